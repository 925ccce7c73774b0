// BatchNormalization and LayerNormalization: weight counts against Keras (4*C with 2*C
// non-trainable; 2*C), values worked out by hand, the moving statistics after one training
// call (moving = 0.99 * old + 0.01 * batch) and inference with them, freezing, other axes,
// gradients, configs and errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

void check_values(const Tensor& y, const std::vector<double>& expected, double eps = 1e-5) {
  const auto got = y.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(eps));
  }
}

std::int64_t count(const std::vector<Variable*>& vars) {
  std::int64_t n = 0;
  for (const auto* v : vars) n += v->shape().num_elements();
  return n;
}

// Four examples of two features: feature 0 = 1 2 3 4, feature 1 = 10 20 30 40.
Tensor four_by_two() { return constant({1.f, 10.f, 2.f, 20.f, 3.f, 30.f, 4.f, 40.f}, Shape{4, 2}); }

}  // namespace

TEST_CASE("BatchNormalization has 4*C weights, 2*C of them non-trainable") {
  layers::BatchNormalization bn;
  bn(zeros({2, 5, 5, 8}));
  CHECK(bn.count_params() == 4 * 8);
  CHECK(count(bn.trainable_weights()) == 2 * 8);
  CHECK(count(bn.non_trainable_weights()) == 2 * 8);
  const auto w = bn.weights();
  REQUIRE(w.size() == 4);
  // Keras' names and order: gamma, beta, moving_mean, moving_variance.
  CHECK(w[0]->name() == bn.name() + "/gamma");
  CHECK(w[1]->name() == bn.name() + "/beta");
  CHECK(w[2]->name() == bn.name() + "/moving_mean");
  CHECK(w[3]->name() == bn.name() + "/moving_variance");
  CHECK_FALSE(bn.moving_mean().trainable());
  // Keras' initial values: gamma 1, beta 0, moving mean 0, moving variance 1.
  check_values(bn.gamma().value(), std::vector<double>(8, 1.0));
  check_values(bn.moving_variance().value(), std::vector<double>(8, 1.0));

  layers::BatchNormalization no_center({.center = false});
  no_center(zeros({3, 4}));
  CHECK(no_center.count_params() == 3 * 4);
  CHECK_THROWS_WITH(no_center.beta(), Contains("center"));
  layers::BatchNormalization neither({.center = false, .scale = false});
  neither(zeros({3, 4}));
  CHECK(neither.count_params() == 2 * 4);
  CHECK(neither.trainable_weights().empty());
}

TEST_CASE("BatchNormalization in training uses the batch statistics and updates the moving ones") {
  layers::BatchNormalization bn;
  const Tensor x = four_by_two();
  bn(x);  // builds; inference, so nothing moves yet
  check_values(bn.moving_mean().value(), {0, 0});
  check_values(bn.moving_variance().value(), {1, 1});
  bn.gamma().assign(constant({2.f, 0.5f}, Shape{2}));
  bn.beta().assign(constant({1.f, -1.f}, Shape{2}));

  // Batch mean (2.5, 25); biased variance: deviations +-0.5, +-1.5 give 1.25, and 125 for
  // feature 1 (ten times the deviations).
  const Tensor y = bn(x, /*training=*/true);
  const double s0 = std::sqrt(1.25 + 1e-3), s1 = std::sqrt(125 + 1e-3);
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    expected.push_back(2 * ((i + 1) - 2.5) / s0 + 1);
    expected.push_back(0.5 * (10 * (i + 1) - 25) / s1 - 1);
  }
  check_values(y, expected);

  // moving = 0.99 * old + 0.01 * batch:
  //   mean     0.99 * 0 + 0.01 * (2.5, 25)   = (0.025, 0.25)
  //   variance 0.99 * 1 + 0.01 * (1.25, 125) = (1.0025, 2.24)
  check_values(bn.moving_mean().value(), {0.025, 0.25}, 1e-6);
  check_values(bn.moving_variance().value(), {1.0025, 2.24}, 1e-6);

  // Inference now normalises with those: (x - moving_mean) / sqrt(moving_variance + eps).
  const Tensor z = bn(x);
  expected.clear();
  for (int i = 0; i < 4; ++i) {
    expected.push_back(2 * ((i + 1) - 0.025) / std::sqrt(1.0025 + 1e-3) + 1);
    expected.push_back(0.5 * (10 * (i + 1) - 0.25) / std::sqrt(2.24 + 1e-3) - 1);
  }
  check_values(z, expected, 1e-4);
  check_values(bn.moving_mean().value(), {0.025, 0.25}, 1e-6);  // inference changes nothing

  // A second training call moves them again from there.
  bn(x, true);
  check_values(bn.moving_mean().value(), {0.99 * 0.025 + 0.025, 0.99 * 0.25 + 0.25}, 1e-6);
}

TEST_CASE("BatchNormalization momentum and epsilon options change the update and the scale") {
  layers::BatchNormalization bn({.momentum = 0.5, .epsilon = 0.75});
  const Tensor x = four_by_two();
  bn(x, true);
  check_values(bn.moving_mean().value(), {1.25, 12.5}, 1e-6);      // 0.5 * 0 + 0.5 * batch
  check_values(bn.moving_variance().value(), {1.125, 63}, 1e-4);   // 0.5 * 1 + 0.5 * batch
  // Feature 0 of the first example: (1 - 2.5) / sqrt(1.25 + 0.75) in training.
  CHECK(bn(x, true).to_vector<double>()[0] == Approx(-1.5 / std::sqrt(2.0)));
}

TEST_CASE("BatchNormalization at inference uses the moving statistics and leaves them alone") {
  layers::BatchNormalization bn;
  const Tensor x = four_by_two();
  bn(x);
  bn.moving_mean().assign(constant({1.f, 20.f}, Shape{2}));
  bn.moving_variance().assign(constant({4.f, 100.f}, Shape{2}));
  std::vector<double> expected;
  for (int i = 0; i < 4; ++i) {
    expected.push_back(((i + 1) - 1) / std::sqrt(4 + 1e-3));
    expected.push_back((10 * (i + 1) - 20) / std::sqrt(100 + 1e-3));
  }
  check_values(bn(x, false), expected);
  check_values(bn.moving_mean().value(), {1, 20});
  check_values(bn.moving_variance().value(), {4, 100});
}

TEST_CASE("a frozen BatchNormalization stays in inference mode in a training call") {
  layers::BatchNormalization bn;
  const Tensor x = four_by_two();
  const Tensor inference = bn(x);
  bn.set_trainable(false);
  CHECK(bn.trainable_weights().empty());
  CHECK(count(bn.non_trainable_weights()) == 8);
  check_values(bn(x, true), inference.to_vector<double>());
  check_values(bn.moving_mean().value(), {0, 0});
}

TEST_CASE("BatchNormalization with axis 1 normalises channels_first features") {
  const Tensor x = random::normal({3, 2, 4, 5}, 1.0, 2.0);  // [N, C, H, W]
  layers::BatchNormalization first({.axis = 1});
  layers::BatchNormalization last;
  const Tensor y_first = first(x, true);
  const Tensor y_last = last(transpose(x, {0, 2, 3, 1}), true);
  CHECK(first.count_params() == 4 * 2);
  CHECK(first.gamma().shape() == Shape{2});
  CHECK(y_first.shape() == x.shape());
  check_values(transpose(y_first, {0, 2, 3, 1}), y_last.to_vector<double>(), 1e-4);
  check_values(first.moving_mean().value(), last.moving_mean().value().to_vector<double>(), 1e-6);
  check_values(first.moving_variance().value(), last.moving_variance().value().to_vector<double>(), 1e-5);
}

TEST_CASE("LayerNormalization has 2*C weights and normalises each example on its own") {
  layers::LayerNormalization ln;
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f, 10.f, 10.f, 10.f, 30.f}, Shape{2, 4});
  ln(x);
  CHECK(ln.count_params() == 2 * 4);
  CHECK(ln.gamma().shape() == Shape{4});
  CHECK(ln.gamma().name() == ln.name() + "/gamma");
  ln.gamma().assign(constant({1.f, 2.f, 1.f, 1.f}, Shape{4}));
  ln.beta().assign(constant({0.f, 0.f, 0.f, 5.f}, Shape{4}));
  // Row 0: mean 2.5, variance 1.25. Row 1: mean 15, variance (3 * 25 + 225) / 4 = 75.
  const double r0 = std::sqrt(1.25 + 1e-3), r1 = std::sqrt(75 + 1e-3);
  check_values(ln(x), {-1.5 / r0, 2 * -0.5 / r0, 0.5 / r0, 1.5 / r0 + 5,  //
                       -5 / r1, 2 * -5 / r1, -5 / r1, 15 / r1 + 5});
  // Training makes no difference: there are no statistics to keep.
  check_values(ln(x, true), ln(x).to_vector<double>());
}

TEST_CASE("LayerNormalization over several axes has gamma and beta shaped like them") {
  layers::LayerNormalization ln({.axis = {1, 2}});
  const Tensor x = random::normal({2, 3, 4});
  const Tensor y = ln(x);
  CHECK(ln.gamma().shape() == Shape{3, 4});
  CHECK(ln.count_params() == 2 * 12);
  // Each example has mean 0 and variance 1 / (1 + eps / var) over its 12 values.
  const auto v = y.to_vector<double>();
  const auto xv = x.to_vector<double>();
  for (int n = 0; n < 2; ++n) {
    double mean = 0, var = 0, xmean = 0, xvar = 0;
    for (int i = 0; i < 12; ++i) {
      mean += v[n * 12 + i] / 12;
      xmean += xv[n * 12 + i] / 12;
    }
    for (int i = 0; i < 12; ++i) {
      var += (v[n * 12 + i] - mean) * (v[n * 12 + i] - mean) / 12;
      xvar += (xv[n * 12 + i] - xmean) * (xv[n * 12 + i] - xmean) / 12;
    }
    CHECK(mean == Approx(0).margin(1e-5));
    CHECK(var == Approx(xvar / (xvar + 1e-3)).epsilon(1e-4));
  }
  layers::LayerNormalization plain({.center = false, .scale = false});
  plain(x);
  CHECK(plain.count_params() == 0);
  CHECK_THROWS_AS(plain.gamma(), ValueError);
}

TEST_CASE("gradients flow through BatchNormalization and LayerNormalization") {
  const auto input = [](const Shape& s) { return random::normal(s, 0.5, 2.0, DType::float64); };
  layers::BatchNormalization bn({.axis = 1});
  check_gradients([&](const std::vector<Tensor>& in) { return bn(in[0], true); }, {input({4, 3, 2})}, 1e-6, 1e-5);
  check_gradients([&](const std::vector<Tensor>& in) { return bn(in[0], false); }, {input({4, 3, 2})});
  layers::LayerNormalization ln({.axis = {-2, -1}});
  check_gradients([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {input({2, 3, 4})}, 1e-6, 1e-5);
}

TEST_CASE("a training step of BatchNormalization under a GradientTape reaches gamma and beta") {
  layers::BatchNormalization bn;
  const Tensor x = four_by_two();
  bn(x);
  GradientTape tape;
  const Tensor y = bn(x, true);  // also assigns the moving statistics, which the tape does not keep
  const Tensor loss = reduce_sum(y * constant({1.f, 2.f}, Shape{2}));
  const auto grads = tape.gradient(loss, bn.trainable_weights());
  REQUIRE(grads.size() == 2);
  // d/dbeta = sum over the batch of the weights (4 examples); d/dgamma = sum of the normalised
  // values, which is 0 for every feature.
  check_values(grads[1], {4, 8});
  check_values(grads[0], {0, 0}, 1e-4);
  check_values(bn.moving_mean().value(), {0.025, 0.25}, 1e-6);
}

TEST_CASE("normalisation get_config carries Keras' options") {
  const auto b = layers::BatchNormalization({.gamma_regularizer = "l1"}).get_config();
  CHECK(b["axis"] == -1);
  CHECK(b["momentum"].get<double>() == Approx(0.99));
  CHECK(b["epsilon"].get<double>() == Approx(1e-3));
  CHECK(b["center"] == true);
  CHECK(b["scale"] == true);
  CHECK(b["moving_variance_initializer"] == "ones");
  CHECK(b["gamma_regularizer"]["class_name"] == "L1");
  CHECK(layers::BatchNormalization().class_name() == "BatchNormalization");
  const auto l = layers::LayerNormalization({.axis = {1, 2}, .epsilon = 1e-5}).get_config();
  CHECK(l["axis"] == nlohmann::json::array({1, 2}));
  CHECK(l["epsilon"].get<double>() == Approx(1e-5));
  CHECK(layers::LayerNormalization().get_config()["axis"] == -1);
}

TEST_CASE("bad normalisation arguments and inputs are errors naming the layer") {
  CHECK_THROWS_WITH(layers::BatchNormalization({.momentum = 1.5, .name = "bn_x"}),
                    Contains("bn_x") && Contains("momentum") && Contains("1.5"));
  CHECK_THROWS_AS(layers::BatchNormalization({.epsilon = 0}), ValueError);
  CHECK_THROWS_AS(layers::LayerNormalization({.epsilon = -1}), ValueError);

  layers::BatchNormalization bn({.name = "bn_y"});
  CHECK_THROWS_AS(bn(zeros({4})), ShapeError);
  bn(zeros({4, 3}));
  CHECK(bn(zeros({7, 3})).shape() == Shape{7, 3});  // another batch size is fine
  CHECK_THROWS_WITH(bn(zeros({4, 5})), Contains("bn_y") && Contains("[4,5]") && Contains("[4,3]"));
  CHECK_THROWS_AS(bn(zeros({4, 5})), ShapeError);
  CHECK_THROWS_AS(bn(zeros({2, 4, 3})), ShapeError);
  CHECK_THROWS_WITH(layers::BatchNormalization({.axis = 3})(zeros({2, 3})), Contains("axis"));
  CHECK_THROWS_WITH(bn(zeros({0, 3}), true), Contains("bn_y"));  // no statistics for an empty batch

  layers::LayerNormalization ln({.axis = 2, .name = "ln_z"});
  CHECK_THROWS_WITH(ln(zeros({2, 3})), Contains("ln_z") && Contains("axis"));
  layers::LayerNormalization ln2;
  ln2(zeros({2, 3}));
  CHECK_THROWS_AS(ln2(zeros({2, 4})), ShapeError);
  CHECK_THROWS_AS(layers::LayerNormalization({.axis = {1, -1}})(zeros({2, 3})), ValueError);
}

TEST_CASE("a functional CNN with BatchNormalization trains under a GradientTape and its loss falls") {
  random::set_seed(5);
  const Tensor inputs = models::Input(Shape{6, 6, 2});
  Tensor h = layers::RandomFlip("horizontal", {.seed = 1})(inputs);
  h = layers::Conv2D(4, {3, 3}, {.padding = "same"})(h);
  h = layers::BatchNormalization()(h);
  h = layers::MaxPooling2D()(h);
  h = layers::GlobalAveragePooling2D()(h);
  const Tensor outputs = layers::Dense(1)(h);
  models::Model model(inputs, outputs);
  REQUIRE(model.non_trainable_weights().size() == 2);  // the moving statistics

  // A target that a horizontal flip does not change: the mean of channel 0 (times 3).
  const Tensor x = random::normal({16, 6, 6, 2});
  const Tensor y = reshape(reduce_mean(slice(x, {0, 0, 0, 0}, {-1, -1, -1, 1}), {1, 2, 3}) * 3.0, Shape{16, 1});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(model(x, /*training=*/true) - y));
    const auto weights = model.trainable_weights();
    const auto grads = tape.gradient(loss, weights);
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i]->assign_sub(grads[i] * 0.1);
    (step == 0 ? first : last) = loss.item<double>();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.5 * first);
  // Sixty training calls moved the statistics away from their initial 0 and 1.
  const auto mean = model.non_trainable_weights()[0]->value().to_vector<double>();
  CHECK(std::any_of(mean.begin(), mean.end(), [](double v) { return v != 0; }));
  CHECK(model(x).shape() == Shape{16, 1});
}

TEST_CASE("BatchNormalization computes its batch statistics over unmasked steps only", "[layers][masking]") {
  // x = [1, 2, 100] over three steps of one feature; the step holding 100 is masked.
  // Keras 3's masked moments: mean = (1 + 2) / (2 + 1e-7) = 1.5 (to 1e-7),
  // var = ((1 - 1.5)^2 + (2 - 1.5)^2) / 2 = 0.25. Every entry is normalised with them
  // (epsilon 1e-3): (x - 1.5) / sqrt(0.251) = -0.998004, 0.998004, 196.6073.
  // moving_mean = 0.99 * 0 + 0.01 * 1.5 = 0.015, moving_variance = 0.99 * 1 + 0.01 * 0.25 = 0.9925.
  const Tensor x = layers::with_mask(constant({1.f, 2.f, 100.f}, {1, 3, 1}), constant({true, true, false}, {1, 3}));
  layers::BatchNormalization bn;
  const Tensor y = bn(x, true);
  const double s = std::sqrt(0.251);
  check_values(y, {-0.5 / s, 0.5 / s, 98.5 / s}, 1e-3);
  check_values(bn.moving_mean().value(), {0.015}, 1e-6);
  check_values(bn.moving_variance().value(), {0.9925}, 1e-6);
  CHECK(layers::get_mask(y).defined());  // the mask passes on
  // without the mask the statistics would include 100: mean 34.33
  layers::BatchNormalization plain;
  plain(constant({1.f, 2.f, 100.f}, {1, 3, 1}), true);
  CHECK(plain.moving_mean().value().item<double>() == Approx(0.01 * 103.0 / 3));
  // inference ignores the mask: the moving statistics normalise every entry
  const Tensor inf = bn(x, false);
  check_values(inf, {(1 - 0.015) / std::sqrt(0.9925 + 1e-3), (2 - 0.015) / std::sqrt(0.9925 + 1e-3),
                     (100 - 0.015) / std::sqrt(0.9925 + 1e-3)}, 1e-3);
  // a mask that is not one dimension less than the inputs is a ValueError
  CHECK_THROWS_AS(bn(layers::with_mask(constant({1.f, 2.f, 3.f}, {1, 3, 1}), constant({true, true, false}, {1, 3, 1})), true),
                  ValueError);
}

TEST_CASE("masked BatchNormalization has finite-difference gradients", "[layers][masking][grad]") {
  // composite ops (means, squares, rsqrt) under the mask: checked end to end in float64
  layers::BatchNormalization bn;
  const Tensor mask = constant({true, false, true, true, true, false}, {2, 3});
  const Tensor x0 = random::normal({2, 3, 2}, 0, 1, DType::float64);
  check_gradients([&](const std::vector<Tensor>& in) { return bn(layers::with_mask(in[0], mask), true); }, {x0}, 1e-6,
                  1e-5);
}
