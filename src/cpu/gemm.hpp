#pragma once
// Matrix products on the CPU: cpu/blas.hpp for float32/float64, plain loops for integers.
#include <cstdint>

#include "keel/core/dtype.hpp"

namespace keel::cpu {

// One row-major view of a matrix: element (i, j) is at data[i*ld + j], or at data[j*ld + i]
// when `trans` (what BLAS calls a transposed operand).
struct MatrixArg {
  const void* data;
  std::int64_t ld;
  bool trans;
};

// C[m, n] (row-major, ldc) = A[m, k] * B[k, n].
void gemm(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, MatrixArg a, MatrixArg b,
          void* c, std::int64_t ldc);

}  // namespace keel::cpu
