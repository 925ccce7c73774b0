// float16 and bfloat16 arithmetic on the CPU: each op computes in float32 and rounds its result
// once to the half type (what a GPU kernel does), so the expected values below are the float32
// results of the same inputs, cast to the half type.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace keel;

namespace {

// Values that are exact in both half types (small integers and halves of them).
Tensor halves(DType dt) { return cast(constant({-2.f, -0.5f, 0.f, 1.5f, 3.f, 8.f}, {2, 3}), dt); }

void check_same_values(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  CHECK(got.to_vector<float>() == want.to_vector<float>());
}

}  // namespace

TEST_CASE("float16 and bfloat16 unary ops equal the float32 op rounded once") {
  DeviceScope cpu(Device::cpu());
  for (DType dt : {DType::float16, DType::bfloat16}) {
    const Tensor x = halves(dt);
    const Tensor x32 = cast(x, DType::float32);
    check_same_values(exp(x), cast(exp(x32), dt));
    check_same_values(tanh(x), cast(tanh(x32), dt));
    check_same_values(relu(x), cast(relu(x32), dt));
    check_same_values(neg(x), cast(neg(x32), dt));
  }
}

TEST_CASE("float16 binary ops broadcast and round like float32 then cast") {
  DeviceScope cpu(Device::cpu());
  const Tensor x = halves(DType::float16);
  const Tensor y = cast(constant({0.25f, -1.f, 3.f}, {3}), DType::float16);
  const Tensor x32 = cast(x, DType::float32), y32 = cast(y, DType::float32);
  check_same_values(add(x, y), cast(add(x32, y32), DType::float16));
  check_same_values(mul(x, y), cast(mul(x32, y32), DType::float16));
  check_same_values(div(x, y), cast(div(x32, y32), DType::float16));
  // 1/3 is not exact in float16: the quotient is the float32 quotient rounded once.
  const Tensor third = div(cast(constant({1.f}, {1}), DType::float16), cast(constant({3.f}, {1}), DType::float16));
  CHECK(third.item<float>() == half_to_float(float_to_half(1.0f / 3.0f)));
}

TEST_CASE("comparisons, is_finite and argmax accept half tensors") {
  DeviceScope cpu(Device::cpu());
  const Tensor x = halves(DType::bfloat16);
  CHECK(greater(x, cast(constant(0.0), DType::bfloat16)).to_vector<bool>() ==
        std::vector<bool>{false, false, false, true, true, true});
  CHECK(is_finite(x).to_vector<bool>() == std::vector<bool>(6, true));
  CHECK(argmax(x, -1).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("half reductions accumulate in float32 and round once") {
  DeviceScope cpu(Device::cpu());
  // 2048 ones: a float16 running sum would stop at 2048 only after rounding steps; the float32
  // accumulator gets it exactly, and 2048 is representable in float16.
  const Tensor ones16 = cast(ones({2048}), DType::float16);
  CHECK(reduce_sum(ones16).item<float>() == 2048.0f);
  // 4097 ones: the float32 sum 4097 rounds (to even) to 4096 in float16.
  CHECK(reduce_sum(cast(ones({4097}), DType::float16)).item<float>() == 4096.0f);
  const Tensor x = halves(DType::float16);
  check_same_values(reduce_mean(x, {1}), cast(reduce_mean(cast(x, DType::float32), {1}), DType::float16));
  check_same_values(reduce_max(x, {0}), cast(reduce_max(cast(x, DType::float32), {0}), DType::float16));
}

TEST_CASE("gradients flow through half ops in the half dtype") {
  DeviceScope cpu(Device::cpu());
  Variable w(cast(constant({1.f, 2.f, 3.f}, {3}), DType::float16));
  GradientTape tape;
  // d/dw sum(w*w + 3w) = 2w + 3 = [5, 7, 9], exact in float16.
  const Tensor loss = reduce_sum(add(mul(w, w), mul(w, cast(constant(3.0), DType::float16))));
  const Tensor g = tape.gradient(loss, w);
  CHECK(g.dtype() == DType::float16);
  CHECK(g.to_vector<float>() == std::vector<float>{5.f, 7.f, 9.f});
}

TEST_CASE("casts between float32 and the half types give the bits of the scalar conversions") {
  // cast() converts a whole buffer without a call per element; its bits must be those of
  // float_to_half / half_to_float / float_to_bfloat16 / bfloat16_to_float (themselves checked
  // against hand-rounded values in test_tensor_core.cpp). Inputs: every float16 and bfloat16
  // pattern, and float32 patterns spread over all 2^32 (an odd step, so that every exponent and
  // many mantissas and signs occur) plus the edges of float16's range: around 65520, from which
  // values round to infinity (0x477FEFFF..0x47800000), the smallest normal 2^-14 (0x38800000),
  // half the smallest subnormal 2^-25 (0x33000000, a tie that rounds to zero) and one ulp above
  // it, infinities, NaNs with payloads, and ties at 1 + 2^-11 (0x3F801000, 0x3F803000).
  DeviceScope cpu(Device::cpu());
  std::vector<std::uint32_t> patterns = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                         0xFFC00001u, 0x7F800001u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u,
                                         0x47800000u, 0x38800000u, 0x387FFFFFu, 0x33000000u, 0x33000001u,
                                         0x32FFFFFFu, 0x00000001u, 0x3F800000u, 0x3F801000u, 0x3F803000u};
  for (std::uint64_t i = 0; i < (1u << 20); ++i) patterns.push_back(static_cast<std::uint32_t>(i * 4093u + (i >> 7)));
  std::vector<float> floats(patterns.size());
  std::memcpy(floats.data(), patterns.data(), patterns.size() * sizeof(float));
  const Tensor f = constant(floats, Shape{static_cast<std::int64_t>(floats.size())});
  const auto bits16 = [](const Tensor& t) {
    std::vector<std::uint16_t> out(static_cast<std::size_t>(t.size()));
    std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(std::uint16_t));
    return out;
  };
  const std::vector<std::uint16_t> h = bits16(cast(f, DType::float16)), b = bits16(cast(f, DType::bfloat16));
  std::size_t wrong_h = 0, wrong_b = 0;
  for (std::size_t i = 0; i < floats.size(); ++i) {
    wrong_h += h[i] != float_to_half(floats[i]).bits;
    wrong_b += b[i] != float_to_bfloat16(floats[i]).bits;
  }
  CHECK(wrong_h == 0);
  CHECK(wrong_b == 0);
  // Back: every pattern of each half type.
  for (const DType dt : {DType::float16, DType::bfloat16}) {
    Tensor all = empty(Shape{65536}, dt);
    auto* p = static_cast<std::uint16_t*>(all.raw_data());
    for (std::uint32_t v = 0; v < 65536; ++v) p[v] = static_cast<std::uint16_t>(v);
    const std::vector<float> back = cast(all, DType::float32).to_vector<float>();
    std::size_t wrong = 0;
    for (std::uint32_t v = 0; v < 65536; ++v) {
      const float want = dt == DType::float16 ? half_to_float(float16_t{static_cast<std::uint16_t>(v)})
                                              : bfloat16_to_float(bfloat16_t{static_cast<std::uint16_t>(v)});
      wrong += std::memcmp(&back[v], &want, sizeof(float)) != 0;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("float32 -> int32 casts of patterns over all 2^32 give the checked conversion's values") {
  // The cast runs four values at a time on the processor's truncating conversion; its values must
  // be the checked scalar rule's (test_elementwise.cpp): truncation toward zero, NaN to 0, and
  // saturation at the int32 range. Patterns: an odd step over all 2^32, plus the range's edges
  // (2^31 = 0x4F000000 and the float below it, -2^31 and the float below it), zeros, infinities
  // and NaNs with payloads, at every position of a group of four.
  DeviceScope cpu(Device::cpu());
  std::vector<std::uint32_t> patterns = {0x4F000000u, 0x4EFFFFFFu, 0xCF000000u, 0xCF000001u, 0xCEFFFFFFu,
                                         0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                         0xFFC00001u, 0x7F800001u, 0x3F7FFFFFu, 0xBF7FFFFFu, 0x3FC00000u};
  for (std::uint64_t i = 0; i < (1u << 20); ++i) patterns.push_back(static_cast<std::uint32_t>(i * 4093u + (i >> 7)));
  std::vector<float> floats(patterns.size());
  std::memcpy(floats.data(), patterns.data(), patterns.size() * sizeof(float));
  const std::vector<std::int32_t> got =
      cast(constant(floats, Shape{static_cast<std::int64_t>(floats.size())}), DType::int32).to_vector<std::int32_t>();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < floats.size(); ++i) {
    const float v = floats[i];
    const std::int32_t want = std::isnan(v)             ? 0
                              : v >= 2147483648.0f      ? INT32_MAX
                              : v <= -2147483648.0f     ? INT32_MIN
                                                        : static_cast<std::int32_t>(v);
    wrong += got[i] != want;
  }
  CHECK(wrong == 0);
}
