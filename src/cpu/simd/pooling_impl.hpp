#pragma once
// The pooling window kernels (cpu/kernels.hpp's window_max, window_mean and their gradients)
// written once against xsimd's batch type; each arch TU of src/cpu/simd/ instantiates them. A window's
// channels are contiguous (NHWC), so a batch holds one tap of W channels and the taps of a window
// are W-wide loads at the window's offsets: a 2x2 window of 16 channels is four AVX-512 loads.
#include <xsimd/xsimd.hpp>

#include <cstdint>

#include "cpu/simd/nan_minmax.hpp"
#include "cpu/simd/store_stream.hpp"

namespace keel::cpu::simd_impl {

// The max pool's choice of tap. The max of a window with a NaN is NaN (tf.nn.max_pool), and its
// gradient goes to the first NaN tap, as argmax picks the first NaN; otherwise to the first tap
// equal to the max (ties keep the earlier tap).
//
// The scalar helpers do not depend on the instruction set, so each arch TU would emit the same
// symbol compiled with its own flags, and the linker keeps one: always inlined, none is emitted.

// Whether tap value v replaces the running maximum `best`: strictly greater, or the first NaN.
template <class T>
[[gnu::always_inline]] inline bool replaces_max(T v, T best) {
  return v > best || (v != v && best == best);
}

// The scalar tail: the first maximum's tap of channel c, by replaces_max.
template <class T>
[[gnu::always_inline]] inline int first_max_tap(const T* x, const std::int64_t* offset, int taps, std::int64_t c) {
  int arg = 0;
  for (int t = 1; t < taps; ++t)
    if (replaces_max(x[offset[t] + c], x[offset[arg] + c])) arg = t;
  return arg;
}

// The window's maximum, NaN when a tap is NaN: max_nan (nan_minmax.hpp) keeps the earlier tap
// on ties and carries a NaN from either side.
template <class B, class T>
inline B window_max_batch(const T* x, const std::int64_t* offset, int taps, std::int64_t c) {
  B m = B::load_unaligned(x + offset[0] + c);
  for (int t = 1; t < taps; ++t) m = max_nan(m, B::load_unaligned(x + offset[t] + c));
  return m;
}

// picked(t, mask) for each tap t of channels [c, c + W), mask holding the lanes whose chosen tap
// is t, given m, the window's max (window_max_batch). The chosen tap is the first where v == m;
// when m is NaN no tap equals it, and the first NaN tap is chosen instead. `v == m || isnan(v)`
// says both at once, since a NaN tap makes m NaN.
template <class B, class T, class Picked>
inline void for_each_picked_tap(const T* x, const std::int64_t* offset, int taps, std::int64_t c, const B& m,
                                Picked&& picked) {
  using M = typename B::batch_bool_type;
  M taken(false);
  for (int t = 0; t < taps; ++t) {
    const B v = B::load_unaligned(x + offset[t] + c);
    const M want = (v == m) | xsimd::isnan(v);
    picked(t, want & ~taken);
    taken = taken | want;
  }
}
template <class B, class T, class Picked>
inline void for_each_picked_tap(const T* x, const std::int64_t* offset, int taps, std::int64_t c, Picked&& picked) {
  for_each_picked_tap<B>(x, offset, taps, c, window_max_batch<B>(x, offset, taps, c), picked);
}

// y[q * channels + c] = max over t < taps of x[q * step + offset[t] + c], for q < pixels.
template <class A, class T>
void window_max(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y, std::int64_t pixels,
                std::int64_t channels) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  for (std::int64_t q = 0; q < pixels; ++q, x += step, y += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) window_max_batch<B>(x, offset, taps, c).store_unaligned(y + c);
    for (; c < channels; ++c) y[c] = x[offset[first_max_tap(x, offset, taps, c)] + c];
  }
}

// The gradient of window_max: dx[q * step + offset[t] + c] gets dy[q * channels + c] for the
// chosen tap t, and 0 for the window's other taps (added to dx when accumulate, for overlapping
// windows; stored otherwise). dx has x's layout. With relu (x a ReLU's output, windows not
// accumulating), the chosen tap gets relu_grad(dy, x) instead: dy * (x > 0 ? 1 : 0), the bits of
// the binary kernel's relu_grad over the result (the other taps' 0 * mask is the same +0); the
// chosen tap's x is the window's max, so one mask serves the window.
template <class A, class T>
void window_max_grad(const T* x, std::int64_t step, const std::int64_t* offset, int taps, const T* dy, T* dx,
                     std::int64_t pixels, std::int64_t channels, bool accumulate, bool relu) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const B zero(T(0)), one(T(1));
  for (std::int64_t q = 0; q < pixels; ++q, x += step, dx += step, dy += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      const B m = window_max_batch<B>(x, offset, taps, c);
      B g = B::load_unaligned(dy + c);
      if (relu) g = g * xsimd::select(m > zero, one, zero);
      for_each_picked_tap<B>(x, offset, taps, c, m, [&](int t, const auto& hit) {
        const B part = xsimd::select(hit, g, zero);
        T* d = dx + offset[t] + c;
        (accumulate ? B::load_unaligned(d) + part : part).store_unaligned(d);
      });
    }
    for (; c < channels; ++c) {
      const int arg = first_max_tap(x, offset, taps, c);
      const T g = relu ? dy[c] * (x[offset[arg] + c] > T(0) ? T(1) : T(0)) : dy[c];
      for (int t = 0; t < taps; ++t) {
        const T part = t == arg ? g : T(0);
        T& d = dx[offset[t] + c];
        d = accumulate ? d + part : part;
      }
    }
  }
}

// What window_max_arg adds to a choice whose window's max is not > 0 (a ReLU's mask is 0 there).
constexpr int kArgMasked = 128;

// window_max, also writing each window's choice to arg[q * channels + c]: the tap
// window_max_grad picks (for_each_picked_tap), plus kArgMasked where the max is not > 0 (NaN
// included). A graph whose backward would read x only to find the max again keeps this instead.
template <class A, class T>
void window_max_arg(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y, T* arg,
                    std::int64_t pixels, std::int64_t channels) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const B zero(T(0)), masked(static_cast<T>(kArgMasked));
  for (std::int64_t q = 0; q < pixels; ++q, x += step, y += channels, arg += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      // window_max_batch's running max_nan, with the tap of the first value greater than all
      // before it, or of the first NaN: the tap for_each_picked_tap finds, in the same pass.
      B m = B::load_unaligned(x + offset[0] + c), a = zero;
      for (int t = 1; t < taps; ++t) {
        const B v = B::load_unaligned(x + offset[t] + c);
        a = xsimd::select(~(v <= m) & ~xsimd::isnan(m), B(T(t)), a);
        m = max_nan(m, v);
      }
      m.store_unaligned(y + c);
      xsimd::select(m > zero, a, a + masked).store_unaligned(arg + c);
    }
    for (; c < channels; ++c) {
      const int t = first_max_tap(x, offset, taps, c);
      const T m = x[offset[t] + c];
      y[c] = m;
      arg[c] = static_cast<T>(m > T(0) ? t : t + kArgMasked);
    }
  }
}

// window_max_grad from window_max_arg's choices instead of x: the same bits (the relu mask is
// the choice's flag, which is window_max_grad's m > 0). With `stream` (a gradient larger than
// the caches; not with accumulate), aligned batches of dx bypass the caches. With `sum`, each
// window's (masked) gradient is also added to sum[(q % kArgSumRows) * channels + c]: every window
// gives its gradient to one tap, so the rows add up to the sum of dx a bias gradient wants.
template <class A, class T>
void window_arg_grad(const T* arg, std::int64_t step, const std::int64_t* offset, int taps, const T* dy, T* dx,
                     std::int64_t pixels, std::int64_t channels, bool accumulate, bool relu, bool stream, T* sum) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const B zero(T(0)), one(T(1)), masked(static_cast<T>(kArgMasked));
  for (std::int64_t q = 0; q < pixels; ++q, dx += step, dy += channels, arg += channels) {
    T* const row = sum != nullptr ? sum + (q % kArgSumRows) * channels : nullptr;
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      B a = B::load_unaligned(arg + c), g = B::load_unaligned(dy + c);
      const auto off = a >= masked;
      if (relu) g = g * xsimd::select(off, zero, one);
      a = xsimd::select(off, a - masked, a);
      if (row != nullptr) (B::load_unaligned(row + c) + g).store_unaligned(row + c);
      for (int t = 0; t < taps; ++t) {
        const B part = xsimd::select(a == B(T(t)), g, zero);
        T* d = dx + offset[t] + c;
        if (accumulate) (B::load_unaligned(d) + part).store_unaligned(d);
        else if (stream && (reinterpret_cast<std::uintptr_t>(d) & (sizeof(B) - 1)) == 0) store_stream(part, d);
        else part.store_unaligned(d);
      }
    }
    for (; c < channels; ++c) {
      const bool off = arg[c] >= T(kArgMasked);
      const int chosen = static_cast<int>(arg[c]) - (off ? kArgMasked : 0);
      const T g = relu ? dy[c] * (off ? T(0) : T(1)) : dy[c];
      if (row != nullptr) row[c] += g;
      for (int t = 0; t < taps; ++t) {
        const T part = t == chosen ? g : T(0);
        T& d = dx[offset[t] + c];
        d = accumulate ? d + part : part;
      }
    }
  }
  if (stream) _mm_sfence();
}

// The adjoint of window_max_grad in dy (the max pool's second derivative): out[q * channels + c]
// = dx[q * step + offset[t] + c] at the chosen tap t. dx has x's layout.
template <class A, class T>
void window_max_gather(const T* x, std::int64_t step, const std::int64_t* offset, int taps, const T* dx, T* out,
                       std::int64_t pixels, std::int64_t channels) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  for (std::int64_t q = 0; q < pixels; ++q, x += step, dx += step, out += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      B acc(T(0));
      for_each_picked_tap<B>(x, offset, taps, c, [&](int t, const auto& hit) {
        acc = xsimd::select(hit, B::load_unaligned(dx + offset[t] + c), acc);
      });
      acc.store_unaligned(out + c);
    }
    for (; c < channels; ++c) out[c] = dx[offset[first_max_tap(x, offset, taps, c)] + c];
  }
}

// The average pool: y[q * channels + c] = the mean of x[q * step + offset[t] + c] over t < taps.
// Only the taps inside the image count (tf.nn.avg_pool excludes the padding), so the divisor is
// `taps`. Summed in tap order, then scaled by 1 / taps.
template <class A, class T>
void window_mean(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y, std::int64_t pixels,
                 std::int64_t channels) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const T scale = T(1) / static_cast<T>(taps);
  for (std::int64_t q = 0; q < pixels; ++q, x += step, y += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      B sum = B::load_unaligned(x + offset[0] + c);
      for (int t = 1; t < taps; ++t) sum += B::load_unaligned(x + offset[t] + c);
      (sum * B(scale)).store_unaligned(y + c);
    }
    for (; c < channels; ++c) {
      T sum = x[offset[0] + c];
      for (int t = 1; t < taps; ++t) sum += x[offset[t] + c];
      y[c] = sum * scale;
    }
  }
}

// Its gradient: dy[q * channels + c] / taps to each tap of the window, added to dx when
// accumulate (overlapping windows), stored otherwise.
template <class A, class T>
void window_mean_grad(const T* dy, std::int64_t step, const std::int64_t* offset, int taps, T* dx, std::int64_t pixels,
                      std::int64_t channels, bool accumulate) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const T scale = T(1) / static_cast<T>(taps);
  for (std::int64_t q = 0; q < pixels; ++q, dx += step, dy += channels) {
    std::int64_t c = 0;
    for (; c + W <= channels; c += W) {
      const B g = B::load_unaligned(dy + c) * B(scale);
      for (int t = 0; t < taps; ++t) {
        T* d = dx + offset[t] + c;
        (accumulate ? B::load_unaligned(d) + g : g).store_unaligned(d);
      }
    }
    for (; c < channels; ++c) {
      const T g = dy[c] * scale;
      for (int t = 0; t < taps; ++t) {
        T& d = dx[offset[t] + c];
        d = accumulate ? d + g : g;
      }
    }
  }
}

}  // namespace keel::cpu::simd_impl
