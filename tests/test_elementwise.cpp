// Elementwise ops: values against <cmath>, broadcasting, dtype rules, comparisons, views, and a
// float64 finite-difference gradient check for every differentiable op.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

using UnaryOp = std::function<Tensor(const Tensor&)>;
using UnaryRef = std::function<double(double)>;
using BinaryOp = std::function<Tensor(const Tensor&, const Tensor&)>;
using BinaryRef = std::function<double(double, double)>;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Unary {
  const char* name;
  UnaryOp op;
  UnaryRef ref;
  std::vector<double> inputs;       // inside the op's domain and away from kinks
  std::vector<double> grad_inputs = {};  // for the gradient check, when inputs has a kink (sign at 0)
  const std::vector<double>& gradient_inputs() const {
    return grad_inputs.empty() ? inputs : grad_inputs;
  }
};

// Inputs: a general set, a positive set (log, sqrt, rsqrt), and one for log1p (> -1).
const std::vector<double> kGeneral = {-2.5, -1.25, -0.4, 0.3, 0.9, 1.7, 2.6, 4.0};
const std::vector<double> kPositive = {0.2, 0.5, 1.0, 1.5, 2.5, 4.0, 7.0, 9.5};
const std::vector<double> kAboveMinusOne = {-0.9, -0.5, -0.1, 0.0, 0.4, 1.0, 3.0, 8.0};

std::vector<Unary> unary_ops() {
  const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, kGeneral},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); },
       kGeneral},
      {"sign", [](const Tensor& x) { return sign(x); },
       [](double x) { return double((x > 0) - (x < 0)); },
       {-2.0, -0.5, 0.0, 0.5, 3.0, 0.0, -1e-3, 1e-3},
       {-2.0, -0.5, 0.25, 0.5, 3.0, 0.75, -1e-3, 1e-3}},  // d sign = 0 away from 0
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; },
       kGeneral},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); },
       kPositive},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); },
       [](double x) { return 1.0 / std::sqrt(x); }, kPositive},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); },
       kGeneral},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); },
       kPositive},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); },
       kAboveMinusOne},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); },
       kGeneral},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); },
       kGeneral},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
       kGeneral},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, ref_sigmoid, kGeneral},
      {"relu", [](const Tensor& x) { return relu(x); },
       [](double x) { return x > 0 ? x : 0.0; }, kGeneral},
      // relu6 = min(max(x, 0), 6)
      {"relu6", [](const Tensor& x) { return relu6(x); },
       [](double x) { return std::min(std::max(x, 0.0), 6.0); },
       {-2.0, -0.5, 0.5, 2.0, 5.5, 6.5, 9.0, 3.0}},
      // leaky_relu: x for x > 0, alpha x otherwise (tf.nn.leaky_relu default alpha = 0.2)
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); },
       [](double x) { return x > 0 ? x : 0.2 * x; }, kGeneral},
      {"leaky_relu(alpha=0.01)", [](const Tensor& x) { return leaky_relu(x, 0.01); },
       [](double x) { return x > 0 ? x : 0.01 * x; }, kGeneral},
      // elu: x for x > 0, alpha (e^x - 1) otherwise, alpha = 1
      {"elu", [](const Tensor& x) { return elu(x); },
       [](double x) { return x > 0 ? x : std::expm1(x); }, kGeneral},
      {"elu(alpha=0.5)", [](const Tensor& x) { return elu(x, 0.5); },
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }, kGeneral},
      // exact gelu: x Phi(x) = x/2 (1 + erf(x / sqrt 2))
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, kGeneral},
      // tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      {"gelu(approximate)", [](const Tensor& x) { return gelu(x, true); },
       [kSqrt2OverPi](double x) {
         return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
       },
       kGeneral},
      // softplus = log(1 + e^x)
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](double x) { return std::log1p(std::exp(x)); }, kGeneral},
      // silu = x sigmoid(x)
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * ref_sigmoid(x); },
       kGeneral},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); },
       kGeneral},
      // scalar operators
      {"x * 2.0", [](const Tensor& x) { return x * 2.0; }, [](double x) { return x * 2.0; },
       kGeneral},
      {"1.0 - x", [](const Tensor& x) { return 1.0 - x; }, [](double x) { return 1.0 - x; },
       kGeneral},
      {"x - 3.0", [](const Tensor& x) { return x - 3.0; }, [](double x) { return x - 3.0; },
       kGeneral},
      {"3.0 + x", [](const Tensor& x) { return 3.0 + x; }, [](double x) { return 3.0 + x; },
       kGeneral},
      {"x + 0.5", [](const Tensor& x) { return x + 0.5; }, [](double x) { return x + 0.5; },
       kGeneral},
      {"2.5 * x", [](const Tensor& x) { return 2.5 * x; }, [](double x) { return 2.5 * x; },
       kGeneral},
      {"x / 4.0", [](const Tensor& x) { return x / 4.0; }, [](double x) { return x / 4.0; },
       kGeneral},
      {"2.0 / x", [](const Tensor& x) { return 2.0 / x; }, [](double x) { return 2.0 / x; },
       kPositive},
      {"-x", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, kGeneral},
      {"pow(x, 2.5)", [](const Tensor& x) { return pow(x, 2.5); },
       [](double x) { return std::pow(x, 2.5); }, kPositive},
      {"pow(x, -1.5)", [](const Tensor& x) { return pow(x, -1.5); },
       [](double x) { return std::pow(x, -1.5); }, kPositive},
      {"maximum(x, 0.5)", [](const Tensor& x) { return maximum(x, 0.5); },
       [](double x) { return std::max(x, 0.5); }, kGeneral},
      {"minimum(x, 0.5)", [](const Tensor& x) { return minimum(x, 0.5); },
       [](double x) { return std::min(x, 0.5); }, kGeneral},
      {"clip_by_value(x, -1, 2)", [](const Tensor& x) { return clip_by_value(x, -1.0, 2.0); },
       [](double x) { return std::min(std::max(x, -1.0), 2.0); }, kGeneral},
  };
}

struct Binary {
  const char* name;
  BinaryOp op;
  BinaryRef ref;
  std::vector<double> x, y;  // y's values differ from x's everywhere (maximum/minimum)
};

const std::vector<double> kX = {-2.5, -1.25, 0.4, 0.9, 1.7, 2.6};
const std::vector<double> kY = {1.5, -2.0, 0.7, -0.3, 2.2, 1.1};
const std::vector<double> kXPositive = {0.5, 1.2, 2.0, 0.8, 3.0, 1.7};

std::vector<Binary> binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](double a, double b) { return a + b; }, kX, kY},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
       [](double a, double b) { return a - b; }, kX, kY},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
       [](double a, double b) { return a * b; }, kX, kY},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
       [](double a, double b) { return a / b; }, kX, kY},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, kXPositive, kY},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, kX, kY},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, kX, kY},
      {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; },
       [](double a, double b) { return a + b; }, kX, kY},
      {"operator-", [](const Tensor& a, const Tensor& b) { return a - b; },
       [](double a, double b) { return a - b; }, kX, kY},
      {"operator*", [](const Tensor& a, const Tensor& b) { return a * b; },
       [](double a, double b) { return a * b; }, kX, kY},
      {"operator/", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](double a, double b) { return a / b; }, kX, kY},
  };
}

// The reference is computed in double from the values the tensor actually holds (for float32,
// the inputs rounded to float), then compared with a tolerance fit for the dtype.
void check_unary_values(const Unary& u, DType dt) {
  const Tensor x = constant(u.inputs, Shape{2, static_cast<std::int64_t>(u.inputs.size() / 2)}, dt);
  const Tensor y = u.op(x);
  INFO(u.name << " in " << name(dt));
  REQUIRE(y.dtype() == dt);
  REQUIRE(y.shape() == x.shape());
  const auto xs = x.to_vector<double>();
  const auto ys = y.to_vector<double>();
  const double eps = dt == DType::float32 ? 2e-6 : 1e-13;
  const double margin = dt == DType::float32 ? 1e-6 : 1e-15;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i]);
    CHECK(ys[i] == Approx(u.ref(xs[i])).epsilon(eps).margin(margin));
  }
}

void check_binary_values(const Binary& b, DType dt) {
  const Tensor x = constant(b.x, Shape{2, 3}, dt);
  const Tensor y = constant(b.y, Shape{2, 3}, dt);
  const Tensor z = b.op(x, y);
  INFO(b.name << " in " << name(dt));
  REQUIRE(z.dtype() == dt);
  REQUIRE(z.shape() == Shape{2, 3});
  const auto xs = x.to_vector<double>();
  const auto ys = y.to_vector<double>();
  const auto zs = z.to_vector<double>();
  const double eps = dt == DType::float32 ? 2e-6 : 1e-13;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i] << ", y = " << ys[i]);
    CHECK(zs[i] == Approx(b.ref(xs[i], ys[i])).epsilon(eps).margin(1e-15));
  }
}

Tensor f64(const std::vector<double>& v, Shape s) { return constant(v, std::move(s), DType::float64); }

}  // namespace

// ---- values ---------------------------------------------------------------------------------

TEST_CASE("every unary elementwise op matches <cmath> in float32 and float64",
          "[elementwise][values]") {
  for (const auto& u : unary_ops()) {
    check_unary_values(u, DType::float32);
    check_unary_values(u, DType::float64);
  }
}

TEST_CASE("every binary elementwise op matches <cmath> in float32 and float64",
          "[elementwise][values]") {
  for (const auto& b : binary_ops()) {
    check_binary_values(b, DType::float32);
    check_binary_values(b, DType::float64);
  }
}

TEST_CASE("softplus and sigmoid stay finite and accurate for large |x|", "[elementwise][values]") {
  // softplus(x) = x + log1p(e^-x) -> 100 for x = 100 (e^100 overflows float32 if done naively);
  // softplus(-100) = log1p(e^-100) = e^-100 = 3.72e-44 (below float32's normal range, so use f64)
  const auto sp = softplus(constant({100.0, -100.0}, {2}, DType::float64)).to_vector<double>();
  CHECK(sp[0] == Approx(100.0));
  CHECK(sp[1] == Approx(std::exp(-100.0)).epsilon(1e-10));
  const auto sp32 = softplus(constant({100.f, -100.f}, {2})).to_vector<float>();
  CHECK(std::isfinite(sp32[0]));
  CHECK(sp32[0] == Approx(100.0f));
  CHECK(sp32[1] >= 0.f);
  CHECK(sp32[1] < 1e-30f);
  // sigmoid(+-100): 1 and e^-100 / (1 + e^-100), no NaN
  const auto sg = sigmoid(constant({100.0, -100.0}, {2}, DType::float64)).to_vector<double>();
  CHECK(sg[0] == 1.0);
  CHECK(sg[1] == Approx(std::exp(-100.0)).epsilon(1e-10));
}

TEST_CASE("broadcasting follows NumPy rules", "[elementwise][broadcast]") {
  const Tensor a = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor row = constant({10.f, 20.f, 30.f}, {3});
  // [2,3] + [3]: the row is added to each row
  const Tensor s = a + row;
  CHECK(s.shape() == Shape{2, 3});
  CHECK(s.to_vector<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
  CHECK(add(row, a).to_vector<float>() == s.to_vector<float>());

  // [2,1] * [1,3] = [2,3], the outer product: [[1*3, 1*4, 1*5], [2*3, 2*4, 2*5]]
  const Tensor col = constant({1.f, 2.f}, {2, 1});
  const Tensor r = constant({3.f, 4.f, 5.f}, {1, 3});
  const Tensor o = col * r;
  CHECK(o.shape() == Shape{2, 3});
  CHECK(o.to_vector<float>() == std::vector<float>{3, 4, 5, 6, 8, 10});

  // [2,1,3] - [4,1]: -> [2,4,3]
  const Tensor p = reshape(arange(6), {2, 1, 3});
  const Tensor q = reshape(arange(4), {4, 1});
  const Tensor d = p - q;
  CHECK(d.shape() == Shape{2, 4, 3});
  // element [i,j,k] = (3i + k) - j; check [1,2,0] = 3 - 2 = 1 and [0,3,2] = 2 - 3 = -1
  const auto dv = d.to_vector<float>();
  CHECK(dv[(1 * 4 + 2) * 3 + 0] == 1.f);
  CHECK(dv[(0 * 4 + 3) * 3 + 2] == -1.f);

  // a rank-0 tensor broadcasts against anything
  CHECK((a * constant(2.0)).to_vector<float>() == std::vector<float>{2, 4, 6, 8, 10, 12});
  // scalar operands adopt the tensor's dtype
  CHECK((a * 2.0).dtype() == DType::float32);
  CHECK((a * 2.0).to_vector<float>() == std::vector<float>{2, 4, 6, 8, 10, 12});
  CHECK((1.0 - a).to_vector<float>() == std::vector<float>{0, -1, -2, -3, -4, -5});
  const Tensor a64 = a.astype(DType::float64);
  CHECK((1.0 - a64).dtype() == DType::float64);
  CHECK((a64 / 4.0).to_vector<double>() == std::vector<double>{0.25, 0.5, 0.75, 1, 1.25, 1.5});

  // size-0 broadcasting: [0,3] + [3] is [0,3]
  CHECK((zeros({0, 3}) + row).shape() == Shape{0, 3});
  CHECK(broadcast_shapes(Shape{2, 1}, Shape{1, 3}) == Shape{2, 3});
  CHECK(broadcast_shapes(Shape{}, Shape{5}) == Shape{5});
}

TEST_CASE("binary ops on float32 and float64 tensors throw DTypeError naming both dtypes",
          "[elementwise][errors]") {
  const Tensor f = ones({2});
  const Tensor d = ones({2}, DType::float64);
  CHECK_THROWS_AS(add(f, d), DTypeError);
  CHECK_THROWS_WITH(add(f, d), Contains("float32") && Contains("float64"));
  CHECK_THROWS_AS(f * d, DTypeError);
  CHECK_THROWS_AS(maximum(d, f), DTypeError);
  CHECK_THROWS_AS(ones({2}, DType::int32) + f, DTypeError);
  CHECK_THROWS_WITH(ones({2}, DType::int32) + f, Contains("int32") && Contains("float32"));
}

TEST_CASE("incompatible broadcasting throws ShapeError naming both shapes",
          "[elementwise][errors]") {
  const Tensor a = ones({2, 3});
  const Tensor b = ones({4});
  CHECK_THROWS_AS(add(a, b), ShapeError);
  CHECK_THROWS_WITH(add(a, b), Contains("[2,3]") && Contains("[4]"));
  CHECK_THROWS_AS(a * ones({3, 2}), ShapeError);
  CHECK_THROWS_WITH(mul(a, ones({3, 2})), Contains("[2,3]") && Contains("[3,2]"));
  CHECK_THROWS_AS(broadcast_shapes(Shape{2}, Shape{3}), ShapeError);
}

TEST_CASE("int32 arithmetic stays int32 and integer division gives float64",
          "[elementwise][dtype]") {
  const Tensor a = constant({7, -7, 3}, {3});
  const Tensor b = constant({2, 2, -5}, {3});
  REQUIRE(a.dtype() == DType::int32);
  CHECK((a + b).dtype() == DType::int32);
  CHECK((a + b).to_vector<int>() == std::vector<int>{9, -5, -2});
  CHECK((a - b).to_vector<int>() == std::vector<int>{5, -9, 8});
  CHECK((a * b).to_vector<int>() == std::vector<int>{14, -14, -15});
  CHECK((-a).to_vector<int>() == std::vector<int>{-7, 7, -3});
  CHECK(maximum(a, b).to_vector<int>() == std::vector<int>{7, 2, 3});
  CHECK(abs(a).to_vector<int>() == std::vector<int>{7, 7, 3});
  CHECK(square(b).to_vector<int>() == std::vector<int>{4, 4, 25});
  // true division: 7/2 = 3.5, -7/2 = -3.5, 3/-5 = -0.6
  const Tensor q = div(a, b);
  CHECK(q.dtype() == DType::float64);
  CHECK(q.to_vector<double>() == std::vector<double>{3.5, -3.5, 3.0 / -5.0});
  CHECK((a / b).dtype() == DType::float64);
  // a C++ scalar adopts the tensor's dtype
  CHECK((a + 1.0).dtype() == DType::int32);
  CHECK((a * 2.0).to_vector<int>() == std::vector<int>{14, -14, 6});

  const Tensor l = constant(std::vector<std::int64_t>{1LL << 40, 3}, Shape{2});
  CHECK((l + l).dtype() == DType::int64);
  CHECK((l + l).to_vector<std::int64_t>() == std::vector<std::int64_t>{1LL << 41, 6});
}

TEST_CASE("comparisons give bool tensors", "[elementwise][compare]") {
  const Tensor x = constant({1.f, 2.f, 3.f}, {3});
  const Tensor y = constant({3.f, 2.f, 1.f}, {3});
  using B = std::vector<bool>;
  CHECK((x == y).dtype() == DType::bool_);
  CHECK((x == y).to_vector<bool>() == B{false, true, false});
  CHECK((x != y).to_vector<bool>() == B{true, false, true});
  CHECK((x < y).to_vector<bool>() == B{true, false, false});
  CHECK((x <= y).to_vector<bool>() == B{true, true, false});
  CHECK((x > y).to_vector<bool>() == B{false, false, true});
  CHECK((x >= y).to_vector<bool>() == B{false, true, true});
  CHECK(equal(x, y).to_vector<bool>() == B{false, true, false});
  CHECK(not_equal(x, y).to_vector<bool>() == B{true, false, true});
  CHECK(less(x, y).to_vector<bool>() == B{true, false, false});
  CHECK(less_equal(x, y).to_vector<bool>() == B{true, true, false});
  CHECK(greater(x, y).to_vector<bool>() == B{false, false, true});
  CHECK(greater_equal(x, y).to_vector<bool>() == B{false, true, true});
  // with C++ scalars
  CHECK((x > 1.5).to_vector<bool>() == B{false, true, true});
  CHECK((x == 2.0).to_vector<bool>() == B{false, true, false});
  CHECK((x != 2.0).to_vector<bool>() == B{true, false, true});
  CHECK((x < 2.0).to_vector<bool>() == B{true, false, false});
  CHECK((x <= 2.0).to_vector<bool>() == B{true, true, false});
  CHECK((x >= 2.0).to_vector<bool>() == B{false, true, true});
  // broadcasting: [3,1] < [3] -> [3,3], element [i,j] = x[i] < x[j]
  CHECK((reshape(x, {3, 1}) < x).to_vector<bool>() ==
        B{false, true, true, false, false, true, false, false, false});
  // integers too
  CHECK((constant({1, 5}, {2}) > constant({2, 2}, {2})).to_vector<bool>() == B{false, true});

  // logic
  const Tensor p = constant({true, true, false, false}, {4});
  const Tensor q = constant({true, false, true, false}, {4});
  CHECK(logical_and(p, q).to_vector<bool>() == B{true, false, false, false});
  CHECK(logical_or(p, q).to_vector<bool>() == B{true, true, true, false});
  CHECK(logical_not(p).to_vector<bool>() == B{false, false, true, true});
  CHECK((p && q).to_vector<bool>() == B{true, false, false, false});
  CHECK((p || q).to_vector<bool>() == B{true, true, true, false});
  CHECK((!p).to_vector<bool>() == B{false, false, true, true});

  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor special = constant({1.0, inf, -inf, nan}, {4}, DType::float64);
  CHECK(is_finite(special).to_vector<bool>() == B{true, false, false, false});
  CHECK(is_nan(special).to_vector<bool>() == B{false, false, false, true});
  CHECK((special == special).to_vector<bool>() == B{true, true, true, false});  // NaN != NaN
}

TEST_CASE("where picks from x where the condition holds and from y elsewhere",
          "[elementwise][where]") {
  const Tensor cond = constant({true, false, true, false}, {2, 2});
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  const Tensor y = constant({10.f, 20.f, 30.f, 40.f}, {2, 2});
  const Tensor w = where(cond, x, y);
  CHECK(w.dtype() == DType::float32);
  CHECK(w.to_vector<float>() == std::vector<float>{1, 20, 3, 40});
  // broadcasting (TF2 semantics): a [2,1] condition and a rank-0 y
  const Tensor c2 = constant({true, false}, {2, 1});
  CHECK(where(c2, x, constant(0.0)).to_vector<float>() == std::vector<float>{1, 2, 0, 0});
  // a condition computed by a comparison
  CHECK(where(x > 2.5, x, -x).to_vector<float>() == std::vector<float>{-1, -2, 3, 4});
  CHECK_THROWS_AS(where(cond, x, ones({2, 2}, DType::float64)), DTypeError);
  CHECK_THROWS_AS(where(constant({true, false, true}, {3}), x, y), ShapeError);
}

TEST_CASE("clip_by_value clamps to [clip_min, clip_max]", "[elementwise][clip]") {
  const Tensor x = constant({-2.f, 0.5f, 3.f, 1.f}, {4});
  CHECK(clip_by_value(x, 0.0, 1.0).to_vector<float>() == std::vector<float>{0, 0.5f, 1, 1});
  // tensor bounds broadcast
  const Tensor lo = constant({-3.f, 0.6f, 0.f, 0.f}, {4});
  const Tensor hi = constant({-1.f, 2.f, 2.f, 0.5f}, {4});
  CHECK(clip_by_value(x, lo, hi).to_vector<float>() == std::vector<float>{-2, 0.6f, 2, 0.5f});
  CHECK(clip_by_value(constant({5, -5, 0}, {3}), -2.0, 2.0).to_vector<int>() ==
        std::vector<int>{2, -2, 0});
}

TEST_CASE("cast converts dtypes, truncating floats toward zero", "[elementwise][cast]") {
  const Tensor x = constant({1.7f, -1.7f, 0.f, 2.f}, {4});
  const Tensor i = cast(x, DType::int32);
  CHECK(i.dtype() == DType::int32);
  CHECK(i.to_vector<int>() == std::vector<int>{1, -1, 0, 2});  // like static_cast / tf.cast
  CHECK(cast(x, DType::bool_).to_vector<bool>() == std::vector<bool>{true, true, false, true});
  const Tensor d = cast(constant({1, -2}, {2}), DType::float64);
  CHECK(d.dtype() == DType::float64);
  CHECK(d.to_vector<double>() == std::vector<double>{1.0, -2.0});
  CHECK(cast(constant({true, false}, {2}), DType::float32).to_vector<float>() ==
        std::vector<float>{1, 0});
  CHECK(cast(x, DType::float32).to_vector<float>() == x.to_vector<float>());
  CHECK(cast(x, DType::float64).to_vector<double>()[0] == double(1.7f));
}

TEST_CASE("elementwise ops on transposed and sliced views equal the ops on contiguous copies",
          "[elementwise][views]") {
  // base [3,4] = 0.1 * (0 .. 11) - 0.5
  const Tensor base = arange(0, 12, 1, DType::float64).reshape({3, 4}) * 0.1 - 0.5;
  const Tensor t = transpose(base);                 // [4,3], strides (1, 4)
  const Tensor s = slice(base, {0, 1}, {3, 2});     // [3,2], row stride 4
  const Tensor r = base[1];                         // [4], offset 4
  const Tensor b = broadcast_to(base[0], {3, 4});   // stride 0 on the first axis
  REQUIRE_FALSE(t.is_contiguous());
  REQUIRE_FALSE(s.is_contiguous());
  const Tensor tc = t.contiguous(), sc = s.contiguous(), rc = r.contiguous(), bc = b.contiguous();

  // Strided and contiguous kernels may differ in the last bit (e.g. SIMD exp vs scalar exp).
  auto same = [](const Tensor& view_result, const Tensor& copy_result) {
    REQUIRE(view_result.shape() == copy_result.shape());
    const auto v = view_result.to_vector<double>(), c = copy_result.to_vector<double>();
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == Approx(c[i]).epsilon(1e-14).margin(1e-15));
  };
  for (const Tensor* v : {&t, &s, &r, &b}) {
    const Tensor c = v->contiguous();
    same(exp(*v), exp(c));
    same(tanh(*v), tanh(c));
    same(relu(*v), relu(c));
    same(square(*v) + *v, square(c) + c);
    same(*v * 3.0, c * 3.0);
    same(-*v, -c);
    same(sigmoid(*v), sigmoid(c));
  }
  // binary: view with view, view with contiguous, views broadcasting
  same(t * t, tc * tc);
  same(t + tc, tc + tc);
  same(s - sc, sc - sc);
  same(maximum(s, sc * 0.5), maximum(sc, sc * 0.5));
  same(t * r.reshape({4, 1}), tc * rc.reshape({4, 1}));
  same(b / (bc + 2.0), bc / (bc + 2.0));
  same(add(transpose(s), r[0]), add(transpose(sc), rc[0]));  // [2,3] + a rank-0 view
  same(where(t > 0.0, t, tc * 2.0), where(tc > 0.0, tc, tc * 2.0));
}

TEST_CASE("cast between float dtypes passes the gradient back in the source dtype",
          "[elementwise][cast][autograd]") {
  const Tensor x = constant({1.f, 2.f}, {2});
  GradientTape tape;
  tape.watch(x);
  // y = sum(3 * cast(x)) -> dy/dx = 3, as float32 like x
  const Tensor y = reduce_sum(cast(x, DType::float64) * 3.0);
  const Tensor g = tape.gradient(y, x);
  REQUIRE(g.defined());
  CHECK(g.dtype() == DType::float32);
  CHECK(g.to_vector<float>() == std::vector<float>{3, 3});
}

// ---- gradients --------------------------------------------------------------------------------

TEST_CASE("every differentiable unary elementwise op passes a finite-difference gradient check",
          "[elementwise][gradient]") {
  for (const auto& u : unary_ops()) {
    INFO(u.name);
    const auto& in = u.gradient_inputs();
    const Tensor x = f64(in, Shape{2, static_cast<std::int64_t>(in.size() / 2)});
    const UnaryOp op = u.op;
    check_gradients([op](const std::vector<Tensor>& xs) { return op(xs[0]); }, {x});
  }
}

TEST_CASE("unary op gradients are right on transposed and sliced inputs",
          "[elementwise][gradient][views]") {
  // x [2,4] values from kGeneral; f uses a transposed view and a slice of it
  const Tensor x = f64(kGeneral, {2, 4});
  for (const auto& u : unary_ops()) {
    if (u.inputs != kGeneral) continue;  // the same domain as x
    INFO(u.name);
    const UnaryOp op = u.op;
    check_gradients([op](const std::vector<Tensor>& xs) { return op(transpose(xs[0])); }, {x});
    check_gradients([op](const std::vector<Tensor>& xs) { return op(slice(xs[0], {0, 1}, {2, 2})); },
                    {x});
    // the input itself is a view
    check_gradients([op](const std::vector<Tensor>& xs) { return op(xs[0]); }, {transpose(x)});
  }
}

TEST_CASE("every binary elementwise op passes a finite-difference gradient check",
          "[elementwise][gradient]") {
  for (const auto& b : binary_ops()) {
    INFO(b.name);
    const BinaryOp op = b.op;
    const Fn f = [op](const std::vector<Tensor>& xs) { return op(xs[0], xs[1]); };
    check_gradients(f, {f64(b.x, {2, 3}), f64(b.y, {2, 3})});
  }
}

TEST_CASE("binary op gradients undo broadcasting", "[elementwise][gradient][broadcast]") {
  const std::vector<double> x23 = {-2.5, -1.25, 0.4, 0.9, 1.7, 2.6};
  const std::vector<double> x23pos = {0.5, 1.2, 2.0, 0.8, 3.0, 1.7};
  for (const auto& b : binary_ops()) {
    INFO(b.name);
    const BinaryOp op = b.op;
    const Fn f = [op](const std::vector<Tensor>& xs) { return op(xs[0], xs[1]); };
    const bool positive_base = std::string(b.name) == "pow";
    const Tensor x = f64(positive_base ? x23pos : x23, {2, 3});
    // [2,3] op [3]; values of y differ from every x in its column (maximum/minimum)
    check_gradients(f, {x, f64({1.1, -0.3, 0.75}, {3})});
    // [3] op [2,3] (the broadcast one first)
    check_gradients(f, {f64({1.1, 0.6, 0.75}, {3}), x});
    // [2,1] op [1,3]: both broadcast
    check_gradients(f, {f64(positive_base ? std::vector<double>{0.7, 1.9}
                                          : std::vector<double>{-0.7, 1.9},
                            {2, 1}),
                        f64({1.3, -0.45, 0.25}, {1, 3})});
    // [2,3] op scalar tensor
    check_gradients(f, {x, f64({1.05}, {})});
    // transposed and sliced views as operands: [3,2]^T is [2,3]
    check_gradients(
        [op](const std::vector<Tensor>& xs) {
          return op(transpose(xs[0]), slice(xs[1], {1, 0}, {2, 3}));
        },
        {f64(positive_base ? x23pos : x23, {3, 2}), f64({9, 9, 9, 0.3, -1.6, 2.2, 1.15, 0.65, -0.2}, {3, 3})});
  }
}

TEST_CASE("where, clip_by_value with tensor bounds, and maximum/minimum pass gradient checks",
          "[elementwise][gradient]") {
  const Tensor cond = constant({true, false, true, false, false, true}, {2, 3});
  check_gradients([cond](const std::vector<Tensor>& xs) { return where(cond, xs[0], xs[1]); },
                  {f64(kX, {2, 3}), f64(kY, {2, 3})});
  // where broadcasting y from [3]
  check_gradients([cond](const std::vector<Tensor>& xs) { return where(cond, xs[0], xs[1]); },
                  {f64(kX, {2, 3}), f64({0.1, 0.2, 0.3}, {3})});
  // clip with tensor bounds: x inside, below and above (never on) its bounds
  check_gradients(
      [](const std::vector<Tensor>& xs) { return clip_by_value(xs[0], xs[1], xs[2]); },
      {f64({-2.0, 0.5, 3.0, 1.0}, {4}), f64({-1.0, 0.0, -1.0, 0.0}, {4}),
       f64({1.0, 1.0, 2.0, 2.0}, {4})});
  // cast float64 -> float64 is the identity
  check_gradients([](const std::vector<Tensor>& xs) { return cast(xs[0], DType::float64) * xs[0]; },
                  {f64(kX, {2, 3})});
  // a composite: sigmoid(x) * tanh(y) + exp(-x^2) / (1 + y^2)
  check_gradients(
      [](const std::vector<Tensor>& xs) {
        return sigmoid(xs[0]) * tanh(xs[1]) + exp(-square(xs[0])) / (1.0 + square(xs[1]));
      },
      {f64(kX, {2, 3}), f64(kY, {2, 3})});
}

TEST_CASE("the same tensor used twice accumulates both gradients", "[elementwise][gradient]") {
  // f(x) = x * x + x -> df/dx = 2x + 1
  check_gradients([](const std::vector<Tensor>& xs) { return xs[0] * xs[0] + xs[0]; },
                  {f64(kX, {2, 3})});
  const Tensor x = constant({1.5, -2.0}, {2}, DType::float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(x * x + x);
  CHECK(tape.gradient(y, x).to_vector<double>() == std::vector<double>{4.0, -3.0});
}

TEST_CASE("relu's gradient is differentiable in the upstream gradient (second order)", "[elementwise][gradient]") {
  // d/dup of d/dx sum(relu(x) * up) = d/dup (up * (x > 0)) = (x > 0): the gradient of the
  // gradient kernel with respect to its upstream input is the same mask.
  const Tensor x = constant({-1.0, 2.0, 0.0, 3.0}, {4}, DType::float64);
  const Tensor up = constant({5.0, 7.0, 11.0, 13.0}, {4}, DType::float64);
  GradientTape outer;
  outer.watch(up);
  Tensor gx;
  {
    GradientTape inner;
    inner.watch(x);
    gx = inner.gradient(reduce_sum(mul(relu(x), up)), x);
  }
  CHECK(gx.to_vector<double>() == std::vector<double>{0.0, 7.0, 0.0, 13.0});
  const Tensor weights = constant({1.0, 10.0, 100.0, 1000.0}, {4}, DType::float64);
  CHECK(outer.gradient(reduce_sum(mul(gx, weights)), up).to_vector<double>() == std::vector<double>{0.0, 10.0, 0.0, 1000.0});
}

TEST_CASE("relu's gradient kernel passes a finite-difference check in its upstream gradient",
          "[elementwise][gradient]") {
  // f(up) = d/dx sum(relu(x) * up) = up * (x > 0), with x away from the kink.
  const Tensor x = constant({-1.5, 0.7, -0.2, 2.0, 0.4, -3.0}, {2, 3}, DType::float64);
  const Tensor up = constant({0.3, -1.1, 2.2, 0.5, -0.8, 1.4}, {2, 3}, DType::float64);
  check_gradients(
      [x](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(x);
        return inner.gradient(reduce_sum(mul(relu(x), in[0])), x);
      },
      {up});
}

TEST_CASE("scalar_like makes a rank-0 tensor of x's dtype", "[elementwise][dtype]") {
  const Tensor s = scalar_like(ones({2, 2}, DType::float64), 2.5);
  CHECK(s.rank() == 0);
  CHECK(s.dtype() == DType::float64);
  CHECK(s.item<double>() == 2.5);
  const Tensor i = scalar_like(ones({3}, DType::int32), 7.0);
  CHECK(i.dtype() == DType::int32);
  CHECK(i.item<int>() == 7);
  CHECK(i.device() == ones({3}, DType::int32).device());
}

TEST_CASE("cast from float to int saturates out-of-range values and maps NaN to 0") {
  // An out-of-range float-to-int conversion is undefined behaviour in C++; keel defines it as
  // NumPy-on-x86 users expect from a checked cast: clamp to the range, NaN to 0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = constant({1e20f, -1e20f, nan, -3.7f, 2.5f}, {5});
  CHECK(cast(x, DType::int32).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{2147483647, -2147483647 - 1, 0, -3, 2});
  CHECK(cast(x, DType::int64).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{INT64_MAX, INT64_MIN, 0, -3, 2});
  CHECK(cast(constant({300.0, -5.0}, {2}), DType::uint8).to_vector<std::uint8_t>() == std::vector<std::uint8_t>{255, 0});
}
