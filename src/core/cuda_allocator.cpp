// One caching allocator per CUDA device (see caching_allocator.hpp), and the config calls that
// report on them.
#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "core/caching_allocator.hpp"
#include "cuda/runtime.hpp"
#include "keel/core/config.hpp"
#include "keel/core/device.hpp"
#include "keel/core/error.hpp"

namespace keel {

#ifdef KEEL_WITH_CUDA
namespace {

constexpr int kMaxDevices = 64;

// Never destroyed: tensors in static storage may be freed after main returns, and by then the
// CUDA context may be gone, so the cached blocks are left to the driver's teardown.
std::array<detail::CachingAllocator*, kMaxDevices>& allocators() {
  static auto* table = new std::array<detail::CachingAllocator*, kMaxDevices>{};
  return *table;
}

std::mutex& allocators_mutex() {
  static auto* m = new std::mutex;
  return *m;
}

detail::CachingAllocator& allocator(int device) {
  if (device < 0 || device >= kMaxDevices || device >= cuda::device_count())
    throw DeviceError("cuda:" + std::to_string(device) + " is not available (" +
                      std::to_string(cuda::device_count()) + " CUDA devices present)");
  std::lock_guard<std::mutex> lock(allocators_mutex());
  auto& slot = allocators()[static_cast<std::size_t>(device)];
  if (!slot)
    slot = new detail::CachingAllocator([device](std::size_t n) { return cuda::raw_malloc(n, device); },
                                        [device](void* p) { cuda::raw_free(p, device); },
                                        "cuda:" + std::to_string(device));
  return *slot;
}

}  // namespace

void* cuda::allocate(std::size_t nbytes, int device) { return allocator(device).allocate(nbytes); }
// Called from destructors only (Storage, Scratch): it must never throw, so a failure (a pointer
// the allocator does not know, no memory for the cache's bookkeeping) leaks the block instead.
void cuda::deallocate(void* ptr, int device) {
  try {
    allocator(device).deallocate(ptr);
  } catch (...) {
  }
}

config::CudaMemoryStats config::cuda_memory_stats(int device) {
  if (device < 0 || device >= cuda::device_count()) return {};
  return allocator(device).stats();
}

void config::empty_cache() {
  for (int d = 0; d < cuda::device_count() && d < kMaxDevices; ++d) {
    detail::CachingAllocator* a = nullptr;
    {
      std::lock_guard<std::mutex> lock(allocators_mutex());
      a = allocators()[static_cast<std::size_t>(d)];
    }
    if (a) a->empty_cache();
  }
}
#else
config::CudaMemoryStats config::cuda_memory_stats(int) { return {}; }
void config::empty_cache() {}
#endif

}  // namespace keel
