// The regularization layers (keel/layers/regularization.hpp): identity at inference, the noise
// statistics of seeded training draws against Keras' definitions, whole-map dropping of the
// spatial dropouts, AlphaDropout's affine correction, ActivityRegularization's loss, float64
// gradients, errors and config round trips.
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
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
double var_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}
}  // namespace

TEST_CASE("the noise layers are the identity at inference", "[layers][regularization]") {
  const Tensor x = random::normal({4, 5, 3}, 0, 1, DType::float64);
  const auto want = x.to_vector<double>();
  check_values(layers::GaussianNoise(0.5)(x), want, 0);
  check_values(layers::GaussianDropout(0.5)(x), want, 0);
  check_values(layers::AlphaDropout(0.5)(x), want, 0);
  check_values(layers::SpatialDropout1D(0.5)(x), want, 0);
  check_values(layers::SpatialDropout2D(0.5)(reshape(x, {4, 5, 3, 1})), want, 0);
  check_values(layers::SpatialDropout3D(0.5)(reshape(x, {4, 5, 3, 1, 1})), want, 0);
}

TEST_CASE("GaussianNoise adds N(0, stddev^2) in training; seeded draws repeat per call index", "[layers][regularization]") {
  const Tensor x = full({200, 100}, 3.0, DType::float64);
  layers::GaussianNoise a(0.4, {.seed = 7});
  const auto y = a(x, true).to_vector<double>();
  // 20000 draws: the mean's standard error is 0.4 / sqrt(20000) = 0.0028; the variance's about
  // 0.16 * sqrt(2 / 20000) = 0.0016. Bounds of several standard errors.
  CHECK(mean_of(y) == Approx(3.0).margin(0.015));
  CHECK(var_of(y) == Approx(0.16).margin(0.01));
  layers::GaussianNoise b(0.4, {.seed = 7});
  CHECK(b(x, true).to_vector<double>() == y);  // the same seed, the same first draw
  CHECK(a(x, true).to_vector<double>() != y);  // the next call draws anew
  CHECK_THROWS_AS(layers::GaussianNoise(1.5), ValueError);
  CHECK_THROWS_AS(layers::GaussianNoise(-0.1), ValueError);
}

TEST_CASE("GaussianDropout multiplies by N(1, rate / (1 - rate)) in training", "[layers][regularization]") {
  const Tensor x = full({200, 100}, 2.0, DType::float64);
  layers::GaussianDropout g(0.2, {.seed = 3});
  const auto y = g(x, true).to_vector<double>();
  // x * n: mean 2, variance 4 * 0.2 / 0.8 = 1 (standard errors 0.007 and 0.01)
  CHECK(mean_of(y) == Approx(2.0).margin(0.04));
  CHECK(var_of(y) == Approx(1.0).margin(0.06));
  CHECK_THROWS_AS(layers::GaussianDropout(1.0), ValueError);
}

TEST_CASE("AlphaDropout keeps a SELU activation's mean and variance and uses Keras' affine map", "[layers][regularization]") {
  const double rate = 0.3;
  const double alpha_p = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
  const double a = std::pow((1 - rate) * (1 + rate * alpha_p * alpha_p), -0.5);
  const double b = -a * alpha_p * rate;
  const Tensor x = random::normal({200, 100}, 0, 1, DType::float64);
  layers::AlphaDropout d(rate, {.seed = 11});
  const Tensor y = d(x, true);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  // Each output is a x + b (kept) or a alpha' + b (dropped).
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const bool kept = std::abs(yv[i] - (a * xv[i] + b)) < 1e-9;
    const bool drop = std::abs(yv[i] - (a * alpha_p + b)) < 1e-9;
    REQUIRE((kept || drop));
    if (!kept) ++dropped;
  }
  // about 30% dropped (standard error sqrt(0.21 / 20000) = 0.003)
  CHECK(static_cast<double>(dropped) / xv.size() == Approx(rate).margin(0.015));
  // For zero-mean unit-variance inputs the output keeps mean 0 and variance 1 (the point of it).
  CHECK(mean_of(yv) == Approx(0.0).margin(0.03));
  CHECK(var_of(yv) == Approx(1.0).margin(0.05));
  // noise_shape {-1, 1}: one decision per row
  layers::AlphaDropout rows(0.5, {.noise_shape = {-1, 1}, .seed = 2});
  const auto r = rows(x, true).to_vector<double>();
  const double a5 = std::pow(0.5 * (1 + 0.5 * alpha_p * alpha_p), -0.5), b5 = -a5 * alpha_p * 0.5;
  for (std::size_t row = 0; row < 200; ++row) {
    const bool drop0 = std::abs(r[row * 100] - (a5 * alpha_p + b5)) < 1e-9 &&
                       std::abs(r[row * 100] - (a5 * xv[row * 100] + b5)) > 1e-9;
    for (std::size_t j = 1; j < 100; ++j) {
      const bool dropj = std::abs(r[row * 100 + j] - (a5 * xv[row * 100 + j] + b5)) > 1e-9;
      CHECK(dropj == drop0);
    }
  }
  CHECK_THROWS_AS(rows(ones({2, 3, 4}), true), ShapeError);  // noise_shape rank
  CHECK_THROWS_AS(layers::AlphaDropout(1.0), ValueError);
  CHECK_THROWS_AS(layers::AlphaDropout(0.5, {.noise_shape = {0, 1}}), ValueError);
}

TEST_CASE("SpatialDropout drops whole channels and scales the kept ones by 1 / (1 - rate)", "[layers][regularization]") {
  const Tensor x = ones({8, 6, 5, 10}, DType::float64);
  layers::SpatialDropout2D d(0.5, {.seed = 5});
  const auto y = d(x, true).to_vector<double>();
  std::size_t dropped = 0;
  for (std::size_t b = 0; b < 8; ++b)
    for (std::size_t c = 0; c < 10; ++c) {
      const double first = y[b * 300 + c];
      CHECK((first == 0.0 || first == 2.0));
      if (first == 0.0) ++dropped;
      for (std::size_t p = 0; p < 30; ++p) CHECK(y[b * 300 + p * 10 + c] == first);  // the whole map
    }
  CHECK(dropped > 10);  // of 80 maps, about 40; both outcomes happen
  CHECK(dropped < 70);
  // channels_first: the maps are axis 1
  layers::SpatialDropout2D cf(0.5, {.data_format = "channels_first", .seed = 5});
  const auto z = cf(ones({2, 3, 4, 4}, DType::float64), true).to_vector<double>();
  for (std::size_t m = 0; m < 6; ++m)
    for (std::size_t p = 1; p < 16; ++p) CHECK(z[m * 16 + p] == z[m * 16]);
  layers::SpatialDropout1D d1(0.5);
  CHECK_THROWS_AS(d1(ones({2, 3})), ShapeError);
  CHECK_THROWS_AS(layers::SpatialDropout2D(0.5, {.data_format = "nchw"}), ValueError);
  CHECK_THROWS_AS(layers::SpatialDropout3D(-0.5), ValueError);
  layers::SpatialDropout3D d3(0.25, {.seed = 1});
  CHECK(d3(ones({2, 2, 2, 2, 3}), true).shape() == Shape{2, 2, 2, 2, 3});
}

TEST_CASE("ActivityRegularization adds l1 sum|x| + l2 sum x^2 to the losses and returns x", "[layers][regularization]") {
  layers::ActivityRegularization r({.l1 = 0.1, .l2 = 0.01});
  const Tensor x = constant(std::vector<double>{1, -2, 3, -4}, {2, 2}, DType::float64);
  check_values(r(x), x.to_vector<double>(), 0);
  const auto losses = r.losses();
  REQUIRE(losses.size() == 1);
  // 0.1 * (1 + 2 + 3 + 4) + 0.01 * (1 + 4 + 9 + 16) = 1.0 + 0.3
  CHECK(losses[0].item<double>() == Approx(1.3).epsilon(1e-6));
  CHECK_THROWS_AS(layers::ActivityRegularization({.l1 = -1}), ValueError);
  // the loss reaches the gradient: d/dx (0.1 |x| + 0.01 x^2) = 0.1 sign(x) + 0.02 x
  GradientTape tape;
  tape.watch(x);
  r(x);
  const Tensor g = tape.gradient(r.losses()[0], x);
  check_values(g, {0.12, -0.14, 0.16, -0.18}, 1e-9);
}

TEST_CASE("the noise layers' gradients in training (the noise is fixed per call)", "[layers][regularization][gradcheck]") {
  const Tensor x = random::normal({3, 4, 2}, 0, 1, DType::float64);
  // A seeded layer draws the same noise for the same call index: rebuilding it for every
  // evaluation makes the function of x deterministic for the finite differences.
  keel_test::check_gradients([](const std::vector<Tensor>& in) { return layers::GaussianNoise(0.3, {.seed = 1})(in[0], true); }, {x});
  keel_test::check_gradients([](const std::vector<Tensor>& in) { return layers::GaussianDropout(0.3, {.seed = 1})(in[0], true); }, {x});
  keel_test::check_gradients([](const std::vector<Tensor>& in) { return layers::AlphaDropout(0.3, {.seed = 1})(in[0], true); }, {x});
  keel_test::check_gradients([](const std::vector<Tensor>& in) { return layers::SpatialDropout1D(0.3, {.seed = 1})(in[0], true); }, {x});
  keel_test::check_gradients([](const std::vector<Tensor>& in) { return layers::ActivityRegularization({.l2 = 0.5})(in[0]); }, {x});
}

TEST_CASE("the regularization layers survive a config round trip", "[layers][regularization][config]") {
  const Tensor x = random::normal({2, 3, 4}, 0, 1, DType::float64);
  const auto round_trip = [&](layers::Layer& l, const Tensor& in) {
    const auto copy = layers::from_config(l.class_name(), l.get_config());
    CHECK(copy->get_config() == l.get_config());
    // a seeded layer and its copy draw the same first training noise
    check_values((*copy)(in, true), l(in, true).to_vector<double>(), 1e-12);
  };
  layers::GaussianNoise gn(0.2, {.seed = 4});
  round_trip(gn, x);
  layers::GaussianDropout gd(0.2, {.seed = 4});
  round_trip(gd, x);
  layers::AlphaDropout ad(0.2, {.noise_shape = {-1, 1, 4}, .seed = 4});
  CHECK(ad.get_config()["noise_shape"] == nlohmann::json::array({nullptr, 1, 4}));
  round_trip(ad, x);
  layers::SpatialDropout1D s1(0.3, {.seed = 9});
  round_trip(s1, x);
  layers::SpatialDropout2D s2(0.3, {.data_format = "channels_first", .seed = 9});
  CHECK(s2.get_config()["data_format"] == "channels_first");
  round_trip(s2, reshape(x, {2, 3, 2, 2}));
  layers::ActivityRegularization ar({.l1 = 0.5});
  round_trip(ar, x);
}
