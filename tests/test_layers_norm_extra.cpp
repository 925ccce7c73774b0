// GroupNormalization, UnitNormalization and Normalization (keel/layers/normalization.hpp):
// values against Keras' formulas worked by hand / recomputed in plain C++, adapt()'s statistics,
// float64 gradients, errors and config round trips.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "layer_checks.hpp"

using namespace keel;
using keel_test::check_values;

TEST_CASE("GroupNormalization normalises each group of channels over the non-batch axes", "[layers][norm]") {
  // [1, 2, 4] with 2 groups of 2 channels: group 0 = channels {0, 1} at both steps.
  const Tensor x = constant(std::vector<double>{1, 2, 10, 20, 3, 4, 30, 40}, {1, 2, 4}, DType::float64);
  layers::GroupNormalization g({.groups = 2, .epsilon = 1e-3});
  const Tensor y = g(x);
  // group 0 holds {1, 2, 3, 4}: mean 2.5, biased variance 1.25; group 1 {10, 20, 30, 40}: 25, 125.
  const double s0 = 1 / std::sqrt(1.25 + 1e-3), s1 = 1 / std::sqrt(125 + 1e-3);
  check_values(y, {-1.5 * s0, -0.5 * s0, -15 * s1, -5 * s1, 0.5 * s0, 1.5 * s0, 5 * s1, 15 * s1}, 1e-9);
  CHECK(g.gamma().shape() == Shape{4});
  // groups = -1: one group per channel (instance norm); axis 1 (channels first)
  layers::GroupNormalization inst({.groups = -1, .axis = 1});
  const Tensor z = inst(transpose(x, {0, 2, 1}));  // [1, 4, 2], non-contiguous
  // channel 0 holds {1, 3}: mean 2, variance 1 -> -1/sqrt(1.001), 1/sqrt(1.001)
  const double s = 1 / std::sqrt(1 + 1e-3);
  CHECK(z.to_vector<double>()[0] == Approx(-s));
  CHECK(z.to_vector<double>()[1] == Approx(s));
  layers::GroupNormalization three({.groups = 3});
  CHECK_THROWS_AS(three(ones({2, 4})), ValueError);   // 3 does not divide 4
  layers::GroupNormalization many({.groups = 8});
  CHECK_THROWS_AS(many(ones({2, 4})), ValueError);    // more groups than channels
  CHECK_THROWS_AS(layers::GroupNormalization({.groups = 0}), ValueError);
  CHECK_THROWS_AS(g(ones({1, 2, 6}, DType::float64)), ShapeError);  // built for 4 channels
}

TEST_CASE("GroupNormalization: gradients and a config round trip", "[layers][norm][gradcheck]") {
  layers::GroupNormalization g({.groups = 2, .beta_initializer = initializers::Constant(0.2),
                                .gamma_initializer = initializers::Constant(1.5)});
  const Tensor x = random::normal({2, 3, 4}, 0, 1, DType::float64);
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return g(in[0]); }, {x}, 1e-6, 1e-5);
  const auto c = g.get_config();
  CHECK(c["groups"] == 2);
  const auto copy = layers::from_config("GroupNormalization", c);
  (*copy)(x);
  for (std::size_t i = 0; i < copy->weights().size(); ++i) copy->weights()[i]->assign(g.weights()[i]->value());
  check_values((*copy)(x), g(x).to_vector<double>(), 1e-12);
}

TEST_CASE("UnitNormalization gives unit L2 norm along the axes", "[layers][norm]") {
  const Tensor x = constant(std::vector<double>{3, 4, 0, 0, 1, 1}, {3, 2}, DType::float64);
  // rows: (3, 4)/5; (0, 0) stays 0 (the 1e-12 floor); (1, 1)/sqrt(2)
  check_values(layers::UnitNormalization()(x), {0.6, 0.8, 0, 0, 1 / std::sqrt(2.0), 1 / std::sqrt(2.0)}, 1e-12);
  const Tensor y = layers::UnitNormalization({.axis = {1, 2}})(random::normal({2, 3, 4}, 0, 1, DType::float64));
  const Tensor norms = reduce_sum(square(y), {1, 2});
  check_values(norms, {1, 1}, 1e-12);
  layers::UnitNormalization u({.axis = 0});
  const Tensor p = random::normal({3, 2}, 0, 1, DType::float64);
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return u(in[0]); }, {p});
  const auto copy = layers::from_config("UnitNormalization", u.get_config());
  check_values((*copy)(p), u(p).to_vector<double>(), 1e-12);
  CHECK_THROWS_AS(layers::UnitNormalization({.axis = 2})(ones({2, 2})), ValueError);
}

TEST_CASE("Normalization: adapt() computes Keras' per-feature mean and biased variance", "[layers][norm]") {
  const Tensor data = constant(std::vector<double>{1, 10, 2, 20, 3, 30, 6, 60}, {4, 2}, DType::float64);
  layers::Normalization n;
  n.adapt(data);
  // feature 0: {1, 2, 3, 6}: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5; feature 1: 10x: 30, 350
  check_values(n.mean(), {3, 30}, 1e-6);
  check_values(n.variance(), {3.5, 350}, 1e-4);
  const Tensor y = n(constant(std::vector<double>{3 + std::sqrt(3.5), 30}, {1, 2}, DType::float64));
  check_values(y, {1, 0}, 1e-5);
  // the adapted output has mean 0 and variance 1 per feature
  const Tensor z = n(data);
  check_values(reduce_mean(z, {0}), {0, 0}, 1e-5);
  check_values(reduce_mean(square(z), {0}), {1, 1}, 1e-5);
  // invert undoes it
  layers::Normalization inv({.mean = {3, 30}, .variance = {3.5, 350}, .invert = true});
  check_values(inv(z), data.to_vector<double>(), 1e-4);
  // axis = {} (Keras None): one scalar mean / variance
  layers::Normalization all({.axis = {}});
  all.adapt(data);
  CHECK(all.mean().to_vector<double>()[0] == Approx(16.5));
  // fixed statistics, one value broadcast
  layers::Normalization fixed({.mean = {2}, .variance = {4}});
  check_values(fixed(data), {-0.5, 4, 0, 9, 0.5, 14, 2, 29}, 1e-6);
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return fixed(in[0]); }, {data});
  CHECK_THROWS_AS(layers::Normalization({.mean = {1}}), ValueError);
  layers::Normalization wrong({.mean = {1, 2, 3}, .variance = {1, 1, 1}});
  CHECK_THROWS_AS(wrong(data), ValueError);
  CHECK_THROWS_AS(n(ones({2, 3}, DType::float64)), ShapeError);
  layers::Normalization batch_axis({.axis = {0}});
  CHECK_THROWS_AS(batch_axis.adapt(data), ValueError);
}

TEST_CASE("Normalization survives a config round trip with fixed statistics", "[layers][norm][config]") {
  layers::Normalization fixed({.mean = {1, 2}, .variance = {4, 9}});
  const Tensor x = random::normal({3, 2}, 0, 1, DType::float64);
  const auto c = fixed.get_config();
  CHECK(c["axis"] == -1);
  const auto copy = layers::from_config("Normalization", c);
  check_values((*copy)(x), fixed(x).to_vector<double>(), 1e-12);
}
