#include "keel/core/storage.hpp"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#include <fmt/core.h>

#include "core/caching_allocator.hpp"
#include "core/memory_events.hpp"
#include "cuda/runtime.hpp"
#include "keel/core/error.hpp"

namespace keel {

namespace {

constexpr std::size_t kAlignment = 64;
// Host buffers from 1 KiB up come from a caching allocator (core/caching_allocator.hpp), which
// keeps freed blocks by size class: a training step frees and reallocates the same few hundred
// buffers (the activations the tape saved, the gradients) every step, and through malloc they
// cost a sixth of an LSTM(50) step (_int_malloc, _int_free, malloc_consolidate; glibc consolidates
// its free lists whenever a request of 1 KiB or more meets freed small chunks), and fresh
// multi-megabyte blocks come from mmap with a page fault per 4 KiB on first touch. Smaller
// buffers stay with malloc's per-thread caches, which are faster for them (small_allocate).
constexpr std::size_t kCacheMinBytes = std::size_t{1} << 10;
// At most this much freed memory is kept; beyond it blocks go back to the system.
constexpr std::size_t kCacheMaxBytes = std::size_t{1} << 30;
// More than any host holds (2^56 bytes = 64 PiB), and small enough that rounding cannot wrap.
constexpr std::size_t kMaxHostBytes = std::size_t{1} << 56;

detail::CachingAllocator& host_allocator() {
  // Size classes from 512 bytes are multiples of 128, as aligned_alloc wants of its size.
  static auto* allocator = new detail::CachingAllocator(  // outlives static tensors at exit
      [](std::size_t n) { return std::aligned_alloc(kAlignment, n); }, [](void* p) { std::free(p); }, "cpu",
      kCacheMaxBytes);
  return *allocator;
}

// A buffer under kCacheMinBytes: malloc'd with room to align it by hand, the block's own address
// kept just below the aligned one. glibc's aligned_alloc (before 2.38) takes no request from its
// per-thread cache: every tiny tensor went through _int_memalign, which splits a larger chunk and
// frees the pieces, and its frees then consolidated the heap. malloc'd, an eager 1-element add
// spends a third less time in the allocator.
void* small_allocate(std::size_t nbytes) {
  void* block = std::malloc(nbytes + kAlignment);  // malloc aligns to 16 >= sizeof(void*)
  if (!block) throw ResourceExhaustedError(fmt::format("out of memory on cpu: cannot allocate {} bytes", nbytes));
  const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(block) + kAlignment) & ~(std::uintptr_t{kAlignment} - 1);
  reinterpret_cast<void**>(at)[-1] = block;
  return reinterpret_cast<void*>(at);
}

void small_free(void* p) { std::free(static_cast<void**>(p)[-1]); }

// A profile's memory timeline listens (core/memory_events.hpp): out of line and cold, so that
// the constructor and destructor stay as small as without it.
[[gnu::noinline, gnu::cold]] void report(detail::MemoryListener* l, bool made, const void* p, std::size_t n,
                                         Device d) {
  if (made)
    l->allocated(p, n, d);
  else
    l->freed(p, n, d);
}

}  // namespace


namespace {
std::atomic<std::uint64_t> storage_serials{1};
}  // namespace

std::atomic<detail::MemoryListener*> detail::memory_listener{nullptr};

config::CudaMemoryStats config::host_memory_stats() { return host_allocator().stats(); }
void config::reset_host_peak_memory() { host_allocator().reset_peak(); }

std::uint64_t next_storage_serial() { return storage_serials.load(std::memory_order_relaxed); }

Storage::Storage(std::size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), serial_(storage_serials.fetch_add(1, std::memory_order_relaxed)) {
  if (device.is_cuda()) {
    data_ = cuda::allocate(nbytes, device.index());  // DeviceError without CUDA or out of memory
  } else if (nbytes > kMaxHostBytes) {  // rounding up would wrap; no host has this much memory anyway
    throw ResourceExhaustedError(fmt::format("out of memory on cpu: cannot allocate {} bytes", nbytes));
  } else if (nbytes >= kCacheMinBytes) {
    data_ = host_allocator().allocate(nbytes);  // ResourceExhaustedError naming the bytes
  } else {
    data_ = small_allocate(nbytes);
  }
  if (detail::MemoryListener* l = detail::memory_listener.load(std::memory_order_relaxed)) [[unlikely]]
    report(l, true, data_, nbytes_, device_);
}

Storage::~Storage() {
  if (!data_) return;
  if (detail::MemoryListener* l = detail::memory_listener.load(std::memory_order_relaxed)) [[unlikely]]
    report(l, false, data_, nbytes_, device_);
  if (device_.is_cuda()) {
    cuda::deallocate(data_, device_.index());  // back to the cache; never throws (see there)
    return;
  }
  if (nbytes_ >= kCacheMinBytes) {
    try {
      host_allocator().deallocate(data_);
    } catch (...) {
      // Only a pointer the allocator did not hand out, or no memory for its bookkeeping: a
      // destructor must not throw, so the block is left as it is.
    }
    return;
  }
  small_free(data_);
}

}  // namespace keel
