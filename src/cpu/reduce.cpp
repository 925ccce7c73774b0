#include "cpu/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "cpu/kernels.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

// The elements of the wide accumulator that sums short rows several at a time (8 KB of float32:
// it stays in L1 beside the rows streaming through).
constexpr std::int64_t kFoldElements = 2048;

template <class T>
T identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return T(0);
    case ReduceOp::prod: return T(1);
    case ReduceOp::max:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    case ReduceOp::min:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
  }
  return T(0);
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Max and min keep a NaN of either side, as the SIMD kernels do (tf.reduce_max of a tensor with
// a NaN is NaN); sum and prod carry NaN by arithmetic.
template <class T>
T reduce_combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::sum: return static_cast<T>(a + b);
    case ReduceOp::prod: return static_cast<T>(a * b);
    case ReduceOp::max: return a > b || is_nan(a) ? a : b;
    case ReduceOp::min: return a < b || is_nan(a) ? a : b;
  }
  return a;
}

template <class T>
T reduce_run(ReduceOp op, const T* x, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    return typed_kernels<T>().reduce(op, x, n);
  } else {
    T acc = identity<T>(op);
    for (std::int64_t i = 0; i < n; ++i) acc = reduce_combine(op, acc, x[i]);
    return acc;
  }
}

template <class T>
void accumulate_run(ReduceOp op, T* acc, const T* x, std::int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    typed_kernels<T>().accumulate(op, acc, x, n);
  } else {
    for (std::int64_t i = 0; i < n; ++i) acc[i] = reduce_combine(op, acc[i], x[i]);
  }
}

// x permuted so that the kept axes come first and the reduced axes last.
Tensor kept_then_reduced(const Tensor& x, const std::vector<int>& axes) {
  std::vector<std::int64_t> shape, strides;
  std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), false);
  for (int a : axes) reduced[static_cast<std::size_t>(a)] = true;
  for (int pass = 0; pass < 2; ++pass)
    for (std::int64_t d = 0; d < x.rank(); ++d)
      if (reduced[static_cast<std::size_t>(d)] == (pass == 1)) {
        shape.push_back(x.shape()[d]);
        strides.push_back(x.strides()[static_cast<std::size_t>(d)]);
      }
  return detail::make_view(x, Shape(shape), strides, x.offset());
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, const Tensor& out) {
  std::int64_t inner = 1;
  for (int a : axes) inner *= x.shape()[a];
  const std::int64_t outer = out.size();
  detail::dispatch_numeric(x.dtype(), "reduce", [&]<class T>() {
    T* y = static_cast<T*>(out.raw_data());
    if (inner == 0 || outer == 0) {
      std::fill(y, y + outer, identity<T>(op));
      return;
    }
    // Leading axes of a contiguous tensor: add whole rows into the output (bias gradients).
    bool leading = x.is_contiguous() && !axes.empty();
    for (std::size_t i = 0; i < axes.size(); ++i) leading &= axes[i] == static_cast<int>(i);
    if (leading && outer > 1) {
      const T* xp = static_cast<const T*>(x.raw_data());
      // Few columns (a convolution's bias gradient: [N*H*W, C] summed over its rows) cannot be
      // split by columns: split the rows, each part summing its rows into its own accumulator
      // (part_stride), and add those at the end. Short rows (C = 16 is one AVX-512 vector) go
      // `fold` at a time, as one run of fold * C into a wide accumulator whose rows are added at
      // the end: a kernel call per row cost more than its additions.
      if (outer < 1024) {
        const std::int64_t most_parts = std::min<std::int64_t>(parallel_threads(), inner);
        const int row_parts = static_cast<int>(std::clamp<std::int64_t>(inner * outer / kParallelGrain, 1, most_parts));
        const std::int64_t fold =
            std::max<std::int64_t>(1, std::min<std::int64_t>(kFoldElements / outer, inner / row_parts));
        const std::int64_t wide = fold * outer, stride = part_stride<T>(wide);
        std::vector<T> partial(static_cast<std::size_t>(row_parts * stride));
        parallel_parts(row_parts, [&](int p) {
          const std::int64_t r0 = inner * p / row_parts, r1 = inner * (p + 1) / row_parts;
          T* acc = partial.data() + p * stride;
          std::copy(xp + r0 * outer, xp + (r0 + fold) * outer, acc);
          std::int64_t r = r0 + fold;
          for (; r + fold <= r1; r += fold) accumulate_run<T>(op, acc, xp + r * outer, wide);
          for (std::int64_t j = 1; j < fold; ++j) accumulate_run<T>(op, acc, acc + j * outer, outer);
          for (; r < r1; ++r) accumulate_run<T>(op, acc, xp + r * outer, outer);
        });
        std::copy(partial.begin(), partial.begin() + outer, y);
        for (int p = 1; p < row_parts; ++p) accumulate_run<T>(op, y, partial.data() + p * stride, outer);
        return;
      }
      parallel_for(outer, 1024, [&](std::int64_t b, std::int64_t e) {
        std::copy(xp + b, xp + e, y + b);
        for (std::int64_t r = 1; r < inner; ++r) accumulate_run<T>(op, y + b, xp + r * outer + b, e - b);
      });
      return;
    }
    // A block of middle axes of a contiguous tensor (a global pooling's {1, 2} of NHWC), [A, R, I]
    // with I >= 16 after it: each of the A slices adds its R rows of I into its output row, as
    // above. Made contiguous with the reduced axes last, it was a transposed copy first (global
    // average pooling of [16, 64, 64, 64] floats: 3.3 ms at one thread).
    bool middle = x.is_contiguous() && !axes.empty() && axes.back() < x.rank() - 1;
    for (std::size_t i = 1; i < axes.size(); ++i) middle &= axes[i] == axes[i - 1] + 1;
    std::int64_t after = 1;
    if (middle)
      for (std::int64_t d = axes.back() + 1; d < x.rank(); ++d) after *= x.shape()[d];
    if (middle && after >= 16) {
      const T* xp = static_cast<const T*>(x.raw_data());
      const std::int64_t slices = outer / after;
      parallel_for(slices, std::max<std::int64_t>(1, kParallelGrain / (inner * after)),
                   [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t a = b; a < e; ++a) {
          const T* xa = xp + a * inner * after;
          T* ya = y + a * after;
          std::copy(xa, xa + after, ya);
          for (std::int64_t r = 1; r < inner; ++r) accumulate_run<T>(op, ya, xa + r * after, after);
        }
      });
      return;
    }
    const Tensor rows = contiguous(kept_then_reduced(x, axes));
    const T* xp = static_cast<const T*>(rows.raw_data());
    if (outer == 1) {
      // One long row: split it between threads and combine the partial results.
      const int threads = std::max(1, std::min<int>(parallel_threads(), static_cast<int>(inner / kParallelGrain)));
      std::vector<T> partial(static_cast<std::size_t>(threads), identity<T>(op));
      parallel_for(threads, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t t = b; t < e; ++t)
          partial[static_cast<std::size_t>(t)] =
              reduce_run<T>(op, xp + inner * t / threads, inner * (t + 1) / threads - inner * t / threads);
      });
      T acc = identity<T>(op);
      for (T v : partial) acc = reduce_combine(op, acc, v);
      y[0] = acc;
      return;
    }
    parallel_for(outer, std::max<std::int64_t>(1, kParallelGrain / inner), [&](std::int64_t b, std::int64_t e) {
      if constexpr (std::is_floating_point_v<T>) return reduce_each_row<T>(op, xp + b * inner, e - b, inner, y + b);
      else
        for (std::int64_t r = b; r < e; ++r) y[r] = reduce_run<T>(op, xp + r * inner, inner);
    });
  });
}

void arg_reduce(kernel::ArgReduceOp op, const Tensor& x, int axis, const Tensor& out) {
  const bool is_max = op == kernel::ArgReduceOp::argmax;
  const Tensor rows = contiguous(kept_then_reduced(x, {axis}));
  const std::int64_t n = x.shape()[axis];
  const std::int64_t outer = out.size();
  auto* y = static_cast<std::int64_t*>(out.raw_data());
  detail::dispatch_numeric(x.dtype(), is_max ? "argmax" : "argmin", [&]<class T>() {
    const T* xp = static_cast<const T*>(rows.raw_data());
    // Each row's extreme value first (the SIMD reduction, which a NaN turns into NaN), then the
    // first index that holds it: comparing every element with the best so far, NaN checks and
    // all, ran at 0.09x a memcpy's rate (4M floats in rows of 1024: 3.1 ms at one thread).
    // Rows shorter than kShortReduceRow take their extremes kArgBlock rows per reduce_rows call:
    // a call per row of 4 took 69 ms for [1048576, 4].
    const ReduceOp extreme = is_max ? ReduceOp::max : ReduceOp::min;
    constexpr std::int64_t kArgBlock = 1024;
    const bool short_rows = std::is_floating_point_v<T> && n > 0 && n < kShortReduceRow;
    // The first index of row r that holds m (its extreme), or for a NaN extreme the first NaN.
    const auto first_of = [&](const T* row, T m) {
      if (n > 0 && !is_nan(m)) {
        // The first of equals, as below. (A pointer walk: with an index GCC kept it in the output
        // element, a store per element, which made the scan of rows of 1024 3x slower.)
        const T* p = row;
        while (!(*p == m)) ++p;
        return static_cast<std::int64_t>(p - row);
      }
      std::int64_t best = 0;
      for (std::int64_t i = 1; i < n; ++i) {
        // The first NaN wins, like NumPy and tf.math.argmax
        if (is_nan(row[best])) break;
        if (is_nan(row[i])) { best = i; break; }
        if (is_max ? row[i] > row[best] : row[i] < row[best]) best = i;
      }
      return best;
    };
    parallel_for(outer, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t b, std::int64_t e) {
                   if constexpr (std::is_floating_point_v<T>) {
                     if (short_rows) {
                       T extremes[kArgBlock];
                       for (std::int64_t r0 = b; r0 < e; r0 += kArgBlock) {
                         const std::int64_t rows_now = std::min(kArgBlock, e - r0);
                         typed_kernels<T>().reduce_rows(extreme, xp + r0 * n, rows_now, n, extremes);
                         for (std::int64_t i = 0; i < rows_now; ++i) {
                           // Without an early exit (a select per element): where the extreme lies
                           // in a short row is random, and the branch out mispredicted 10 ns a row.
                           const T* row = xp + (r0 + i) * n;
                           const T m = extremes[i];
                           std::int64_t best = n;
                           for (std::int64_t j = n - 1; j >= 0; --j) best = row[j] == m ? j : best;
                           y[r0 + i] = best < n ? best : first_of(row, m);  // none equal: a NaN
                         }
                       }
                       return;
                     }
                   }
                   for (std::int64_t r = b; r < e; ++r) {
                     const T* row = xp + r * n;
                     y[r] = first_of(row, n > 0 ? reduce_run<T>(extreme, row, n) : T());
                   }
                 });
  });
}

}  // namespace keel::cpu
