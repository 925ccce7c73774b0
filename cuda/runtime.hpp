#pragma once
// The CUDA runtime as the rest of keel sees it: devices, memory, copies between host and device,
// and the TF32 switch. Plain C++17 with no CUDA header (see cuda/backend.hpp for the kernels).
// src/core/ (Storage, the caching allocator, Device) uses this and nothing else of cuda/.
#include <cstddef>

namespace keel::cuda {

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

// Whether float32 GEMMs and convolutions may use TF32 tensor cores (default false, as the CPU).
void set_tf32(bool enabled);
bool tf32();

}  // namespace keel::cuda
