// Creation and elementwise ops on cuda:0 against the CPU: every op of ops/creation.hpp and
// ops/elementwise.hpp, forward and gradient, with broadcasting, strided (transposed, sliced)
// inputs, every dtype where the op takes it, and the float16/bfloat16 casts. Bounds: see
// cuda_compare.hpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuda_compare.hpp"

using namespace keel;
using namespace keel_cuda_test;

TEST_CASE("creation ops on cuda:0 give the CPU's values", "[cuda][elementwise]") {
  const Tensor like = rnd({2, 3}, 1);
  const Tol no_grad{.grads = false};
  same_on_gpu({
      {"constant", [](const Inputs&) { return constant({1.f, -2.f, 3.5f, 4.f}, {2, 2}); }, {}, no_grad},
      {"constant int64", [](const Inputs&) { return constant(std::vector<std::int64_t>{1, -2, 3}); }, {}, no_grad},
      {"constant scalar", [](const Inputs&) { return constant(2.5, DType::float64); }, {}, no_grad},
      {"zeros", [](const Inputs&) { return zeros({3, 4}); }, {}, no_grad},
      {"ones int32", [](const Inputs&) { return ones({5}, DType::int32); }, {}, no_grad},
      {"full", [](const Inputs&) { return full({2, 3}, -1.25); }, {}, no_grad},
      {"full bool", [](const Inputs&) { return full({4}, 1, DType::bool_); }, {}, no_grad},
      {"zeros_like / ones_like / full_like",
       [](const Inputs& v) { return pack({zeros_like(v[0]), ones_like(v[0]), full_like(v[0], 7)}); },
       {like}, no_grad},
      {"arange", [](const Inputs&) { return arange(10); }, {}, no_grad},
      {"arange step float64", [](const Inputs&) { return arange(-3, 4, 0.5, DType::float64); }, {}, no_grad},
      {"arange int64", [](const Inputs&) { return arange(2, 20, 3, DType::int64); }, {}, no_grad},
      {"linspace", [](const Inputs&) { return linspace(-1, 1, 17); }, {}, no_grad},
      {"eye", [](const Inputs&) { return eye(5); }, {}, no_grad},
      // The same seed gives the same numbers on either device (counter-based Philox).
      {"random::uniform",
       [](const Inputs&) { random::set_seed(42); return random::uniform({1000}, -2, 3); }, {}, no_grad},
      {"random::normal",
       [](const Inputs&) { random::set_seed(43); return random::normal({1001}, 1, 2); }, {}, no_grad},
      {"random::truncated_normal",
       [](const Inputs&) { random::set_seed(44); return random::truncated_normal({999}); }, {}, no_grad},
      {"random::uniform_int",
       [](const Inputs&) { random::set_seed(45); return random::uniform_int({1000}, -5, 17); }, {}, no_grad},
      {"random::normal float64",
       [](const Inputs&) { random::set_seed(46); return random::normal({64}, 0, 1, DType::float64); }, {},
       Tol{.rtol = kFloat64, .grads = false}},
  });
}

TEST_CASE("factories create on cuda:0 under a cuda DeviceScope", "[cuda][elementwise]") {
  DeviceScope gpu(Device::cuda(0));
  CHECK(zeros({2}).device() == Device::cuda(0));
  CHECK(random::normal({2}).device() == Device::cuda(0));
  CHECK(arange(3).device() == Device::cuda(0));
  CHECK(constant({1.f, 2.f}, {2}).device() == Device::cuda(0));
  const Tensor g = ones({3});
  {
    DeviceScope cpu(Device::cpu());
    CHECK(zeros_like(g).device() == Device::cuda(0));  // *_like follow their argument
    CHECK(zeros({2}).device() == Device::cpu());
  }
}

TEST_CASE("unary elementwise ops and their gradients on cuda:0 match the CPU", "[cuda][elementwise]") {
  const Tensor x = rnd({3, 4, 5}, 1, -2, 2);
  const Tensor p = rnd({3, 4, 5}, 2, 0.1, 3);  // positive: log, sqrt, rsqrt, pow
  const Tensor wide = rnd({3, 4, 5}, 3, -8, 8);  // both bends of relu6 and clip
  std::vector<Case> cases = {
      {"neg", [](const Inputs& v) { return neg(v[0]); }, {x}},
      {"abs", [](const Inputs& v) { return abs(v[0]); }, {x}},
      {"sign", [](const Inputs& v) { return sign(v[0]); }, {x}},
      {"square", [](const Inputs& v) { return square(v[0]); }, {x}},
      {"sqrt", [](const Inputs& v) { return sqrt(v[0]); }, {p}},
      {"rsqrt", [](const Inputs& v) { return rsqrt(v[0]); }, {p}},
      {"exp", [](const Inputs& v) { return exp(v[0]); }, {x}},
      {"log", [](const Inputs& v) { return log(v[0]); }, {p}},
      {"log1p", [](const Inputs& v) { return log1p(v[0]); }, {p}},
      {"sin", [](const Inputs& v) { return sin(v[0]); }, {wide}},
      {"cos", [](const Inputs& v) { return cos(v[0]); }, {wide}},
      {"tanh", [](const Inputs& v) { return tanh(v[0]); }, {x}},
      {"sigmoid", [](const Inputs& v) { return sigmoid(v[0]); }, {wide}},
      {"relu", [](const Inputs& v) { return relu(v[0]); }, {x}},
      {"relu6", [](const Inputs& v) { return relu6(v[0]); }, {wide}},
      {"leaky_relu", [](const Inputs& v) { return leaky_relu(v[0], 0.1); }, {x}},
      {"elu", [](const Inputs& v) { return elu(v[0], 0.7); }, {x}},
      {"gelu", [](const Inputs& v) { return gelu(v[0]); }, {x}},
      {"gelu approximate", [](const Inputs& v) { return gelu(v[0], true); }, {x}},
      {"softplus", [](const Inputs& v) { return softplus(v[0]); }, {wide}},
      {"silu", [](const Inputs& v) { return silu(v[0]); }, {x}},
      {"erf", [](const Inputs& v) { return erf(v[0]); }, {x}},
      {"pow scalar", [](const Inputs& v) { return pow(v[0], 3.0); }, {x}},
      {"pow fractional", [](const Inputs& v) { return pow(v[0], 0.5); }, {p}},
      {"clip_by_value", [](const Inputs& v) { return clip_by_value(v[0], -3.0, 2.5); }, {wide}},
      {"maximum scalar", [](const Inputs& v) { return maximum(v[0], 0.25); }, {x}},
      {"minimum scalar", [](const Inputs& v) { return minimum(v[0], 0.25); }, {x}},
      {"scalar operators", [](const Inputs& v) { return (2.0 - v[0]) * 3.0 / 1.5 + 1.0 - v[0] / 4.0; }, {x}},
      // Strided inputs: a transposed and a sliced view.
      {"exp of a transposed view", [](const Inputs& v) { return exp(transpose(v[0], {2, 0, 1})); }, {x}},
      {"tanh of a sliced view", [](const Inputs& v) { return tanh(slice(v[0], {1, 0, 1}, {2, -1, 3})); }, {x}},
  };
  same_on_gpu(cases);

  // float64: the same table at float64's bound.
  for (auto& c : cases) {
    for (auto& in : c.inputs) in = in.astype(DType::float64);
    c.name += " float64";
    c.tol.rtol = kFloat64;
  }
  same_on_gpu(cases);
}

TEST_CASE("binary elementwise ops broadcast and differentiate on cuda:0 as on the CPU",
          "[cuda][elementwise]") {
  const Tensor a = rnd({3, 4, 5}, 1);
  const Tensor b = rnd({4, 5}, 2);            // broadcast over the first axis
  const Tensor col = rnd({3, 1, 5}, 3);       // [3,1,5] with [4,1] -> [3,4,5]
  const Tensor row = rnd({4, 1}, 4);
  const Tensor nz = rnd({4, 5}, 5, 0.5, 2);   // divisors and bases away from zero
  const Tensor pa = rnd({3, 4, 5}, 6, 0.2, 2);
  const Tensor t = rnd({5, 4, 3}, 7);         // added to a transposed a
  const Tensor lo = rnd({4, 5}, 8, -1, -0.2), hi = rnd({3, 1, 1}, 9, 0.2, 1);
  std::vector<Case> cases = {
      {"add", [](const Inputs& v) { return add(v[0], v[1]); }, {a, b}},
      {"sub", [](const Inputs& v) { return sub(v[0], v[1]); }, {a, b}},
      {"mul", [](const Inputs& v) { return mul(v[0], v[1]); }, {a, b}},
      {"div", [](const Inputs& v) { return div(v[0], v[1]); }, {a, nz}},
      {"pow", [](const Inputs& v) { return pow(v[0], v[1]); }, {pa, b}},
      {"maximum", [](const Inputs& v) { return maximum(v[0], v[1]); }, {a, b}},
      {"minimum", [](const Inputs& v) { return minimum(v[0], v[1]); }, {a, b}},
      {"add, both operands broadcast", [](const Inputs& v) { return v[0] + v[1]; }, {col, row}},
      {"mul, both operands broadcast", [](const Inputs& v) { return v[0] * v[1]; }, {col, row}},
      {"div, both operands broadcast", [](const Inputs& v) { return v[1] / (v[0] + 2.0); }, {col, row}},
      {"add to a transposed view", [](const Inputs& v) { return add(transpose(v[0], {2, 1, 0}), v[1]); }, {a, t}},
      {"mul of two transposed views",
       [](const Inputs& v) { return mul(transpose(v[0]), transpose(v[1], {2, 1, 0})); }, {a, transpose(t).contiguous()}},
      {"sub of a broadcast_to view", [](const Inputs& v) { return sub(broadcast_to(v[1], {3, 4, 5}), v[0]); }, {a, b}},
      {"where", [](const Inputs& v) { return where(greater(v[0], v[1]), v[0], v[1] * 2.0); }, {a, b}},
      {"where with a broadcast condition", [](const Inputs& v) { return where(v[1] > 0.0, v[0], v[0] * -3.0); }, {a, row}},
      {"clip_by_value with tensor bounds", [](const Inputs& v) { return clip_by_value(v[0], v[1], v[2]); }, {a, lo, hi}},
  };
  same_on_gpu_in_float32_and_float64(cases);
}

TEST_CASE("integer arithmetic on cuda:0 is exact and matches the CPU", "[cuda][elementwise]") {
  for (DType dt : {DType::int32, DType::int64}) {
    INFO("dtype " << name(dt));
    const Tensor a = rnd_int({3, 4}, 1, -50, 50, dt);
    const Tensor b = rnd_int({4}, 2, 1, 50, dt);
    same_on_gpu({
        {"add", [](const Inputs& v) { return add(v[0], v[1]); }, {a, b}},
        {"sub", [](const Inputs& v) { return sub(v[0], v[1]); }, {a, b}},
        {"mul", [](const Inputs& v) { return mul(v[0], v[1]); }, {a, b}},
        {"div (true division, float64)", [](const Inputs& v) { return div(v[0], v[1]); }, {a, b},
         Tol{.rtol = kFloat64}},
        {"maximum / minimum", [](const Inputs& v) { return pack({maximum(v[0], v[1]), minimum(v[0], v[1])}); }, {a, b}},
        {"neg / abs / sign / square",
         [](const Inputs& v) { return pack({neg(v[0]), abs(v[0]), sign(v[0]), square(v[0])}); }, {a}},
        {"scalar operand", [](const Inputs& v) { return v[0] * 3.0 + 7.0; }, {a}},
        {"on a transposed view", [](const Inputs& v) { return transpose(v[0]) - v[1].reshape({4, 1}); }, {a, b}},
    });
  }
  const Tensor u = rnd_int({10}, 3, 0, 100, DType::uint8), w = rnd_int({10}, 4, 0, 100, DType::uint8);
  same_on_gpu("uint8 add", [](const Inputs& v) { return add(v[0], v[1]); }, {u, w});
}

TEST_CASE("comparisons, logic and finiteness tests on cuda:0 give the CPU's bools", "[cuda][elementwise]") {
  // Small integers as floats: many exact ties, so equal / less_equal are exercised.
  const Tensor a = rnd_int({3, 4, 5}, 1, -3, 3, DType::float32);
  const Tensor b = rnd_int({4, 5}, 2, -3, 3, DType::float32);
  Tensor special;
  {
    DeviceScope cpu(Device::cpu());
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    special = constant({1.f, inf, -inf, nan, 0.f, -0.f, 3e38f, 1e-45f}, {8});
  }
  same_on_gpu({
      {"equal", [](const Inputs& v) { return equal(v[0], v[1]); }, {a, b}},
      {"not_equal", [](const Inputs& v) { return not_equal(v[0], v[1]); }, {a, b}},
      {"less", [](const Inputs& v) { return less(v[0], v[1]); }, {a, b}},
      {"less_equal", [](const Inputs& v) { return less_equal(v[0], v[1]); }, {a, b}},
      {"greater", [](const Inputs& v) { return greater(v[0], v[1]); }, {a, b}},
      {"greater_equal", [](const Inputs& v) { return greater_equal(v[0], v[1]); }, {a, b}},
      {"comparison with a scalar", [](const Inputs& v) { return v[0] >= 1.0; }, {a}},
      {"comparison of a transposed view", [](const Inputs& v) { return transpose(v[0]) < 0.0; }, {a}},
      {"logical_and / or / not",
       [](const Inputs& v) {
         const Tensor p = v[0] > 0.0, q = v[1] < 1.0;
         return pack({logical_and(p, q), logical_or(p, q), logical_not(p), (p && q) || !q});
       },
       {a, b}},
      {"is_finite", [](const Inputs& v) { return is_finite(v[0]); }, {special}},
      {"is_nan", [](const Inputs& v) { return is_nan(v[0]); }, {special}},
      {"exp / log of inf, nan and extremes", [](const Inputs& v) { return pack({exp(v[0]), abs(v[0]), v[0] * 2.0}); },
       {special}, Tol{.grads = false}},
      {"scalar_like", [](const Inputs& v) { return scalar_like(v[0], 2.5) + v[0]; }, {b}},
  });
}

TEST_CASE("casts on cuda:0, float16 and bfloat16 included, match the CPU's", "[cuda][elementwise]") {
  const Tensor x = rnd({4, 33}, 1, -70000, 70000);   // beyond float16's range: +-inf, as the CPU
  const Tensor small = rnd({4, 33}, 2, -3, 3);
  const Tensor tiny = rnd({64}, 3, -1e-6, 1e-6);     // float16 subnormals
  const Tensor ints = rnd_int({20}, 4, -300, 300, DType::int32);
  const Tol half{.rtol = kFloat16, .grads = false}, bf{.rtol = kBFloat16, .grads = false};
  const Tol exact{.rtol = 0, .grads = false};
  auto through = [](DType mid) {
    return [mid](const Inputs& v) { return cast(cast(v[0], mid), DType::float32); };
  };
  same_on_gpu({
      {"float32 -> float16 -> float32 (small)", through(DType::float16), {small}, half},
      {"float32 -> float16 -> float32 (overflow)", through(DType::float16), {x}, half},
      {"float32 -> float16 -> float32 (subnormal)", through(DType::float16), {tiny}, half},
      {"float32 -> bfloat16 -> float32", through(DType::bfloat16), {x}, bf},
      {"float32 -> bfloat16 -> float32 (small)", through(DType::bfloat16), {small}, bf},
      {"float16 -> bfloat16 -> float32",
       [](const Inputs& v) { return cast(cast(cast(v[0], DType::float16), DType::bfloat16), DType::float32); },
       {small}, bf},
      {"float32 -> float16 of a transposed view",
       [](const Inputs& v) { return cast(cast(transpose(v[0]), DType::float16), DType::float32); }, {small}, half},
      {"int32 -> float16 / bfloat16",
       [](const Inputs& v) { return pack({cast(cast(v[0], DType::float16), DType::float32),
                                          cast(cast(v[0], DType::bfloat16), DType::float32)}); },
       {ints}, bf},
      {"float32 -> int32 / int64 (truncation)",
       [](const Inputs& v) { return pack({cast(v[0], DType::int64), cast(v[0], DType::int32).astype(DType::int64)}); },
       {small}, exact},
      {"float32 -> uint8 / bool",
       [](const Inputs& v) { return pack({cast(abs(v[0]) * 10.0, DType::uint8), cast(v[0] > 0.0, DType::uint8),
                                          cast(cast(v[0], DType::bool_), DType::uint8)}); },
       {small}, exact},
      {"int32 -> float64 -> float32", [](const Inputs& v) { return cast(cast(v[0], DType::float64), DType::float32); },
       {ints}, exact},
      {"bool -> float32", [](const Inputs& v) { return cast(v[0] > 0.0, DType::float32); }, {small}, exact},
  });
  // Casts between float32 and float64 are differentiable.
  same_on_gpu("float32 -> float64 -> float32 with gradient",
              [](const Inputs& v) { return cast(square(cast(v[0], DType::float64)), DType::float32); }, {small});
  // A float16 tensor copied to the GPU and back keeps its bits.
  const Tensor h = cast(small, DType::float16);
  CHECK(h.to(Device::cuda(0)).to(Device::cpu()).to_vector<float>() == h.to_vector<float>());
}
