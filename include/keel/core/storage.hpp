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
  // Increasing in the order storages are made, never reused: tells a traced function's
  // buffers (made while it traced) from the state it captured (made before).
  std::uint64_t serial() const { return serial_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  std::atomic<std::uint64_t> version_{0};
  std::uint64_t serial_;
};

// The serial the next Storage gets.
std::uint64_t next_storage_serial();

}  // namespace keel
