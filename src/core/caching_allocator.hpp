#pragma once
// A caching allocator over a raw allocator (cudaMalloc on a GPU, aligned_alloc for host tensors
// of 1 KiB and more): freed blocks are kept in bins by size class and handed out again, so an op
// never pays for cudaMalloc/cudaFree (each a device-wide synchronisation) or for malloc's free
// lists and fresh pages once a training step's sizes have been seen.
//
// Size classes are 2^k * {1, 1.25, 1.5, 1.75} from 512 bytes up: at most 25% of a block is
// slack, and a batch whose size varies a little still reuses the same blocks. When the raw
// allocator fails, the cache is emptied and the allocation retried once; a second failure is a
// DeviceError that names the request and the allocator's state, which the caller can catch.
//
// Reuse is safe for stream-ordered work: a block freed by a tensor whose kernels are still queued
// goes to the next allocation on the same stream, whose kernels run after them.
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "keel/core/config.hpp"

namespace keel::detail {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(std::size_t)>;  // nullptr when out of memory
  using RawFree = std::function<void(void*)>;

  // `where` names the device in error messages ("cuda:0"). A freed block that would take the
  // cached bytes past `max_cached_bytes` goes back to the raw allocator instead.
  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, std::string where,
                   std::size_t max_cached_bytes = static_cast<std::size_t>(-1));
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t nbytes);
  void deallocate(void* ptr);  // ValueError for a pointer this allocator did not hand out
  void empty_cache();
  config::CudaMemoryStats stats() const;
  void reset_peak();  // peak_allocated_bytes = allocated_bytes

  static std::size_t size_class(std::size_t nbytes);

 private:
  void release_cached();  // mutex held

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  std::string where_;
  std::size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, std::size_t> live_;  // pointer -> its block's size class
  std::multimap<std::size_t, void*> cached_;     // size class -> free blocks
  config::CudaMemoryStats stats_;
};

}  // namespace keel::detail
