#include "keel/core/config.hpp"

#include <atomic>
#include <thread>

#include "cuda/runtime.hpp"
#include "keel/core/error.hpp"

namespace keel::config {

namespace {
int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}
std::atomic<int> threads{hardware_threads()};
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError("config::set_num_threads: need at least 1 thread, got " + std::to_string(n));
  // Every parallel kernel region, BLAS's included, runs on keel's own pool (cpu/thread_pool.hpp),
  // which reads this setting at each region.
  threads.store(n);
}

int num_threads() { return threads.load(std::memory_order_relaxed); }

void set_tf32(bool enabled) { cuda::set_tf32(enabled); }
bool tf32() { return cuda::tf32(); }

}  // namespace keel::config
