// Max and average pooling on NHWC images, with the kernels their gradients need.
#include "cpu/conv.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/window_kernels.hpp"

namespace keel::cpu {

namespace {

using namespace window;

// ---- pooling -------------------------------------------------------------------------------------

// Whether tap value v replaces the window's running maximum `best`: when strictly greater (ties
// keep the earlier tap), or when v is the window's first NaN. The max of a window with a NaN is
// NaN (tf.nn.max_pool), and its gradient goes to that NaN, as argmax picks the first NaN.
template <class T>
inline bool replaces_max(T v, T best) {
  return v > best || (v != v && best == best);
}

// window_argmax on channels [c0, c0 + nv * lanes), the running maxima and their taps in
// registers. The fast version assumes no NaN: a strict compare finds the first maximum and maxps
// keeps the value (six instructions a vector and tap with the sum below; the exact version's NaN
// rule takes nine). It also sums the taps, and when a sum is NaN (a NaN tap, or +inf and -inf)
// returns false without writing: the exact version then redoes the block.
template <class T, int nv>
bool argmax_block_fast(const T* x, const i64* offset, TapIndex<T> taps, i64 c0, TapIndex<T>* tap) {
  using S = Vec<T>;
  typename S::V best[nv], sum[nv];
  typename S::M arg[nv];
  for (int v = 0; v < nv; ++v) {
    best[v] = sum[v] = S::load(x + offset[0] + c0 + v * S::lanes);
    arg[v] = S::splat(0);
  }
  for (TapIndex<T> t = 1; t < taps; ++t) {
    const typename S::M tv = S::splat(t);
    for (int v = 0; v < nv; ++v) {
      const typename S::V xv = S::load(x + offset[t] + c0 + v * S::lanes);
      arg[v] = S::select(best[v] < xv, tv, arg[v]);  // strict: ties keep the earlier tap
      best[v] = S::max(xv, best[v]);
      sum[v] += xv;
    }
  }
  typename S::M nan{};
  for (int v = 0; v < nv; ++v) nan |= sum[v] != sum[v];
  if (S::any(nan)) return false;
  for (int v = 0; v < nv; ++v) S::store(tap + c0 + v * S::lanes, arg[v]);
  return true;
}

template <class T, int nv>
void argmax_block_exact(const T* x, const i64* offset, TapIndex<T> taps, i64 c0, TapIndex<T>* tap) {
  using S = Vec<T>;
  typename S::V best[nv];
  typename S::M arg[nv];
  for (int v = 0; v < nv; ++v) {
    best[v] = S::load(x + offset[0] + c0 + v * S::lanes);
    arg[v] = S::splat(0);
  }
  for (TapIndex<T> t = 1; t < taps; ++t) {
    const typename S::M tv = S::splat(t);
    for (int v = 0; v < nv; ++v) {
      const typename S::V xv = S::load(x + offset[t] + c0 + v * S::lanes);
      // replaces_max, lane by lane: !(xv <= best) is xv > best or either NaN; best == best
      // then rules out a NaN best (the first NaN stays).
      const typename S::M greater = ~(xv <= best[v]) & (best[v] == best[v]);
      best[v] = S::select(greater, xv, best[v]);
      arg[v] = S::select(greater, tv, arg[v]);
    }
  }
  for (int v = 0; v < nv; ++v) S::store(tap + c0 + v * S::lanes, arg[v]);
}

// The first maximum of each channel in the window of output pixel (n, oh, ow), taps visited in
// row-major order (see replaces_max): channel c's maximum is x[offset[tap[c]] + c]. tap[] holds
// c entries, offset[] kh*kw. Returns the number of taps inside the image.
template <class T>
TapIndex<T> window_argmax(const WindowGeom& g, const T* x, i64 n, i64 oh, i64 ow, TapIndex<T>* tap,
                          i64* offset) {
  using I = TapIndex<T>;
  const i64 C = g.c;
  const i64 ih0 = oh * g.sh - g.pad_top, iw0 = ow * g.sw - g.pad_left;
  const TapRange ti = taps_inside(ih0, g.kh, 1, g.h), tj = taps_inside(iw0, g.kw, 1, g.w);
  I taps = 0;
  for (i64 i = ti.begin; i < ti.end; ++i)
    for (i64 j = tj.begin; j < tj.end; ++j) offset[taps++] = ((n * g.h + ih0 + i) * g.w + iw0 + j) * C;
  // Four vectors of channels at a time.
  constexpr int nv = 4;
  constexpr i64 width = nv * Vec<T>::lanes;
  i64 c0 = 0;
  for (; c0 + width <= C; c0 += width)
    if (!argmax_block_fast<T, nv>(x, offset, taps, c0, tap)) argmax_block_exact<T, nv>(x, offset, taps, c0, tap);
  for (i64 c = c0; c < C; ++c) {
    T best = x[offset[0] + c];
    I arg = 0;
    for (I t = 1; t < taps; ++t)
      if (replaces_max(x[offset[t] + c], best)) {
        best = x[offset[t] + c];
        arg = t;
      }
    tap[c] = arg;
  }
  return taps;
}

// Per-thread scratch of window_argmax and of the window runs (tap offsets; the taps array is
// window_argmax's alone).
template <class T>
struct ArgmaxScratch {
  i64 tap_stride, offset_stride;  // each part's own cache lines (part_stride)
  std::vector<TapIndex<T>> tap;
  std::vector<i64> offset;
  ArgmaxScratch(const WindowGeom& g, int parts)
      : tap_stride(part_stride<TapIndex<T>>(g.c)),
        offset_stride(part_stride<i64>(g.kh * g.kw)),
        tap(static_cast<std::size_t>(parts * tap_stride)),
        offset(static_cast<std::size_t>(parts * offset_stride)) {}
  TapIndex<T>* taps_of(int part) { return tap.data() + part * tap_stride; }
  i64* offsets_of(int part) { return offset.data() + part * offset_stride; }
};

// The windows of output row oh in runs of consecutive pixels with the same taps inside the image
// (the interior is one run, a border pixel in the padding is a run of its own): run(ow0, pixels,
// taps) with offset[0, taps) the taps of pixel ow0 relative to its image's first element; pixel
// ow0 + q adds q * sw * C. The kernel table's window kernels take such runs.
template <class F>
void for_each_window_run(const WindowGeom& g, i64 oh, i64* offset, F&& run) {
  const i64 C = g.c, ih0 = oh * g.sh - g.pad_top;
  const TapRange ti = taps_inside(ih0, g.kh, 1, g.h);
  const auto taps_at = [&](i64 ow) { return taps_inside(ow * g.sw - g.pad_left, g.kw, 1, g.w); };
  for (i64 ow = 0, end; ow < g.wo; ow = end) {
    const TapRange tj = taps_at(ow);
    for (end = ow + 1; end < g.wo; ++end) {
      const TapRange next = taps_at(end);
      if (next.begin != tj.begin || next.end != tj.end) break;
    }
    const i64 iw0 = ow * g.sw - g.pad_left;
    int taps = 0;
    for (i64 i = ti.begin; i < ti.end; ++i)
      for (i64 j = tj.begin; j < tj.end; ++j) offset[taps++] = ((ih0 + i) * g.w + iw0 + j) * C;
    run(ow, end - ow, taps);
  }
}

// The forwards: `window` (the kernel table's window_max or window_mean) over the window runs of
// every output row. The max of a window is NaN if a tap is NaN (tf.nn.max_pool), else the largest
// tap; the mean is over the taps inside the image (tf.nn.avg_pool).
template <class T>
void pool_forward_t(const WindowGeom& g, const T* x, T* y, decltype(TypedKernels<T>::window_max) window) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  ArgmaxScratch<T> scratch(g, parts);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    i64* offset = scratch.offsets_of(p);
    for (i64 r = r0; r < r1; ++r) {
      const T* img = x + r / g.ho * g.h * g.w * C;
      for_each_window_run(g, r % g.ho, offset, [&](i64 ow0, i64 pixels, int taps) {
        window(img, g.sw * C, offset, taps, y + (r * g.wo + ow0) * C, pixels, C);
      });
    }
  });
}

// Pooling windows that do not overlap (stride >= pool, the usual 2x2/2) own their pixels, so the
// backward kernels write each pixel's gradient once instead of zero-filling and adding into it.
bool disjoint_windows(const WindowGeom& g) { return g.sh >= g.kh && g.sw >= g.kw; }
// ... and when they also tile the whole image, no pixel is left to zero.
bool windows_cover(const WindowGeom& g) {
  return g.sh == g.kh && g.sw == g.kw && (g.ho - 1) * g.sh - g.pad_top + g.kh >= g.h &&
         (g.wo - 1) * g.sw - g.pad_left + g.kw >= g.w;
}

// The gradients, a scatter into dx split by images: grad(n, oh, ow0, pixels, taps, offset,
// accumulate) runs the kernel on one window run of image n, output row oh. dx is zeroed first
// unless the windows own every pixel, and overlapping windows add up.
template <class T, class Grad>
void pool_backward_t(const WindowGeom& g, T* dx, Grad&& grad) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const bool disjoint = disjoint_windows(g), covers = windows_cover(g);
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  ArgmaxScratch<T> scratch(g, parts);
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    if (!(disjoint && covers)) std::fill(dx + n0 * image, dx + n1 * image, T(0));
    i64* offset = scratch.offsets_of(p);
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh)
        for_each_window_run(g, oh, offset, [&](i64 ow0, i64 pixels, int taps) {
          grad(n, oh, ow0, pixels, taps, offset, /*accumulate=*/!disjoint);
        });
  });
}

template <class T>
void max_pool_backward_t(const WindowGeom& g, const T* x, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  const auto window_max_grad = typed_kernels<T>().window_max_grad;
  pool_backward_t(g, dx, [&](i64 n, i64 oh, i64 ow0, i64 pixels, int taps, const i64* offset, bool accumulate) {
    window_max_grad(x + n * image, g.sw * C, offset, taps, dy + ((n * g.ho + oh) * g.wo + ow0) * C, dx + n * image,
                    pixels, C, accumulate);
  });
}

template <class T>
void max_pool_gather_t(const WindowGeom& g, const T* x, const T* dx, T* out) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  ArgmaxScratch<T> scratch(g, parts);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    TapIndex<T>* tap = scratch.taps_of(p);
    i64* offset = scratch.offsets_of(p);
    for (i64 r = r0; r < r1; ++r)
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const TapIndex<T> taps = window_argmax(g, x, r / g.ho, r % g.ho, ow, tap, offset);
        T* op = out + (r * g.wo + ow) * C;
        // A select per tap rather than an indexed load per channel: it vectorises.
        using S = Vec<T>;
        i64 c = 0;
        for (; c + S::lanes <= C; c += S::lanes) {
          const typename S::M arg = S::load(tap + c);
          typename S::V acc{};
          for (TapIndex<T> t = 0; t < taps; ++t)
            acc = S::select(arg == S::splat(t), S::load(dx + offset[t] + c), acc);
          S::store(op + c, acc);
        }
        for (; c < C; ++c) op[c] = dx[offset[tap[c]] + c];
      }
  });
}

template <class T>
void avg_pool_backward_t(const WindowGeom& g, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  const auto window_mean_grad = typed_kernels<T>().window_mean_grad;
  pool_backward_t(g, dx, [&](i64 n, i64 oh, i64 ow0, i64 pixels, int taps, const i64* offset, bool accumulate) {
    window_mean_grad(dy + ((n * g.ho + oh) * g.wo + ow0) * C, g.sw * C, offset, taps, dx + n * image, pixels, C,
                     accumulate);
  });
}

}  // namespace

void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y) {
  detail::dispatch_float(dtype, "max_pool2d", [&]<class T>() {
    pool_forward_t<T>(g, in<T>(x), out<T>(y), typed_kernels<T>().window_max);
  });
}

void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "max_pool2d_grad", [&]<class T>() {
    max_pool_backward_t<T>(g, in<T>(x), in<T>(dy), out<T>(dx));
  });
}

void max_pool_gather(DType dtype, const WindowGeom& g, const void* x, const void* dx, void* o) {
  detail::dispatch_float(dtype, "max_pool2d_grad_grad", [&]<class T>() {
    max_pool_gather_t<T>(g, in<T>(x), in<T>(dx), out<T>(o));
  });
}

void avg_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y) {
  detail::dispatch_float(dtype, "avg_pool2d", [&]<class T>() {
    pool_forward_t<T>(g, in<T>(x), out<T>(y), typed_kernels<T>().window_mean);
  });
}

void avg_pool_backward(DType dtype, const WindowGeom& g, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "avg_pool2d_grad", [&]<class T>() {
    avg_pool_backward_t<T>(g, in<T>(dy), out<T>(dx));
  });
}


}  // namespace keel::cpu
