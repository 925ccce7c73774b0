// The direct convolution's tiles for AVX2 + FMA; CMakeLists.txt gives this file its -m flags.
#include <immintrin.h>

#include "cpu/conv_direct/tiles_impl.hpp"

namespace keel::cpu::direct {
namespace {

// 16 registers: 6 pixels x 2 registers of accumulators, 2 of weights, 1 broadcast.
struct Avx2 {
  using reg = __m256;
  static constexpr int W = 8;
  static constexpr int kMaxBlockLog2 = 1;
  static constexpr int kForwardRows[3] = {6, 6, 6};
  static constexpr int kNarrowRegisters = 15;
  static constexpr int kFilterRows[3] = {6, 6, 6};
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static reg bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static float hsum(reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  // v[m] and v[m+4] fold into s[m], whose 128-bit half k holds v[m+4k]'s four partial sums; a
  // 4x4 transpose-and-add within the halves then leaves v[4k+m]'s sum in lane 4k+m.
  [[gnu::always_inline]] static void sums(const reg* v, float* out) {
    reg s[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m)
      s[m] = _mm256_add_ps(_mm256_permute2f128_ps(v[m], v[m + 4], 0x20), _mm256_permute2f128_ps(v[m], v[m + 4], 0x31));
    const reg u0 = _mm256_add_ps(_mm256_unpacklo_ps(s[0], s[1]), _mm256_unpackhi_ps(s[0], s[1]));
    const reg u1 = _mm256_add_ps(_mm256_unpacklo_ps(s[2], s[3]), _mm256_unpackhi_ps(s[2], s[3]));
    const __m256d d0 = _mm256_castps_pd(u0), d1 = _mm256_castps_pd(u1);
    const reg lo = _mm256_castpd_ps(_mm256_unpacklo_pd(d0, d1)), hi = _mm256_castpd_ps(_mm256_unpackhi_pd(d0, d1));
    store(out, _mm256_add_ps(lo, hi));
  }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg relu(reg v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
};

}  // namespace

const DirectKernels& direct_avx2() { return tiles::table<Avx2>(); }

}  // namespace keel::cpu::direct
