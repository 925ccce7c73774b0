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
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg relu(reg v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }
};

}  // namespace

const DirectKernels& direct_avx2() { return tiles::table<Avx2>(); }

}  // namespace keel::cpu::direct
