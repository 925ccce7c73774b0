// The CPU thread pool (src/cpu/thread_pool.hpp): every part runs once; and when a worker is held
// up inside a part it claimed (as when another process takes its core), the regions that follow
// run on the calling thread alone for a while, with the same parts.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/thread_pool.hpp"

using namespace keel;

namespace {

struct ThreadsGuard {
  int saved = config::num_threads();
  ~ThreadsGuard() { config::set_num_threads(saved); }
};

// Runs a region of `parts` parts; returns how many ran on a thread other than the caller.
// A part on another thread first sleeps `worker_delay` (a descheduled worker), one on the caller
// `caller_delay` (time for a sleeping worker to wake and claim a part).
int region(int parts, std::chrono::microseconds worker_delay, std::chrono::microseconds caller_delay = {}) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  std::vector<int> ran(static_cast<std::size_t>(parts), 0);
  cpu::parallel_parts(parts, [&](int p) {
    ++ran[static_cast<std::size_t>(p)];
    if (std::this_thread::get_id() != caller) {
      ++elsewhere;
      std::this_thread::sleep_for(worker_delay);
    } else if (caller_delay.count() > 0) {
      std::this_thread::sleep_for(caller_delay);
    }
  });
  for (int r : ran) REQUIRE(r == 1);
  return elsewhere.load();
}

}  // namespace

TEST_CASE("every part of a region runs exactly once, on the caller and the workers") {
  ThreadsGuard guard;
  config::set_num_threads(2);
  for (int parts : {2, 3, 16, 100}) (void)region(parts, std::chrono::microseconds(0));
}

TEST_CASE("after a worker holds a region up, regions run on the caller alone for a while") {
  ThreadsGuard guard;
  config::set_num_threads(2);
  // Wait out a solo period an earlier region may have started.
  for (int i = 0; i < 200 && cpu::pool_detail::running_solo(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE_FALSE(cpu::pool_detail::running_solo());
  // A worker that claims a part takes 3 ms over it while the caller's takes 0.3 ms: a stall. (A
  // worker that wakes too late to claim a part leaves both to the caller: try again.)
  const std::int64_t before = cpu::pool_detail::stalls();
  bool held_up = false;
  for (int attempt = 0; attempt < 200 && !held_up; ++attempt)
    held_up = region(2, std::chrono::milliseconds(3), std::chrono::microseconds(300)) > 0;
  REQUIRE(held_up);
  CHECK(cpu::pool_detail::stalls() == before + 1);
  // Now every part runs on the caller, for at least the shortest solo period (20 ms) ...
  REQUIRE(cpu::pool_detail::running_solo());
  CHECK(region(8, std::chrono::microseconds(0)) == 0);
  // ... and then the workers take parts again.
  for (int i = 0; i < 200 && cpu::pool_detail::running_solo(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(cpu::pool_detail::running_solo());
  bool shared = false;
  for (int attempt = 0; attempt < 200 && !shared; ++attempt)
    shared = region(2, std::chrono::microseconds(0), std::chrono::microseconds(300)) > 0;
  CHECK(shared);
}
