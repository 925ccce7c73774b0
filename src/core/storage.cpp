#include "keel/core/storage.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cuda/runtime.hpp"
#include "keel/core/error.hpp"

namespace keel {

namespace {

constexpr std::size_t kAlignment = 64;
// Large buffers are kept for reuse: fresh multi-megabyte blocks come from mmap and pay a page
// fault per 4 KiB on first touch, which costs more than the elementwise op that uses them.
constexpr std::size_t kCacheMinBytes = std::size_t{1} << 20;
constexpr std::size_t kCacheMaxTotal = std::size_t{1} << 30;
constexpr std::size_t kCacheMaxBlocks = 32;
// More than any host holds (2^56 bytes = 64 PiB), and small enough that rounding cannot wrap.
constexpr std::size_t kMaxHostBytes = std::size_t{1} << 56;

struct Block {
  std::size_t bytes;
  void* ptr;
};

class HostCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].bytes == bytes) {
        void* p = blocks_[i].ptr;
        total_ -= bytes;
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        return p;
      }
    }
    return nullptr;
  }
  bool give(void* ptr, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (total_ + bytes > kCacheMaxTotal) return false;
    if (blocks_.size() >= kCacheMaxBlocks) {
      std::free(blocks_.front().ptr);
      total_ -= blocks_.front().bytes;
      blocks_.erase(blocks_.begin());
    }
    blocks_.push_back({bytes, ptr});
    total_ += bytes;
    return true;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : blocks_) std::free(b.ptr);
    blocks_.clear();
    total_ = 0;
  }
  ~HostCache() {
    for (auto& b : blocks_) std::free(b.ptr);
  }

 private:
  std::mutex mutex_;
  std::vector<Block> blocks_;
  std::size_t total_ = 0;
};

HostCache& host_cache() {
  static HostCache* cache = new HostCache();  // outlives static tensors at exit
  return *cache;
}

std::size_t rounded(std::size_t nbytes) {
  const std::size_t granule = nbytes >= kCacheMinBytes ? 4096 : kAlignment;
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
