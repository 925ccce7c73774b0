// Max and average pooling over NHWC images on the GPU, with exactly the CPU kernels' semantics
// (src/cpu/pooling.cpp): a window's maximum is its first maximum in row-major tap order (a later tap
// replaces it only when strictly greater, or when it is the window's first NaN: a window with a
// NaN pools to NaN, as tf.nn.max_pool), and the average counts only the taps inside the image.
//
// The forwards run one thread per output element. The backwards run one thread per input
// element that gathers from the windows containing it, in the same (oh, ow) order as the CPU's
// scatter adds them: no atomics, no races, and bit-identical sums run to run. The max backward
// first stores each window's argmax tap (one pass over the windows), so that the gather reads
// one integer per window instead of searching the window again.
//
// Indices are 32-bit when every tensor fits, since 64-bit division is several times slower on
// the GPU and every thread decomposes its index into (n, row, column, channel).
#include <cstdint>
#include <limits>
#include <string>

#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda {

namespace {

// What a window kernel computes per output element.
enum class WindowMode : int { max, avg, argmax, gather };

// WindowGeom in the kernels' index type.
template <class I>
struct Geom {
  I n, h, w, c, kh, kw, sh, sw, pad_top, pad_left, ho, wo;
};

template <class I>
Geom<I> geom_of(const WindowGeom& g) {
  return {static_cast<I>(g.n),  static_cast<I>(g.h),       static_cast<I>(g.w),
          static_cast<I>(g.c),  static_cast<I>(g.kh),      static_cast<I>(g.kw),
          static_cast<I>(g.sh), static_cast<I>(g.sw),      static_cast<I>(g.pad_top),
          static_cast<I>(g.pad_left), static_cast<I>(g.ho), static_cast<I>(g.wo)};
}

// The taps [begin, end) of a window starting at `start` (in input coordinates) with k taps that
// fall inside [0, size).
template <class I>
__device__ __forceinline__ void taps_inside(I start, I k, I size, I& begin, I& end) {
  begin = start < 0 ? -start : 0;
  end = size - start < k ? size - start : k;
}

// a * b rounded on its own: nvcc would otherwise fuse `acc += a * b` into one FMA, which rounds
// differently from the CPU's separate multiply and add.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

// One thread per output element (n, oh, ow, c).
//   max:    y = the window's maximum
//   avg:    y = the mean of the taps inside the image
//   argmax: taps = the row-major tap index (i*kw + j) of the window's first maximum
//   gather: y = aux[the input pixel of that maximum] (max_pool_gather: aux is dx)
template <class T, class I>
__global__ void window_kernel(WindowMode mode, Geom<I> g, const T* __restrict__ x,
                              const T* __restrict__ aux, T* __restrict__ y,
                              std::int32_t* __restrict__ taps, I total) {
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    I rest = idx;
    const I c = rest % g.c;
    rest /= g.c;
    const I ow = rest % g.wo;
    rest /= g.wo;
    const I oh = rest % g.ho;
    const I n = rest / g.ho;
    const I ih0 = oh * g.sh - g.pad_top, iw0 = ow * g.sw - g.pad_left;
    I i0, i1, j0, j1;
    taps_inside(ih0, g.kh, g.h, i0, i1);
    taps_inside(iw0, g.kw, g.w, j0, j1);
    // The pixel (ih0 + i, iw0 + j) of image n, channel c.
    const T* img = x + n * g.h * g.w * g.c + c;
    if (i0 >= i1 || j0 >= j1) {  // no tap inside the image: the ops never build such a window
      if (mode == WindowMode::argmax)
        taps[idx] = -1;
      else
        y[idx] = T(0);
      continue;
    }
    if (mode == WindowMode::avg) {
      T sum = T(0);
      for (I i = i0; i < i1; ++i)
        for (I j = j0; j < j1; ++j) sum += img[((ih0 + i) * g.w + iw0 + j) * g.c];
      // As the CPU: the sum times the reciprocal of the count, each rounded in T.
      y[idx] = sum * (T(1) / static_cast<T>((i1 - i0) * (j1 - j0)));
      continue;
    }
    T best = img[((ih0 + i0) * g.w + iw0 + j0) * g.c];
    I bi = i0, bj = j0;
    for (I i = i0; i < i1; ++i)
      for (I j = j0; j < j1; ++j) {
        const T v = img[((ih0 + i) * g.w + iw0 + j) * g.c];
        // strict: ties keep the earlier tap; the first NaN wins and stays (nothing is > NaN)
        if (v > best || (v != v && best == best)) {
          best = v;
          bi = i;
          bj = j;
        }
      }
    if (mode == WindowMode::max)
      y[idx] = best;
    else if (mode == WindowMode::argmax)
      taps[idx] = static_cast<std::int32_t>(bi * g.kw + bj);
    else
      y[idx] = aux[n * g.h * g.w * g.c + ((ih0 + bi) * g.w + iw0 + bj) * g.c + c];
  }
}

// The first window index (along one axis) whose window of k taps, moved by s, with `pad`
// before, contains input position p, and the last one (clamped to [0, out)).
template <class I>
__device__ __forceinline__ void windows_containing(I p, I k, I s, I pad, I out, I& first, I& last) {
  // Window o covers o*s - pad .. o*s - pad + k - 1.
  const I lo = p + pad - k + 1;  // o*s >= lo
  first = lo <= 0 ? 0 : (lo + s - 1) / s;
  last = (p + pad) / s;  // o*s <= p + pad (p + pad >= 0)
  if (last > out - 1) last = out - 1;
}

// One thread per input element (n, ih, iw, c): the sum over the windows that contain it, taken
// in (oh, ow) order as the CPU adds them.
//   max: dy of each window whose argmax tap (from window_kernel's argmax pass) is this pixel
//   avg: dy of each window divided by its count of taps inside the image
template <class T, class I>
__global__ void gather_kernel(bool is_max, Geom<I> g, const T* __restrict__ dy,
                              const std::int32_t* __restrict__ taps, T* __restrict__ dx, I total) {
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    I rest = idx;
    const I c = rest % g.c;
    rest /= g.c;
    const I iw = rest % g.w;
    rest /= g.w;
    const I ih = rest % g.h;
    const I n = rest / g.h;
    I oh0, oh1, ow0, ow1;
    windows_containing(ih, g.kh, g.sh, g.pad_top, g.ho, oh0, oh1);
    windows_containing(iw, g.kw, g.sw, g.pad_left, g.wo, ow0, ow1);
    T acc = T(0);
    for (I oh = oh0; oh <= oh1; ++oh) {
      const I ih0 = oh * g.sh - g.pad_top;
      for (I ow = ow0; ow <= ow1; ++ow) {
        const I iw0 = ow * g.sw - g.pad_left;
        const I o = ((n * g.ho + oh) * g.wo + ow) * g.c + c;
        if (is_max) {
          if (taps[o] == static_cast<std::int32_t>((ih - ih0) * g.kw + (iw - iw0))) acc += dy[o];
        } else {
          I i0, i1, j0, j1;
          taps_inside(ih0, g.kh, g.h, i0, i1);
          taps_inside(iw0, g.kw, g.w, j0, j1);
          acc += mul_rn(dy[o], T(1) / static_cast<T>((i1 - i0) * (j1 - j0)));
        }
      }
    }
    dx[idx] = acc;
  }
}

// Whether 32-bit indices reach every element of the input and output, with room for the
// grid-stride step past the end.
bool fits_int32(const WindowGeom& g) {
  const std::int64_t limit = std::numeric_limits<std::int32_t>::max() / 2;
  return g.n * g.h * g.w * g.c < limit && g.n * g.ho * g.wo * g.c < limit;
}

void check_pool(DType dtype, const WindowGeom& g, const char* op) {
  if (dtype != DType::float32 && dtype != DType::float64)
    throw DTypeError(std::string(op) + ": no CUDA kernel for " + std::string(name(dtype)) +
                     " (float32 and float64 only)");
  if (g.kh * g.kw > std::numeric_limits<std::int32_t>::max())
    throw DeviceError(std::string(op) + ": pooling window too large for the CUDA kernel");
}

template <class T, class I>
void launch_window(WindowMode mode, const WindowGeom& g, const void* x, const void* aux,
                   void* y, std::int32_t* taps, int device) {
  const std::int64_t total = g.n * g.ho * g.wo * g.c;
  window_kernel<T, I><<<blocks_for(total, device), kThreads, 0, stream(device)>>>(
      mode, geom_of<I>(g), static_cast<const T*>(x), static_cast<const T*>(aux),
      static_cast<T*>(y), taps, static_cast<I>(total));
  check_launch("pool window kernel", device);
}

template <class T, class I>
void launch_gather(bool is_max, const WindowGeom& g, const void* dy,
                   const std::int32_t* taps, void* dx, int device) {
  const std::int64_t total = g.n * g.h * g.w * g.c;
  gather_kernel<T, I><<<blocks_for(total, device), kThreads, 0, stream(device)>>>(
      is_max, geom_of<I>(g), static_cast<const T*>(dy), taps, static_cast<T*>(dx),
      static_cast<I>(total));
  check_launch("pool gather kernel", device);
}

// The window kernel of the dtype and the smallest index type that fits.
void run_window(DType dtype, WindowMode mode, const WindowGeom& g, const void* x,
                const void* aux, void* y, std::int32_t* taps, int device) {
  const bool small = fits_int32(g);
  if (dtype == DType::float32) {
    if (small)
      launch_window<float, std::int32_t>(mode, g, x, aux, y, taps, device);
    else
      launch_window<float, std::int64_t>(mode, g, x, aux, y, taps, device);
  } else {
    if (small)
      launch_window<double, std::int32_t>(mode, g, x, aux, y, taps, device);
    else
      launch_window<double, std::int64_t>(mode, g, x, aux, y, taps, device);
  }
}

void run_gather(DType dtype, bool is_max, const WindowGeom& g, const void* dy,
                const std::int32_t* taps, void* dx, int device) {
  const bool small = fits_int32(g);
  if (dtype == DType::float32) {
    if (small)
      launch_gather<float, std::int32_t>(is_max, g, dy, taps, dx, device);
    else
      launch_gather<float, std::int64_t>(is_max, g, dy, taps, dx, device);
  } else {
    if (small)
      launch_gather<double, std::int32_t>(is_max, g, dy, taps, dx, device);
    else
      launch_gather<double, std::int64_t>(is_max, g, dy, taps, dx, device);
  }
}

bool empty_output(const WindowGeom& g) { return g.n * g.ho * g.wo * g.c == 0; }
bool empty_input(const WindowGeom& g) { return g.n * g.h * g.w * g.c == 0; }

// dx = 0 where no window reads the input (an empty output).
void zero_input(DType dtype, const WindowGeom& g, void* dx, int device) {
  check(cudaMemsetAsync(dx, 0, static_cast<std::size_t>(g.n * g.h * g.w * g.c) * itemsize(dtype),
                        stream(device)),
        "cudaMemsetAsync (pooling gradient)", device);
}

}  // namespace

void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y, int device) {
  check_pool(dtype, g, "max_pool2d");
  if (empty_output(g)) return;
  use_device(device);
  run_window(dtype, WindowMode::max, g, x, nullptr, y, nullptr, device);
}

void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                       void* dx, int device) {
  check_pool(dtype, g, "max_pool2d_grad");
  if (empty_input(g)) return;
  use_device(device);
  if (empty_output(g)) {
    zero_input(dtype, g, dx, device);
    return;
  }
  // Pass 1: each window's argmax tap; pass 2: each input pixel sums the windows that chose it.
  Scratch taps(static_cast<std::size_t>(g.n * g.ho * g.wo * g.c) * sizeof(std::int32_t), device);
  run_window(dtype, WindowMode::argmax, g, x, nullptr, nullptr, taps.as<std::int32_t>(), device);
  run_gather(dtype, /*is_max=*/true, g, dy, taps.as<std::int32_t>(), dx, device);
}

void max_pool_gather(DType dtype, const WindowGeom& g, const void* x, const void* dx,
                     void* out, int device) {
  check_pool(dtype, g, "max_pool2d_grad_grad");
  if (empty_output(g)) return;
  use_device(device);
  run_window(dtype, WindowMode::gather, g, x, dx, out, nullptr, device);
}

void avg_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y, int device) {
  check_pool(dtype, g, "avg_pool2d");
  if (empty_output(g)) return;
  use_device(device);
  run_window(dtype, WindowMode::avg, g, x, nullptr, y, nullptr, device);
}

void avg_pool_backward(DType dtype, const WindowGeom& g, const void* dy, void* dx,
                       int device) {
  check_pool(dtype, g, "avg_pool2d_grad");
  if (empty_input(g)) return;
  use_device(device);
  if (empty_output(g)) {
    zero_input(dtype, g, dx, device);
    return;
  }
  run_gather(dtype, /*is_max=*/false, g, dy, nullptr, dx, device);
}

}  // namespace keel::cuda
