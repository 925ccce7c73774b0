#include "keel/core/config.hpp"

#include <atomic>
#include <cstdlib>
#include <string_view>
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

// -1 until first asked or set: constant-initialised, so a static initialiser elsewhere (in the
// same program when keel is a static library) may set it before or after this file's turn.
std::atomic<int> yield_busy{-1};
}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError("config::set_num_threads: need at least 1 thread, got " + std::to_string(n));
  // Every parallel kernel region, BLAS's included, runs on keel's own pool (cpu/thread_pool.hpp),
  // which reads this setting at each region.
  threads.store(n);
}

int num_threads() { return threads.load(std::memory_order_relaxed); }

void set_yield_busy_cores(bool enabled) { yield_busy.store(enabled ? 1 : 0, std::memory_order_relaxed); }

bool yield_busy_cores() {
  int state = yield_busy.load(std::memory_order_relaxed);
  if (state < 0) {
    const char* env = std::getenv("KEEL_YIELD_BUSY_CORES");
    const int from_env = env == nullptr || std::string_view(env) != "0" ? 1 : 0;
    // A set_yield_busy_cores() racing with this first read wins.
    if (!yield_busy.compare_exchange_strong(state, from_env, std::memory_order_relaxed)) return state == 1;
    return from_env == 1;
  }
  return state == 1;
}

void set_tf32(bool enabled) { cuda::set_tf32(enabled); }
bool tf32() { return cuda::tf32(); }

}  // namespace keel::config
