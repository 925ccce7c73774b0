#pragma once
// Wall time spent inside backend kernels, for the training-step benchmark's split of a step into
// kernel time and framework overhead (everything outside kernels: dispatch, shape checks, the
// tape, allocation). Off by default; when off a scope costs one relaxed load.
//
// A scope counts only at the outermost level of its thread (a backend call that calls another
// counts once), and the time is the caller's wall time, parallel regions included.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace keel::backend {

namespace clock_detail {
extern std::atomic<bool> kernel_clock_on;
void kernel_clock_add(std::int64_t ns);
extern thread_local int kernel_clock_depth;
}  // namespace clock_detail

// Starts (and zeroes) or stops the clock.
void set_kernel_clock(bool on);
// Seconds counted since the clock was last started, summed over threads.
double kernel_clock_seconds();

class KernelClock {
 public:
  KernelClock() {
    if (!clock_detail::kernel_clock_on.load(std::memory_order_relaxed)) return;
    entered_ = true;
    if (clock_detail::kernel_clock_depth++ == 0) {
      outermost_ = true;
      start_ = std::chrono::steady_clock::now();
    }
  }
  ~KernelClock() {
    if (!entered_) return;
    --clock_detail::kernel_clock_depth;
    if (outermost_)
      clock_detail::kernel_clock_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start_).count());
  }
  KernelClock(const KernelClock&) = delete;
  KernelClock& operator=(const KernelClock&) = delete;

 private:
  bool entered_ = false, outermost_ = false;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace keel::backend
