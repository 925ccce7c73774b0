#pragma once
// The CPU's dense linear algebra: LAPACK routines of OpenBLAS (which carries LAPACK), declared
// here with their Fortran ABI so that no LAPACKE is needed, and the batched kernels built on them.
// Internal to src/cpu/; the backend (src/backend/lapack.hpp) is the way in.
//
// keel's matrices are row-major and LAPACK's column-major. A row-major m x n buffer read as
// column-major is the n x m transpose, so most kernels factor the transpose and read the answer
// back through the same identity instead of copying: inv(A^T) = inv(A)^T; a column-major upper
// triangle is the row-major lower one (cholesky and eigh read the lower triangle, as TensorFlow's
// kernels do); the SVD of A^T is V S U^T, so LAPACK's vt of the transpose is keel's u as stored.
// Only QR and the right-hand sides of a general solve are transposed on copy.
//
// Every kernel takes contiguous operands of `batch` matrices, float32 or float64 (`dtype`), and
// returns the index of the first matrix LAPACK failed on (-1 when none): singular for the LU
// kernels, not positive definite for cholesky, not converged for svd and eigh.
#include <cstddef>
#include <cstdint>

#include "keel/core/dtype.hpp"

// Fortran LAPACK (32-bit integers, as Debian's OpenBLAS is built). The trailing size_t values
// are the hidden lengths of the character arguments gfortran passes; OpenBLAS's own C versions
// of some routines ignore them.
extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work, const int* lwork, int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work, const int* lwork, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda, const int* ipiv,
             float* b, const int* ldb, int* info, std::size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, std::size_t);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, std::size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info,
             std::size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             std::size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, std::size_t, std::size_t);
}

namespace keel::cpu::lapack {

// a (n x n) overwritten by its inverse (getrf + getri).
std::int64_t inverse(DType dtype, std::int64_t batch, std::int64_t n, void* a);
// x (n x k) = op(A)^-1 b with op = transpose when `adjoint` (getrf + getrs).
std::int64_t solve(DType dtype, std::int64_t batch, std::int64_t n, std::int64_t k, const void* a, const void* b,
                   bool adjoint, void* x);
// a (n x n) overwritten by the lower Cholesky factor of its lower triangle, zeros above.
std::int64_t cholesky(DType dtype, std::int64_t batch, std::int64_t n, void* a);
// x (n x k), holding b on entry, overwritten by op(A)^-1 b for triangular A (lower or upper,
// op = transpose when `adjoint`). Returns the first matrix with a zero on its diagonal (x is
// then left as b for it).
std::int64_t triangular_solve(DType dtype, std::int64_t batch, std::int64_t n, std::int64_t k, const void* a,
                              bool lower, bool adjoint, void* x);
// a (m x n) = q r: q (m x qc), r (qc x n) with qc = m when `full`, else min(m, n).
void qr(DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n, bool full, const void* a, void* q, void* r);
// a (m x n) = u diag(s) v^T: s (min(m,n)); with `compute_uv`, u (m x uc) and vt (vc x n) row-major,
// uc = m and vc = n when `full`, else both min(m, n).
std::int64_t svd(DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n, bool full, bool compute_uv,
                 const void* a, void* s, void* u, void* vt);
// Symmetric a (n x n, lower triangle read) = v diag(e) v^T, e ascending; vt (n x n) = v^T.
std::int64_t eigh(DType dtype, std::int64_t batch, std::int64_t n, const void* a, void* e, void* vt);
// The determinant of each a (n x n) through LU: det, or its sign and log|det|; null pointers skip.
void determinant(DType dtype, std::int64_t batch, std::int64_t n, const void* a, void* det, void* sign,
                 void* log_abs);

}  // namespace keel::cpu::lapack
