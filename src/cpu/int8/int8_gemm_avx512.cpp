// The int8 GEMM micro-kernels for AVX-512 VNNI (vpdpbusd); CMakeLists.txt gives this file its -m flags.
#include "cpu/int8/int8_gemm_impl.hpp"

namespace keel::cpu::int8 {

void gemm_rows_avx512vnni(const std::uint8_t* a, std::int64_t lda, std::int64_t r0, std::int64_t r1, const PackedWeights& w,
                        const Epilogue& e, float* out, std::int64_t ldo) {
  avx512vnni::gemm_rows(a, lda, r0, r1, w, e, out, ldo);
}

bool quantize_rows_avx512vnni(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, float inv_scale,
                  float zero_point, std::uint8_t* q, std::int64_t ldq) {
  return avx512vnni::quantize_rows(x, rows, cols, ldx, inv_scale, zero_point, q, ldq);
}

void value_range_avx512vnni(const float* x, std::int64_t n, float& lo, float& hi) { avx512vnni::value_range(x, n, lo, hi); }

}  // namespace keel::cpu::int8
