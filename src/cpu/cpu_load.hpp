#pragma once
// How many of this process's cores other processes keep busy, from the system's CPU accounting.
//
// Why: a parallel region ends when its slowest part does. When another process runs on one of
// two cores, the scheduler shares that core between it and keel's thread there in time slices of
// milliseconds, and every region that thread has a part of waits for its next slice: the LSTM
// step, a hundred regions of microseconds each, took 2.2x its quiet time at 2 threads and 1.6x on
// one. Timing keel's own parts to find such a thread mistook the quiet machine's hiccups for it;
// the CPU time the system has given to others on our cores is the fact itself.
//
// busy_cores() is refreshed at most every kLoadWindowMs, by whichever thread asks first once the
// window has passed (a read of /proc/stat, ~20 us); the others read the cached value.
#include <cstdint>
#include <vector>

namespace keel::cpu {

inline constexpr std::int64_t kLoadWindowMs = 100;

// One reading: wall-clock and this process's CPU seconds, and the seconds every CPU of its
// affinity set has spent busy (user, nice, system, irq, softirq, steal) since boot.
struct LoadSample {
  double wall = 0, process = 0, cpus_busy = 0;
  int cpus = 0;  // CPUs in this process's affinity set
};

// From two readings: the cores other processes kept busy in between (their CPU time over the
// wall time), rounded, with hysteresis against flickering at half a core: it moves away from
// `current` only when the measured load is more than 0.6 of a core from it. At most the CPUs
// of the set; `current` when the readings do not span a positive time.
int busy_cores_between(const LoadSample& before, const LoadSample& after, int current);

// Parses /proc/stat's text: the busy seconds of the CPUs listed in `cpus`, at `ticks_per_second`
// (the kernel's USER_HZ). CPUs absent from the text count nothing.
double busy_seconds(const char* proc_stat, std::size_t length, const std::vector<int>& cpus,
                    double ticks_per_second);

// Cores of this process's affinity set that other processes kept busy over the last window; 0
// where /proc/stat cannot be read.
int busy_cores();
// Of `wanted` threads, those to run with `busy` of `cpus` cores taken by others: all of them
// while nobody else is busy (a width set above the CPU count stays), else at most the cores
// left, and at least 1. `wanted` where the CPU count is unknown (cpus <= 0).
int threads_left(int wanted, int busy, int cpus);

// threads_left(wanted, busy_cores(), the CPUs of this process's affinity set).
int threads_left(int wanted);

}  // namespace keel::cpu
