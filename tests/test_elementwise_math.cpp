// tf.math's rounding, trigonometric, hyperbolic, logarithmic and flooring-division functions, the
// float tests, logical_xor and Keras 3's activations: values derived by hand from their
// definitions and against <cmath> at every SIMD level, integer and float dtypes, NaN and inf,
// broadcasting, views, errors, traced (fused) use, and float64 finite-difference gradients.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "graph/plan.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = std::numbers::pi;
// Keras 3's selu constants.
constexpr double kAlpha = 1.67326324235437728481704299;
constexpr double kScale = 1.05070098735548049341933498;

using UnaryFn = std::function<Tensor(const Tensor&)>;
using Ref = std::function<double(double)>;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor f64(const std::vector<double>& v, Shape s) { return constant(v, std::move(s), DType::float64); }
Tensor f64(const std::vector<double>& v) { return constant(v, Shape{static_cast<std::int64_t>(v.size())}, DType::float64); }
Tensor i32(const std::vector<std::int32_t>& v) { return constant(v, Shape{static_cast<std::int64_t>(v.size())}, DType::int32); }

double relu6_ref(double v) { return std::min(std::max(v, 0.0), 6.0); }
double softplus_ref(double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }

struct Unary {
  const char* name;
  UnaryFn op;
  Ref ref;
  std::vector<double> inputs;  // some with special values; the domain is each function's own
  std::vector<double> grad_inputs;  // smooth points for the gradient check (empty: no gradient)
};

// The reference is the definition in double precision (C's functions, which TensorFlow's Eigen
// kernels follow).
std::vector<Unary> unary_ops() {
  const std::vector<double> general = {-2.6, -1.3, -0.45, 0.35, 0.8, 1.55, 2.7, 4.2};
  const std::vector<double> unit = {-0.9, -0.55, -0.2, 0.1, 0.3, 0.6, 0.75, 0.95};
  const std::vector<double> positive = {0.15, 0.5, 1.2, 1.9, 2.5, 4.0, 7.5, 9.0};
  const std::vector<double> above_one = {1.1, 1.4, 2.0, 2.5, 3.3, 4.7, 6.0, 9.5};
  return {
      {"floor", [](const Tensor& x) { return floor(x); }, [](double v) { return std::floor(v); },
       {-2.5, -0.5, -0.0, 0.0, 0.5, 1.0, 2.999, -3.001, 1e7 + 0.5, kNaN, kInf, -kInf}, general},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](double v) { return std::ceil(v); },
       {-2.5, -0.5, -0.0, 0.0, 0.5, 1.0, 2.001, -3.999, kNaN, kInf, -kInf}, general},
      // nearbyint in the default rounding mode: to nearest, ties to even (tf.math.round)
      {"round", [](const Tensor& x) { return round(x); }, [](double v) { return std::nearbyint(v); },
       {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.4, 0.6, 2.4999, kNaN, kInf, -kInf}, general},
      {"tan", [](const Tensor& x) { return tan(x); }, [](double v) { return std::tan(v); },
       {-1.5, -0.7, 0.0, 0.3, 1.2, 3.0, kNaN, kInf}, {-1.2, -0.7, -0.1, 0.3, 0.5, 0.9, 1.1, 1.3}},
      {"asin", [](const Tensor& x) { return asin(x); }, [](double v) { return std::asin(v); },
       {-1.0, -0.5, 0.0, 0.25, 1.0, 1.5, -2.0, kNaN}, unit},
      {"acos", [](const Tensor& x) { return acos(x); }, [](double v) { return std::acos(v); },
       {-1.0, -0.5, 0.0, 0.25, 1.0, 1.5, -2.0, kNaN}, unit},
      {"atan", [](const Tensor& x) { return atan(x); }, [](double v) { return std::atan(v); },
       {-10.0, -1.0, 0.0, 0.5, 3.0, kInf, -kInf, kNaN}, general},
      {"sinh", [](const Tensor& x) { return sinh(x); }, [](double v) { return std::sinh(v); },
       {-5.0, -1.0, -0.01, 0.0, 0.5, 3.0, kInf, kNaN}, general},
      {"cosh", [](const Tensor& x) { return cosh(x); }, [](double v) { return std::cosh(v); },
       {-5.0, -1.0, 0.0, 0.5, 3.0, -kInf, kNaN}, general},
      {"asinh", [](const Tensor& x) { return asinh(x); }, [](double v) { return std::asinh(v); },
       {-5.0, -1.0, 0.0, 0.01, 3.0, 1e6, -kInf, kNaN}, general},
      {"acosh", [](const Tensor& x) { return acosh(x); }, [](double v) { return std::acosh(v); },
       {1.0, 1.5, 3.0, 100.0, 0.5, -2.0, kInf, kNaN}, above_one},
      {"atanh", [](const Tensor& x) { return atanh(x); }, [](double v) { return std::atanh(v); },
       {-0.99, -0.5, 0.0, 0.25, 0.9, 1.0, -1.0, 1.5, kNaN}, unit},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double v) { return std::expm1(v); },
       {-30.0, -1.0, -1e-5, 0.0, 1e-5, 1.0, 10.0, kInf, -kInf, kNaN}, general},
      // exact at powers of the base: log2(8) = 3, log10(1000) = 3
      {"log2", [](const Tensor& x) { return log2(x); }, [](double v) { return std::log2(v); },
       {0.125, 0.7, 1.0, 2.0, 8.0, 1024.0, 0.0, -1.0, kInf, kNaN}, positive},
      {"log10", [](const Tensor& x) { return log10(x); }, [](double v) { return std::log10(v); },
       {0.01, 0.7, 1.0, 10.0, 1000.0, 0.0, -1.0, kInf, kNaN}, positive},
      // 1/x: 1/0 = inf, 1/-0 = -inf, 1/inf = 0
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double v) { return 1.0 / v; },
       {-4.0, -0.5, 0.25, 3.0, 0.0, -0.0, kInf, kNaN}, general},
      {"erfc", [](const Tensor& x) { return erfc(x); }, [](double v) { return std::erfc(v); },
       {-3.0, -0.5, 0.0, 0.5, 2.0, 5.0, kInf, -kInf, kNaN}, general},
      // scale * (x > 0 ? x : alpha (e^x - 1))
      {"selu", [](const Tensor& x) { return selu(x); },
       [](double v) { return kScale * (v > 0 ? v : kAlpha * std::expm1(v)); },
       {-20.0, -1.0, -0.1, 0.0, 0.1, 2.0, kInf, -kInf, kNaN}, general},
      // x / (1 + |x|); at +-inf inf / inf is NaN, as TensorFlow's Softsign computes it
      {"softsign", [](const Tensor& x) { return softsign(x); },
       [](double v) { return v / (std::abs(v) + 1.0); }, {-3.0, -1.0, 0.0, 0.5, 1.0, 100.0, kNaN, kInf}, general},
      // relu6(x + 3) / 6
      {"hard_sigmoid", [](const Tensor& x) { return hard_sigmoid(x); },
       [](double v) { return relu6_ref(v + 3.0) / 6.0; },
       {-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0, kInf, -kInf, kNaN}, general},
      // x relu6(x + 3) / 6
      {"hard_swish", [](const Tensor& x) { return hard_swish(x); },
       [](double v) { return v * (relu6_ref(v + 3.0) / 6.0); },
       {-4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0, kInf, kNaN}, general},
      // x tanh(softplus(x))
      {"mish", [](const Tensor& x) { return mish(x); },
       [](double v) { return v * std::tanh(softplus_ref(v)); },
       {-30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0, kInf, kNaN}, general},
  };
}

// Both NaN, or equal (infinities, signed zeros' values), or close: float32 kernels carry a few
// ulp of error relative to the double reference of the float32 input.
bool close(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  const double tol = dtype == DType::float32 ? 4e-6 : 1e-13;
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

// 37 elements: full batches and a tail at every SIMD width.
std::vector<double> tile37(const std::vector<double>& v) {
  std::vector<double> out(37);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = v[i % v.size()];
  return out;
}

void check_against_reference(const Unary& u, DType dtype) {
  const std::vector<double> in = tile37(u.inputs);
  const Tensor x = constant(in, Shape{37}, DType::float64);
  const Tensor xd = cast(x, dtype);
  const std::vector<double> got = u.op(xd).to_vector<double>();
  const std::vector<double> rounded_in = xd.to_vector<double>();  // float32's inputs
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double want = u.ref(rounded_in[i]);
    INFO(u.name << "(" << rounded_in[i] << ") = " << got[i] << ", want " << want);
    CHECK(close(got[i], want, dtype));
  }
}

}  // namespace

// ---- values ------------------------------------------------------------------------------------

TEST_CASE("the unary math ops match their definitions at every SIMD level", "[elementwise_math]") {
  testing::at_every_simd_level([](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      for (const Unary& u : unary_ops()) check_against_reference(u, dtype);
    }
  });
}

TEST_CASE("round is half to even, floor/ceil/round keep the sign of a zero", "[elementwise_math]") {
  testing::at_every_simd_level([](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      // ties go to the even neighbour: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -2.5 -> -2
      const auto r = round(cast(f64({0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -3.5}), dtype)).to_vector<double>();
      CHECK(r == std::vector<double>{0, 2, 2, -0.0, -2, 4, -4});
      CHECK(std::signbit(r[3]));  // round(-0.5) = -0
      CHECK_FALSE(std::signbit(r[0]));
      // floor(-0) = -0, ceil(-0.5) = -0, ceil(-0) = -0
      CHECK(std::signbit(floor(cast(f64({-0.0}), dtype)).to_vector<double>()[0]));
      const auto c = ceil(cast(f64({-0.5, -0.0, -0.99}), dtype)).to_vector<double>();
      for (double v : c) {
        CHECK(v == 0.0);
        CHECK(std::signbit(v));
      }
    }
  });
  // float16 rounds in float32 and stores the integer exactly
  CHECK(round(cast(f64({2.5, -1.5}), DType::float16)).to_vector<double>() == std::vector<double>{2, -2});
}

TEST_CASE("hand-derived values of the activations", "[elementwise_math]") {
  // selu(1) = scale; selu(-1) = scale alpha (e^-1 - 1) = 1.0507 * 1.6733 * -0.63212 = -1.11133
  const auto s = selu(f64({1.0, -1.0, 0.0})).to_vector<double>();
  CHECK(s[0] == Approx(1.0507009873554805).epsilon(1e-15));
  CHECK(s[1] == Approx(-1.1113307378125628).epsilon(1e-14));
  CHECK(s[2] == 0.0);
  // hard_sigmoid: relu6(x + 3) / 6: -3 -> 0, 0 -> 0.5, 1.5 -> 4.5 / 6 = 0.75, 3 -> 1, 7 -> 1
  CHECK(hard_sigmoid(f64({-3.0, 0.0, 1.5, 3.0, 7.0})).to_vector<double>() ==
        std::vector<double>{0.0, 0.5, 0.75, 1.0, 1.0});
  // hard_swish: x hard_sigmoid(x): 1.5 * 0.75 = 1.125, -1.5 * 0.25 = -0.375, 4 * 1 = 4
  CHECK(hard_swish(f64({1.5, -1.5, 4.0, -4.0})).to_vector<double>() == std::vector<double>{1.125, -0.375, 4.0, 0.0});
  // softsign: 1 / 2, -3 / 4
  CHECK(softsign(f64({1.0, -3.0})).to_vector<double>() == std::vector<double>{0.5, -0.75});
  // mish(1) = tanh(log(1 + e)) = tanh(1.3132616875182228) = 0.8650983882673103
  CHECK(mish(f64({1.0})).item<double>() == Approx(0.8650983882673103).epsilon(1e-14));
  // the float32 kernels give the same numbers
  CHECK(hard_sigmoid(constant({1.5f}, Shape{1})).item<float>() == 0.75f);
  CHECK(selu(constant({1.0f}, Shape{1})).item<float>() == Approx(1.0507009873554805).epsilon(1e-6));
}

TEST_CASE("mod is floormod and floordiv rounds toward -inf, for integers", "[elementwise_math]") {
  // Python's rule: mod(-7, 3) = 2 (-7 = -3 * 3 + 2), mod(7, -3) = -2 (7 = -3 * -3 - 2),
  // mod(-7, -3) = -1, mod(7, 3) = 1; floordiv: -7 / 2 = -3.5 -> -4, 7 / -2 -> -4, -7 / -2 -> 3
  const Tensor x = i32({-7, 7, -7, 7, 6, -6, 0});
  const Tensor y = i32({3, -3, -3, 3, 3, -3, 5});
  const Tensor m = mod(x, y);
  CHECK(m.dtype() == DType::int32);
  CHECK(m.to_vector<std::int32_t>() == std::vector<std::int32_t>{2, -2, -1, 1, 0, 0, 0});
  CHECK(floordiv(i32({-7, 7, -7, 7, 6, -1, 0}), i32({2, -2, -2, 2, 3, 5, 4})).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{-4, -4, 3, 3, 2, -1, 0});
  // int64 and uint8
  const Tensor x64 = constant(std::vector<std::int64_t>{-10000000000LL, 10000000000LL}, {2}, DType::int64);
  // -1e10 = -3333333334 * 3 + 2
  CHECK(mod(x64, 3.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 1});
  CHECK(floordiv(x64, 3.0).to_vector<std::int64_t>() == std::vector<std::int64_t>{-3333333334LL, 3333333333LL});
  const Tensor u8 = constant(std::vector<std::uint8_t>{250, 7}, {2}, DType::uint8);
  CHECK(mod(u8, constant(std::vector<std::uint8_t>{7, 250}, {2}, DType::uint8)).to_vector<int>() == std::vector<int>{5, 7});
  CHECK(floordiv(u8, 7.0).to_vector<int>() == std::vector<int>{35, 1});
  // the lowest int32 by -1 wraps, as two's complement does, instead of trapping; its mod is 0
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  CHECK(floordiv(i32({lo, 9}), i32({-1, -1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{lo, -9});
  CHECK(mod(i32({lo, 9}), i32({-1, -1})).to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0});
}

TEST_CASE("mod and floordiv of floats, with NaN and inf", "[elementwise_math]") {
  testing::at_every_simd_level([](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      // mod: fmod, then + y when the signs differ: fmod(-7.5, 2) = -1.5 -> 0.5; fmod(7.5, -2) =
      // 1.5 -> -0.5; fmod(5.25, 0.5) = 0.25; mod(x, 0) = NaN; mod(5, inf) = 5; mod(-5, inf) =
      // -5 + inf = inf (TensorFlow's rule); mod(inf, 2) = NaN
      const Tensor x = cast(f64({-7.5, 7.5, 5.25, 3.0, 5.0, -5.0, kInf, kNaN, -7.0, 7.0}), dtype);
      const Tensor y = cast(f64({2.0, -2.0, 0.5, 0.0, kInf, kInf, 2.0, 1.0, 3.0, -3.0}), dtype);
      const auto m = mod(x, y).to_vector<double>();
      const std::vector<double> want_m = {0.5, -0.5, 0.25, kNaN, 5.0, kInf, kNaN, kNaN, 2.0, -2.0};
      for (std::size_t i = 0; i < m.size(); ++i) {
        INFO(i);
        CHECK(close(m[i], want_m[i], dtype));
      }
      // floordiv: floor(x / y): -3.75 -> -4, -3.75 -> -4, 10.5 -> 10, 3/0 -> inf, 5/inf -> 0,
      // -5/inf -> -0, inf/2 -> inf, NaN, -7/3 -> -3, 7/-3 -> -3
      const auto q = floordiv(x, y).to_vector<double>();
      const std::vector<double> want_q = {-4, -4, 10, kInf, 0, -0.0, kInf, kNaN, -3, -3};
      for (std::size_t i = 0; i < q.size(); ++i) {
        INFO(i);
        CHECK(close(q[i], want_q[i], dtype));
      }
      CHECK(std::signbit(q[5]));
      // a remainder that x / y rounding would lose: fmod(1e15 + 1, 3) is exact (1e15 + 1 = 333333333333333 * 3 + 2)
      if (dtype == DType::float64) CHECK(mod(f64({1e15 + 1}), f64({3.0})).item<double>() == 2.0);
    }
  });
}

namespace {
// TensorFlow's FloorMod of floats, in T: fmod (exact), moved by y when the signs differ.
template <class T>
T floormod_ref(T x, T y) {
  const T r = std::fmod(x, y);
  return r != T(0) && ((y < T(0)) != (r < T(0))) ? r + y : r;
}

template <class T>
void check_mod_bit_exact(DType dtype) {
  // Magnitudes from 1e-8 to 1e12 over divisors from 1e-6 to 1e6, both signs: quotients up to
  // 1e18, past every mantissa, where x - trunc(x / y) y without care loses the remainder.
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> e(-8, 12), f(-6, 6);
  std::vector<double> xs, ys;
  for (int i = 0; i < 4001; ++i) {
    xs.push_back((i % 2 ? -1 : 1) * std::pow(10.0, e(gen)));
    ys.push_back((i % 3 ? 1 : -1) * std::pow(10.0, f(gen)));
  }
  const Tensor x = cast(f64(xs), dtype), y = cast(f64(ys), dtype);
  const std::vector<T> xv = x.to_vector<T>(), yv = y.to_vector<T>();
  const std::vector<T> m = mod(x, y).to_vector<T>(), q = floordiv(x, y).to_vector<T>();
  int wrong_m = 0, wrong_q = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const T want = floormod_ref(xv[i], yv[i]);
    if (!(m[i] == want && std::signbit(m[i]) == std::signbit(want))) ++wrong_m;
    if (q[i] != std::floor(xv[i] / yv[i])) ++wrong_q;  // floor(x / y) in T
  }
  CHECK(wrong_m == 0);
  CHECK(wrong_q == 0);
}
}  // namespace

TEST_CASE("mod of floats is exact: TensorFlow's fmod-based FloorMod bit for bit", "[elementwise_math]") {
  testing::at_every_simd_level([](const std::string&) {
    check_mod_bit_exact<float>(DType::float32);
    check_mod_bit_exact<double>(DType::float64);
  });
}

TEST_CASE("atan2(y, x) is the angle of the point (x, y) in every quadrant", "[elementwise_math]") {
  testing::at_every_simd_level([](const std::string&) {
    for (DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      // (1,1): pi/4; (-1,1): 3pi/4; (-1,-1): -3pi/4; (1,-1): -pi/4; (-1, 0): pi; (-1, -0): -pi;
      // (0, 1): pi/2; (0, 0): 0; (inf, 1): 0; NaN. C99's signed zeros and infinities: (-0, 0): pi,
      // (-0, -0): -pi, (0, -0): -0, (inf, inf): pi/4, (-inf, inf): 3pi/4, (-inf, -inf): -3pi/4,
      // (1, -inf): -pi/2
      const Tensor y = cast(f64({1, 1, -1, -1, 0, -0.0, 1, 0, 1, kNaN, 0, -0.0, -0.0, kInf, kInf, -kInf, -kInf}), dtype);
      const Tensor x = cast(f64({1, -1, -1, 1, -1, -1, 0, 0, kInf, 1, -0.0, -0.0, 0, kInf, -kInf, -kInf, 1}), dtype);
      const auto a = atan2(y, x).to_vector<double>();
      const std::vector<double> want = {kPi / 4, 3 * kPi / 4, -3 * kPi / 4, -kPi / 4, kPi, -kPi, kPi / 2, 0, 0, kNaN,
                                        kPi, -kPi, -0.0, kPi / 4, 3 * kPi / 4, -3 * kPi / 4, -kPi / 2};
      CHECK(std::signbit(a[12]));
      for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(i);
        CHECK(close(a[i], want[i], dtype));
      }
    }
  });
}

TEST_CASE("is_inf, is_nan and is_finite follow TensorFlow", "[elementwise_math]") {
  for (DType dtype : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    INFO(name(dtype));
    const Tensor x = cast(f64({kInf, -kInf, kNaN, 1.0, 0.0, -2.5}), dtype);
    CHECK(is_inf(x).dtype() == DType::bool_);
    CHECK(is_inf(x).to_vector<int>() == std::vector<int>{1, 1, 0, 0, 0, 0});
    CHECK(is_nan(x).to_vector<int>() == std::vector<int>{0, 0, 1, 0, 0, 0});
    CHECK(is_finite(x).to_vector<int>() == std::vector<int>{0, 0, 0, 1, 1, 1});
  }
  // float32 overflow to inf, and a transposed view
  CHECK(is_inf(constant({3e38f, 1.0f}, Shape{2}) * 10.0).to_vector<int>() == std::vector<int>{1, 0});
  const Tensor v = transpose(f64({kInf, 1, 2, -kInf}, {2, 2}));  // [[inf, 2], [1, -inf]]
  CHECK(is_inf(v).to_vector<int>() == std::vector<int>{1, 0, 0, 1});
  // tf.math.is_inf / is_nan have no integer kernels
  CHECK_THROWS_AS(is_inf(i32({1})), DTypeError);
  CHECK_THROWS_AS(is_nan(i32({1})), DTypeError);
  CHECK(is_inf(f64({}, {0, 3})).shape() == Shape{0, 3});
}

TEST_CASE("logical_xor: truth table, broadcasting, bool only", "[elementwise_math]") {
  const Tensor a = constant({true, true, false, false}, Shape{4});
  const Tensor b = constant({true, false, true, false}, Shape{4});
  CHECK(logical_xor(a, b).to_vector<int>() == std::vector<int>{0, 1, 1, 0});
  // [2,1] xor [3]: rows true / false against (true, false, true)
  const Tensor col = constant({true, false}, Shape{2, 1});
  const Tensor row = constant({true, false, true}, Shape{3});
  const Tensor r = logical_xor(col, row);
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.to_vector<int>() == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK_THROWS_AS(logical_xor(i32({1}), i32({0})), DTypeError);
  CHECK_THROWS_AS(logical_xor(a, constant({true, false}, Shape{2})), ShapeError);
}

// ---- dtypes, shapes, views, errors --------------------------------------------------------------

TEST_CASE("integers: rounding returns them unchanged, float-only ops are DTypeErrors", "[elementwise_math]") {
  const Tensor x = i32({-3, 0, 7});
  for (const UnaryFn& f : {UnaryFn([](const Tensor& t) { return floor(t); }), UnaryFn([](const Tensor& t) { return ceil(t); }),
                           UnaryFn([](const Tensor& t) { return round(t); })}) {
    const Tensor y = f(x);
    CHECK(y.dtype() == DType::int32);
    CHECK(y.to_vector<std::int32_t>() == std::vector<std::int32_t>{-3, 0, 7});
  }
  for (const Unary& u : unary_ops()) {
    if (std::string(u.name) == "floor" || std::string(u.name) == "ceil" || std::string(u.name) == "round") continue;
    INFO(u.name);
    CHECK_THROWS_AS(u.op(x), DTypeError);
    CHECK_THROWS_AS(u.op(constant({true}, Shape{1})), DTypeError);
  }
  CHECK_THROWS_AS(floor(constant({true}, Shape{1})), DTypeError);
  CHECK_THROWS_AS(atan2(x, x), DTypeError);
  CHECK_THROWS_AS(mod(constant({true}, Shape{1}), constant({true}, Shape{1})), DTypeError);
  CHECK_THROWS_AS(mod(x, f64({1, 2, 3})), DTypeError);  // int32 and float64
  CHECK_THROWS_AS(floor(Tensor()), ValueError);
}

TEST_CASE("an integer division by zero is a ValueError naming the op", "[elementwise_math]") {
  const Tensor x = i32({4, 5});
  CHECK_THROWS_AS(mod(x, i32({2, 0})), ValueError);
  CHECK_THROWS_WITH(floordiv(x, i32({0, 1})), Catch::Contains("floordiv") && Catch::Contains("division by zero"));
  CHECK_THROWS_WITH(mod(x, 0.0), Catch::Contains("mod") && Catch::Contains("[]"));
  // nothing is divided when the result is empty
  CHECK(mod(constant(std::vector<std::int32_t>{}, {0, 2}, DType::int32), i32({0, 1})).shape() == Shape{0, 2});
  // a float divisor of 0 is IEEE arithmetic, not an error
  CHECK(std::isinf(floordiv(f64({1.0}), f64({0.0})).item<double>()));
}

TEST_CASE("broadcasting, empty tensors, size-1 axes and views", "[elementwise_math]") {
  // [2,3] mod [3]: row (-7, 8, 9.5) and (1, -2, 3) by (3, -3, 2): 2, -1, 1.5, 1, -2, 1
  const Tensor x = f64({-7, 8, 9.5, 1, -2, 3}, {2, 3});
  const Tensor m = mod(x, f64({3, -3, 2}));
  CHECK(m.shape() == Shape{2, 3});
  CHECK(m.to_vector<double>() == std::vector<double>{2, -1, 1.5, 1, -2, 1});
  // [2,1] floordiv [1,3]: (7, -7) by (2, 3, -4): 3, 2, -2, -4, -3, 1
  const Tensor q = floordiv(f64({7, -7}, {2, 1}), f64({2, 3, -4}, {1, 3}));
  CHECK(q.shape() == Shape{2, 3});
  CHECK(q.to_vector<double>() == std::vector<double>{3, 2, -2, -4, -3, 1});
  // scalar overloads adopt x's dtype
  CHECK(mod(i32({-1, 5}), 4.0).to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 1});
  // atan2 of [2,1] and [2]
  CHECK(atan2(f64({1, -1}, {2, 1}), f64({0, 1})).shape() == Shape{2, 2});
  // empty and size-1 shapes
  CHECK(floor(f64({}, {0, 3})).shape() == Shape{0, 3});
  CHECK(mish(f64({}, {3, 0})).shape() == Shape{3, 0});
  CHECK(mod(f64({}, {0}), f64({2.0})).shape() == Shape{0});
  CHECK(floordiv(f64({5.0}, {1, 1}), f64({2.0})).to_vector<double>() == std::vector<double>{2.0});
  // a transposed input: [[0.5, 1.5], [2.5, -0.5]]^T = [[0.5, 2.5], [1.5, -0.5]] rounds to 0, 2, 2, -0
  const Tensor t = transpose(f64({0.5, 1.5, 2.5, -0.5}, {2, 2}));
  CHECK(round(t).to_vector<double>() == std::vector<double>{0, 2, 2, 0});
  // a strided view: column 0 of [4,2], every second element of 8 (strides 2, 1)
  const Tensor s = slice(reshape(f64({-2.5, 9, -1.5, 9, 0.25, 9, 3.0, 9}), {4, 2}), {0, 0}, {4, 1});
  CHECK(s.shape() == Shape{4, 1});
  CHECK_FALSE(s.is_contiguous());
  CHECK(hard_sigmoid(s).to_vector<double>() == std::vector<double>{0.5 / 6, 1.5 / 6, 3.25 / 6, 1.0});
  // mod(-2.5, 0.5) = -0, mod(-1.5, 2.5) = -1.5 + 2.5 = 1, mod(0.25, 1.5) = 0.25, mod(3, -0.5) = 0
  CHECK(mod(s, reshape(t, {4, 1})).to_vector<double>() == std::vector<double>{0.0, 1.0, 0.25, 0.0});
}

// ---- traced functions ---------------------------------------------------------------------------

TEST_CASE("the new kernels in a traced function: fused and unfused agree with eager", "[elementwise_math][function]") {
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  auto body = [](const Tensor& x) {
    return hard_swish(mod(x * 3.0, 1.7) - 0.5) + atan2(x, mish(x) + 2.0) * round(x) + selu(floor(x * 0.7));
  };
  const Tensor x = random::normal({64, 33});
  const auto eager = body(x).to_vector<float>();
  for (bool fuse : {false, true}) {
    INFO("fuse " << fuse);
    passes.fuse_elementwise = fuse;
    auto traced = keel::function(body);
    const graph::Graph& g = traced.concrete_graph(x);
    std::size_t fused = 0;
    for (const auto& op : g.operations()) fused += op.type == "FusedElementwise";
    CHECK((fused > 0) == fuse);
    CHECK(traced(x).to_vector<float>() == eager);
  }
  passes.fuse_elementwise = false;  // the kernels' own names, unfused
  auto names = keel::function([](const Tensor& x) { return log10(expm1(x)); });
  std::vector<std::string> types;
  for (const auto& op : names.concrete_graph(ones({2})).operations()) types.push_back(op.type);
  passes = saved;
  CHECK(std::find(types.begin(), types.end(), "Expm1") != types.end());
  CHECK(std::find(types.begin(), types.end(), "Log10") != types.end());
}

// ---- gradients ----------------------------------------------------------------------------------

TEST_CASE("every differentiable unary math op passes a finite-difference gradient check",
          "[elementwise_math][gradient]") {
  for (const Unary& u : unary_ops()) {
    INFO(u.name);
    const UnaryFn op = u.op;
    const Tensor x = f64(u.grad_inputs, {2, 4});
    keel_test::check_gradients([op](const std::vector<Tensor>& xs) { return op(xs[0]); }, {x});
    // through a transposed view
    keel_test::check_gradients([op](const std::vector<Tensor>& xs) { return op(transpose(xs[0])); }, {x});
  }
}

TEST_CASE("floor, ceil and round have zero gradients; floordiv has none", "[elementwise_math][gradient]") {
  const Tensor x = f64({0.3, 1.7, -2.2});
  for (const UnaryFn& f : {UnaryFn([](const Tensor& t) { return floor(t); }), UnaryFn([](const Tensor& t) { return ceil(t); }),
                           UnaryFn([](const Tensor& t) { return round(t); })}) {
    GradientTape tape;
    tape.watch(x);
    const Tensor g = tape.gradient(reduce_sum(f(x) * x), x);  // d(f(x) x) = f(x) + 0
    REQUIRE(g.defined());
    CHECK(g.to_vector<double>() == f(x).to_vector<double>());
  }
  GradientTape tape;
  tape.watch(x);
  const Tensor y = floordiv(x, f64({2.0}));
  CHECK_FALSE(tape.gradient(reduce_sum(y), x).defined());
}

TEST_CASE("mod and atan2 pass finite-difference gradient checks, broadcasting included",
          "[elementwise_math][gradient]") {
  // mod: x away from the jumps at multiples of y
  const Fn fmod_ = [](const std::vector<Tensor>& xs) { return mod(xs[0], xs[1]); };
  keel_test::check_gradients(fmod_, {f64({-7.3, 5.2, 2.9, 0.4, -1.1, 8.6}, {2, 3}), f64({2.0, -1.5, 0.7, 3.1, 1.3, -2.2}, {2, 3})});
  keel_test::check_gradients(fmod_, {f64({-7.3, 5.2, 2.9, 0.4, -1.1, 8.6}, {2, 3}), f64({2.1, -1.5, 0.7}, {3})});
  keel_test::check_gradients(fmod_, {f64({4.3}, {}), f64({2.1, -1.7, 0.9}, {3, 1})});
  // dy = -floor(x / y): mod(7.5, 2) -> -3
  {
    const Tensor x = f64({7.5}), y = f64({2.0});
    GradientTape tape;
    tape.watch(y);
    CHECK(tape.gradient(mod(x, y), y).to_vector<double>() == std::vector<double>{-3.0});
  }
  const Fn fatan2 = [](const std::vector<Tensor>& xs) { return atan2(xs[0], xs[1]); };
  keel_test::check_gradients(fatan2, {f64({1.0, -0.5, 2.0, -1.5, 0.3, 0.8}, {2, 3}), f64({0.7, -1.2, -0.4, 2.0, -0.9, 1.1}, {2, 3})});
  keel_test::check_gradients(fatan2, {f64({1.0, -0.5, 2.0, -1.5, 0.3, 0.8}, {2, 3}), f64({-0.6, 1.4}, {2, 1})});
  keel_test::check_gradients(fatan2, {transpose(f64({1.0, -0.5, 2.0, -1.5, 0.3, 0.8}, {3, 2})), f64({0.9}, {})});
}

TEST_CASE("second derivatives of the activations through nested tapes", "[elementwise_math][gradient]") {
  // the first derivatives are written with differentiable ops, so they pass a gradient check too
  for (const Unary& u : unary_ops()) {
    const std::string n = u.name;
    // rounding: zero; hard_sigmoid's derivative is a constant times a mask: its own is zero
    // and not connected to x
    if (n == "floor" || n == "ceil" || n == "round" || n == "hard_sigmoid") continue;
    INFO(n);
    const UnaryFn op = u.op;
    keel_test::check_gradients(
        [op](const std::vector<Tensor>& xs) {
          GradientTape inner;
          inner.watch(xs[0]);
          const Tensor y = reduce_sum(op(xs[0]));
          return inner.gradient(y, xs[0]);
        },
        {f64(u.grad_inputs, {8})}, 1e-6, 1e-5);
  }
}

TEST_CASE("pow by a scalar 2, 1, 0, -1 or 0.5 is correctly rounded and C99's at every SIMD level",
          "[elementwise][pow]") {
  // These exponents run as x * x, x, 1, 1 / x and sqrt(x): one IEEE operation each, so the
  // correctly rounded power (glibc's pow of doubles may be 1 ulp off it). C99's special operands
  // get C99's pow, signs of zero included: pow(-0, 0.5) = +0 and pow(-inf, 0.5) = +inf (where
  // sqrt gives -0 and NaN), pow(-0, -1) = -inf, pow(NaN, 0) = 1.
  const std::vector<double> specials = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, -2.0, 0.5, -0.5};
  std::vector<double> x = specials;
  for (int i = 0; i < 200; ++i) x.push_back(std::ldexp(std::sin(1.7 * i) * 1.3, i % 40 - 20));
  const auto ieee = [](auto v, double e) -> double {
    using T = decltype(v);
    return e == 2.0 ? v * v : e == -1.0 ? T(1) / v : e == 0.5 ? std::sqrt(v) : e == 1.0 ? v : T(1);
  };
  testing::at_every_simd_level([&](const std::string&) {
    for (const DType dtype : {DType::float32, DType::float64}) {
      INFO(name(dtype));
      const bool f32 = dtype == DType::float32;
      const Tensor xt = f64(x).astype(dtype);
      const std::vector<double> xs = xt.to_vector<double>();  // x rounded to dtype
      for (const double e : {2.0, 1.0, 0.0, -1.0, 0.5}) {
        const std::vector<double> got = pow(xt, e).to_vector<double>();
        std::string bad;
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double special = f32 ? static_cast<float>(std::pow(xs[i], e)) : std::pow(xs[i], e);
          const double want = i < specials.size() ? special
                              : f32               ? ieee(static_cast<float>(xs[i]), e)
                                                  : ieee(xs[i], e);
          const bool equal = std::isnan(want) ? std::isnan(got[i])
                                              : got[i] == want && std::signbit(got[i]) == std::signbit(want);
          if (!equal)
            bad += "pow(" + std::to_string(xs[i]) + ", " + std::to_string(e) + ") = " + std::to_string(got[i]) + "\n";
        }
        CHECK(bad == "");
      }
    }
  });
}
