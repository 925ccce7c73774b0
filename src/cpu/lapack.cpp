// Batched LAPACK kernels (see lapack.hpp for the row-major / column-major identities they use).
// Workspaces are sized once per call by LAPACK's own query and reused over the batch.
#include "cpu/lapack.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dispatch.hpp"

namespace keel::cpu::lapack {

namespace {

template <class T>
struct Routines;

template <>
struct Routines<float> {
  static void getrf(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info) {
    sgetrf_(m, n, a, lda, ipiv, info);
  }
  static void getri(const int* n, float* a, const int* lda, const int* ipiv, float* w, const int* lw, int* info) {
    sgetri_(n, a, lda, ipiv, w, lw, info);
  }
  static void getrs(char t, const int* n, const int* k, const float* a, const int* lda, const int* ipiv, float* b,
                    const int* ldb, int* info) {
    sgetrs_(&t, n, k, a, lda, ipiv, b, ldb, info, 1);
  }
  static void potrf(const int* n, float* a, const int* lda, int* info) { spotrf_("U", n, a, lda, info, 1); }
  static void geqrf(const int* m, const int* n, float* a, const int* lda, float* tau, float* w, const int* lw,
                    int* info) {
    sgeqrf_(m, n, a, lda, tau, w, lw, info);
  }
  static void orgqr(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* w,
                    const int* lw, int* info) {
    sorgqr_(m, n, k, a, lda, tau, w, lw, info);
  }
  static void gesdd(char jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
                    const int* ldu, float* vt, const int* ldvt, float* w, const int* lw, int* iw, int* info) {
    sgesdd_(&jobz, m, n, a, lda, s, u, ldu, vt, ldvt, w, lw, iw, info, 1);
  }
  static void syevd(const int* n, float* a, const int* lda, float* e, float* w, const int* lw, int* iw,
                    const int* liw, int* info) {
    ssyevd_("V", "U", n, a, lda, e, w, lw, iw, liw, info, 1, 1);
  }
  static void trsm(bool lower, bool adjoint, int n, int k, const float* a, float* b) {
    cblas_strsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper, adjoint ? CblasTrans : CblasNoTrans,
                CblasNonUnit, n, k, 1.0f, a, n, b, k);
  }
};

template <>
struct Routines<double> {
  static void getrf(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info) {
    dgetrf_(m, n, a, lda, ipiv, info);
  }
  static void getri(const int* n, double* a, const int* lda, const int* ipiv, double* w, const int* lw, int* info) {
    dgetri_(n, a, lda, ipiv, w, lw, info);
  }
  static void getrs(char t, const int* n, const int* k, const double* a, const int* lda, const int* ipiv, double* b,
                    const int* ldb, int* info) {
    dgetrs_(&t, n, k, a, lda, ipiv, b, ldb, info, 1);
  }
  static void potrf(const int* n, double* a, const int* lda, int* info) { dpotrf_("U", n, a, lda, info, 1); }
  static void geqrf(const int* m, const int* n, double* a, const int* lda, double* tau, double* w, const int* lw,
                    int* info) {
    dgeqrf_(m, n, a, lda, tau, w, lw, info);
  }
  static void orgqr(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
                    double* w, const int* lw, int* info) {
    dorgqr_(m, n, k, a, lda, tau, w, lw, info);
  }
  static void gesdd(char jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
                    const int* ldu, double* vt, const int* ldvt, double* w, const int* lw, int* iw, int* info) {
    dgesdd_(&jobz, m, n, a, lda, s, u, ldu, vt, ldvt, w, lw, iw, info, 1);
  }
  static void syevd(const int* n, double* a, const int* lda, double* e, double* w, const int* lw, int* iw,
                    const int* liw, int* info) {
    dsyevd_("V", "U", n, a, lda, e, w, lw, iw, liw, info, 1, 1);
  }
  static void trsm(bool lower, bool adjoint, int n, int k, const double* a, double* b) {
    cblas_dtrsm(CblasRowMajor, CblasLeft, lower ? CblasLower : CblasUpper, adjoint ? CblasTrans : CblasNoTrans,
                CblasNonUnit, n, k, 1.0, a, n, b, k);
  }
};

// The workspace size a query (lwork = -1) reported, at least 1.
template <class T>
int work_size(T reported) {
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(reported))));
}

template <class T>
std::int64_t inverse_t(std::int64_t batch, std::int64_t n, T* a) {
  using L = Routines<T>;
  if (n == 0) return -1;
  const int N = static_cast<int>(n);
  std::vector<int> ipiv(static_cast<std::size_t>(n));
  int info = 0, lwork = -1;
  T query{};
  L::getri(&N, a, &N, ipiv.data(), &query, &lwork, &info);
  lwork = work_size(query);
  std::vector<T> work(static_cast<std::size_t>(lwork));
  for (std::int64_t b = 0; b < batch; ++b) {
    T* p = a + b * n * n;
    L::getrf(&N, &N, p, &N, ipiv.data(), &info);
    if (info > 0) return b;
    L::getri(&N, p, &N, ipiv.data(), work.data(), &lwork, &info);
    if (info > 0) return b;
  }
  return -1;
}

template <class T>
std::int64_t solve_t(std::int64_t batch, std::int64_t n, std::int64_t k, const T* a, const T* b, bool adjoint,
                     T* x) {
  using L = Routines<T>;
  if (n == 0) return -1;
  const int N = static_cast<int>(n), K = static_cast<int>(k);
  std::vector<T> lu(static_cast<std::size_t>(n * n));
  std::vector<int> ipiv(static_cast<std::size_t>(n));
  // A single right-hand side is the same buffer in both layouts; wider ones are transposed.
  std::vector<T> cols(k > 1 ? static_cast<std::size_t>(n * k) : 0);
  // The buffer holds A^T (column-major), so op(A) = A is LAPACK's transpose of it.
  const char trans = adjoint ? 'N' : 'T';
  int info = 0;
  for (std::int64_t i = 0; i < batch; ++i) {
    std::memcpy(lu.data(), a + i * n * n, sizeof(T) * static_cast<std::size_t>(n * n));
    L::getrf(&N, &N, lu.data(), &N, ipiv.data(), &info);
    if (info > 0) return i;
    if (k == 0) continue;
    const T* bi = b + i * n * k;
    T* xi = x + i * n * k;
    if (k == 1) {
      std::memcpy(xi, bi, sizeof(T) * static_cast<std::size_t>(n));
      L::getrs(trans, &N, &K, lu.data(), &N, ipiv.data(), xi, &N, &info);
    } else {
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c) cols[static_cast<std::size_t>(r + c * n)] = bi[r * k + c];
      L::getrs(trans, &N, &K, lu.data(), &N, ipiv.data(), cols.data(), &N, &info);
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c) xi[r * k + c] = cols[static_cast<std::size_t>(r + c * n)];
    }
  }
  return -1;
}

template <class T>
std::int64_t cholesky_t(std::int64_t batch, std::int64_t n, T* a) {
  using L = Routines<T>;
  if (n == 0) return -1;
  const int N = static_cast<int>(n);
  int info = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    T* p = a + b * n * n;
    L::potrf(&N, p, &N, &info);  // column-major upper = row-major lower
    if (info > 0) return b;
    for (std::int64_t r = 0; r < n; ++r) std::fill(p + r * n + r + 1, p + (r + 1) * n, T(0));
  }
  return -1;
}

template <class T>
std::int64_t triangular_solve_t(std::int64_t batch, std::int64_t n, std::int64_t k, const T* a, bool lower,
                                bool adjoint, T* x) {
  if (n == 0) return -1;
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* ab = a + b * n * n;
    for (std::int64_t i = 0; i < n; ++i)
      if (ab[i * n + i] == T(0)) return b;
    if (k > 0) Routines<T>::trsm(lower, adjoint, static_cast<int>(n), static_cast<int>(k), ab, x + b * n * k);
  }
  return -1;
}

template <class T>
void qr_t(std::int64_t batch, std::int64_t m, std::int64_t n, bool full, const T* a, T* q, T* r) {
  using L = Routines<T>;
  if (m == 0) return;  // q and r are empty
  const std::int64_t k = std::min(m, n), qc = full ? m : k;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k), QC = static_cast<int>(qc);
  // Column-major m x max(n, qc): geqrf's input, then orgqr's output (wider when full and m > n).
  std::vector<T> t(static_cast<std::size_t>(m * std::max(n, qc)));
  std::vector<T> tau(static_cast<std::size_t>(std::max<std::int64_t>(k, 1)));
  int info = 0, lwork = -1;
  T query_f{}, query_o{};
  L::geqrf(&M, &N, t.data(), &M, tau.data(), &query_f, &lwork, &info);
  L::orgqr(&M, &QC, &K, t.data(), &M, tau.data(), &query_o, &lwork, &info);
  lwork = std::max(work_size(query_f), work_size(query_o));
  std::vector<T> work(static_cast<std::size_t>(lwork));
  for (std::int64_t b = 0; b < batch; ++b) {
    const T* ab = a + b * m * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) t[static_cast<std::size_t>(i + j * m)] = ab[i * n + j];
    if (k > 0) L::geqrf(&M, &N, t.data(), &M, tau.data(), work.data(), &lwork, &info);
    T* rb = r + b * qc * n;
    for (std::int64_t i = 0; i < qc; ++i)
      for (std::int64_t j = 0; j < n; ++j) rb[i * n + j] = i <= j ? t[static_cast<std::size_t>(i + j * m)] : T(0);
    if (qc > 0) L::orgqr(&M, &QC, &K, t.data(), &M, tau.data(), work.data(), &lwork, &info);
    T* qb = q + b * m * qc;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < qc; ++j) qb[i * qc + j] = t[static_cast<std::size_t>(i + j * m)];
  }
}

template <class T>
void set_identity(T* p, std::int64_t n) {
  std::fill(p, p + n * n, T(0));
  for (std::int64_t i = 0; i < n; ++i) p[i * n + i] = T(1);
}

template <class T>
std::int64_t svd_t(std::int64_t batch, std::int64_t m, std::int64_t n, bool full, bool compute_uv, const T* a, T* s,
                   T* u, T* vt) {
  using L = Routines<T>;
  const std::int64_t k = std::min(m, n);
  const std::int64_t uc = full ? m : k, vc = full ? n : k;
  if (k == 0) {  // no singular values; the full bases of an empty matrix are identities
    if (compute_uv && full)
      for (std::int64_t b = 0; b < batch; ++b) {
        set_identity(u + b * m * m, m);
        set_identity(vt + b * n * n, n);
      }
    return -1;
  }
  // LAPACK factors B = A^T (n x m column-major) = U_b S V_b^T, so A = V_b S U_b^T: its vt
  // (ldvt = uc) is keel's u as stored, and its u (ldu = n) is keel's vt.
  const char jobz = !compute_uv ? 'N' : full ? 'A' : 'S';
  const int M = static_cast<int>(n), N = static_cast<int>(m);
  const int ldu = compute_uv ? static_cast<int>(n) : 1, ldvt = compute_uv ? static_cast<int>(uc) : 1;
  std::vector<T> t(static_cast<std::size_t>(m * n));
  std::vector<int> iwork(static_cast<std::size_t>(8 * k));
  T dummy[1] = {};
  int info = 0, lwork = -1;
  T query{};
  L::gesdd(jobz, &M, &N, t.data(), &M, s, compute_uv ? vt : dummy, &ldu, compute_uv ? u : dummy, &ldvt, &query,
           &lwork, iwork.data(), &info);
  lwork = work_size(query);
  std::vector<T> work(static_cast<std::size_t>(lwork));
  for (std::int64_t b = 0; b < batch; ++b) {
    std::memcpy(t.data(), a + b * m * n, sizeof(T) * static_cast<std::size_t>(m * n));
    L::gesdd(jobz, &M, &N, t.data(), &M, s + b * k, compute_uv ? vt + b * vc * n : dummy, &ldu,
             compute_uv ? u + b * m * uc : dummy, &ldvt, work.data(), &lwork, iwork.data(), &info);
    if (info > 0) return b;
  }
  return -1;
}

template <class T>
std::int64_t eigh_t(std::int64_t batch, std::int64_t n, const T* a, T* e, T* vt) {
  using L = Routines<T>;
  if (n == 0) return -1;
  const int N = static_cast<int>(n);
  int info = 0, lwork = -1, liwork = -1, iquery = 0;
  T query{};
  L::syevd(&N, vt, &N, e, &query, &lwork, &iquery, &liwork, &info);
  lwork = work_size(query);
  liwork = std::max(1, iquery);
  std::vector<T> work(static_cast<std::size_t>(lwork));
  std::vector<int> iwork(static_cast<std::size_t>(liwork));
  for (std::int64_t b = 0; b < batch; ++b) {
    T* vb = vt + b * n * n;
    // Column-major upper = row-major lower; the eigenvectors come back as columns, i.e. v^T row-major.
    std::memcpy(vb, a + b * n * n, sizeof(T) * static_cast<std::size_t>(n * n));
    L::syevd(&N, vb, &N, e + b * n, work.data(), &lwork, iwork.data(), &liwork, &info);
    if (info > 0) return b;
  }
  return -1;
}

template <class T>
void determinant_t(std::int64_t batch, std::int64_t n, const T* a, T* det, T* sign, T* log_abs) {
  using L = Routines<T>;
  const int N = static_cast<int>(std::max<std::int64_t>(n, 1));
  std::vector<T> lu(static_cast<std::size_t>(n * n));
  std::vector<int> ipiv(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < batch; ++b) {
    int info = 0;
    if (n > 0) {
      std::memcpy(lu.data(), a + b * n * n, sizeof(T) * static_cast<std::size_t>(n * n));
      L::getrf(&N, &N, lu.data(), &N, ipiv.data(), &info);  // det(A^T) = det(A)
    }
    T product = 1, sgn = 1, logs = 0;
    if (info > 0) {  // an exact zero pivot: a singular matrix
      product = 0;
      sgn = 0;
      logs = -std::numeric_limits<T>::infinity();
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const T d = lu[static_cast<std::size_t>(i * n + i)];
        const bool swapped = ipiv[static_cast<std::size_t>(i)] != static_cast<int>(i) + 1;
        product *= swapped ? -d : d;
        if ((d < 0) != swapped) sgn = -sgn;
        logs += std::log(std::abs(d));
      }
    }
    if (det) det[b] = product;
    if (sign) sign[b] = sgn;
    if (log_abs) log_abs[b] = logs;
  }
}

}  // namespace

std::int64_t inverse(DType dtype, std::int64_t batch, std::int64_t n, void* a) {
  return detail::dispatch_float(dtype, "inv", [&]<class T>() { return inverse_t(batch, n, static_cast<T*>(a)); });
}

std::int64_t solve(DType dtype, std::int64_t batch, std::int64_t n, std::int64_t k, const void* a, const void* b,
                   bool adjoint, void* x) {
  return detail::dispatch_float(dtype, "solve", [&]<class T>() {
    return solve_t(batch, n, k, static_cast<const T*>(a), static_cast<const T*>(b), adjoint, static_cast<T*>(x));
  });
}

std::int64_t cholesky(DType dtype, std::int64_t batch, std::int64_t n, void* a) {
  return detail::dispatch_float(dtype, "cholesky",
                                [&]<class T>() { return cholesky_t(batch, n, static_cast<T*>(a)); });
}

std::int64_t triangular_solve(DType dtype, std::int64_t batch, std::int64_t n, std::int64_t k, const void* a,
                              bool lower, bool adjoint, void* x) {
  return detail::dispatch_float(dtype, "triangular_solve", [&]<class T>() {
    return triangular_solve_t(batch, n, k, static_cast<const T*>(a), lower, adjoint, static_cast<T*>(x));
  });
}

void qr(DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n, bool full, const void* a, void* q,
        void* r) {
  detail::dispatch_float(dtype, "qr", [&]<class T>() {
    qr_t(batch, m, n, full, static_cast<const T*>(a), static_cast<T*>(q), static_cast<T*>(r));
  });
}

std::int64_t svd(DType dtype, std::int64_t batch, std::int64_t m, std::int64_t n, bool full, bool compute_uv,
                 const void* a, void* s, void* u, void* vt) {
  return detail::dispatch_float(dtype, "svd", [&]<class T>() {
    return svd_t(batch, m, n, full, compute_uv, static_cast<const T*>(a), static_cast<T*>(s), static_cast<T*>(u),
                 static_cast<T*>(vt));
  });
}

std::int64_t eigh(DType dtype, std::int64_t batch, std::int64_t n, const void* a, void* e, void* vt) {
  return detail::dispatch_float(dtype, "eigh", [&]<class T>() {
    return eigh_t(batch, n, static_cast<const T*>(a), static_cast<T*>(e), static_cast<T*>(vt));
  });
}

void determinant(DType dtype, std::int64_t batch, std::int64_t n, const void* a, void* det, void* sign,
                 void* log_abs) {
  detail::dispatch_float(dtype, "det", [&]<class T>() {
    determinant_t(batch, n, static_cast<const T*>(a), static_cast<T*>(det), static_cast<T*>(sign),
                  static_cast<T*>(log_abs));
  });
}

}  // namespace keel::cpu::lapack
