#pragma once
// Tensor allocations and frees as they happen, for a listener above core (the profiler's memory
// timeline) that installs itself here: every Storage reports its bytes when it is made and when
// it goes. One atomic load per allocation while nobody listens. Internal to keel.
#include <atomic>
#include <cstddef>

#include "keel/core/device.hpp"

namespace keel::detail {

class MemoryListener {
 public:
  virtual ~MemoryListener() = default;
  // Called on the allocating (freeing) thread, from any thread; must not throw.
  virtual void allocated(const void* address, std::size_t bytes, Device device) noexcept = 0;
  virtual void freed(const void* address, std::size_t bytes, Device device) noexcept = 0;
};

// The listener, or null. Set by one owner that outlives every call it may get (the profiler's
// session, a static).
extern std::atomic<MemoryListener*> memory_listener;

}  // namespace keel::detail
