// Max and average pooling on NHWC images, with the kernels their gradients need.
#include "cpu/conv.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include <fmt/format.h>

#include "core/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/window_kernels.hpp"

namespace keel::cpu {

namespace {

using namespace window;

// ---- pooling -------------------------------------------------------------------------------------

// Per-thread tap offsets of the window runs, each part in its own cache lines (part_stride).
struct OffsetScratch {
  i64 stride;
  std::vector<i64> offset;
  OffsetScratch(const WindowGeom& g, int parts)
      : stride(part_stride<i64>(g.kh * g.kw)), offset(static_cast<std::size_t>(parts * stride)) {}
  i64* of(int part) { return offset.data() + part * stride; }
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

// The per-output-pixel kernels (the forwards, and the max's gradient gather), split by output
// rows: window(image, offset, taps, y_run, pixels) runs one window run of the image starting at
// element `image`, writing the run's C channels a pixel to y_run.
template <class T, class Window>
void pool_rows_t(const WindowGeom& g, T* y, Window&& window) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  OffsetScratch scratch(g, parts);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    i64* offset = scratch.of(p);
    for (i64 r = r0; r < r1; ++r)
      for_each_window_run(g, r % g.ho, offset, [&](i64 ow0, i64 pixels, int taps) {
        window(r / g.ho * g.h * g.w * C, offset, taps, y + (r * g.wo + ow0) * C, pixels);
      });
  });
}

// The forwards: the kernel table's window_max (NaN if a tap is NaN, as tf.nn.max_pool, else the
// largest tap) or window_mean (over the taps inside the image, as tf.nn.avg_pool).
template <class T>
void pool_forward_t(const WindowGeom& g, const T* x, T* y, decltype(TypedKernels<T>::window_max) kernel) {
  pool_rows_t(g, y, [&](i64 image, const i64* offset, int taps, T* y_run, i64 pixels) {
    kernel(x + image, g.sw * g.c, offset, taps, y_run, pixels, g.c);
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
// unless the windows own every pixel, and overlapping windows add up. finish(n) runs when image
// n's gradient is complete, while it is in cache.
template <class T, class Grad, class Finish>
void pool_backward_t(const WindowGeom& g, T* dx, Grad&& grad, Finish&& finish) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const bool disjoint = disjoint_windows(g), covers = windows_cover(g);
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  OffsetScratch scratch(g, parts);
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    if (!(disjoint && covers)) std::fill(dx + n0 * image, dx + n1 * image, T(0));
    i64* offset = scratch.of(p);
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh)
        for_each_window_run(g, oh, offset, [&](i64 ow0, i64 pixels, int taps) {
          grad(n, oh, ow0, pixels, taps, offset, /*accumulate=*/!disjoint);
        });
    for (i64 n = n0; n < n1; ++n) finish(n);
  });
}

// The max pool's gradient; with `relu`, masked as relu_grad(dx, x) (x a ReLU's output): in the
// scatter itself where windows do not overlap, else image by image once each is complete.
template <class T>
void max_pool_backward_t(const WindowGeom& g, const T* x, const T* dy, T* dx, bool relu) {
  const i64 C = g.c, image = g.h * g.w * C;
  const TypedKernels<T>& kern = typed_kernels<T>();
  const bool in_scatter = relu && disjoint_windows(g);
  pool_backward_t(
      g, dx,
      [&](i64 n, i64 oh, i64 ow0, i64 pixels, int taps, const i64* offset, bool accumulate) {
        kern.window_max_grad(x + n * image, g.sw * C, offset, taps, dy + ((n * g.ho + oh) * g.wo + ow0) * C,
                             dx + n * image, pixels, C, accumulate, in_scatter);
      },
      [&](i64 n) {
        if (relu && !in_scatter)
          kern.binary(BinaryOp::relu_grad, dx + n * image, 1, x + n * image, 1, dx + n * image, image);
      });
}

// The max pool's forward keeping each window's choice, and the gradient scattered by it.
template <class T>
void max_pool_forward_arg_t(const WindowGeom& g, const T* x, T* y, T* arg) {
  const auto window_max_arg = typed_kernels<T>().window_max_arg;
  pool_rows_t(g, y, [&](i64 image, const i64* offset, int taps, T* y_run, i64 pixels) {
    window_max_arg(x + image, g.sw * g.c, offset, taps, y_run, arg + (y_run - y), pixels, g.c);
  });
}

// With `sum` (C values), also dx's sum over its images and pixels, a bias gradient: each image's
// sums in its own rows of `partial` (whichever part runs it), then the rows added in order, so
// that the bits do not depend on the number of threads.
template <class T>
void max_pool_backward_arg_t(const WindowGeom& g, const T* arg, const T* dy, T* dx, bool relu, T* sum) {
  const i64 C = g.c, image = g.h * g.w * C;
  const auto window_arg_grad = typed_kernels<T>().window_arg_grad;
  // A gradient larger than the caches goes around them: the convolution's gradients read it next,
  // and the read-for-ownership of every line would cost more (3 in 4 values written are zeros).
  const bool stream = static_cast<std::size_t>(g.n * image) * sizeof(T) >= kStreamOutputBytes;
  const i64 rows = kArgSumRows * C;  // an image's rows of window_arg_grad's sums
  std::vector<T> partial(sum != nullptr ? static_cast<std::size_t>(g.n * rows) : 0, T(0));
  pool_backward_t(
      g, dx,
      [&](i64 n, i64 oh, i64 ow0, i64 pixels, int taps, const i64* offset, bool accumulate) {
        const i64 at = ((n * g.ho + oh) * g.wo + ow0) * C;
        window_arg_grad(arg + at, g.sw * C, offset, taps, dy + at, dx + n * image, pixels, C, accumulate, relu,
                        stream && !accumulate, sum != nullptr ? partial.data() + n * rows : nullptr);
      },
      [](i64) {});
  if (sum == nullptr) return;
  std::fill(sum, sum + C, T(0));
  const auto accumulate = typed_kernels<T>().accumulate;
  for (i64 r = 0; r < g.n * kArgSumRows; ++r) accumulate(kernel::ReduceOp::sum, sum, partial.data() + r * C, C);
}

template <class T>
void max_pool_gather_t(const WindowGeom& g, const T* x, const T* dx, T* out) {
  const auto window_max_gather = typed_kernels<T>().window_max_gather;
  pool_rows_t(g, out, [&](i64 image, const i64* offset, int taps, T* out_run, i64 pixels) {
    window_max_gather(x + image, g.sw * g.c, offset, taps, dx + image, out_run, pixels, g.c);
  });
}

template <class T>
void avg_pool_backward_t(const WindowGeom& g, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  const auto window_mean_grad = typed_kernels<T>().window_mean_grad;
  pool_backward_t(
      g, dx,
      [&](i64 n, i64 oh, i64 ow0, i64 pixels, int taps, const i64* offset, bool accumulate) {
        window_mean_grad(dy + ((n * g.ho + oh) * g.wo + ow0) * C, g.sw * C, offset, taps, dx + n * image, pixels, C,
                         accumulate);
      },
      [](i64) {});
}

}  // namespace

void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y) {
  detail::dispatch_float(dtype, "max_pool2d", [&]<class T>() {
    pool_forward_t<T>(g, in<T>(x), out<T>(y), typed_kernels<T>().window_max);
  });
}

void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "max_pool2d_grad", [&]<class T>() {
    max_pool_backward_t<T>(g, in<T>(x), in<T>(dy), out<T>(dx), /*relu=*/false);
  });
}

void max_pool_backward_relu(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "max_pool2d_grad", [&]<class T>() {
    max_pool_backward_t<T>(g, in<T>(x), in<T>(dy), out<T>(dx), /*relu=*/true);
  });
}

bool max_pool_arg_fits(const WindowGeom& g, bool relu) {
  return g.kh * g.kw < 128 && (!relu || disjoint_windows(g));
}

static void check_arg_geometry(const WindowGeom& g, bool relu, const char* op) {
  if (!max_pool_arg_fits(g, relu))
    throw ValueError(fmt::format("{}: no kept-choice kernel for a {}x{} window of stride {}x{}{}", op, g.kh, g.kw,
                                 g.sh, g.sw, relu ? " with the ReLU mask" : ""));
}

void max_pool_forward_arg(DType dtype, const WindowGeom& g, const void* x, void* y, void* arg) {
  check_arg_geometry(g, false, "max_pool2d_with_argmax");
  detail::dispatch_float(dtype, "max_pool2d_with_argmax", [&]<class T>() {
    max_pool_forward_arg_t<T>(g, in<T>(x), out<T>(y), out<T>(arg));
  });
}

void max_pool_backward_arg(DType dtype, const WindowGeom& g, const void* arg, const void* dy, void* dx, bool relu,
                           void* sum) {
  check_arg_geometry(g, relu, "max_pool2d_grad_with_argmax");
  detail::dispatch_float(dtype, "max_pool2d_grad_with_argmax", [&]<class T>() {
    max_pool_backward_arg_t<T>(g, in<T>(arg), in<T>(dy), out<T>(dx), relu, sum != nullptr ? out<T>(sum) : nullptr);
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
