#pragma once
// N-d iteration over strided operands, one innermost run at a time: the loops of every
// elementwise op, copy and broadcast. Dimensions that are contiguous in every operand are
// merged first, so a contiguous or row-broadcast operand costs one call per long run.
#include <array>
#include <cstdint>
#include <vector>

#include "cpu/thread_pool.hpp"

namespace keel::cpu {

template <std::size_t K>
struct RunPlan {
  std::vector<std::int64_t> shape;                       // merged dims; last is the run
  std::array<std::vector<std::int64_t>, K> strides;      // per operand, elements
  std::int64_t outer = 1;                                // number of runs
  std::int64_t inner = 1;                                // run length
};

template <std::size_t K>
RunPlan<K> make_plan(const std::vector<std::int64_t>& shape,
                     const std::array<const std::vector<std::int64_t>*, K>& strides) {
  RunPlan<K> p;
  // Drop size-1 dims, then merge neighbours that are contiguous for every operand.
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!p.shape.empty()) {
      bool mergeable = true;
      for (std::size_t k = 0; k < K; ++k)
        if (p.strides[k].back() != (*strides[k])[d] * shape[d]) mergeable = false;
      if (mergeable) {
        p.shape.back() *= shape[d];
        for (std::size_t k = 0; k < K; ++k) p.strides[k].back() = (*strides[k])[d];
        continue;
      }
    }
    p.shape.push_back(shape[d]);
    for (std::size_t k = 0; k < K; ++k) p.strides[k].push_back((*strides[k])[d]);
  }
  if (p.shape.empty()) {
    p.shape.push_back(1);
    for (std::size_t k = 0; k < K; ++k) p.strides[k].push_back(0);
  }
  p.inner = p.shape.back();
  for (std::size_t d = 0; d + 1 < p.shape.size(); ++d) p.outer *= p.shape[d];
  return p;
}

// Calls fn(offsets, n, inner_strides) for runs [begin, end) of the plan.
template <std::size_t K, class F>
void run_range(const RunPlan<K>& p, std::int64_t begin, std::int64_t end, F& fn) {
  const std::size_t nd = p.shape.size();
  std::array<std::int64_t, K> inner_strides;
  for (std::size_t k = 0; k < K; ++k) inner_strides[k] = p.strides[k][nd - 1];
  std::vector<std::int64_t> idx(nd, 0);
  std::array<std::int64_t, K> off{};
  // Decode the starting multi-index once; afterwards step like an odometer.
  std::int64_t rem = begin;
  for (std::size_t d = nd - 1; d-- > 0;) {
    idx[d] = rem % p.shape[d];
    rem /= p.shape[d];
    for (std::size_t k = 0; k < K; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  for (std::int64_t r = begin; r < end; ++r) {
    fn(off, p.inner, inner_strides);
    for (std::size_t d = nd - 1; d-- > 0;) {
      ++idx[d];
      for (std::size_t k = 0; k < K; ++k) off[k] += p.strides[k][d];
      if (idx[d] < p.shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= idx[d] * p.strides[k][d];
      idx[d] = 0;
    }
  }
}

// Work below this many elements stays on the calling thread (thread start-up costs ~µs).
inline constexpr std::int64_t kParallelGrain = 1 << 15;

template <std::size_t K, class F>
void for_each_run(const RunPlan<K>& p, F&& fn) {
  const std::int64_t total = p.outer * p.inner;
  // Small work never asks how many threads there are (a tiny op's overhead is ~100 ns).
  const int threads = total < 2 * kParallelGrain ? 1 : parallel_threads();
  if (threads > 1 && p.outer == 1) {
    // One long run (operands contiguous or scalars): split along it, or it would run on one thread.
    std::array<std::int64_t, K> steps;
    for (std::size_t k = 0; k < K; ++k) steps[k] = p.strides[k].back();
    parallel_ranges(total, threads, [&](std::int64_t b, std::int64_t e) {
      std::array<std::int64_t, K> off;
      for (std::size_t k = 0; k < K; ++k) off[k] = b * steps[k];
      fn(off, e - b, steps);
    });
    return;
  }
  if (threads <= 1 || p.outer < 2) {
    run_range(p, 0, p.outer, fn);
    return;
  }
  parallel_ranges(p.outer, threads, [&](std::int64_t b, std::int64_t e) { run_range(p, b, e, fn); });
}

// for_each_run over the plan of these operands (none when a dimension is 0).
template <std::size_t K, class F>
void for_each_run(const std::vector<std::int64_t>& shape,
                  const std::array<const std::vector<std::int64_t>*, K>& strides, F&& fn) {
  for (auto d : shape)
    if (d == 0) return;  // nothing to visit (and no index to decode)
  for_each_run(make_plan<K>(shape, strides), fn);
}

// Splits [0, n) into per-thread ranges when n is large; fn(begin, end).
template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& fn) {
  const int threads = n < 2 * grain ? 1 : parallel_threads();
  if (threads <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  const auto chunks = static_cast<int>(std::min<std::int64_t>(threads, n / grain));
  parallel_ranges(n, chunks, fn);
}

}  // namespace keel::cpu
