#pragma once
// A block of device memory shared by every tensor view of it. The version counter counts
// in-place writes so that a tape can tell when a tensor it saved was overwritten.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "keel/core/device.hpp"

namespace keel {

class Storage {
 public:
  // Allocates `nbytes` on `device` (64-byte aligned on the CPU; cached for reuse).
  Storage(std::size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  std::uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  std::atomic<std::uint64_t> version_{0};
};

}  // namespace keel
