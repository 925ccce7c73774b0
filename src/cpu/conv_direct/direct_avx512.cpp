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
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg relu(reg v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }
};

}  // namespace

const DirectKernels& direct_avx512() { return tiles::table<Avx512>(); }

}  // namespace keel::cpu::direct
