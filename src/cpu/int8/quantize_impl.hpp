// The activation quantization loop, compiled once per level (int8_gemm_impl.hpp's includers, and
// cpu/int8_gemm.cpp for the portable level) inside the namespace KEEL_INT8_LEVEL names: no
// include guard, on purpose.
#include <cstdint>

namespace keel::cpu::int8::KEEL_INT8_LEVEL {

// Activation codes (cpu/int8_gemm.hpp's quantize_rows), one value at a time: limited first
// (comparisons that send NaN to the lower end), rounded to nearest even by adding and
// subtracting 1.5 * 2^23, then clamped to 0..127. Returns whether every value was finite. The
// vector levels compute the same codes 8 or 16 at a time (int8_gemm_impl.hpp) and use this for
// the last few of a row.
inline bool quantize_scalar(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, float inv_scale,
                          float zero_point, std::uint8_t* q, std::int64_t ldq) {
  int bad = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* xr = x + i * ldx;
    std::uint8_t* qr = q + i * ldq;
    for (std::int64_t j = 0; j < cols; ++j) {
      const float v = xr[j];
      bad |= !(v - v == 0.0f);  // NaN or infinity
      float t = v * inv_scale;
      t = t > -256.0f ? t : -256.0f;
      t = t < 256.0f ? t : 256.0f;
      float r = (t + 12582912.0f) - 12582912.0f + zero_point;
      r = r > 0.0f ? r : 0.0f;
      r = r < 127.0f ? r : 127.0f;
      qr[j] = static_cast<std::uint8_t>(static_cast<int>(r));
    }
  }
  return bad == 0;
}

// The smallest and largest of x[0..n), NaN skipped (quantize_scalar reports it); lo and hi are
// widened from what they hold.
inline void range_scalar(const float* x, std::int64_t n, float& lo, float& hi) {
  for (std::int64_t i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
}

}  // namespace keel::cpu::int8::KEEL_INT8_LEVEL
