// Running sums and products along one axis. x is read as [outer, n, inner] (contiguous); each
// output row along the axis is the previous output row combined with one input row, so for
// inner > 1 the loop runs across `inner` contiguous columns and vectorises.
#include <algorithm>
#include <type_traits>

#include "core/dispatch.hpp"
#include "cpu/copy.hpp"
#include "cpu/rows.hpp"
#include "cpu/scan_sort.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

// Integers accumulate in their unsigned type: overflow wraps (as TensorFlow's kernels do in
// practice) instead of being undefined behaviour.
template <class T>
struct AccOf {
  using type = T;
};
template <class T>
  requires(std::is_integral_v<T> && std::is_signed_v<T>)
struct AccOf<T> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Acc = typename AccOf<T>::type;

template <class T>
T scan_combine(ScanOp kind, T a, T b) {
  const Acc<T> x = static_cast<Acc<T>>(a), y = static_cast<Acc<T>>(b);
  return static_cast<T>(kind == ScanOp::sum ? static_cast<Acc<T>>(x + y) : static_cast<Acc<T>>(x * y));
}

// The narrowest column strip (bytes of a row) a thread takes when a block [n, inner] is split
// across threads: narrower strips of two threads share pages and ran slower than one thread.
constexpr std::int64_t kMinStripBytes = 4096;

// One column c of the block: its running value stays in a register, combined in the same order as
// scan_block's rows (inclusive: y[0] = x[0], then y[s] = y[s-1] (+) x[s]; exclusive: y[0] = the
// identity, then y[s] = y[s-1] (+) x[s-1]). Along the last axis (inner == 1) scan_block's row loop
// ran once per element: cumsum over rows of 1024, 4M floats, 14 ms at one thread.
template <class T, ScanOp Kind>
void scan_column(const T* x, T* y, std::int64_t n, std::int64_t step, std::int64_t first, bool exclusive) {
  const T identity = Kind == ScanOp::sum ? T(0) : T(1);
  T acc = exclusive ? identity : x[first];
  y[first] = acc;
  for (std::int64_t s = 1, at = first + step; s < n; ++s, at += step) {
    acc = scan_combine(Kind, acc, x[exclusive ? at - step : at]);
    y[at] = acc;
  }
}

// Rows of a scan along the last axis run kScanRows at a time, each its own chain of dependent
// operations in scan_column's order (the same bits), so that the chains overlap. Row k runs
// kScanLag * (kScanRows - 1 - k) elements ahead of the last one: rows of 1024 floats start 4 KiB
// apart, and a load whose address matches a pending store's in the low 12 bits waits for that
// store (processed in step, the rows ran slower than one after the other).
constexpr int kScanRows = 4;
constexpr std::int64_t kScanLag = 16;

// Rows whose element 0 is at first[k] (their elements `step` apart), as scan_column each. Each
// row is a lane of its own (no array indexed at run time, so that the compiler keeps all four in
// registers).
template <class T, ScanOp Kind>
void scan_rows(const T* x, T* y, std::int64_t n, std::int64_t step, const std::int64_t (&first)[kScanRows],
               bool exclusive) {
  static_assert(kScanRows == 4);
  struct Lane {
    const T* x;  // what the next element combines: its own input, or with exclusive the one before
    T* y;        // the next output
    T acc;
  };
  const auto start = [&](std::int64_t p0) {
    const T acc = exclusive ? (Kind == ScanOp::sum ? T(0) : T(1)) : x[p0];
    y[p0] = acc;
    return Lane{x + (exclusive ? p0 : p0 + step), y + p0 + step, acc};
  };
  const auto advance = [step](Lane& l) {
    l.acc = scan_combine(Kind, l.acc, *l.x);
    *l.y = l.acc;
    l.x += step;
    l.y += step;
  };
  const auto run = [&](Lane& l, std::int64_t count) {
    for (std::int64_t s = 0; s < count; ++s) advance(l);
  };
  Lane l0 = start(first[0]), l1 = start(first[1]), l2 = start(first[2]), l3 = start(first[3]);
  run(l0, 3 * kScanLag);  // the leads
  run(l1, 2 * kScanLag);
  run(l2, kScanLag);
  for (std::int64_t s = 1; s < n - 3 * kScanLag; ++s) {
    advance(l0);
    advance(l1);
    advance(l2);
    advance(l3);
  }
  run(l1, kScanLag);  // the rows behind catch up
  run(l2, 2 * kScanLag);
  run(l3, 3 * kScanLag);
}

template <class T>
void scan_block(ScanOp kind, const T* x, T* y, std::int64_t n, std::int64_t inner, std::int64_t c0,
                std::int64_t c1, bool exclusive, bool reverse) {
  const T identity = kind == ScanOp::sum ? T(0) : T(1);
  const std::int64_t step = reverse ? -inner : inner;
  const std::int64_t first = reverse ? (n - 1) * inner : 0;
  if (c1 - c0 == 1) {
    if (kind == ScanOp::sum) scan_column<T, ScanOp::sum>(x, y, n, step, first + c0, exclusive);
    else scan_column<T, ScanOp::prod>(x, y, n, step, first + c0, exclusive);
    return;
  }
  for (std::int64_t c = c0; c < c1; ++c) y[first + c] = exclusive ? identity : x[first + c];
  for (std::int64_t s = 1; s < n; ++s) {
    const std::int64_t at = first + s * step, prev = at - step;
    // inclusive: y[at] = y[prev] (+) x[at]; exclusive: y[at] = y[prev] (+) x[prev].
    const T* xs = x + (exclusive ? prev : at);
    const T* yp = y + prev;
    T* yo = y + at;
    if (kind == ScanOp::sum) {
      for (std::int64_t c = c0; c < c1; ++c) yo[c] = scan_combine(ScanOp::sum, yp[c], xs[c]);
    } else {
      for (std::int64_t c = c0; c < c1; ++c) yo[c] = scan_combine(ScanOp::prod, yp[c], xs[c]);
    }
  }
}

}  // namespace

void scan(ScanOp kind, const Tensor& x_in, int axis, bool exclusive, bool reverse, const Tensor& out) {
  if (out.size() == 0) return;
  const Tensor x = contiguous(x_in);
  const AxisLines lines = axis_lines(x.shape().dims(), axis);
  const std::int64_t outer = lines.outer, n = lines.n, inner = lines.inner;
  detail::dispatch_numeric(x.dtype(), "cumsum", [&]<class T>() {
    const T* xs = x.data<T>();
    T* ys = static_cast<T*>(out.raw_data());
    // Whole rows of `inner` columns per task, read and written front to back; the columns are
    // split only as far as the threads need it (narrow column strips touch a new page on every
    // row: cumsum over the rows of [4096, 1024] in strips of 256 columns ran at 0.26x memcpy).
    const int nt = std::max(1, parallel_threads());
    const bool big = x.size() >= kParallelGrain;
    const auto row_bytes = inner * static_cast<std::int64_t>(sizeof(T));
    const std::int64_t widest = std::max<std::int64_t>(1, row_bytes / kMinStripBytes);
    const std::int64_t blocks = big && outer < nt ? std::clamp<std::int64_t>((nt + outer - 1) / outer, 1, widest) : 1;
    const std::int64_t width = (inner + blocks - 1) / blocks;
    const std::int64_t tasks = outer * blocks;
    const bool par = nt > 1 && tasks > 1 && big;
    parallel_ranges(tasks, nt, [&](std::int64_t b, std::int64_t e) {
      // Rows along the last axis, kScanRows at a time, where the chain of float additions is what
      // limits (an integer addition takes one cycle).
      if (std::is_floating_point_v<T> && inner == 1 && n > kScanLag * kScanRows)
        for (; b + kScanRows <= e; b += kScanRows) {
          std::int64_t first[kScanRows];
          for (int k = 0; k < kScanRows; ++k) first[k] = (b + k) * n + (reverse ? n - 1 : 0);
          const std::int64_t step = reverse ? -1 : 1;
          if (kind == ScanOp::sum) scan_rows<T, ScanOp::sum>(xs, ys, n, step, first, exclusive);
          else scan_rows<T, ScanOp::prod>(xs, ys, n, step, first, exclusive);
        }
      for (std::int64_t t = b; t < e; ++t) {
        const std::int64_t o = t / blocks, blk = t % blocks;
        const std::int64_t base = o * n * inner;
        scan_block<T>(kind, xs + base, ys + base, n, inner, std::min(inner, blk * width),
                      std::min(inner, (blk + 1) * width), exclusive, reverse);
      }
    }, par);
  });
}

}  // namespace keel::cpu
