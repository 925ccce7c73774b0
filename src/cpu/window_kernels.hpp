#pragma once
// Pieces the CPU sliding-window kernels share (conv.cpp, conv_direct.cpp, depthwise.cpp,
// pooling.cpp): BLAS with beta, how a kernel splits its work over threads, short channel runs,
// SSE-width vectors and tap ranges. Internal to src/cpu/.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/blas.hpp"
#include "cpu/conv.hpp"
#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu::window {

using i64 = std::int64_t;

// ---- BLAS with beta (cpu::gemm always overwrites; the kernel gradient accumulates) ------------

inline void gemm_rm(bool ta, bool tb, i64 m, i64 n, i64 k, const float* a, i64 lda, const float* b,
                    i64 ldb, float beta, float* c, i64 ldc) {
  blas::gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm_rm(bool ta, bool tb, i64 m, i64 n, i64 k, const double* a, i64 lda, const double* b,
                    i64 ldb, double beta, double* c, i64 ldc) {
  blas::gemm(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// ---- a forward convolution's epilogue (cpu/conv.hpp) -------------------------------------------

// rows x o contiguous elements of y = activation(y + bias), in place.
template <class T>
inline void finish_rows(const ConvEpilogue& ep, T* y, i64 rows, i64 o) {
  if (ep.bias != nullptr && rows > 0)
    typed_kernels<T>().bias_unary(ep.op, ep.linear, y, static_cast<const T*>(ep.bias), o, y, rows * o);
}

// ---- threading ---------------------------------------------------------------------------------

// Below this much work (multiply-adds, or elements touched by the loop kernels) per thread a
// kernel stays on the calling thread: starting an OpenMP region costs microseconds.
constexpr double kMinWorkPerThread = 1 << 17;

// How many contiguous parts to split `items` into: at most parallel_threads(), and only as
// many as there is work for.
inline int plan_parts(i64 items, double work_per_item) {
  const int threads = parallel_threads();
  if (threads <= 1 || items < 2) return 1;
  const double by_work = static_cast<double>(items) * work_per_item / kMinWorkPerThread;
  const double parts = std::min({by_work, static_cast<double>(items), static_cast<double>(threads)});
  return parts < 2 ? 1 : static_cast<int>(parts);
}

// fn(part, begin, end) for each part of [0, items); parts > 1 run on parallel threads.
template <class F>
void run_parts(int parts, i64 items, F&& fn) {
  if (parts <= 1) {
    fn(0, i64{0}, items);
    return;
  }
  parallel_parts(parts, [&](int p) { fn(p, items * p / parts, items * (p + 1) / parts); });
}

// ---- short runs along the channel axis (often tiny: 3 channels x 3 taps = 9 values) -------------
// im2col spends its time here. A memcpy call or a vectorised loop's prologue and epilogue cost more
// than copying 9 floats, so copies move fixed 32- or 16-byte chunks (constant-size memcpy compiles
// to plain vector moves), the last chunk overlapping the one before instead of a scalar tail.

template <class T>
inline void copy_run(const T* __restrict src, i64 len, T* __restrict dst) {
  constexpr i64 wide = 32 / sizeof(T), narrow = 16 / sizeof(T);
  if (len >= wide) {
    i64 t = 0;
    for (; t + wide <= len; t += wide) std::memcpy(dst + t, src + t, 32);
    if (t < len) std::memcpy(dst + len - wide, src + len - wide, 32);
  } else if (len >= narrow) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + len - narrow, src + len - narrow, 16);
  } else {
    for (i64 t = 0; t < len; ++t) dst[t] = src[t];
  }
}
template <class T>
inline void zero_run(i64 len, T* dst) {
  constexpr i64 wide = 32 / sizeof(T);
  static constexpr T zeros[wide] = {};
  if (len >= wide) {
    i64 t = 0;
    for (; t + wide <= len; t += wide) std::memcpy(dst + t, zeros, 32);
    if (t < len) std::memcpy(dst + len - wide, zeros, 32);
  } else {
    for (i64 t = 0; t < len; ++t) dst[t] = T(0);
  }
}
template <class T>
inline void add_run(const T* __restrict src, i64 len, T* __restrict dst) {
  for (i64 t = 0; t < len; ++t) dst[t] += src[t];
}

// ---- SSE-width vectors ---------------------------------------------------------------------------

// 16-byte vectors through the compiler's vector extensions (GCC, Clang), for the depthwise
// kernels' per-channel-block accumulators (kept in registers across taps; g++ 12 leaves those
// loops scalar). SSE2, the library's baseline.
template <class T>
struct Vec {
  typedef T V __attribute__((vector_size(16)));
  static constexpr i64 lanes = 16 / sizeof(T);
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
};

// First and one-past-last tap along an axis whose taps at start + t*d lie inside [0, size).
struct TapRange {
  i64 begin, end;
};
inline TapRange taps_inside(i64 start, i64 taps, i64 d, i64 size) {
  i64 b = 0, e = taps;
  if (start < 0) b = (-start + d - 1) / d;
  if (start + (taps - 1) * d >= size) e = size - start <= 0 ? 0 : (size - start - 1) / d + 1;
  return {b, std::max(b, e)};
}

// Typed views of the kernels' untyped pointers.
template <class T>
const T* in(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* out(void* p) {
  return static_cast<T*>(p);
}

}  // namespace keel::cpu::window
