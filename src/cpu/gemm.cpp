#include "cpu/gemm.hpp"

#include <algorithm>
#include <cstring>

#include "core/dispatch.hpp"
#include "cpu/blas.hpp"

namespace keel::cpu {

void gemm(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, MatrixArg a, MatrixArg b,
          void* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(c, 0, static_cast<std::size_t>(m * ldc) * itemsize(dtype));
    return;
  }
  // BLAS wants ld >= the row length even when a dimension is 1.
  const std::int64_t lda = std::max<std::int64_t>(a.ld, a.trans ? m : k);
  const std::int64_t ldb = std::max<std::int64_t>(b.ld, b.trans ? k : n);
  switch (dtype) {
    case DType::float32:
      blas::gemm(a.trans, b.trans, m, n, k, 1.0f, static_cast<const float*>(a.data), lda,
                 static_cast<const float*>(b.data), ldb, 0.0f, static_cast<float*>(c), ldc);
      return;
    case DType::float64:
      blas::gemm(a.trans, b.trans, m, n, k, 1.0, static_cast<const double*>(a.data), lda,
                 static_cast<const double*>(b.data), ldb, 0.0, static_cast<double*>(c), ldc);
      return;
    default:
      break;
  }
  detail::dispatch_numeric(dtype, "matmul", [&]<class T>() {
    const T* ap = static_cast<const T*>(a.data);
    const T* bp = static_cast<const T*>(b.data);
    T* cp = static_cast<T*>(c);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const T av = a.trans ? ap[p * a.ld + i] : ap[i * a.ld + p];
          const T bv = b.trans ? bp[j * b.ld + p] : bp[p * b.ld + j];
          acc = static_cast<T>(acc + av * bv);
        }
        cp[i * ldc + j] = acc;
      }
  });
}

}  // namespace keel::cpu
