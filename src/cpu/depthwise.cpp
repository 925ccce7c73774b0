// Depthwise convolution on NHWC images: direct loops over the contiguous channel axis, each
// with the kernels its gradients need.
#include "cpu/conv.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/window_kernels.hpp"

namespace keel::cpu {

namespace {

using namespace window;

// ---- depthwise -----------------------------------------------------------------------------------
// Kernel [kh, kw, c, m] flattened per tap is [c*m] = [o]: output channel c*m + j reads input
// channel c. All three kernels work with multiplier 1 over the o output channels: for m > 1 the
// input's channels are first repeated m times (per image, into a per-thread buffer), and the
// input gradient of the repeated channels is summed back in groups of m. Per output pixel, blocks
// of channels accumulate in vector registers across the window's taps.

// out[c] = sum over the listed taps of a[a_off[t] + c] * b[b_off[t] + c], for c < channels.
template <class T>
void sum_of_products(const T* a, const i64* a_off, const T* b, const i64* b_off, i64 taps, i64 channels,
                     T* out) {
  using S = Vec<T>;
  constexpr i64 nv = 4, width = nv * S::lanes;
  i64 c0 = 0;
  for (; c0 + width <= channels; c0 += width) {
    typename S::V acc[nv] = {};
    for (i64 t = 0; t < taps; ++t) {
      const T* ap = a + a_off[t] + c0;
      const T* bp = b + b_off[t] + c0;
      for (i64 v = 0; v < nv; ++v) acc[v] += S::load(ap + v * S::lanes) * S::load(bp + v * S::lanes);
    }
    for (i64 v = 0; v < nv; ++v) S::store(out + c0 + v * S::lanes, acc[v]);
  }
  for (i64 c = c0; c < channels; ++c) {
    T acc = 0;
    for (i64 t = 0; t < taps; ++t) acc += a[a_off[t] + c] * b[b_off[t] + c];
    out[c] = acc;
  }
}

// The depthwise input of image n with o channels: x itself when the multiplier is 1, else x's
// channels each repeated m times, built in `buffer` (h*w*o values) when n changes.
template <class T>
class DepthwiseImage {
 public:
  DepthwiseImage(const WindowGeom& g, const T* x, T* buffer) : g_(g), x_(x), buffer_(buffer) {}
  const T* get(i64 n) {
    const i64 C = g_.c, mult = g_.o / C;
    const T* img = x_ + n * g_.h * g_.w * C;
    if (mult == 1) return img;
    if (n != loaded_) {
      for (i64 p = 0; p < g_.h * g_.w; ++p)
        for (i64 c = 0; c < C; ++c)
          for (i64 m = 0; m < mult; ++m) buffer_[(p * C + c) * mult + m] = img[p * C + c];
      loaded_ = n;
    }
    return buffer_;
  }

 private:
  const WindowGeom& g_;
  const T* x_;
  T* buffer_;
  i64 loaded_ = -1;
};

template <class T>
void depthwise_forward_t(const WindowGeom& g, const T* x, const T* k, T* y) {
  const i64 O = g.o, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || O == 0) return;
  const bool repeat = O != g.c;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  const std::size_t image = static_cast<std::size_t>(g.h * g.w * O);
  std::vector<T> repeated(repeat ? parts * image : 0);
  const i64 stride = part_stride<i64>(2 * g.kh * g.kw);
  std::vector<i64> offsets(static_cast<std::size_t>(parts * stride));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    DepthwiseImage<T> input(g, x, repeated.data() + (repeat ? p * image : 0));
    i64* x_off = offsets.data() + p * stride;
    i64* k_off = x_off + g.kh * g.kw;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = input.get(n);
      const i64 ih0 = oh * g.sh - g.pad_top;
      const TapRange ti = taps_inside(ih0, g.kh, g.dh, g.h);
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, g.dw, g.w);
        i64 taps = 0;
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j, ++taps) {
            x_off[taps] = ((ih0 + i * g.dh) * g.w + iw0 + j * g.dw) * O;
            k_off[taps] = (i * g.kw + j) * O;
          }
        sum_of_products(img, x_off, k, k_off, taps, O, y + (r * g.wo + ow) * O);
      }
    }
  });
}

// Written as a gather: input pixel (ih, iw) sums dy * kernel over the output pixels whose window
// tap (i, j) lands on it (oh*sh - pad_top + i*dh = ih, likewise for columns). Each input pixel is
// written once, so the rows of dx split across threads with no zero-fill and no conflicts.
template <class T>
void depthwise_backward_input_t(const WindowGeom& g, const T* dy, const T* k, T* dx) {
  const i64 C = g.c, O = g.o, mult = C == 0 ? 0 : O / C, rows = g.n * g.h;
  if (rows == 0 || g.w == 0 || C == 0) return;
  // Taps that land on input column iw: (j, ow) with ow*sw - pad_left + j*dw == iw. Computed once
  // (they do not depend on the row) to keep divisions out of the pixel loop.
  std::vector<i64> col_count(static_cast<std::size_t>(g.w), 0), col_j(static_cast<std::size_t>(g.w * g.kw)),
      col_ow(static_cast<std::size_t>(g.w * g.kw));
  for (i64 iw = 0; iw < g.w; ++iw)
    for (i64 j = 0; j < g.kw; ++j) {
      const i64 tw = iw + g.pad_left - j * g.dw;  // = ow * sw
      if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.wo) continue;
      const auto at = static_cast<std::size_t>(iw * g.kw + col_count[static_cast<std::size_t>(iw)]++);
      col_j[at] = j;
      col_ow[at] = tw / g.sw;
    }
  const int parts = plan_parts(rows, static_cast<double>(g.w * g.kh * g.kw * O));
  // With a multiplier, each pixel's o sums go to a scratch row and are added up in groups of m.
  const i64 sum_stride = part_stride<T>(O), offset_stride = part_stride<i64>(2 * (g.kh * g.kw + g.kh));
  std::vector<T> sums(mult > 1 ? static_cast<std::size_t>(parts * sum_stride) : 0);
  std::vector<i64> offsets(static_cast<std::size_t>(parts * offset_stride));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    i64* g_off = offsets.data() + p * offset_stride;
    i64* k_off = g_off + g.kh * g.kw;
    i64* row_i = k_off + g.kh * g.kw;
    i64* row_oh = row_i + g.kh;
    T* sum = mult > 1 ? sums.data() + p * sum_stride : nullptr;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.h, ih = r % g.h;
      i64 row_taps = 0;
      for (i64 i = 0; i < g.kh; ++i) {
        const i64 th = ih + g.pad_top - i * g.dh;  // = oh * sh
        if (th < 0 || th % g.sh != 0 || th / g.sh >= g.ho) continue;
        row_i[row_taps] = i;
        row_oh[row_taps++] = th / g.sh;
      }
      for (i64 iw = 0; iw < g.w; ++iw) {
        i64 taps = 0;
        const auto col = static_cast<std::size_t>(iw * g.kw);
        for (i64 a = 0; a < row_taps; ++a)
          for (i64 b = 0; b < col_count[static_cast<std::size_t>(iw)]; ++b) {
            g_off[taps] = ((n * g.ho + row_oh[a]) * g.wo + col_ow[col + static_cast<std::size_t>(b)]) * O;
            k_off[taps++] = (row_i[a] * g.kw + col_j[col + static_cast<std::size_t>(b)]) * O;
          }
        T* out = dx + (r * g.w + iw) * C;
        if (mult == 1) {
          sum_of_products(dy, g_off, k, k_off, taps, O, out);
        } else {
          sum_of_products(dy, g_off, k, k_off, taps, O, sum);
          for (i64 c = 0; c < C; ++c) {
            T s = 0;
            for (i64 m = 0; m < mult; ++m) s += sum[c * mult + m];
            out[c] = s;
          }
        }
      }
    }
  });
}

// dk[i, j, :] = sum over output pixels of x(window tap (i, j)) * dy, for multiplier 1 over o
// channels. Per output row and tap, the pixels whose tap lies inside the image form one range of
// ow; a block of channels sums over that range in registers before it is added to dk.
template <class T>
void depthwise_backward_filter_t(const WindowGeom& g, const T* x, const T* dy, T* dk) {
  using S = Vec<T>;
  const i64 O = g.o, rows = g.n * g.ho, ksize = g.kh * g.kw * O;
  std::fill(dk, dk + ksize, T(0));
  if (rows == 0 || g.wo == 0 || ksize == 0) return;
  const bool repeat = O != g.c;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  const std::size_t image = static_cast<std::size_t>(g.h * g.w * O);
  std::vector<T> repeated(repeat ? parts * image : 0);
  std::vector<T> partial(static_cast<std::size_t>((parts - 1) * ksize));  // zeroed
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    DepthwiseImage<T> input(g, x, repeated.data() + (repeat ? p * image : 0));
    T* acc = p == 0 ? dk : partial.data() + (p - 1) * ksize;
    constexpr i64 nv = 4, width = nv * S::lanes;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = input.get(n);
      const T* grow = dy + r * g.wo * O;
      for (i64 i = 0; i < g.kh; ++i) {
        const i64 ih = oh * g.sh - g.pad_top + i * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (i64 j = 0; j < g.kw; ++j) {
          // Output columns whose tap j falls inside the row: 0 <= ow*sw - pad_left + j*dw < w.
          const i64 shift = g.pad_left - j * g.dw;  // iw = ow*sw - shift
          const i64 ow0 = shift <= 0 ? 0 : (shift + g.sw - 1) / g.sw;
          const i64 ow1 = std::min(g.wo, g.w + shift <= 0 ? 0 : (g.w + shift - 1) / g.sw + 1);
          if (ow0 >= ow1) continue;
          const T* xrow = img + (ih * g.w + ow0 * g.sw - shift) * O;
          const T* grow0 = grow + ow0 * O;
          const i64 xstep = g.sw * O;
          T* ap = acc + (i * g.kw + j) * O;
          i64 c0 = 0;
          for (; c0 + width <= O; c0 += width) {
            typename S::V sum[nv] = {};
            const T* xp = xrow + c0;
            const T* gp = grow0 + c0;
            for (i64 ow = ow0; ow < ow1; ++ow, xp += xstep, gp += O)
              for (i64 v = 0; v < nv; ++v) sum[v] += S::load(xp + v * S::lanes) * S::load(gp + v * S::lanes);
            for (i64 v = 0; v < nv; ++v)
              S::store(ap + c0 + v * S::lanes, S::load(ap + c0 + v * S::lanes) + sum[v]);
          }
          for (i64 c = c0; c < O; ++c) {
            T sum = 0;
            const T* xp = xrow + c;
            const T* gp = grow0 + c;
            for (i64 ow = ow0; ow < ow1; ++ow, xp += xstep, gp += O) sum += *xp * *gp;
            ap[c] += sum;
          }
        }
      }
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial.data() + (p - 1) * ksize, ksize, dk);
}


}  // namespace

void depthwise_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y) {
  detail::dispatch_float(dtype, "depthwise_conv2d", [&]<class T>() {
    depthwise_forward_t<T>(g, in<T>(x), in<T>(kernel), out<T>(y));
  });
}

void depthwise_backward_input(DType dtype, const WindowGeom& g, const void* dy, const void* kernel,
                              void* dx) {
  detail::dispatch_float(dtype, "depthwise_conv2d_backprop_input", [&]<class T>() {
    depthwise_backward_input_t<T>(g, in<T>(dy), in<T>(kernel), out<T>(dx));
  });
}

void depthwise_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                               void* dkernel) {
  detail::dispatch_float(dtype, "depthwise_conv2d_backprop_filter", [&]<class T>() {
    depthwise_backward_filter_t<T>(g, in<T>(x), in<T>(dy), out<T>(dkernel));
  });
}


}  // namespace keel::cpu
