// The CUDA backend's entry points (cuda/backend.hpp, indexing.hpp, optimizers.hpp) in a build
// without CUDA: no device exists, so every call that would touch one is a DeviceError that says
// how to get the backend. Ops call the backend unconditionally; this keeps #ifdefs out of them.
#ifndef KEEL_WITH_CUDA

#include <atomic>
#include <string>

#include "cuda/backend.hpp"
#include "cuda/device_timer.hpp"
#include "cuda/indexing.hpp"
#include "cuda/nccl.hpp"
#include "cuda/optimizers.hpp"
#include "keel/core/error.hpp"

namespace keel::cuda {

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw DeviceError(std::string(what) +
                    ": keel was built without the CUDA backend (configure with -DKEEL_CUDA=ON on a "
                    "machine with the CUDA toolkit and cuDNN)");
}
std::atomic<bool> tf32_flag{false};
}  // namespace

int device_count() { return 0; }
void* raw_malloc(std::size_t, int) { unavailable("cudaMalloc"); }
void raw_free(void*, int) {}
void copy_to_device(void*, const void*, std::size_t, int) { unavailable("copy to cuda"); }
void copy_to_host(void*, const void*, std::size_t, int) { unavailable("copy from cuda"); }
void copy_between(void*, int, const void*, int, std::size_t) { unavailable("copy between cuda devices"); }
void synchronize(int) {}
std::size_t total_memory(int) { return 0; }
std::size_t free_memory(int) { return 0; }
void* allocate(std::size_t, int device) {
  unavailable(("allocate on cuda:" + std::to_string(device)).c_str());
}
void deallocate(void*, int) {}

void fill(const View&, double) { unavailable("fill"); }
void copy(const View&, const View&) { unavailable("copy"); }
void unary(UnaryOp, const View&, const View&, double) { unavailable("unary op"); }
void binary(BinaryOp, const View&, const View&, const View&) { unavailable("binary op"); }
void compare(CompareOp, const View&, const View&, const View&) { unavailable("compare"); }
void logical(LogicalOp, const View&, const View&, const View&) { unavailable("logical op"); }
void logical_not(const View&, const View&) { unavailable("logical_not"); }
void where(const View&, const View&, const View&, const View&) { unavailable("where"); }
void float_test(FloatTest, const View&, const View&) { unavailable("is_finite"); }
void reduce(ReduceOp, const View&, int, const View&) { unavailable("reduce"); }
void arg_reduce(ArgReduceOp, const View&, const View&) { unavailable("arg_reduce"); }

void gemm(DType, std::int64_t, std::int64_t, std::int64_t, const Matrix&, const Matrix&, void*,
          std::int64_t, std::int64_t, std::int64_t, int) {
  unavailable("matmul");
}
void set_tf32(bool enabled) { tf32_flag.store(enabled); }
bool tf32() { return tf32_flag.load(); }


void conv2d_forward(DType, const WindowGeom&, const void*, const void*, void*, int) { unavailable("conv2d"); }
void conv2d_backward_input(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("conv2d_backprop_input");
}
void conv2d_backward_filter(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("conv2d_backprop_filter");
}
void depthwise_forward(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("depthwise_conv2d");
}
void depthwise_backward_input(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("depthwise_conv2d_backprop_input");
}
void depthwise_backward_filter(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("depthwise_conv2d_backprop_filter");
}
void max_pool_forward(DType, const WindowGeom&, const void*, void*, int) { unavailable("max_pool2d"); }
void max_pool_backward(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("max_pool2d gradient");
}
void max_pool_gather(DType, const WindowGeom&, const void*, const void*, void*, int) {
  unavailable("max_pool2d second-order gradient");
}
void avg_pool_forward(DType, const WindowGeom&, const void*, void*, int) { unavailable("avg_pool2d"); }
void avg_pool_backward(DType, const WindowGeom&, const void*, void*, int) {
  unavailable("avg_pool2d gradient");
}

// ---- indexing and dropout (cuda/indexing.hpp) ----

BadIndex gather_rows(const void*, std::int64_t, std::int64_t, std::size_t, const void*, DType,
                     std::int64_t, void*, int) {
  unavailable("gather");
}
SegmentIds segment_sum(DType, const void*, std::int64_t, std::int64_t, const void*, DType,
                       std::int64_t, void*, int) {
  unavailable("unsorted_segment_sum");
}
void one_hot(const void*, DType, std::int64_t, std::int64_t, std::uint64_t, std::uint64_t,
             std::size_t, void*, int) {
  unavailable("one_hot");
}
void dropout(DType, const void*, std::int64_t, const PhiloxDraw&, std::uint32_t, double, void*,
             void*, int) {
  unavailable("dropout");
}

// ---- optimizer updates (cuda/optimizers.hpp) ----

void optimizer_update(DType, const OptimizerParams&, std::int64_t, void*, const void*, void* const[3],
                      int device) {
  unavailable(("optimizer update on cuda:" + std::to_string(device)).c_str());
}

namespace timing {
int mark(int) { unavailable("device timing"); }
double elapsed_us(int, int) { unavailable("device timing"); }
void reset() {}
}  // namespace timing

namespace nccl {
bool built() { return false; }
UniqueId unique_id() { unavailable("NCCL"); }
const char* version() { unavailable("NCCL"); }
std::shared_ptr<Comm> join(const UniqueId&, int, int, int, double) { unavailable("NCCL"); }
bool on_device(const void*, int) { return false; }
}  // namespace nccl

}  // namespace keel::cuda

#endif  // KEEL_WITH_CUDA
