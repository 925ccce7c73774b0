#pragma once
// The backend entries of dense linear algebra (LAPACK on the CPU). The ops (src/ops/linalg_*.cpp)
// have checked shapes and dtypes (float32 or float64, one device); the input `a` is a batch of
// matrices [batch..., m, n] with any strides, every output is contiguous with the shape given
// below, and the leading axes of all operands are the same batch.
//
// There are no CUDA kernels for these families yet: a CUDA operand is factored on the host (a
// documented host fallback: copied down, run through the CPU kernel, the outputs copied back).
//
// The entries that can fail return the flat index of the first matrix of the batch that failed
// (-1 when none), for the op to word the error; under a graph recorder a replay throws itself.
#include <cstdint>

#include "keel/core/tensor.hpp"

namespace keel::backend {

// out [..., n, n] = a^-1; fails where a is singular (an exact zero pivot of its LU factors).
std::int64_t inverse(const Tensor& a, const Tensor& out);
// out [..., n, k] = op(a)^-1 b for b [..., n, k], op = transpose when `adjoint`; fails where singular.
std::int64_t solve(const Tensor& a, const Tensor& b, bool adjoint, const Tensor& out);
// out [..., n, n] = the lower Cholesky factor of a's lower triangle; fails where not positive definite.
std::int64_t cholesky(const Tensor& a, const Tensor& out);
// out [..., n, k] = op(a)^-1 b for triangular a (its lower or upper triangle read); fails where a
// has a zero on its diagonal.
std::int64_t triangular_solve(const Tensor& a, const Tensor& b, bool lower, bool adjoint, const Tensor& out);
// a [..., m, n] = q r with q [..., m, c] and r [..., c, n], c = m when `full`, else min(m, n).
void qr(const Tensor& a, bool full, const Tensor& q, const Tensor& r);
// a [..., m, n] = u diag(s) vt: s [..., min(m,n)]; u [..., m, m or min] and vt [..., n or min, n]
// (undefined when not computed). Fails where the SVD did not converge.
std::int64_t svd(const Tensor& a, bool full, const Tensor& s, const Tensor& u, const Tensor& vt);
// Symmetric a [..., n, n] (lower triangle read) = vt^T diag(e) vt, e [..., n] ascending, vt [..., n, n].
std::int64_t eigh(const Tensor& a, const Tensor& e, const Tensor& vt);
// det, or sign and log|det|, [...] each, of a [..., n, n] (undefined outputs are skipped).
void determinant(const Tensor& a, const Tensor& det, const Tensor& sign, const Tensor& log_abs);

}  // namespace keel::backend
