// Matrix products on the GPU with cuBLAS.
//
// keel's matrices are row-major and cuBLAS is column-major. A row-major m x n matrix with leading
// dimension ld is, read column-major, its n x m transpose with the same ld, so the row-major
// product C = A * B is computed as the column-major product C^T = B^T * A^T: the operands swap
// places, m and n swap, and each operand keeps its own transpose flag (a row-major operand that
// is read transposed is, column-major, read as stored, and the other way round).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda {

namespace {

std::atomic<bool> g_tf32{false};

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return CUDA_R_32F;
    case DType::float64: return CUDA_R_64F;
    case DType::float16: return CUDA_R_16F;
    case DType::bfloat16: return CUDA_R_16BF;
    default: break;
  }
  throw DTypeError(std::string("matmul: no cuBLAS kernel for ") + std::string(name(dtype)) +
                   " (float16, bfloat16, float32 and float64 only)");
}

// C = 0 for every matrix of the batch (the product over an empty inner dimension).
void zero_output(DType dtype, std::int64_t m, std::int64_t n, void* c, std::int64_t ldc,
                 std::int64_t c_batch_stride, std::int64_t batch, int device) {
  const std::size_t is = itemsize(dtype);
  const cudaStream_t s = stream(device);
  const std::int64_t ld = std::max(ldc, n);
  const auto rows = static_cast<std::size_t>(m), width = static_cast<std::size_t>(n) * is,
             pitch = static_cast<std::size_t>(ld) * is;
  if (batch == 1 || c_batch_stride == m * ld) {  // the batch's rows follow each other at one pitch
    check(cudaMemset2DAsync(c, pitch, 0, width, rows * static_cast<std::size_t>(batch), s),
          "cudaMemset2DAsync (matmul)", device);
    return;
  }
  for (std::int64_t b = 0; b < batch; ++b)
    check(cudaMemset2DAsync(static_cast<char*>(c) + static_cast<std::size_t>(b * c_batch_stride) * is,
                            pitch, 0, width, rows, s),
          "cudaMemset2DAsync (matmul)", device);
}

}  // namespace

void set_tf32(bool enabled) { g_tf32.store(enabled, std::memory_order_relaxed); }
bool tf32() { return g_tf32.load(std::memory_order_relaxed); }

void gemm(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, const Matrix& a,
          const Matrix& b, void* c, std::int64_t ldc, std::int64_t c_batch_stride,
          std::int64_t batch, int device) {
  const cudaDataType_t type = cuda_type(dtype);
  if (m <= 0 || n <= 0 || batch <= 0) return;  // nothing to write
  use_device(device);
  if (k <= 0) {
    zero_output(dtype, m, n, c, ldc, c_batch_stride, batch, device);
    return;
  }

  // Column-major: C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m). A row-major operand that is
  // not transposed is, read column-major, exactly the transpose we need (CUBLAS_OP_N).
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLAS wants ld >= the stored column-major row count even when that count is 1, where a
  // row-major caller may pass any ld; the ld of a single stored row is never read.
  const std::int64_t ldb = std::max<std::int64_t>(b.ld, b.trans ? k : n);
  const std::int64_t lda = std::max<std::int64_t>(a.ld, a.trans ? m : k);
  const std::int64_t ldc_ = std::max<std::int64_t>(ldc, n);

  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  const void* alpha;
  const void* beta;
  static const float one_f = 1.0f, zero_f = 0.0f;
  static const double one_d = 1.0, zero_d = 0.0;
  if (dtype == DType::float64) {
    compute = CUBLAS_COMPUTE_64F;
    alpha = &one_d;
    beta = &zero_d;
  } else {
    // float16 and bfloat16 accumulate in float32 too (scale type float for COMPUTE_32F).
    if (dtype == DType::float32 && tf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    alpha = &one_f;
    beta = &zero_f;
  }

  const cublasHandle_t handle = cublas(device);
  // The _64 entry points take 64-bit sizes, so large batches and matrices need no splitting.
  check(cublas_api().gemm_strided_batched(handle, op_b, op_a, n, m, k, alpha, b.data, type, ldb,
                                      b.batch_stride, a.data, type, lda, a.batch_stride, beta, c,
                                      type, ldc_, c_batch_stride, batch, compute,
                                      CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx (matmul)", device);
}

}  // namespace keel::cuda
