// The direct convolution's tiles for AVX-512F; CMakeLists.txt gives this file its -m flags.
#include <immintrin.h>

#include "cpu/conv_direct/tiles_impl.hpp"

namespace keel::cpu::direct {
namespace {

// 32 registers: up to 24 accumulators (12 pixels x 1 or 2, 6 x 4 registers of channels), that
// block's weights, and the broadcast, which the compiler folds into the multiply-add. More
// pixels per tile need more pointers than the general registers hold: 24 x 1 ran at 0.4x.
struct Avx512 {
  using reg = __m512;
  static constexpr int W = 16;
  static constexpr int kMaxBlockLog2 = 2;
  static constexpr int kForwardRows[3] = {12, 12, 6};
  static constexpr int kNarrowRegisters = 29;
  static constexpr int kFilterRows[3] = {16, 12, 6};
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static reg bcast(const float* p) { return _mm512_set1_ps(*p); }
  static float hsum(reg v) { return _mm512_reduce_add_ps(v); }
  // Four at a time, v[m], v[m+4], v[m+8], v[m+12] fold into s[m], whose 128-bit block k holds
  // v[m+4k]'s four partial sums; a 4x4 transpose-and-add within the blocks then leaves v[4k+m]'s
  // sum in lane 4k+m: 46 instructions for the 16 sums.
  [[gnu::always_inline]] static void sums(const reg* v, float* out) {
    auto fold = [](reg a, reg b) {  // [a0+a2, a1+a3, b0+b2, b1+b3] in 128-bit blocks
      return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    };
    reg s[4];
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const reg ab = fold(v[m], v[m + 4]), cd = fold(v[m + 8], v[m + 12]);
      s[m] = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    }
    const reg u0 = _mm512_add_ps(_mm512_unpacklo_ps(s[0], s[1]), _mm512_unpackhi_ps(s[0], s[1]));
    const reg u1 = _mm512_add_ps(_mm512_unpacklo_ps(s[2], s[3]), _mm512_unpackhi_ps(s[2], s[3]));
    const __m512d d0 = _mm512_castps_pd(u0), d1 = _mm512_castps_pd(u1);
    const reg lo = _mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)), hi = _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1));
    store(out, _mm512_add_ps(lo, hi));
  }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg relu(reg v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }
};

}  // namespace

const DirectKernels& direct_avx512() { return tiles::table<Avx512>(); }

}  // namespace keel::cpu::direct
