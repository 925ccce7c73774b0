#pragma once
// Element types of a tensor and their properties.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace keel {

enum class DType : std::uint8_t { float16, bfloat16, float32, float64, int32, int64, uint8, bool_ };

std::string_view name(DType);
std::size_t itemsize(DType);
bool is_floating(DType);          // float16, bfloat16, float32, float64
bool is_integral(DType);          // int32, int64, uint8 (not bool)
// float16 or bfloat16: the 16-bit float types that are stored as such and computed in float32.
constexpr bool is_half(DType dt) { return dt == DType::float16 || dt == DType::bfloat16; }

// IEEE half and bfloat16 as 16-bit storage types; arithmetic happens after astype().
struct float16_t { std::uint16_t bits = 0; };
struct bfloat16_t { std::uint16_t bits = 0; };
float half_to_float(float16_t);
float16_t float_to_half(float);
float bfloat16_to_float(bfloat16_t);
bfloat16_t float_to_bfloat16(float);  // round to nearest even

template <class T> struct dtype_traits;
template <> struct dtype_traits<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_traits<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_traits<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_traits<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_traits<std::uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_traits<bool> { static constexpr DType value = DType::bool_; };
template <> struct dtype_traits<float16_t> { static constexpr DType value = DType::float16; };
template <> struct dtype_traits<bfloat16_t> { static constexpr DType value = DType::bfloat16; };
template <class T> inline constexpr DType dtype_of = dtype_traits<T>::value;

}  // namespace keel
