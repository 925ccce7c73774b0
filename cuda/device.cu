// CUDA runtime entry points of the backend: device discovery and raw device memory. The
// kernels and the caching allocator of the CUDA backend build on these.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "keel/core/error.hpp"

namespace keel::cuda {

// 0 where the driver is missing or reports no device (cudaGetDeviceCount does not write the
// count on error, so the status is checked, not the value).
int device_count() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls start clean
    return 0;
  }
  return n;
}

static void check(cudaError_t status, const char* what, int device) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(std::string(what) + " on cuda:" + std::to_string(device) + ": " +
                      cudaGetErrorString(status));
  }
}

void* device_alloc(std::size_t nbytes, int device) {
  if (device < 0 || device >= device_count())
    throw DeviceError("cuda:" + std::to_string(device) + " is not available (" +
                      std::to_string(device_count()) + " CUDA devices present)");
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* p = nullptr;
  check(cudaMalloc(&p, nbytes == 0 ? 1 : nbytes), "cudaMalloc", device);
  return p;
}

void device_free(void* ptr, std::size_t, int device) {
  if (cudaSetDevice(device) == cudaSuccess) cudaFree(ptr);
  cudaGetLastError();
}

}  // namespace keel::cuda
