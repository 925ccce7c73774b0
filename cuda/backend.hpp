#pragma once
// The CUDA backend's entry points, as the ops in src/ops/ call them. Plain C++17 with no CUDA
// header, so that both the C++20 library sources and the .cu files (nvcc) include it; it is
// compiled into the library only when KEEL_WITH_CUDA is defined.
//
// Every function throws keel::DeviceError naming the call, the device and the CUDA, cuBLAS or
// cuDNN status when anything fails. Work is queued on the device's one stream (see runtime.cu):
// functions return before the GPU is done, except those that write host memory.
#include <cstddef>
#include <cstdint>

#include "cpu/conv.hpp"     // WindowGeom: the sliding-window geometry the CPU kernels use too
#include "cpu/kernels.hpp"  // UnaryOp, BinaryOp, ReduceOp
#include "keel/core/dtype.hpp"

namespace keel::cuda {

using cpu::BinaryOp;
using cpu::ReduceOp;
using cpu::UnaryOp;

// Rank limit of the strided kernels. Callers merge dimensions that are contiguous in every
// operand first (see merge_dims in src/core/cuda_dispatch.cpp), so only views with more than
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

// ---- runtime (runtime.cu) ----------------------------------------------------------------------

// Usable devices; 0 when the driver is missing or reports none (never throws).
int device_count();
// Raw device memory for the caching allocator: nullptr when the device is out of memory.
void* raw_malloc(std::size_t nbytes, int device);
void raw_free(void* ptr, int device);
// Host -> device through a pinned staging buffer; `src` may be reused as soon as this returns.
void copy_to_device(void* dst, const void* src, std::size_t nbytes, int device);
// Device -> host; waits for the device's stream, so `dst` holds the data on return.
void copy_to_host(void* dst, const void* src, std::size_t nbytes, int device);
// Device -> device, within one GPU or between two.
void copy_between(void* dst, int dst_device, const void* src, int src_device, std::size_t nbytes);
// Waits until every queued kernel of `device` has finished.
void synchronize(int device);
// Bytes of device memory in all / free right now (cudaMemGetInfo).
std::size_t total_memory(int device);
std::size_t free_memory(int device);

// Device memory from keel's caching allocator (src/core/cuda_allocator.cpp): what Storage and
// the kernels' scratch buffers use. Reuses freed blocks of the same size class; on
// out-of-memory it empties the cache and retries once, then throws DeviceError.
void* allocate(std::size_t nbytes, int device);
void deallocate(void* ptr, int device);

// ---- elementwise and copies (elementwise.cu, copy.cu) -------------------------------------------
// Outputs are contiguous views with the op's result shape; inputs are views of the same shape
// whose strides are 0 on broadcast axes. All dtypes of keel are accepted where the CPU accepts
// them; float16 and bfloat16 are computed in float32 and rounded once.

void fill(const View& out, double value);                     // out contiguous, any dtype
void copy(const View& src, const View& dst);                  // any strides; converts dtypes
void unary(UnaryOp op, const View& x, const View& out, double alpha);
void binary(BinaryOp op, const View& a, const View& b, const View& out);
// op: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge (the order of cpu::CompareOp); out is bool.
void compare(int op, const View& a, const View& b, const View& out);
void logical(bool is_and, const View& a, const View& b, const View& out);  // all bool
void logical_not(const View& x, const View& out);
void where(const View& cond, const View& a, const View& b, const View& out);
void is_finite(const View& x, const View& out, bool nan_only);  // out bool: isfinite / isnan

// ---- reductions (reduce.cu) --------------------------------------------------------------------

// x lists the kept axes first and the reduced axes after them (`kept` of x.rank axes are kept);
// out is contiguous with the kept axes' shape. Warp-shuffle tree reductions, float16/bfloat16
// and float32 accumulate in float32.
void reduce(ReduceOp op, const View& x, int kept, const View& out);
// x lists the kept axes first and the reduced axis last; out is int64 with the kept shape. The
// first index of the max (min) wins ties, as on the CPU.
void arg_reduce(bool is_max, const View& x, const View& out);

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

// Whether float32 GEMMs and convolutions may use TF32 tensor cores (default false, as the CPU).
void set_tf32(bool enabled);
bool tf32();

// ---- convolution and pooling (conv.cu, pool.cu) -------------------------------------------------
// The same contract as the CPU kernels of src/cpu/conv.hpp (NHWC images, [kh,kw,in,out] kernels,
// TensorFlow's padding given by the geometry), on device pointers. float32 and float64.

void conv2d_forward(DType dtype, const cpu::WindowGeom& g, const void* x, const void* kernel,
                    void* y, int device);
void conv2d_backward_input(DType dtype, const cpu::WindowGeom& g, const void* dy,
                           const void* kernel, void* dx, int device);
void conv2d_backward_filter(DType dtype, const cpu::WindowGeom& g, const void* x, const void* dy,
                            void* dkernel, int device);
void depthwise_forward(DType dtype, const cpu::WindowGeom& g, const void* x, const void* kernel,
                       void* y, int device);
void depthwise_backward_input(DType dtype, const cpu::WindowGeom& g, const void* dy,
                              const void* kernel, void* dx, int device);
void depthwise_backward_filter(DType dtype, const cpu::WindowGeom& g, const void* x,
                               const void* dy, void* dkernel, int device);
void max_pool_forward(DType dtype, const cpu::WindowGeom& g, const void* x, void* y, int device);
void max_pool_backward(DType dtype, const cpu::WindowGeom& g, const void* x, const void* dy,
                       void* dx, int device);
void max_pool_gather(DType dtype, const cpu::WindowGeom& g, const void* x, const void* dx,
                     void* out, int device);
void avg_pool_forward(DType dtype, const cpu::WindowGeom& g, const void* x, void* y, int device);
void avg_pool_backward(DType dtype, const cpu::WindowGeom& g, const void* dy, void* dx,
                       int device);

}  // namespace keel::cuda
