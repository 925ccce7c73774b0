#include "core/caching_allocator.hpp"

#include <bit>
#include <exception>
#include <limits>
#include <utility>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::detail {

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, std::string where,
                                   std::size_t max_cached_bytes)
    : raw_alloc_(std::move(raw_alloc)),
      raw_free_(std::move(raw_free)),
      where_(std::move(where)),
      max_cached_bytes_(max_cached_bytes) {}

std::size_t CachingAllocator::size_class(std::size_t nbytes) {
  constexpr std::size_t kMin = 512;
  if (nbytes <= kMin) return kMin;
  // The octave [2^k, 2^(k+1)) holding nbytes is split into four equal steps of 2^(k-2).
  const int k = std::bit_width(nbytes) - 1;
  const std::size_t step = std::size_t{1} << (k - 2);
  if (nbytes > std::numeric_limits<std::size_t>::max() - step) return nbytes;  // absurd sizes: as is
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(std::size_t nbytes) {
  const std::size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  if (auto it = cached_.find(cls); it != cached_.end()) {
    ptr = it->second;
    cached_.erase(it);
    stats_.cached_bytes -= cls;
    ++stats_.cache_hits;
  } else {
    ptr = raw_alloc_(cls);
    if (!ptr && !cached_.empty()) {
      // Out of memory with free blocks of other sizes held: give them back and try again.
      ++stats_.oom_retries;
      release_cached();
      ptr = raw_alloc_(cls);
    }
    if (!ptr)
      throw ResourceExhaustedError(fmt::format(
          "out of memory on {}: could not allocate {} bytes ({} MiB); {} MiB are in use by tensors, "
          "{} MiB reserved in all. Free tensors or use a smaller batch",
          where_, nbytes, cls >> 20, stats_.allocated_bytes >> 20, stats_.reserved_bytes >> 20));
    ++stats_.device_mallocs;
    stats_.reserved_bytes += cls;
  }
  live_.emplace(ptr, cls);
  stats_.allocated_bytes += cls;
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
  return ptr;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end())
    throw ValueError(fmt::format("deallocate: {} was not allocated by keel's allocator on {}", ptr, where_));
  const std::size_t cls = it->second;
  live_.erase(it);
  stats_.allocated_bytes -= cls;
  if (stats_.cached_bytes + cls > max_cached_bytes_) {
    stats_.reserved_bytes -= cls;
    raw_free_(ptr);
    return;
  }
  cached_.emplace(cls, ptr);
  stats_.cached_bytes += cls;
}

void CachingAllocator::release_cached() {
  // Each block leaves the cache before it is freed: when a free fails (cudaFree also reports
  // errors of earlier kernels), the blocks already freed must not be handed out again. The
  // first failure is rethrown once every block has been tried.
  std::exception_ptr failure;
  while (!cached_.empty()) {
    const auto it = cached_.begin();
    const auto [cls, ptr] = *it;
    cached_.erase(it);
    stats_.cached_bytes -= cls;
    stats_.reserved_bytes -= cls;
    try {
      raw_free_(ptr);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached();
}

config::CudaMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace keel::detail
