#include "keel/core/storage.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/core.h>

#include "cuda/runtime.hpp"
#include "keel/core/error.hpp"

namespace keel {

namespace {

constexpr std::size_t kAlignment = 64;
// Buffers from 1 KiB up are kept for reuse, by exact (rounded) size. Fresh multi-megabyte blocks
// come from mmap and pay a page fault per 4 KiB on first touch, which costs more than the
// elementwise op that uses them; and a training step frees and allocates the same few hundred
// medium buffers (activations the tape saved, gradients) every step, which through malloc cost
// a sixth of an LSTM(50) step (measured: _int_malloc, _int_free, malloc_consolidate; glibc
// consolidates its free lists whenever a request of 1 KiB or more meets freed small chunks).
constexpr std::size_t kCacheMinBytes = std::size_t{1} << 10;
// From this size blocks are rounded to whole pages.
constexpr std::size_t kPageRoundBytes = std::size_t{16} << 10;
constexpr std::size_t kCacheMaxTotal = std::size_t{1} << 30;
constexpr std::size_t kCacheMaxBlocks = 4096;
// More than any host holds (2^56 bytes = 64 PiB), and small enough that rounding cannot wrap.
constexpr std::size_t kMaxHostBytes = std::size_t{1} << 56;

class HostCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    total_ -= bytes;
    --blocks_;
    return p;
  }
  // False when the cache is full: the caller frees the block.
  bool give(void* ptr, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (total_ + bytes > kCacheMaxTotal || blocks_ >= kCacheMaxBlocks) return false;
    free_[bytes].push_back(ptr);
    total_ += bytes;
    ++blocks_;
    return true;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    release();
  }
  ~HostCache() { release(); }

 private:
  void release() {
    for (auto& [bytes, ptrs] : free_)
      for (void* p : ptrs) std::free(p);
    free_.clear();
    total_ = 0;
    blocks_ = 0;
  }

  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t total_ = 0, blocks_ = 0;
};

HostCache& host_cache() {
  static HostCache* cache = new HostCache();  // outlives static tensors at exit
  return *cache;
}

std::size_t rounded(std::size_t nbytes) {
  const std::size_t granule = nbytes >= kPageRoundBytes ? 4096 : kAlignment;
  return (nbytes + granule - 1) / granule * granule;
}

}  // namespace


Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda::allocate(nbytes, device.index());  // DeviceError without CUDA or out of memory
    return;
  }
  if (nbytes > kMaxHostBytes)  // rounding up would wrap; no host has this much memory anyway
    throw ResourceExhaustedError(fmt::format("out of memory on cpu: cannot allocate {} bytes", nbytes));
  const std::size_t bytes = rounded(nbytes == 0 ? 1 : nbytes);
  if (bytes >= kCacheMinBytes) data_ = host_cache().take(bytes);
  if (!data_) data_ = std::aligned_alloc(kAlignment, bytes);
  if (!data_) {
    // Free blocks the cache holds may be what is missing: give them back and try once more.
    host_cache().clear();
    data_ = std::aligned_alloc(kAlignment, bytes);
  }
  if (!data_)
    throw ResourceExhaustedError(fmt::format("out of memory on cpu: cannot allocate {} bytes ({:.1f} GiB)", nbytes,
                                             static_cast<double>(nbytes) / (1 << 30)));
}

Storage::~Storage() {
  if (!data_) return;
  if (device_.is_cuda()) {
    cuda::deallocate(data_, device_.index());  // back to the cache; never throws (see there)
    return;
  }
  const std::size_t bytes = rounded(nbytes_ == 0 ? 1 : nbytes_);
  if (bytes >= kCacheMinBytes && host_cache().give(data_, bytes)) return;
  std::free(data_);
}

}  // namespace keel
