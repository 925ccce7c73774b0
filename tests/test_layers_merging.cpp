// The merging layers (keel/layers/merging.hpp), the parameterised activation layers
// (activation_layers.hpp) and Identity / Lambda (core.hpp): values against Keras' definitions
// worked by hand, masks, float64 gradient checks, error cases and config round trips.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "layer_checks.hpp"

using namespace keel;
using keel_test::check_values;

namespace {
Tensor f64(std::vector<double> v, Shape s) { return constant(v, std::move(s), DType::float64); }

// get_config -> from_config -> the same output on x (and the same class name).
void check_round_trip(layers::Layer& layer, const std::vector<Tensor>& xs) {
  const Tensor want = xs.size() == 1 ? layer(xs[0]) : layer(xs);
  const auto copy = layers::from_config(layer.class_name(), layer.get_config());
  REQUIRE(copy->class_name() == layer.class_name());
  const Tensor got = xs.size() == 1 ? (*copy)(xs[0]) : (*copy)(xs);
  check_values(got, want.to_vector<double>(), 1e-12);
}
}  // namespace

TEST_CASE("Average, Subtract, Maximum, Minimum: elementwise values with size-1 broadcasting", "[layers][merging]") {
  const Tensor a = f64({1, -2, 3, 4}, {2, 2});
  const Tensor b = f64({5, 6, -7, 0}, {2, 2});
  const Tensor c = f64({1, 1}, {2, 1});  // broadcasts over the feature axis
  // Average: (a + b + c) / 3 = {(1+5+1)/3, (-2+6+1)/3, (3-7+1)/3, (4+0+1)/3}
  check_values(layers::Average()({a, b, c}), {7.0 / 3, 5.0 / 3, -1.0, 5.0 / 3}, 1e-12);
  check_values(layers::Subtract()({a, b}), {-4, -8, 10, 4}, 1e-12);
  check_values(layers::Maximum()({a, b, c}), {5, 6, 3, 4}, 1e-12);
  check_values(layers::Minimum()({a, b, c}), {1, -2, -7, 0}, 1e-12);
}

TEST_CASE("merge layers pass on the logical and of their inputs' masks", "[layers][merging]") {
  const Tensor x = layers::with_mask(ones({2, 3, 1}), constant(std::vector<bool>{true, true, false, true, false, true}, {2, 3}));
  const Tensor y = layers::with_mask(ones({2, 3, 1}), constant(std::vector<bool>{true, false, true, true, true, true}, {2, 3}));
  const Tensor m = layers::get_mask(layers::Maximum()({x, y}));
  REQUIRE(m.defined());
  CHECK(m.to_vector<bool>() == std::vector<bool>{true, false, false, true, false, true});
  CHECK_FALSE(layers::get_mask(layers::Dot(2)({x, y})).defined());  // Keras' Dot returns no mask
}

TEST_CASE("merge layers reject single tensors, wrong counts and incompatible shapes", "[layers][merging]") {
  CHECK_THROWS_AS(layers::Average()(ones({2, 2})), ValueError);
  CHECK_THROWS_AS(layers::Subtract()({ones({2, 2}), ones({2, 2}), ones({2, 2})}), ValueError);
  CHECK_THROWS_AS(layers::Subtract()({ones({2, 2})}), ValueError);
  CHECK_THROWS_AS(layers::Maximum()({ones({2, 2}), ones({2, 3})}), ShapeError);
  CHECK_THROWS_AS(layers::Minimum()({ones({2, 2}), ones({3, 2})}), ShapeError);  // batch sizes
  CHECK_THROWS_AS(layers::Dot(1)({ones({2, 3}), ones({2, 4})}), ShapeError);
  CHECK_THROWS_AS(layers::Dot(0)({ones({2, 3}), ones({2, 3})}), ValueError);  // the batch axis
  CHECK_THROWS_AS(layers::Dot(3)({ones({2, 3}), ones({2, 3})}), ValueError);
}

TEST_CASE("Dot: batch_dot along the given axes, [B, 1] for two vectors, cosine with normalize", "[layers][merging]") {
  const Tensor a = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f64({1, 0, 1, 2, 2, 1}, {2, 3});
  // row 0: 1 + 0 + 3 = 4; row 1: 8 + 10 + 6 = 24
  const Tensor y = layers::Dot(1)({a, b});
  CHECK(y.shape() == Shape{2, 1});
  check_values(y, {4, 24}, 1e-12);
  // cosine: 4 / (sqrt(14) sqrt(2)), 24 / (sqrt(77) * 3)
  check_values(layers::Dot(-1, {.normalize = true})({a, b}), {4 / (std::sqrt(14.0) * std::sqrt(2.0)), 24 / (std::sqrt(77.0) * 3)}, 1e-9);
  // [B, 2, 3] . [B, 3, 2] with axes (2, 1) is a batched matmul: [B, 2, 2]
  const Tensor p = random::normal({2, 2, 3}, 0, 1, DType::float64);
  const Tensor q = random::normal({2, 3, 2}, 0, 1, DType::float64);
  const Tensor d = layers::Dot({2, 1})({p, q});
  CHECK(d.shape() == Shape{2, 2, 2});
  check_values(d, matmul(p, q).to_vector<double>(), 1e-12);
  // axes (1, 1) of [B, 3, 2] and [B, 3, 4]: out[b, i, j] = sum_k p[b, k, i] q[b, k, j] = p^T q
  const Tensor r = random::normal({2, 3, 4}, 0, 1, DType::float64);
  check_values(layers::Dot(1)({q, r}), matmul(q, r, true, false).to_vector<double>(), 1e-12);
  // a non-contiguous input (a transpose) gives the same numbers
  check_values(layers::Dot({1, 1})({transpose(p, {0, 2, 1}), q}), matmul(p, q).to_vector<double>(), 1e-12);
}

TEST_CASE("merge layers: float64 gradients match finite differences", "[layers][merging][gradcheck]") {
  const Tensor a = random::normal({2, 3}, 0, 1, DType::float64);
  const Tensor b = random::normal({2, 3}, 0, 1, DType::float64) + 3.0;  // keeps max/min away from ties
  layers::Average avg;
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return avg({in[0], in[1]}); }, {a, b});
  layers::Subtract subl;
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return subl({in[0], in[1]}); }, {a, b});
  layers::Maximum mx;
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return mx({in[0], in[1]}); }, {a, b});
  layers::Minimum mn;
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return mn({in[0], in[1]}); }, {a, b});
  layers::Dot dot(1, {.normalize = true});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return dot({in[0], in[1]}); }, {a, b});
  const Tensor p = random::normal({2, 2, 3}, 0, 1, DType::float64);
  const Tensor q = random::normal({2, 3, 2}, 0, 1, DType::float64);
  layers::Dot dot2({2, 1});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return dot2({in[0], in[1]}); }, {p, q});
}

TEST_CASE("merge layers survive a config round trip", "[layers][merging][config]") {
  const Tensor a = random::normal({2, 3}, 0, 1, DType::float64);
  const Tensor b = random::normal({2, 3}, 0, 1, DType::float64);
  layers::Average avg;
  check_round_trip(avg, {a, b});
  layers::Subtract s;
  check_round_trip(s, {a, b});
  layers::Maximum mx;
  check_round_trip(mx, {a, b});
  layers::Minimum mn;
  check_round_trip(mn, {a, b});
  layers::Dot dot({1, 1}, {.normalize = true});
  CHECK(dot.get_config()["axes"] == 1);
  CHECK(dot.get_config()["normalize"] == true);
  check_round_trip(dot, {a, b});
  const Tensor p = random::normal({2, 2, 3}, 0, 1, DType::float64);
  const Tensor q = random::normal({2, 3, 2}, 0, 1, DType::float64);
  layers::Dot dot2({2, 1});
  CHECK(dot2.get_config()["axes"] == nlohmann::json::array({2, 1}));
  check_round_trip(dot2, {p, q});
}

// ---- activation layers -------------------------------------------------------------------------

TEST_CASE("PReLU: relu(x) - alpha relu(-x), alpha per element of an example, shared axes of size 1", "[layers][activation]") {
  layers::PReLU p({.alpha_initializer = initializers::Constant(0.25)});
  const Tensor x = f64({-4, 2, -1, -8, 0, 3}, {2, 3});
  // negative entries times 0.25: -1, 2, -0.25, -2, 0, 3
  check_values(p(x), {-1, 2, -0.25, -2, 0, 3}, 1e-12);
  CHECK(p.alpha().shape() == Shape{3});
  layers::PReLU shared({.shared_axes = {1, 2}});
  shared(ones({2, 4, 5, 3}));
  CHECK(shared.alpha().shape() == Shape{1, 1, 3});  // Keras: input_shape[1:] with shared axes 1
  CHECK_THROWS_AS(shared(ones({2, 4, 5, 2})), ShapeError);
  CHECK_NOTHROW(shared(ones({2, 6, 7, 3})));  // shared axes may change size
  CHECK_THROWS_AS(layers::PReLU({.shared_axes = {0}}), ValueError);
  layers::PReLU bad({.shared_axes = {3}});
  CHECK_THROWS_AS(bad(ones({2, 3})), ValueError);
}

TEST_CASE("PReLU: gradients for the input and alpha, and a config round trip", "[layers][activation][gradcheck]") {
  layers::PReLU p({.alpha_initializer = initializers::Constant(0.3)});
  const Tensor x = f64({-1.5, 0.7, -0.2, 2.0, -3.0, 0.4}, {2, 3});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return p(in[0]); }, {x});
  {
    GradientTape tape;
    const Tensor y = reduce_sum(p(x));
    // d/dalpha_j sum = -sum_b relu(-x[b, j]); the columns are {-1.5, 2.0}, {0.7, -3.0},
    // {-0.2, 0.4}: -1.5, -3.0, -0.2
    const Tensor g = tape.gradient(y, p.alpha());
    check_values(g, {-1.5, -3.0, -0.2}, 1e-6);
  }
  const auto c = p.get_config();
  CHECK(c.contains("alpha_constraint"));
  const auto copy = layers::from_config("PReLU", c);
  copy->build(x.shape());
  copy->weights()[0]->assign(p.alpha().value());
  check_values((*copy)(x), p(x).to_vector<double>(), 1e-12);
}

TEST_CASE("ELU and ThresholdedReLU: values, gradients, errors, config", "[layers][activation]") {
  const Tensor x = f64({-2, -0.5, 0.5, 1.0, 1.5}, {1, 5});
  // ELU(alpha = 0.5): 0.5 (e^x - 1) for x <= 0
  check_values(layers::ELU(0.5)(x), {0.5 * (std::exp(-2.0) - 1), 0.5 * (std::exp(-0.5) - 1), 0.5, 1.0, 1.5}, 1e-12);
  // ThresholdedReLU(theta = 1): x where x > 1 (1 itself gives 0)
  check_values(layers::ThresholdedReLU()(x), {0, 0, 0, 0, 1.5}, 1e-12);
  check_values(layers::ThresholdedReLU(0.0)(x), {0, 0, 0.5, 1.0, 1.5}, 1e-12);
  CHECK_THROWS_AS(layers::ThresholdedReLU(-1.0), ValueError);
  layers::ELU elu(0.7);
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return elu(in[0]); }, {x});
  layers::ThresholdedReLU t(0.7);
  const Tensor away = f64({-1, 0.2, 0.9, 2}, {2, 2});  // away from theta
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return t(in[0]); }, {away});
  check_round_trip(elu, {x});
  check_round_trip(t, {x});
  CHECK(t.get_config()["theta"] == 0.7);
  const Tensor empty = zeros({0, 3});
  CHECK(layers::ELU()(empty).shape() == Shape{0, 3});
}

// ---- Identity, Lambda --------------------------------------------------------------------------

TEST_CASE("Identity returns its input, mask included", "[layers][core]") {
  const Tensor x = layers::with_mask(ones({2, 3}), constant(std::vector<bool>{true, false}, {2}));
  const Tensor y = layers::Identity()(x);
  CHECK(y.to_vector<float>() == x.to_vector<float>());
  CHECK(layers::get_mask(y).defined());
  layers::Identity id;
  check_round_trip(id, {ones({2, 2})});
}

TEST_CASE("Lambda: registered functions are serialisable, bare callables are not", "[layers][core]") {
  layers::register_lambda("test_square_plus_one", [](const Tensor& x) { return square(x) + 1.0; });
  CHECK(layers::has_lambda("test_square_plus_one"));
  layers::Lambda lam("test_square_plus_one");
  const Tensor x = f64({1, -2, 3}, {1, 3});
  check_values(lam(x), {2, 5, 10}, 1e-12);
  CHECK(lam.get_config()["function"] == "test_square_plus_one");
  check_round_trip(lam, {x});
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return lam(in[0]); }, {x});

  layers::register_lambda("test_pair_sum", layers::LambdaFn([](const std::vector<Tensor>& xs) { return xs.at(0) + xs.at(1); }));
  layers::Lambda pair("test_pair_sum");
  check_values(pair({x, x}), {2, -4, 6}, 1e-12);

  layers::Lambda bare(std::function<Tensor(const Tensor&)>([](const Tensor& t) { return t * 2.0; }));
  check_values(bare(x), {2, -4, 6}, 1e-12);
  CHECK_THROWS_AS(bare.get_config(), ValueError);
  CHECK_THROWS_AS(layers::Lambda("no_such_function_registered"), ValueError);
  CHECK_THROWS_AS(layers::register_lambda("", [](const Tensor& t) { return t; }), ValueError);
}
