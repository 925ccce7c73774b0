// Fewer threads while other processes keep cores busy (config::yield_busy_cores, src/cpu/cpu_load.hpp):
// the arithmetic of a load reading, the parsing of /proc/stat, and a real spinning process.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_load.hpp"
#include "cpu/thread_pool.hpp"
#include "threads_guard.hpp"

using namespace keel;
using cpu::LoadSample;

TEST_CASE("the cores others kept busy are their CPU time over the wall time, ours taken out", "[cpu_load]") {
  // 0.5 s on 2 CPUs; the CPUs were busy 1.3 s, 0.3 s of it this process's: others 1.0 s / 0.5 s = 2.
  const LoadSample a{10.0, 4.0, 100.0, 2}, b{10.5, 4.3, 101.3, 2};
  CHECK(cpu::busy_cores_between(a, b, 0) == 2);
  // Busy 0.8 s, ours 0.3 s: others 0.5 s / 0.5 s = 1 core.
  CHECK(cpu::busy_cores_between(a, {10.5, 4.3, 100.8, 2}, 0) == 1);
  // Only our own threads ran (1.0 s busy, all ours): nobody else.
  CHECK(cpu::busy_cores_between(a, {10.5, 5.0, 101.0, 2}, 1) == 0);
  // More than the set holds (other CPUs' time miscounted): at most the CPUs of the set.
  CHECK(cpu::busy_cores_between(a, {10.5, 4.0, 103.0, 2}, 0) == 2);
  // Our accounting ahead of the system's (a negative difference): none.
  CHECK(cpu::busy_cores_between(a, {10.5, 4.6, 100.2, 2}, 1) == 0);
  // No time between the readings: unchanged.
  CHECK(cpu::busy_cores_between(a, a, 1) == 1);
}

TEST_CASE("the busy-core count moves only when the load is more than 0.6 of a core away", "[cpu_load]") {
  const LoadSample a{0.0, 0.0, 0.0, 2};
  auto others = [&](double cores, int current) {  // a 1 s reading with `cores` of others' time
    return cpu::busy_cores_between(a, {1.0, 0.0, cores, 2}, current);
  };
  CHECK(others(0.55, 0) == 0);  // half a core now and then: stays quiet
  CHECK(others(0.65, 0) == 1);
  CHECK(others(0.45, 1) == 1);  // a spinner measured a little low: stays busy
  CHECK(others(0.35, 1) == 0);
  CHECK(others(1.7, 1) == 2);
  CHECK(others(1.5, 1) == 1);   // 0.5 away: unchanged
}

TEST_CASE("other processes' busy cores leave the threads the cores they do not use", "[cpu_load]") {
  CHECK(cpu::threads_left(2, 0, 2) == 2);
  CHECK(cpu::threads_left(8, 0, 2) == 8);  // nobody else busy: the width set stays, even above the CPUs
  CHECK(cpu::threads_left(2, 1, 2) == 1);
  CHECK(cpu::threads_left(2, 2, 2) == 1);  // at least one
  CHECK(cpu::threads_left(4, 1, 16) == 4);
  CHECK(cpu::threads_left(8, 3, 8) == 5);
  CHECK(cpu::threads_left(2, 1, 0) == 2);  // CPU count unknown
}

TEST_CASE("/proc/stat's CPU lines give the busy seconds of the CPUs asked for", "[cpu_load]") {
  // user nice system idle iowait irq softirq steal guest guest_nice, at 100 ticks a second:
  // busy = user + nice + system + irq + softirq + steal (idle and iowait are not; guest is in user).
  const std::string text =
      "cpu  300 0 60 1000 10 0 4 0 0 0\n"
      "cpu0 100 0 20 500 5 0 2 0 50 0\n"
      "cpu1 200 10 40 500 5 3 2 5 0 0\n"
      "cpu12 7 0 0 0 0 0 0 0 0 0\n"
      "intr 12345 1 2 3\n"
      "cpu3 999 0 0 0 0 0 0 0 0 0\n";  // past the CPU lines: ignored
  CHECK(cpu::busy_seconds(text.data(), text.size(), {0}, 100.0) == Approx(1.22));
  CHECK(cpu::busy_seconds(text.data(), text.size(), {1}, 100.0) == Approx(2.60));
  CHECK(cpu::busy_seconds(text.data(), text.size(), {0, 1}, 100.0) == Approx(3.82));
  CHECK(cpu::busy_seconds(text.data(), text.size(), {12}, 100.0) == Approx(0.07));
  CHECK(cpu::busy_seconds(text.data(), text.size(), {3, 5}, 100.0) == 0.0);
  // Short and truncated lines count what they hold, and nothing is read past the text.
  const std::string cut = "cpu  1 2\ncpu0 100 0 2";
  CHECK(cpu::busy_seconds(cut.data(), cut.size(), {0}, 100.0) == Approx(1.02));
  CHECK(cpu::busy_seconds(cut.data(), 3, {0}, 100.0) == 0.0);
  CHECK(cpu::busy_seconds("", 0, {0}, 100.0) == 0.0);
  // The aggregate line's first number is not a CPU's; a CPU number too large for an int is skipped.
  const std::string odd = "cpu  5 0 0 0\ncpu99999999999999999999 1 0 0 0\ncpu5 3 0 0 0\n";
  CHECK(cpu::busy_seconds(odd.data(), odd.size(), {5}, 100.0) == Approx(0.03));
}

TEST_CASE("the test programs keep a fixed number of threads unless KEEL_YIELD_BUSY_CORES says otherwise",
          "[cpu_load]") {
  // tests/fixed_threads.cpp turns yielding off where the variable is unset; set, the library
  // reads it at start-up: "0" off, anything else on.
  const char* env = std::getenv("KEEL_YIELD_BUSY_CORES");
  CHECK(config::yield_busy_cores() == (env != nullptr && std::string(env) != "0"));
}

TEST_CASE("a process spinning on one of our cores leaves kernels the other cores", "[cpu_load]") {
  REQUIRE(std::ifstream("/proc/stat").good());  // Linux's CPU accounting
  const keel_test::ThreadsGuard guard;
  config::set_num_threads(2);
  struct Restore {
    bool was = config::yield_busy_cores();
    ~Restore() { config::set_yield_busy_cores(was); }
  } restore;
  const pid_t spinner = fork();
  REQUIRE(spinner >= 0);
  if (spinner == 0) {
    // Dies with the test, and spins 10 s at most whatever happens to it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (volatile unsigned long x = 0; (x & 0xfffff) != 0 || std::chrono::steady_clock::now() < end; x = x + 1) {
    }
    _exit(0);
  }
  // Readings with the spinner running, at most 3 s in all; the checks follow a reading at once,
  // so the next one is a window away.
  int busy = 0;
  for (int i = 0; i < 30 && busy == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(cpu::kLoadWindowMs + 10));
    busy = cpu::busy_cores();
  }
  CHECK(busy >= 1);
  config::set_yield_busy_cores(true);
  CHECK(cpu::parallel_threads() == cpu::threads_left(2));
  if (sysconf(_SC_NPROCESSORS_ONLN) == 2) CHECK(cpu::parallel_threads() == 1);  // as on the CI machines
  config::set_yield_busy_cores(false);
  CHECK(cpu::parallel_threads() == 2);
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  // Work splits still give every part once, on however many threads.
  config::set_yield_busy_cores(true);
  std::vector<int> ran(64, 0);
  cpu::parallel_parts(64, [&](int p) { ++ran[static_cast<std::size_t>(p)]; });
  CHECK(std::count(ran.begin(), ran.end(), 1) == 64);
}
