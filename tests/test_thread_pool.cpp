// The CPU thread pool (src/cpu/thread_pool.hpp): every part of a region runs exactly once,
// whether the caller or a worker takes it, also when a worker is held up inside a part it
// claimed (as when another process takes its core).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/thread_pool.hpp"
#include "threads_guard.hpp"

using namespace keel;

namespace {

using keel_test::ThreadsGuard;

// Runs a region of `parts` parts, those on a worker first sleeping `worker_delay`; every part
// must run once. Returns how many ran on a thread other than the caller.
int region(int parts, std::chrono::microseconds worker_delay) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  std::vector<std::atomic<int>> ran(static_cast<std::size_t>(parts));
  cpu::parallel_parts(parts, [&](int p) {
    ++ran[static_cast<std::size_t>(p)];
    if (std::this_thread::get_id() != caller) {
      ++elsewhere;
      std::this_thread::sleep_for(worker_delay);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // time for a worker to wake and claim
    }
  });
  for (const auto& r : ran) REQUIRE(r.load() == 1);
  return elsewhere.load();
}

}  // namespace

TEST_CASE("every part of a region runs exactly once, on the caller and the workers") {
  ThreadsGuard guard;
  config::set_num_threads(2);
  int shared = 0;
  for (int parts : {2, 3, 16, 64})
    for (int i = 0; i < 20; ++i) shared += region(parts, std::chrono::microseconds(0)) > 0;
  // The worker takes parts in some of these regions (a sleeping worker may wake too late for one).
  CHECK(shared > 0);
  // A worker held up in its part: the region still completes with every part run once.
  for (int i = 0; i < 10; ++i) (void)region(2, std::chrono::milliseconds(2));
}

TEST_CASE("the caller always runs the first part, so kernels split alike keep their halves on one core") {
  // Two kernels in a row over the same tensor split the same way: the first range stays in the
  // calling thread's cache only if that thread runs part 0 every time, whoever wakes first.
  ThreadsGuard guard;
  config::set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  for (int parts : {2, 3, 8})
    for (int i = 0; i < 200; ++i) {
      std::atomic<bool> first_on_caller{false};
      cpu::parallel_parts(parts, [&](int p) {
        if (p == 0) first_on_caller = std::this_thread::get_id() == caller;
      });
      INFO("parts " << parts << ", region " << i);
      REQUIRE(first_on_caller.load());
    }
}
