#include "keel/core/dtype.hpp"

#include <cstring>

namespace keel {

std::string_view name(DType dt) {
  switch (dt) {
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::bool_: return "bool";
  }
  return "unknown";
}

std::size_t itemsize(DType dt) {
  switch (dt) {
    case DType::float16:
    case DType::bfloat16: return 2;
    case DType::float32:
    case DType::int32: return 4;
    case DType::float64:
    case DType::int64: return 8;
    case DType::uint8:
    case DType::bool_: return 1;
  }
  return 1;
}

bool is_floating(DType dt) {
  return dt == DType::float16 || dt == DType::bfloat16 || dt == DType::float32 ||
         dt == DType::float64;
}

bool is_integral(DType dt) {
  return dt == DType::int32 || dt == DType::int64 || dt == DType::uint8;
}

// IEEE 754 binary16 <-> binary32, with subnormals, infinities, NaN, round to nearest even.
float half_to_float(float16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t exp = (h.bits >> 10) & 0x1Fu;
  std::uint32_t mant = h.bits & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal half: normalise it for float
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3FFu;
    bits = sign | (exp << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float16_t float_to_half(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >= 0x7F800000u) {  // inf or NaN (keep NaN quiet)
    return {static_cast<std::uint16_t>(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0u))};
  }
  if (absx >= 0x477FF000u) return {static_cast<std::uint16_t>(sign | 0x7C00u)};  // overflow
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return {sign};
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t half_m = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return {static_cast<std::uint16_t>(sign | half_m)};
  }
  std::uint32_t h = ((absx >> 13) - (112u << 10));
  const std::uint32_t rem = absx & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return {static_cast<std::uint16_t>(sign | h)};
}

float bfloat16_to_float(bfloat16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bfloat16_t float_to_bfloat16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  const std::uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return {static_cast<std::uint16_t>((x + rounding) >> 16)};
}

}  // namespace keel
