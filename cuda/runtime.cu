// The CUDA runtime layer of the backend: device discovery, one stream and one cuBLAS/cuDNN
// handle per device, status checks, raw device memory for the caching allocator, and copies
// between host and device through pinned staging buffers.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda {

namespace {

[[noreturn]] void fail(const char* what, int device, const std::string& detail) {
  throw DeviceError(std::string(what) + " on cuda:" + std::to_string(device) + ": " + detail);
}

// Per-device state, created on first use. A GPU box has few devices: a fixed array avoids
// locking on the hot path once a device's state exists.
constexpr int kMaxDevices = 64;

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  std::once_flag blas_once;
  cublasHandle_t blas = nullptr;
  std::once_flag dnn_once;
  cudnnHandle_t dnn = nullptr;
  int sm_count = 0;
  // Pinned staging for host <-> device copies of pageable memory; `done` marks when the last
  // copy through it finished, so it is not overwritten while the DMA engine still reads it.
  std::mutex staging_mutex;
  void* staging = nullptr;
  std::size_t staging_bytes = 0;
  cudaEvent_t staging_done = nullptr;
  std::atomic<bool> started{false};  // the stream exists (set at the end of the first use)
};

DeviceState* states() {
  static DeviceState all[kMaxDevices];
  return all;
}

DeviceState& state(int device) {
  if (device < 0 || device >= kMaxDevices || device >= device_count())
    throw DeviceError("cuda:" + std::to_string(device) + " is not available (" +
                      std::to_string(device_count()) + " CUDA devices present)");
  DeviceState& s = states()[device];
  std::call_once(s.once, [&] {
    // Leaves `device` current (restoring the previous one could create a context on a device
    // keel never uses); use_device asks the runtime rather than trusting a cache, so this is
    // harmless to keel's own calls.
    check(cudaSetDevice(device), "cudaSetDevice", device);
    // Non-blocking: keel's stream does not serialise with the legacy default stream that other
    // libraries in the process may use.
    check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate", device);
    check(cudaDeviceGetAttribute(&s.sm_count, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute", device);
    check(cudaEventCreateWithFlags(&s.staging_done, cudaEventDisableTiming), "cudaEventCreate", device);
    s.started.store(true, std::memory_order_release);
  });
  return s;
}

bool started(int device) { return states()[device].started.load(std::memory_order_acquire); }

constexpr std::size_t kStagingBytes = std::size_t{8} << 20;  // copies larger than this go in chunks

}  // namespace

void check(cudaError_t status, const char* what, int device) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so later calls start clean
  fail(what, device, std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")");
}

void check(cublasStatus_t status, const char* what, int device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& api = cublas_api();
  fail(what, device, std::string(api.status_name(status)) + " (" + api.status_string(status) + ")");
}

void* open_library(const char* what, std::initializer_list<const char*> names) {
  std::string errors;
  for (const char* name : names) {
    if (!*name) continue;
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* e = dlerror();
    errors += std::string(errors.empty() ? "" : "; ") + (e ? e : name);
  }
  throw DeviceError(std::string(what) + ": cannot open " + *names.begin() + ": " + errors);
}

void* library_symbol(void* lib, const char* what, const char* library, const char* symbol) {
  void* fn = dlsym(lib, symbol);
  if (!fn) throw DeviceError(std::string(what) + ": " + library + " has no " + symbol);
  return fn;
}

const CublasApi& cublas_api() {
  // KEEL_CUBLAS_SONAME (libcublas.so.<major> of the toolkit keel was built with) is found the
  // way a linked library would be (RUNPATH, LD_LIBRARY_PATH, the loader cache);
  // KEEL_CUBLAS_LIBRARY, the file CMake found, is the fallback.
  static const CublasApi api = [] {
    void* lib = open_library("cuBLAS", {KEEL_CUBLAS_SONAME, KEEL_CUBLAS_LIBRARY});
    CublasApi a;
    const auto load = [lib](auto& fn, const char* symbol) {
      load_symbol(fn, lib, "cuBLAS", KEEL_CUBLAS_SONAME, symbol);
    };
    load(a.create, "cublasCreate_v2");
    load(a.set_stream, "cublasSetStream_v2");
    load(a.status_name, "cublasGetStatusName");
    load(a.status_string, "cublasGetStatusString");
    load(a.gemm_strided_batched, "cublasGemmStridedBatchedEx_64");
    return a;
  }();
  return api;
}

void check(cudnnStatus_t status, const char* what, int device) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  fail(what, device, cudnnGetErrorString(status));
}

void check_launch(const char* kernel, int device) { check(cudaGetLastError(), kernel, device); }

int device_count() {
  // cudaGetDeviceCount does not write the count on error (no driver, no device): check status.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

void use_device(int device) {
  // Asked every time rather than cached per thread: other libraries in the process (and the
  // user) may call cudaSetDevice behind keel's back, and cudaGetDevice is a cheap host-side read.
  int current = -1;
  const cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess && current == device) return;
  if (status != cudaSuccess) cudaGetLastError();
  check(cudaSetDevice(device), "cudaSetDevice", device);
}

cudaStream_t stream(int device) { return state(device).stream; }

cublasHandle_t cublas(int device) {
  DeviceState& s = state(device);
  std::call_once(s.blas_once, [&] {
    use_device(device);
    const CublasApi& api = cublas_api();
    check(api.create(&s.blas), "cublasCreate", device);
    check(api.set_stream(s.blas, s.stream), "cublasSetStream", device);
  });
  return s.blas;
}

cudnnHandle_t cudnn(int device) {
  DeviceState& s = state(device);
  std::call_once(s.dnn_once, [&] {
    use_device(device);
    check(cudnnCreate(&s.dnn), "cudnnCreate", device);
    check(cudnnSetStream(s.dnn, s.stream), "cudnnSetStream", device);
  });
  return s.dnn;
}

int blocks_for(std::int64_t n, int device) {
  const std::int64_t wanted = (n + kThreads - 1) / kThreads;
  // Enough blocks to keep every SM busy several times over; grid-stride loops do the rest.
  const std::int64_t cap = std::int64_t{state(device).sm_count} * 32;
  const std::int64_t b = wanted < cap ? wanted : cap;
  return static_cast<int>(b < 1 ? 1 : b);
}

void* raw_malloc(std::size_t nbytes, int device) {
  state(device);
  use_device(device);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, nbytes == 0 ? 1 : nbytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  check(status, "cudaMalloc", device);
  return p;
}

void raw_free(void* ptr, int device) {
  if (!ptr) return;
  use_device(device);
  // The block may still be used by kernels queued on keel's non-blocking stream: wait for them
  // explicitly rather than rely on cudaFree's implicit synchronisation.
  synchronize(device);
  check(cudaFree(ptr), "cudaFree", device);
}

void copy_to_device(void* dst, const void* src, std::size_t nbytes, int device) {
  if (nbytes == 0) return;
  DeviceState& s = state(device);
  use_device(device);
  std::lock_guard<std::mutex> lock(s.staging_mutex);
  if (!s.staging) {
    check(cudaMallocHost(&s.staging, kStagingBytes), "cudaMallocHost", device);
    s.staging_bytes = kStagingBytes;
  }
  // Pageable source -> pinned staging (host memcpy) -> device (async DMA on keel's stream).
  // The caller may reuse `src` on return; the staging buffer is reused only after the previous
  // chunk's DMA finished.
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (std::size_t done = 0; done < nbytes;) {
    const std::size_t chunk = nbytes - done < s.staging_bytes ? nbytes - done : s.staging_bytes;
    check(cudaEventSynchronize(s.staging_done), "cudaEventSynchronize", device);
    std::memcpy(s.staging, from + done, chunk);
    check(cudaMemcpyAsync(to + done, s.staging, chunk, cudaMemcpyHostToDevice, s.stream),
          "cudaMemcpyAsync (host to device)", device);
    check(cudaEventRecord(s.staging_done, s.stream), "cudaEventRecord", device);
    done += chunk;
  }
}

void copy_to_host(void* dst, const void* src, std::size_t nbytes, int device) {
  if (nbytes == 0) return;
  DeviceState& s = state(device);
  use_device(device);
  // Ordered after every kernel queued on the stream; the synchronous wait makes `dst` valid.
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s.stream),
        "cudaMemcpyAsync (device to host)", device);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", device);
}

void copy_between(void* dst, int dst_device, const void* src, int src_device, std::size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device == src_device) {
    DeviceState& s = state(dst_device);
    use_device(dst_device);
    check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s.stream),
          "cudaMemcpyAsync (device to device)", dst_device);
    return;
  }
  // Across GPUs: the source's pending writes must land first, and the destination's stream
  // must not reuse `dst` concurrently; synchronising both streams keeps this simple and correct.
  synchronize(src_device);
  synchronize(dst_device);
  use_device(dst_device);
  check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, state(dst_device).stream),
        "cudaMemcpyPeerAsync", dst_device);
  synchronize(dst_device);
}

void synchronize(int device) {
  // A device keel never used has nothing queued: no context is created just to wait on it
  // (keel::cuda_synchronize walks every device). Invalid indices still throw in state().
  if (device >= 0 && device < kMaxDevices && !started(device)) return;
  DeviceState& s = state(device);
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", device);
}

std::size_t total_memory(int device) {
  state(device);
  use_device(device);
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", device);
  return total;
}

std::size_t free_memory(int device) {
  state(device);
  use_device(device);
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", device);
  return free;
}

}  // namespace keel::cuda
