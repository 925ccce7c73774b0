#pragma once
// keel's one CPU thread pool: every parallel kernel region runs on it, and BLAS runs
// single-threaded inside it (cpu/blas.hpp), so no second runtime competes for the cores.
//
// Why not OpenMP: at the end of a fork-join region every thread of the team must arrive, so
// when another process takes a core, the region waits for the descheduled thread's next time
// slice (measured: the seed CNN's 2-thread step went from 14 to 36 ms with one core kept busy;
// libgomp's active spin-waiting makes it worse, and its wait policy can only be chosen by an
// environment variable before the program starts). Here the calling thread takes parts itself
// and waits only for parts that a worker has claimed: a worker that wakes late finds nothing
// left and goes back to sleep. Idle workers sleep on a condition variable after a short spin.
// The caller claims parts from the front and workers from the back, so part 0 always runs on the
// caller: kernels that split a tensor alike keep its first rows in the caller's cache.
#include <cstdint>
#include <type_traits>

namespace keel::cpu {

namespace pool_detail {
void run(int parts, void (*call)(void*, int), void* ctx);
}

// The threads a region started now runs on: config::num_threads(), or while other processes
// keep cores busy (config::yield_busy_cores(), cpu/cpu_load.hpp) at most the cores they leave.
// Kernels split their work by it.
int parallel_threads();

// fn(p) for each p in [0, parts), each exactly once, on the calling thread and up to
// min(parts, parallel_threads()) - 1 workers; in order on the calling thread when not
// `parallel`, or when called from inside a region (a part that starts parallel work of its own).
// An exception from fn reaches the caller after every claimed part has finished.
template <class F>
void parallel_parts(int parts, F&& fn, bool parallel = true) {
  if (parts <= 0) return;
  if (!parallel || parts == 1) {
    for (int p = 0; p < parts; ++p) fn(p);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  pool_detail::run(parts, [](void* ctx, int p) { (*static_cast<Fn*>(ctx))(p); },
                   const_cast<void*>(static_cast<const void*>(&fn)));
}

// fn(begin, end) over `parts` contiguous, nearly equal ranges of [0, n), as parallel_parts.
template <class F>
void parallel_ranges(std::int64_t n, int parts, F&& fn, bool parallel = true) {
  if (n <= 0) return;
  if (parts > n) parts = static_cast<int>(n);
  parallel_parts(parts, [&](int p) { fn(n * p / parts, n * (p + 1) / parts); }, parallel);
}

// Elements of T from the start of one part of a per-part scratch array to the next, for parts of
// n elements: n rounded up to whole 128-byte blocks, plus one block. Parts written by different
// threads then never share a cache line (nor the pair of lines the adjacent-line prefetcher
// fetches together). Packed tightly, every write waits for the other core to give the line
// back: the max-pool gradient ran 1.5x slower on 2 threads than on 1.
template <class T>
constexpr std::int64_t part_stride(std::int64_t n) {
  constexpr std::int64_t block = 128 / static_cast<std::int64_t>(sizeof(T));
  return (n + block - 1) / block * block + block;
}

// True on a pool worker, and on the calling thread while it runs parts.
bool in_parallel_region();

}  // namespace keel::cpu
