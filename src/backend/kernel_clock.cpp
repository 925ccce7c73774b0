#include "backend/kernel_clock.hpp"

namespace keel::backend {

namespace clock_detail {
std::atomic<bool> kernel_clock_on{false};
thread_local int kernel_clock_depth = 0;
namespace {
std::atomic<std::int64_t> kernel_ns{0};
}
void kernel_clock_add(std::int64_t ns) { kernel_ns.fetch_add(ns, std::memory_order_relaxed); }
}  // namespace clock_detail

void set_kernel_clock(bool on) {
  if (on) clock_detail::kernel_ns.store(0);
  clock_detail::kernel_clock_on.store(on);
}

double kernel_clock_seconds() { return static_cast<double>(clock_detail::kernel_ns.load()) * 1e-9; }

}  // namespace keel::backend
