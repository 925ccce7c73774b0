#include "cpu/cpu_load.hpp"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>

namespace keel::cpu {

int busy_cores_between(const LoadSample& before, const LoadSample& after, int current) {
  const double wall = after.wall - before.wall;
  if (!(wall > 0) || after.cpus <= 0) return current;
  // Our own threads' time (spinning included) is in the CPUs' busy time too: take it out.
  const double others = ((after.cpus_busy - before.cpus_busy) - (after.process - before.process)) / wall;
  const int cores = static_cast<int>(std::clamp(std::lround(others), 0L, static_cast<long>(after.cpus)));
  if (std::fabs(others - current) <= 0.6) return std::clamp(current, 0, after.cpus);
  return cores;
}

namespace {

// The decimal number at p (before end), p moved past it; false where none starts there.
bool parse_count(const char*& p, const char* end, double& value) {
  while (p < end && *p == ' ') ++p;
  if (p == end || *p < '0' || *p > '9') return false;
  double v = 0;
  for (; p < end && *p >= '0' && *p <= '9'; ++p) v = v * 10 + (*p - '0');
  value = v;
  return true;
}

}  // namespace

double busy_seconds(const char* text, std::size_t length, const std::vector<int>& cpus, double ticks_per_second) {
  const char* p = text;
  const char* end = text + length;
  double ticks = 0;
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (eol == nullptr) eol = end;
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice" (guest time is
    // already in user); the aggregate "cpu " line first, then one per CPU, then other records.
    if (eol - p < 3 || std::memcmp(p, "cpu", 3) != 0) break;
    const char* q = p + 3;
    double cpu = -1;  // the aggregate line has a space after "cpu"
    if (q < eol && *q != ' ' && parse_count(q, eol, cpu) && cpu < 1e9 &&
        std::find(cpus.begin(), cpus.end(), static_cast<int>(cpu)) != cpus.end()) {
      double field[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (double& f : field)
        if (!parse_count(q, eol, f)) break;
      ticks += field[0] + field[1] + field[2] + field[5] + field[6] + field[7];
    }
    p = eol + 1;
  }
  return ticks / ticks_per_second;
}

namespace {

double seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::int64_t coarse_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// A reading now; false where /proc/stat cannot be read.
bool read_sample(LoadSample& s) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  const int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // The CPU lines come first: 64 KiB holds them for hundreds of CPUs. One buffer: refresh()
  // reads under its mutex.
  static std::vector<char> buffer(std::size_t{64} << 10);
  std::size_t length = 0;
  for (;;) {
    const ssize_t got = read(fd, buffer.data() + length, buffer.size() - length);
    if (got <= 0) break;
    length += static_cast<std::size_t>(got);
    if (length == buffer.size()) break;
  }
  close(fd);
  if (length == 0) return false;
  static const double ticks = [] {
    const long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? static_cast<double>(hz) : 100.0;
  }();
  s.wall = seconds(CLOCK_MONOTONIC);
  s.process = seconds(CLOCK_PROCESS_CPUTIME_ID);
  s.cpus_busy = busy_seconds(buffer.data(), length, cpus, ticks);
  s.cpus = static_cast<int>(cpus.size());
  return true;
}

std::atomic<int> others_busy{0};
std::atomic<int> set_cpus{0};  // CPUs of the affinity set at the last reading (0: none yet)
std::atomic<std::int64_t> next_refresh_ms{0};
std::mutex refresh_mutex;
LoadSample last;  // guarded by refresh_mutex; cpus == 0 until a reading

void refresh(std::int64_t now) {
  const std::unique_lock<std::mutex> lock(refresh_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is refreshing
  next_refresh_ms.store(now + kLoadWindowMs, std::memory_order_relaxed);
  LoadSample s;
  if (!read_sample(s)) {  // no reading this window (no /proc, no file descriptor left): nobody busy
    others_busy.store(0, std::memory_order_relaxed);
    last = LoadSample{};
    return;
  }
  if (last.cpus > 0) {
    const int busy = busy_cores_between(last, s, others_busy.load(std::memory_order_relaxed));
    others_busy.store(busy, std::memory_order_relaxed);
  }
  set_cpus.store(s.cpus, std::memory_order_relaxed);
  last = s;
}

}  // namespace

int busy_cores() {
  const std::int64_t now = coarse_ms();
  if (now >= next_refresh_ms.load(std::memory_order_relaxed)) refresh(now);
  return others_busy.load(std::memory_order_relaxed);
}

int threads_left(int wanted, int busy, int cpus) {
  if (busy <= 0 || cpus <= 0) return wanted;
  return std::clamp(cpus - busy, 1, std::max(wanted, 1));
}

int threads_left(int wanted) {
  const int busy = busy_cores();
  return threads_left(wanted, busy, set_cpus.load(std::memory_order_relaxed));
}

}  // namespace keel::cpu
