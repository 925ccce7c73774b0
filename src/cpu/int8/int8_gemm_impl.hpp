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
#include "cpu/int8/quantize_impl.hpp"

namespace keel::cpu::int8::KEEL_INT8_LEVEL {

using i64 = std::int64_t;

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
// The float epilogue of one block of 16 columns (cols of them real), the reference's arithmetic
// (cpu/int8_gemm.cpp's gemm_rows_scalar) lane by lane: (acc - zp * colsum) * (a_scale * w_scale)
// + bias, then ReLU.
struct Finish {
  __mmask16 mask;
  __m512i zp_colsum;
  __m512 scale, bias;
  bool has_bias, relu;
  Finish(const PackedWeights& w, const Epilogue& e, i64 col0, i64 cols) {
    mask = cols >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
    zp_colsum = _mm512_mullo_epi32(_mm512_set1_epi32(e.a_zero_point), _mm512_loadu_si512(w.colsum.data() + col0));
    scale = e.per_channel ? _mm512_mul_ps(_mm512_set1_ps(e.a_scale), _mm512_maskz_loadu_ps(mask, e.w_scale + col0))
                          : _mm512_set1_ps(e.a_scale * e.w_scale[0]);
    has_bias = e.bias != nullptr;
    bias = has_bias ? _mm512_maskz_loadu_ps(mask, e.bias + col0) : _mm512_setzero_ps();
    relu = e.relu;
  }
  void operator()(const Acc& acc, float* out) const {
    __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, zp_colsum)), scale);
    if (has_bias) y = _mm512_add_ps(y, bias);
    if (relu) y = _mm512_max_ps(y, _mm512_setzero_ps());
    // A whole block stores unmasked: a masked store to memory is several times slower on AMD's
    // cores (it was the first layer's bottleneck).
    if (mask == 0xFFFF)
      _mm512_storeu_ps(out, y);
    else
      _mm512_mask_storeu_ps(out, mask, y);
  }
};
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
// The float epilogue of one block of 16 columns, as in the AVX-512 version: two halves of 8.
struct Finish {
  struct Half {
    __m256i mask, zp_colsum;
    __m256 scale, bias;
    bool full;
  } half[2];
  bool has_bias, relu;
  Finish(const PackedWeights& w, const Epilogue& e, i64 col0, i64 cols) {
    has_bias = e.bias != nullptr;
    relu = e.relu;
    for (int h = 0; h < 2; ++h) {
      Half& f = half[h];
      const i64 c0 = col0 + 8 * h;
      f.full = cols - 8 * h >= 8;
      f.mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols - 8 * h)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      f.zp_colsum = _mm256_mullo_epi32(_mm256_set1_epi32(e.a_zero_point),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.colsum.data() + c0)));
      f.scale = e.per_channel ? _mm256_mul_ps(_mm256_set1_ps(e.a_scale), _mm256_maskload_ps(e.w_scale + c0, f.mask))
                              : _mm256_set1_ps(e.a_scale * e.w_scale[0]);
      f.bias = has_bias ? _mm256_maskload_ps(e.bias + c0, f.mask) : _mm256_setzero_ps();
    }
  }
  void operator()(const Acc& acc, float* out) const {
    const __m256i parts[2] = {acc.lo, acc.hi};
    for (int h = 0; h < 2; ++h) {
      const Half& f = half[h];
      __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(parts[h], f.zp_colsum)), f.scale);
      if (has_bias) y = _mm256_add_ps(y, f.bias);
      if (relu) y = _mm256_max_ps(y, _mm256_setzero_ps());
      if (f.full)  // unmasked, as in the AVX-512 version (vmaskmovps to memory is microcoded on AMD)
        _mm256_storeu_ps(out + 8 * h, y);
      else
        _mm256_maskstore_ps(out + 8 * h, f.mask, y);
    }
  }
};
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
  for (int b = 0; b < NB; ++b) {
    const i64 col0 = (jb + b) * 16;
    const i64 cols = std::min<i64>(16, w.n - col0);
    if (cols <= 0) continue;
    const Finish finish(w, e, col0, cols);
    for (int r = 0; r < R; ++r) finish(acc[r][b], out + r * ldo + col0);
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

// quantize_scalar's codes, a vector at a time. max/min return their second operand for NaN, as
// the scalar comparisons do; rounding to nearest even equals the 1.5 * 2^23 trick on [-256, 256].
inline bool quantize_rows(const float* x, i64 rows, i64 cols, i64 ldx, float inv_scale, float zero_point,
                          std::uint8_t* q, i64 ldq) {
  bool ok = true;
#if defined(__AVX512F__)
  constexpr i64 kW = 16;
  const __m512 inv = _mm512_set1_ps(inv_scale), zp = _mm512_set1_ps(zero_point);
  const __m512 lo = _mm512_set1_ps(-256.0f), hi = _mm512_set1_ps(256.0f);
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(127.0f);
  __mmask16 finite = 0xFFFF;
#else
  constexpr i64 kW = 8;
  const __m256 inv = _mm256_set1_ps(inv_scale), zp = _mm256_set1_ps(zero_point);
  const __m256 lo = _mm256_set1_ps(-256.0f), hi = _mm256_set1_ps(256.0f);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(127.0f);
  int finite = 0xFF;
#endif
  for (i64 i = 0; i < rows; ++i) {
    const float* xr = x + i * ldx;
    std::uint8_t* qr = q + i * ldq;
    i64 j = 0;
    for (; j + kW <= cols; j += kW) {
#if defined(__AVX512F__)
      const __m512 v = _mm512_loadu_ps(xr + j);
      finite &= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), zero, _CMP_EQ_OQ);
      __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), lo), hi);
      t = _mm512_add_ps(_mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
      t = _mm512_min_ps(_mm512_max_ps(t, zero), top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qr + j), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(t)));
#else
      const __m256 v = _mm256_loadu_ps(xr + j);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(v, v), zero, _CMP_EQ_OQ));
      __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, inv), lo), hi);
      t = _mm256_add_ps(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
      t = _mm256_min_ps(_mm256_max_ps(t, zero), top);
      const __m256i w = _mm256_cvttps_epi32(t);
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(qr + j), _mm_packus_epi16(w16, w16));
#endif
    }
    if (j < cols) ok &= quantize_scalar(xr + j, 1, cols - j, ldx, inv_scale, zero_point, qr + j, ldq);
  }
#if defined(__AVX512F__)
  return ok && finite == 0xFFFF;
#else
  return ok && finite == 0xFF;
#endif
}

// range_scalar a vector at a time (min/max with the new value first return the running bound for
// a NaN).
inline void value_range(const float* x, i64 n, float& lo, float& hi) {
  i64 i = 0;
#if defined(__AVX512F__)
  __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    vlo = _mm512_min_ps(v, vlo);
    vhi = _mm512_max_ps(v, vhi);
  }
  lo = _mm512_reduce_min_ps(vlo);
  hi = _mm512_reduce_max_ps(vhi);
#else
  __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(v, vlo);
    vhi = _mm256_max_ps(v, vhi);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  for (int j = 0; j < 8; ++j) {
    lo = l[j] < lo ? l[j] : lo;
    hi = h[j] > hi ? h[j] : hi;
  }
#endif
  range_scalar(x + i, n - i, lo, hi);
}

}  // namespace keel::cpu::int8::KEEL_INT8_LEVEL
