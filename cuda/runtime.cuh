#pragma once
// What the .cu files share: the per-device stream and library handles, status checks that turn
// every CUDA, cuBLAS and cuDNN failure into keel::DeviceError, launch geometry, and a scratch
// buffer from the caching allocator. Included by .cu files only.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "cuda/backend.hpp"

namespace keel::cuda {

// Throws DeviceError "<what> on cuda:<device>: <status text>" unless the status is success.
void check(cudaError_t status, const char* what, int device);
void check(cublasStatus_t status, const char* what, int device);
void check(cudnnStatus_t status, const char* what, int device);
// After a kernel launch: reports launch-configuration errors at the launch site.
void check_launch(const char* kernel, int device);

// Makes `device` current for the calling thread (cheap when it already is).
void use_device(int device);
// The one stream of each device that all of keel's work is queued on (created on first use).
cudaStream_t stream(int device);
// Library handles bound to that stream, created on first use, one per device.
cublasHandle_t cublas(int device);

// cuBLAS's entry points keel calls, from libcublas opened on first use (dlopen) rather than
// linked: loading libcublas loads libcublasLt, whose static initialisation takes about 0.4 s in
// every process of a CUDA build, with or without a GPU (each test program, each CPU-only run).
// DeviceError naming the library when it cannot be opened or lacks one of them.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasGemmStridedBatchedEx_64) gemm_strided_batched = nullptr;
};
const CublasApi& cublas_api();

// A library keel opens on first use rather than links (cuBLAS, NCCL): the first of `names` that
// dlopen finds (a soname first, found as a linked library would be; then the file CMake found).
// DeviceError "<what>: cannot open <names[0]>: <dlerror of each>" when none opens.
void* open_library(const char* what, std::initializer_list<const char*> names);
// fn = the library's `symbol`, or DeviceError "<what>: <library> has no <symbol>".
void* library_symbol(void* lib, const char* what, const char* library, const char* symbol);
template <class Fn>
void load_symbol(Fn& fn, void* lib, const char* what, const char* library, const char* symbol) {
  fn = reinterpret_cast<Fn>(library_symbol(lib, what, library, symbol));
}
cudnnHandle_t cudnn(int device);

// Grid-stride launch geometry: 256 threads, enough blocks to fill the GPU without exceeding
// what n needs.
constexpr int kThreads = 256;
int blocks_for(std::int64_t n, int device);

// Scratch device memory from the caching allocator, released when it goes out of scope (the
// allocator's reuse is stream-ordered, so kernels queued before the release still see it).
class Scratch {
 public:
  Scratch(std::size_t nbytes, int device)
      : device_(device), ptr_(nbytes ? allocate(nbytes, device) : nullptr) {}
  ~Scratch() {
    if (ptr_) deallocate(ptr_, device_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  int device_;
  void* ptr_;
};

}  // namespace keel::cuda
