#pragma once
// The CUDA backend's entry points, as the backend layer (src/backend/) calls them. Plain C++17 with no CUDA
// header, so that both the C++20 library sources and the .cu files (nvcc) include it; it is
// compiled into the library only when KEEL_WITH_CUDA is defined.
//
// Every function throws keel::DeviceError naming the call, the device and the CUDA, cuBLAS or
// cuDNN status when anything fails. Work is queued on the device's one stream (see runtime.cu):
// functions return before the GPU is done, except those that write host memory.
#include <cstddef>
#include <cstdint>

#include "core/kernel_kinds.hpp"  // the op kinds, shared with the CPU kernels
#include "core/window.hpp"        // WindowGeom: the sliding-window geometry the CPU kernels use too
#include "cuda/runtime.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cuda {

using kernel::ArgReduceOp;
using kernel::BinaryOp;
using kernel::CompareOp;
using kernel::FloatTest;
using kernel::LogicalOp;
using kernel::ReduceOp;
using kernel::UnaryOp;
using kernel::WindowGeom;

// Rank limit of the strided kernels. Callers merge dimensions that are contiguous in every
// operand first (see merge_axes in src/backend/cuda_views.cpp), so only views with more than
// eight non-mergeable axes are refused (DeviceError).
constexpr int kMaxDims = 8;

// A strided view of device memory. Strides count elements, not bytes; 0 broadcasts an axis.
struct View {
  void* data = nullptr;
  DType dtype = DType::float32;
  int device = 0;
  int rank = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
};

// ---- elementwise and copies (elementwise.cu, copy.cu) -------------------------------------------
// Outputs are contiguous views with the op's result shape; inputs are views of the same shape
// whose strides are 0 on broadcast axes. All dtypes of keel are accepted where the CPU accepts
// them; float16 and bfloat16 are computed in float32 and rounded once.

void fill(const View& out, double value);                     // out contiguous, any dtype
void copy(const View& src, const View& dst);                  // any strides; converts dtypes
void unary(UnaryOp op, const View& x, const View& out, double alpha);
void binary(BinaryOp op, const View& a, const View& b, const View& out);
void compare(CompareOp op, const View& a, const View& b, const View& out);  // out is bool
void logical(LogicalOp op, const View& a, const View& b, const View& out);  // all bool
void logical_not(const View& x, const View& out);
void where(const View& cond, const View& a, const View& b, const View& out);
void float_test(FloatTest test, const View& x, const View& out);  // out bool: isfinite / isnan

// ---- reductions (reduce.cu) --------------------------------------------------------------------

// x lists the kept axes first and the reduced axes after them (`kept` of x.rank axes are kept);
// out is contiguous with the kept axes' shape. Warp-shuffle tree reductions, float16/bfloat16
// and float32 accumulate in float32.
void reduce(ReduceOp op, const View& x, int kept, const View& out);
// x lists the kept axes first and the reduced axis last; out is int64 with the kept shape. The
// first index of the max (min) wins ties, as on the CPU.
void arg_reduce(ArgReduceOp op, const View& x, const View& out);

// ---- matrix products (blas.cu) -----------------------------------------------------------------

// One row-major operand: element (i, j) at data[i*ld + j], or data[j*ld + i] when `trans`.
struct Matrix {
  const void* data;
  std::int64_t ld;
  bool trans;
  std::int64_t batch_stride;  // elements between consecutive matrices of a batch
};

// C[b] (row-major, leading dimension ldc, c_batch_stride elements apart) = A[b] * B[b] for
// b < batch, with cuBLAS. float32 (TF32 tensor cores when config::set_tf32(true)), float64, float16 and
// bfloat16 (float32 accumulation). Integer dtypes are refused with DTypeError by the op.
void gemm(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, const Matrix& a,
          const Matrix& b, void* c, std::int64_t ldc, std::int64_t c_batch_stride,
          std::int64_t batch, int device);


// ---- convolution and pooling (conv.cu, pool.cu) -------------------------------------------------
// The same contract as the CPU kernels of core/window.hpp (NHWC images, [kh,kw,in,out] kernels,
// TensorFlow's padding given by the geometry), on device pointers. float32 and float64.

void conv2d_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel,
                    void* y, int device);
void conv2d_backward_input(DType dtype, const WindowGeom& g, const void* dy,
                           const void* kernel, void* dx, int device);
void conv2d_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                            void* dkernel, int device);
void depthwise_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel,
                       void* y, int device);
void depthwise_backward_input(DType dtype, const WindowGeom& g, const void* dy,
                              const void* kernel, void* dx, int device);
void depthwise_backward_filter(DType dtype, const WindowGeom& g, const void* x,
                               const void* dy, void* dkernel, int device);
void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y, int device);
void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                       void* dx, int device);
void max_pool_gather(DType dtype, const WindowGeom& g, const void* x, const void* dx,
                     void* out, int device);
void avg_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y, int device);
void avg_pool_backward(DType dtype, const WindowGeom& g, const void* dy, void* dx,
                       int device);

}  // namespace keel::cuda
