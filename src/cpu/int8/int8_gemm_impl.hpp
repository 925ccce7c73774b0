#pragma once
// The int8 GEMM micro-kernels, one instantiation per instruction set (int8_gemm_avx2.cpp,
// int8_gemm_avx512.cpp compile this header with their -m flags). See cpu/int8_gemm.hpp for the
// packed layout and the arithmetic.
//
// A micro-kernel computes an MR x (16 * NB) tile: MR rows of `a`, NB blocks of 16 columns. Each
// K step of 4 broadcasts 4 activation bytes of a row (one int32) and multiplies them with the 64
// packed bytes of each block: int32 lane c gets a[k..k+3] . w[k..k+3, c].
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/int8_gemm.hpp"

// Each instantiation lives in a namespace of its own: the same inline functions compiled with
// other -m flags must not meet at link time (the linker would keep one of them for both).
#if defined(__AVX512VNNI__)
#define KEEL_INT8_LEVEL avx512vnni
#else
#define KEEL_INT8_LEVEL avx2
#endif

namespace keel::cpu::int8::KEEL_INT8_LEVEL {

using i64 = std::int64_t;

// The float epilogue for one row of 16 columns held as int32 lanes (written lane by lane through
// a buffer: AVX2 holds 16 lanes in two registers, AVX-512 in one).
inline void finish_row(const std::int32_t* acc, i64 col0, i64 cols, const PackedWeights& w, const Epilogue& e,
                       float* out) {
  for (i64 c = 0; c < cols; ++c) {
    const i64 j = col0 + c;
    const std::int32_t corrected = acc[c] - e.a_zero_point * w.colsum[static_cast<std::size_t>(j)];
    const float scale = e.a_scale * (e.per_channel ? e.w_scale[j] : e.w_scale[0]);
    float y = static_cast<float>(corrected) * scale;
    if (e.bias) y += e.bias[j];
    if (e.relu && y < 0) y = 0;
    out[c] = y;
  }
}

#if defined(__AVX512VNNI__)
constexpr int kMR = 6, kNB = 2;
using Acc = __m512i;
inline Acc zero() { return _mm512_setzero_si512(); }
// acc += a4 (4 unsigned bytes, broadcast) . b (16 columns x 4 signed bytes)
inline void madd(Acc& acc, __m512i a4, const std::int8_t* b) {
  acc = _mm512_dpbusd_epi32(acc, a4, _mm512_loadu_si512(b));
}
inline __m512i broadcast4(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline void store(std::int32_t* dst, const Acc& acc) { _mm512_storeu_si512(dst, acc); }
#else
constexpr int kMR = 4, kNB = 1;
// 16 columns: lanes 0-7 in lo, 8-15 in hi.
struct Acc {
  __m256i lo, hi;
};
inline Acc zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
inline void madd(Acc& acc, __m256i a4, const std::int8_t* b) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i blo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  const __m256i bhi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
  // u8 x s8 -> adjacent pairs summed in int16 (exact for 7-bit activations), then pairs of those
  // summed into int32: each lane gets its column's 4 products.
  acc.lo = _mm256_add_epi32(acc.lo, _mm256_madd_epi16(_mm256_maddubs_epi16(a4, blo), ones));
  acc.hi = _mm256_add_epi32(acc.hi, _mm256_madd_epi16(_mm256_maddubs_epi16(a4, bhi), ones));
}
inline __m256i broadcast4(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline void store(std::int32_t* dst, const Acc& acc) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), acc.lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8), acc.hi);
}
#endif

// rows (<= kMR) rows from `a`, blocks (<= kNB) column blocks from block jb.
template <int R, int NB>
void tile(const std::uint8_t* a, i64 lda, const PackedWeights& w, i64 jb, const Epilogue& e, float* out, i64 ldo) {
  // Fully unrolled, so that the accumulators stay in registers.
  Acc acc[R][NB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[r][b] = zero();
  const i64 steps = w.k4 / 4;
  const i64 block_bytes = w.k4 * 16;
  const std::int8_t* bp = w.data.data() + jb * block_bytes;
  for (i64 s = 0; s < steps; ++s) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const auto a4 = broadcast4(a + r * lda + 4 * s);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) madd(acc[r][b], a4, bp + b * block_bytes + 64 * s);
    }
  }
  alignas(64) std::int32_t buf[16];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < NB; ++b) {
      const i64 col0 = (jb + b) * 16;
      const i64 cols = std::min<i64>(16, w.n - col0);
      if (cols <= 0) continue;
      store(buf, acc[r][b]);
      finish_row(buf, col0, cols, w, e, out + r * ldo + col0);
    }
}

template <int R>
void row_tiles(const std::uint8_t* a, i64 lda, const PackedWeights& w, const Epilogue& e, float* out, i64 ldo) {
  const i64 blocks = w.n16 / 16;
  i64 jb = 0;
  for (; jb + kNB <= blocks; jb += kNB) tile<R, kNB>(a, lda, w, jb, e, out, ldo);
  for (; jb < blocks; ++jb) tile<R, 1>(a, lda, w, jb, e, out, ldo);
}

// Rows [r0, r1) of the product.
inline void gemm_rows(const std::uint8_t* a, i64 lda, i64 r0, i64 r1, const PackedWeights& w, const Epilogue& e,
                      float* out, i64 ldo) {
  i64 i = r0;
  for (; i + kMR <= r1; i += kMR) row_tiles<kMR>(a + i * lda, lda, w, e, out + i * ldo, ldo);
  const i64 rest = r1 - i;
  const std::uint8_t* ar = a + i * lda;
  float* o = out + i * ldo;
  if constexpr (kMR > 4) {
    if (rest >= 4) {
      row_tiles<4>(ar, lda, w, e, o, ldo);
      ar += 4 * lda;
      o += 4 * ldo;
      if (rest == 5) row_tiles<1>(ar, lda, w, e, o, ldo);
      return;
    }
  }
  if (rest == 3) row_tiles<3>(ar, lda, w, e, o, ldo);
  if (rest == 2) row_tiles<2>(ar, lda, w, e, o, ldo);
  if (rest == 1) row_tiles<1>(ar, lda, w, e, o, ldo);
}

}  // namespace keel::cpu::int8::KEEL_INT8_LEVEL
