#include "cpu/random.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "core/philox.hpp"

namespace keel::cpu {

namespace {

using kernel::Distribution;
using philox::Words;
__extension__ using u128 = unsigned __int128;

// [0, 1) with 24 random bits (every value exactly representable as a float).
inline double unit24(std::uint32_t w) { return static_cast<double>(w >> 8) * 0x1.0p-24; }
// [0, 1) with 53 random bits.
inline double unit53(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}
// (0, 1): never 0, so log() stays finite in Box-Muller.
inline double open32(std::uint32_t w) { return (static_cast<double>(w) + 0.5) * 0x1.0p-32; }
inline double open53(std::uint32_t hi, std::uint32_t lo) {
  return (static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) + 0.5) * 0x1.0p-53;
}

// Normals per block: float32 uses one word per uniform (4 normals), float64 two (2 normals).
template <class T>
constexpr int normals_per_block() { return sizeof(T) == 4 ? 4 : 2; }

// The Box-Muller pair j of a run of words: an open uniform for the radius and one for the angle,
// from words 2j and 2j + 1 (float32) or 4j .. 4j + 3 (float64, 53 bits each).
template <class T>
inline void pair_uniforms(const std::uint32_t* words, std::int64_t j, double& u_open, double& u) {
  if constexpr (sizeof(T) == 4) {
    u_open = open32(words[2 * j]);
    u = words[2 * j + 1] * 0x1.0p-32;
  } else {
    u_open = open53(words[4 * j], words[4 * j + 1]);
    u = unit53(words[4 * j + 2], words[4 * j + 3]);
  }
}

// z[0 .. 2 pairs) = the standard normals of `pairs` pairs of the words (the kernel table's
// box_muller: the same bits at every SIMD level).
template <class T>
void standard_normals(const std::uint32_t* words, std::int64_t pairs, double* z) {
  double u_open[2 * kPhiloxChunk], u[2 * kPhiloxChunk];
  for (std::int64_t j = 0; j < pairs; ++j) pair_uniforms<T>(words, j, u_open[j], u[j]);
  simd().box_muller(u_open, u, pairs, z);
}

// Runs body(b0, b1, words) over chunks of blocks [b0, b1), words[4 (b - b0) + k] holding word k
// of block b (the kernel table's philox_words, a SIMD batch of blocks at a time).
template <class F>
void for_block_words(std::int64_t n_elements, std::int64_t n_blocks, std::uint64_t key, std::uint64_t counter,
                     F&& body) {
  const int nt = std::max(1, parallel_threads());
  const bool par = nt > 1 && n_elements > (std::int64_t{1} << 16);
  const auto philox_words = simd().philox_words;
  parallel_ranges(n_blocks, nt, [&](std::int64_t b0, std::int64_t b1) {
    std::uint32_t words[4 * kPhiloxChunk];
    for (std::int64_t b = b0; b < b1; b += kPhiloxChunk) {
      const std::int64_t e = std::min(b1, b + kPhiloxChunk);
      philox_words(key, counter + static_cast<std::uint64_t>(b), 0, e - b, words);
      body(b, e, static_cast<const std::uint32_t*>(words));
    }
  }, par);
}

// Elements one block gives.
int per_block(Distribution d, DType dtype) {
  const bool wide = itemsize(dtype) == 8;
  switch (d) {
    case Distribution::uniform:
    case Distribution::normal:
    case Distribution::truncated_normal: return wide ? 2 : 4;
    case Distribution::uniform_int: return 2;
  }
  return 1;
}

template <class T>
void uniform(const RandomDraw& r, std::uint64_t key, std::uint64_t counter, std::int64_t n, T* p) {
  constexpr int per = sizeof(T) == 4 ? 4 : 2;
  const std::int64_t blocks = (n + per - 1) / per;
  const double minval = r.a, maxval = r.b;
  const T lo = static_cast<T>(minval), hi = static_cast<T>(maxval);
  // Rounding of lo + (hi - lo) * u can land on hi; keep the interval half-open.
  const T below_hi = lo < hi ? std::nextafter(hi, lo) : lo;
  // Element i = per * b + k takes word k of block b (float32), or words 2k and 2k + 1 (float64):
  // words[i - i0], or words[2 (i - i0)] and the next, counted from the chunk's first element i0.
  const auto floats = simd().uniform_floats;  // float32: the same rule in SIMD
  for_block_words(n, blocks, key, counter, [&](std::int64_t b0, std::int64_t b1, const std::uint32_t* words) {
    const std::int64_t i0 = b0 * per, i1 = std::min(n, b1 * per);
    if constexpr (std::is_same_v<T, float>) return floats(words, i1 - i0, minval, maxval, hi, below_hi, p + i0);
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::uint32_t* w = words + (per == 4 ? 1 : 2) * (i - i0);
      const double u = per == 4 ? unit24(w[0]) : unit53(w[0], w[1]);
      const T v = static_cast<T>(minval + (maxval - minval) * u);
      p[i] = v < hi ? v : below_hi;
    }
  });
}

// truncated_normal: a normal of block b outside [-2, 2] is redrawn from the same block index on
// the next stream, so every redraw is still a function of (key, counter, element index) alone.
// 4.6% of draws are rejected; 64 rounds in a row (probability ~1e-86) fall back to the mean.

// Keeps the draws d of one block's redraw where z (its normals so far) is still outside.
inline void accept_inside(double* z, const double* d, int per) {
  for (int k = 0; k < per; ++k)
    if (!(std::fabs(z[k]) <= 2.0) && std::fabs(d[k]) <= 2.0) z[k] = d[k];
}
inline bool any_outside(const double* z, int per) {
  for (int k = 0; k < per; ++k)
    if (!(std::fabs(z[k]) <= 2.0)) return true;
  return false;
}

// Block b's normals z after streams 0 .. first - 1: the streams from `first` on, one at a time.
template <class T>
void redraw_outside(std::uint64_t key, std::uint64_t counter, std::int64_t b, double* z, std::uint32_t first) {
  constexpr int per = normals_per_block<T>();
  for (std::uint32_t stream = first; any_outside(z, per) && stream < 64; ++stream) {
    double d[4];
    standard_normals<T>(philox::block(key, counter, static_cast<std::uint64_t>(b), stream).data(), per / 2, d);
    accept_inside(z, d, per);
  }
  for (int k = 0; k < per; ++k)
    if (!(std::fabs(z[k]) <= 2.0)) z[k] = 0;
}

// The blocks [b0, b1) of a chunk, z their stream-0 normals: stream 1 for every block with a
// draw outside in one batch (about a sixth of float32 blocks), the rare rest block by block.
template <class T>
void truncate_chunk(std::uint64_t key, std::uint64_t counter, std::int64_t b0, std::int64_t b1, double* z) {
  constexpr int per = normals_per_block<T>();
  std::int64_t redrawn[kPhiloxChunk];
  std::uint32_t words[4 * kPhiloxChunk];
  std::int64_t count = 0;
  for (std::int64_t b = b0; b < b1; ++b) {
    if (!any_outside(z + (b - b0) * per, per)) continue;
    const Words w = philox::block(key, counter, static_cast<std::uint64_t>(b), 1);
    std::copy(w.begin(), w.end(), words + 4 * count);
    redrawn[count++] = b;
  }
  double d[4 * kPhiloxChunk];
  standard_normals<T>(words, count * per / 2, d);
  for (std::int64_t i = 0; i < count; ++i) {
    double* zb = z + (redrawn[i] - b0) * per;
    accept_inside(zb, d + i * per, per);
    redraw_outside<T>(key, counter, redrawn[i], zb, 2);
  }
}

// normal and truncated_normal: element i = per * b + k is normal k of block b.
template <class T>
void normals(const RandomDraw& r, std::uint64_t key, std::uint64_t counter, std::int64_t n, T* p) {
  constexpr int per = normals_per_block<T>();
  const std::int64_t blocks = (n + per - 1) / per;
  const bool truncated = r.distribution == Distribution::truncated_normal;
  for_block_words(n, blocks, key, counter, [&](std::int64_t b0, std::int64_t b1, const std::uint32_t* words) {
    double z[4 * kPhiloxChunk];
    standard_normals<T>(words, (b1 - b0) * per / 2, z);
    if (truncated) truncate_chunk<T>(key, counter, b0, b1, z);
    const std::int64_t i0 = b0 * per, i1 = std::min(n, b1 * per);
    for (std::int64_t i = i0; i < i1; ++i) p[i] = static_cast<T>(r.a + r.b * z[i - i0]);
  });
}

template <class T>
void uniform_int(const RandomDraw& r, std::uint64_t key, std::uint64_t counter, std::int64_t n, T* p) {
  const std::int64_t blocks = (n + 1) / 2;
  const std::uint64_t range = r.int_range, minval = static_cast<std::uint64_t>(r.int_min);
  // Element i = 2b + k takes words 2k and 2k + 1 of block b: words[2 (i - i0)] and the next.
  for_block_words(n, blocks, key, counter, [&](std::int64_t b0, std::int64_t b1, const std::uint32_t* words) {
    const std::int64_t i0 = b0 * 2, i1 = std::min(n, b1 * 2);
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::uint32_t* w = words + 2 * (i - i0);
      // 64 random bits scaled into [0, range) by a multiply-high: the bias is at most
      // range / 2^64, and no data-dependent rejection loop is needed.
      const std::uint64_t x = (static_cast<std::uint64_t>(w[0]) << 32) | w[1];
      const auto v = static_cast<std::uint64_t>((static_cast<u128>(x) * range) >> 64);
      p[i] = static_cast<T>(static_cast<std::int64_t>(minval + v));
    }
  });
}

}  // namespace

std::int64_t random_blocks(Distribution d, DType dtype, std::int64_t n) {
  const int per = per_block(d, dtype);
  return (n + per - 1) / per;
}

void random_fill(const RandomDraw& r, DType dtype, std::uint64_t key, std::uint64_t counter, std::int64_t n,
                 void* out) {
  switch (r.distribution) {
    case Distribution::uniform:
      return detail::dispatch_float(dtype, "random.uniform",
                                    [&]<class T>() { uniform<T>(r, key, counter, n, static_cast<T*>(out)); });
    case Distribution::normal:
    case Distribution::truncated_normal:
      return detail::dispatch_float(dtype, "random.normal",
                                    [&]<class T>() { normals<T>(r, key, counter, n, static_cast<T*>(out)); });
    case Distribution::uniform_int:
      return detail::dispatch_index(dtype, "random.uniform_int",
                                    [&]<class T>() { uniform_int<T>(r, key, counter, n, static_cast<T*>(out)); });
  }
}

}  // namespace keel::cpu
