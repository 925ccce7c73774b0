// The core Keras layers (keel/layers/core.hpp): parameter counts and output shapes against Keras'
// formulas, forward values against hand-computed numbers, gradients (by hand where a layer only
// reuses checked ops with float32 weights, by finite differences in float64 where a layer
// composes something new), Dropout's training behaviour, Embedding masks, regularisation
// losses, freezing and get_config. The layers inside Sequential, functional and custom layers
// are in test_layers_composition.cpp.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "layer_checks.hpp"

using namespace keel;
using Catch::Contains;
using keel_test::check_values;
using keel_test::param_count;

// ---- Dense -------------------------------------------------------------------------------------

TEST_CASE("Dense has in*units + units parameters: a kernel (in, units) named kernel and a bias (units) named bias", "[layers][dense]") {
  layers::Dense dense(3, {.name = "d"});
  const Tensor y = dense(ones({2, 4}));
  CHECK(y.shape() == Shape{2, 3});
  CHECK(dense.count_params() == 4 * 3 + 3);
  const auto w = dense.trainable_weights();
  REQUIRE(w.size() == 2);
  CHECK(w[0]->name() == "d/kernel");
  CHECK(w[0]->shape() == Shape{4, 3});
  CHECK(w[1]->name() == "d/bias");
  CHECK(w[1]->shape() == Shape{3});
  CHECK(&dense.kernel() == w[0]);
  CHECK(&dense.bias() == w[1]);
  // The bias starts at zeros (Keras' bias_initializer) and the kernel is not all zeros.
  check_values(dense.bias().value(), {0, 0, 0});
  CHECK(reduce_sum(abs(dense.kernel().value())).item<double>() > 0);

  layers::Dense no_bias(5, {.use_bias = false});
  no_bias(ones({1, 7}));
  CHECK(no_bias.count_params() == 7 * 5);
  CHECK(no_bias.weights().size() == 1);
  CHECK_THROWS_AS(no_bias.bias(), ValueError);
}

TEST_CASE("Dense computes activation(x . kernel + bias) with fixed weights", "[layers][dense]") {
  const Tensor x = constant({1.f, 1.f, 1.f, 1.f, 0.f, -1.f}, {2, 3});
  const Tensor kernel = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});
  const Tensor bias = constant({0.5f, -100.f}, {2});

  layers::Dense linear(2);
  linear.build(Shape{2, 3});  // build() directly, then operator() skips it
  auto w = linear.trainable_weights();
  REQUIRE(w.size() == 2);
  w[0]->assign(kernel);
  w[1]->assign(bias);
  // [1,1,1].K = [9, 12]; [1,0,-1].K = [-4, -4]; plus the bias.
  const Tensor y = linear(x);
  check_values(y, {9.5, -88, -3.5, -104});
  CHECK(linear.weights().size() == 2);  // the call did not build a second set of weights
  CHECK(linear.built());

  layers::Dense relu(2, {.activation = "relu"});
  relu(x);
  relu.kernel().assign(kernel);
  relu.bias().assign(bias);
  check_values(relu(x), {9.5, 0, 0, 0});
}

TEST_CASE("Dense applies to the last axis of inputs of any rank >= 2", "[layers][dense]") {
  random::set_seed(1);
  layers::Dense dense(3);
  const Tensor x = random::normal({2, 5, 4});
  const Tensor y = dense(x);
  CHECK(y.shape() == Shape{2, 5, 3});
  CHECK(dense.count_params() == 4 * 3 + 3);  // the leading axes share the weights
  // Each [b, t, :] row is the 2-D Dense of that row.
  const Tensor rows = dense(reshape(x, {10, 4}));
  check_values(reshape(y, {10, 3}), rows.to_vector<double>(), 1e-5);
  // Rank 4 works with the same weights; the features must match.
  CHECK(dense(random::normal({2, 2, 2, 4})).shape() == Shape{2, 2, 2, 3});
}

TEST_CASE("Dense gradients are x^T . dy for the kernel and the batch sum for the bias", "[layers][dense]") {
  layers::Dense dense(2);
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  dense(x);
  dense.kernel().assign(constant({1.f, -1.f, 0.5f, 2.f, 0.f, 1.f}, {3, 2}));
  GradientTape tape;
  const Tensor loss = reduce_sum(dense(x));  // dy = ones
  const auto g = tape.gradient(loss, dense.trainable_weights());
  REQUIRE(g.size() == 2);
  // dK[i][j] = sum_b x[b][i]: column sums of x, repeated for both units.
  check_values(g[0], {5, 5, 7, 7, 9, 9});
  check_values(g[1], {2, 2});
}

TEST_CASE("Dense rejects non-positive units and inputs that do not fit its kernel", "[layers][dense][errors]") {
  CHECK_THROWS_AS(layers::Dense(0), ValueError);
  CHECK_THROWS_WITH(layers::Dense(-3), Contains("Dense") && Contains("-3"));
  layers::Dense dense(4, {.name = "fc"});
  dense(ones({2, 3}));
  CHECK_THROWS_AS(dense(ones({2, 5})), ShapeError);
  CHECK_THROWS_WITH(dense(ones({2, 5})), Contains("fc") && Contains("[2,5]"));
  CHECK_THROWS_AS(dense(ones({3})), ShapeError);
  layers::Dense fresh(4);
  CHECK_THROWS_AS(fresh(ones({3})), ShapeError);  // rank 1 cannot build
  CHECK_THROWS_AS(fresh.kernel(), ValueError);     // not built
  CHECK_THROWS_AS(layers::Dense(2, {.activation = "no_such_activation"}), ValueError);
}

TEST_CASE("Dense regularizers add 0.01 * sum(w^2) (l2), 0.01 * sum|w| (l1) and activity losses", "[layers][dense]") {
  layers::Dense dense(2, {.kernel_regularizer = "l2", .bias_regularizer = "l1"});
  dense(ones({1, 2}));
  dense.kernel().assign(constant({1.f, -2.f, 3.f, 0.5f}, {2, 2}));
  dense.bias().assign(constant({-1.f, 3.f}, {2}));
  auto losses = dense.losses();
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].item<double>() == Approx(0.01 * (1 + 4 + 9 + 0.25)));
  CHECK(losses[1].item<double>() == Approx(0.01 * (1 + 3)));

  // The regularisation loss is differentiable: d(0.01 sum w^2)/dw = 0.02 w.
  {
    GradientTape tape;
    const Tensor l = dense.losses()[0];
    check_values(tape.gradient(l, dense.kernel()), {0.02, -0.04, 0.06, 0.01});
  }

  // activity_regularizer: the penalty of the output of the latest call (Keras 3: not divided by
  // the batch size).
  layers::Dense act(1, {.use_bias = false, .activity_regularizer = regularizers::l2(0.5)});
  act(ones({1, 2}));
  act.kernel().assign(constant({1.f, 2.f}, {2, 1}));
  act(constant({1.f, 1.f, 2.f, 0.f}, {2, 2}));  // outputs 3 and 2
  losses = act.losses();
  REQUIRE(losses.size() == 1);
  CHECK(losses[0].item<double>() == Approx(0.5 * (9 + 4)));
}

TEST_CASE("set_trainable(false) moves a layer's weights to non_trainable_weights", "[layers][dense]") {
  layers::Dense dense(3);
  dense(ones({1, 2}));
  CHECK(dense.trainable_weights().size() == 2);
  CHECK(dense.non_trainable_weights().empty());
  dense.set_trainable(false);
  CHECK(dense.trainable_weights().empty());
  CHECK(dense.non_trainable_weights().size() == 2);
  CHECK(dense.weights().size() == 2);
  CHECK(dense.count_params() == 9);
  CHECK_FALSE(dense.get_config()["trainable"].get<bool>());
  dense.set_trainable(true);
  CHECK(dense.trainable_weights().size() == 2);

  // Inside a model: only the frozen layer's weights leave the trainable list.
  auto first = std::make_shared<layers::Dense>(8);
  models::Sequential model{layers::InputLayer({4}), first, layers::Dense(2)};
  first->set_trainable(false);
  CHECK(param_count(model.trainable_weights()) == 8 * 2 + 2);
  CHECK(param_count(model.non_trainable_weights()) == 4 * 8 + 8);
}

// ---- activations -------------------------------------------------------------------------------

TEST_CASE("Activation applies an activation by Keras name or a callable", "[layers][activation]") {
  const Tensor x = constant({-1.f, 0.f, 2.f}, {1, 3});
  check_values(layers::Activation("relu")(x), {0, 0, 2});
  check_values(layers::Activation("linear")(x), {-1, 0, 2});
  check_values(layers::Activation(std::string("tanh"))(x), {std::tanh(-1.0), 0, std::tanh(2.0)});
  const double s = std::exp(-1.0) + 1 + std::exp(2.0);
  check_values(layers::Activation("softmax")(x), {std::exp(-1.0) / s, 1 / s, std::exp(2.0) / s});
  layers::Activation twice(activations::ActivationFn([](const Tensor& t) { return t * 2.0; }, "twice"));
  check_values(twice(x), {-2, 0, 4});
  CHECK(twice.get_config()["activation"] == "twice");
  CHECK(layers::Activation("sigmoid").get_config()["activation"] == "sigmoid");
  CHECK_THROWS_AS(layers::Activation("relu7"), ValueError);
  // Keras 3's other names, at x = -1, 0, 2 from their definitions:
  //   selu: scale * alpha * (e^x - 1) below 0, scale * x above (scale 1.0507009873554805,
  //         alpha 1.6732632423543772); softsign x / (1 + |x|); hard_sigmoid relu6(x + 3) / 6;
  //   hard_silu x * hard_sigmoid(x); mish x * tanh(log(1 + e^x)).
  const double scale = 1.0507009873554805, alpha = 1.6732632423543772;
  check_values(layers::Activation("selu")(x), {scale * alpha * (std::exp(-1.0) - 1), 0, 2 * scale});
  check_values(layers::Activation("softsign")(x), {-0.5, 0, 2.0 / 3});
  check_values(layers::Activation("hard_sigmoid")(x), {2.0 / 6, 0.5, 5.0 / 6});
  check_values(layers::Activation("hard_silu")(x), {-2.0 / 6, 0, 10.0 / 6});
  // Keras 2's (and TensorFlow.js's) hard_sigmoid, clip(0.2 x + 0.5, 0, 1): 0.3, 0.5, 0.9; it
  // reaches 0 at x = -2.5 and 1 at x = 2.5.
  check_values(layers::Activation("hard_sigmoid_keras2")(x), {0.3, 0.5, 0.9});
  check_values(layers::Activation("hard_sigmoid_keras2")(constant(std::vector<float>{-4.f, 4.f})), {0.0, 1.0});
  check_values(layers::Activation("hard_swish")(x), {-2.0 / 6, 0, 10.0 / 6});
  check_values(layers::Activation("mish")(x),
               {-std::tanh(std::log1p(std::exp(-1.0))), 0, 2 * std::tanh(std::log1p(std::exp(2.0)))});
  // Elementwise: any rank, and another shape after the first call.
  layers::Activation relu("relu");
  CHECK(relu(ones({2, 3, 4})).shape() == Shape{2, 3, 4});
  CHECK(relu(ones({5})).shape() == Shape{5});
}

TEST_CASE("ReLU follows Keras' piecewise definition with max_value, negative_slope and threshold", "[layers][relu]") {
  const Tensor x = constant({-2.f, -0.5f, 0.f, 0.5f, 1.f, 2.f, 5.f, 8.f}, {1, 8});
  check_values(layers::ReLU()(x), {0, 0, 0, 0.5, 1, 2, 5, 8});
  check_values(layers::ReLU({.max_value = 6})(x), {0, 0, 0, 0.5, 1, 2, 5, 6});
  check_values(layers::ReLU({.max_value = 3})(x), {0, 0, 0, 0.5, 1, 2, 3, 3});
  check_values(layers::ReLU({.negative_slope = 0.1})(x), {-0.2, -0.05, 0, 0.5, 1, 2, 5, 8});
  // x > threshold keeps x itself (not x - threshold); at and below the threshold: 0.
  check_values(layers::ReLU({.threshold = 1})(x), {0, 0, 0, 0, 0, 2, 5, 8});
  // All three: x > 1 -> min(x, 4); otherwise 0.5 * (x - 1).
  check_values(layers::ReLU({.max_value = 4, .negative_slope = 0.5, .threshold = 1})(x),
               {-1.5, -0.75, -0.5, -0.25, 0, 2, 4, 4});

  CHECK_THROWS_AS(layers::ReLU({.max_value = -1}), ValueError);
  CHECK_THROWS_AS(layers::ReLU({.negative_slope = -0.1}), ValueError);
  CHECK_THROWS_WITH(layers::ReLU({.threshold = -2}), Contains("ReLU") && Contains("-2"));

  const auto config = layers::ReLU({.max_value = 6, .negative_slope = 0.1}).get_config();
  CHECK(config["max_value"] == 6.0);
  CHECK(config["negative_slope"] == 0.1);
  CHECK(config["threshold"] == 0.0);
  CHECK(layers::ReLU().get_config()["max_value"].is_null());
}

TEST_CASE("ReLU's gradients match finite differences away from its kinks", "[layers][relu][gradcheck]") {
  // Points at least 0.1 from 0, the threshold 1 and max_value 4.
  const Tensor x = constant(std::vector<double>{-2.0, -0.5, 0.4, 0.7, 1.5, 2.5, 3.5, 5.0}, {2, 4});
  for (const layers::ReLUOptions& o :
       {layers::ReLUOptions{.max_value = 4, .negative_slope = 0.5, .threshold = 1},
        layers::ReLUOptions{.negative_slope = 0.2}, layers::ReLUOptions{.max_value = 3, .threshold = 1},
        layers::ReLUOptions{.max_value = 6}}) {
    check_gradients([&](const std::vector<Tensor>& in) { return layers::ReLU(o)(in[0]); }, {x});
  }
}

TEST_CASE("hard_sigmoid_keras2's gradient is 0.2 inside (-2.5, 2.5) and 0 outside", "[layers][activations][gradcheck]") {
  // Points at least 0.1 from the kinks at -2.5 and 2.5.
  const Tensor x = constant(std::vector<double>{-3.0, -2.2, -0.5, 0.4, 1.7, 2.3, 2.7, 4.0}, {2, 4});
  check_gradients([](const std::vector<Tensor>& in) { return layers::Activation("hard_sigmoid_keras2")(in[0]); }, {x});
}

TEST_CASE("LeakyReLU's negative_slope defaults to 0.3 as in Keras 3", "[layers][relu]") {
  layers::LeakyReLU leaky;
  check_values(leaky(constant({-1.f, 0.f, 2.f}, {1, 3})), {-0.3, 0, 2});
  CHECK(leaky.get_config()["negative_slope"] == Approx(0.3));
  check_values(layers::LeakyReLU({.negative_slope = 0.01})(constant({-100.f, 3.f}, {1, 2})), {-1, 3});
  CHECK_THROWS_AS(layers::LeakyReLU({.negative_slope = -0.3}), ValueError);
  check_gradients([](const std::vector<Tensor>& in) { return layers::LeakyReLU()(in[0]); },
                  {constant(std::vector<double>{-1.5, -0.2, 0.3, 2.0}, {2, 2})});
}

TEST_CASE("Softmax normalises along its axis", "[layers][softmax]") {
  const Tensor x = constant({1.f, 2.f, 3.f, 1.f, 1.f, 1.f}, {2, 3});
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_values(layers::Softmax()(x), {std::exp(1.0) / s, std::exp(2.0) / s, std::exp(3.0) / s, 1. / 3, 1. / 3, 1. / 3});
  // axis 0: each column of two, e.g. [2, 1] -> [1/(1+e^-1), 1/(1+e)].
  const double e = std::exp(1.0);
  check_values(layers::Softmax({.axis = 0})(x),
               {0.5, 1 / (1 + 1 / e), 1 / (1 + 1 / (e * e)), 0.5, 1 / (1 + e), 1 / (1 + e * e)});
  CHECK(layers::Softmax({.axis = 1}).get_config()["axis"] == 1);
  layers::Softmax bad({.axis = 2, .name = "sm"});
  CHECK_THROWS_AS(bad(x), ValueError);
  CHECK_THROWS_WITH(bad(x), Contains("sm") && Contains("2"));
}

TEST_CASE("Softmax gives positions masked out by the input's mask no weight", "[layers][softmax]") {
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {1, 4});
  const Tensor mask = constant(std::vector<bool>{true, false, true, false}, {1, 4});
  const Tensor y = layers::Softmax()(layers::with_mask(x, mask));
  const double s = std::exp(1.0) + std::exp(3.0);
  check_values(y, {std::exp(1.0) / s, 0, std::exp(3.0) / s, 0});
  CHECK(layers::get_mask(y).defined());  // Softmax supports masking: the mask passes on
}

// ---- reshaping ---------------------------------------------------------------------------------

TEST_CASE("Flatten keeps the batch axis and flattens the rest in row-major order", "[layers][reshape]") {
  const Tensor x = arange(0, 24).reshape({2, 3, 4});
  layers::Flatten flatten;
  const Tensor y = flatten(x);
  CHECK(y.shape() == Shape{2, 12});
  check_values(y, x.to_vector<double>());
  CHECK(flatten.count_params() == 0);
  CHECK(flatten(ones({5, 2, 2, 2})).shape() == Shape{5, 8});  // another rank is fine
  CHECK(layers::Flatten()(ones({5})).shape() == Shape{5, 1});
  // channels_first: [N, C, H] flattened as [N, H, C] would be.
  const Tensor cf = layers::Flatten({.data_format = "channels_first"})(constant({1.f, 2.f, 3.f, 4.f}, {1, 2, 2}));
  check_values(cf, {1, 3, 2, 4});
  CHECK(layers::Flatten().get_config()["data_format"] == "channels_last");
  CHECK_THROWS_AS(layers::Flatten({.data_format = "nhwc"}), ValueError);
}

TEST_CASE("Reshape reshapes each example to target_shape, inferring one -1", "[layers][reshape]") {
  const Tensor x = arange(0, 24).reshape({2, 12});
  layers::Reshape reshape_layer({3, -1});
  const Tensor y = reshape_layer(x);
  CHECK(y.shape() == Shape{2, 3, 4});
  check_values(y, x.to_vector<double>());
  CHECK(layers::Reshape({2, 2, 3})(x).shape() == Shape{2, 2, 2, 3});
  CHECK(reshape_layer.get_config()["target_shape"] == nlohmann::json::array({3, -1}));
  layers::Reshape bad({5, -1}, {.name = "rs"});
  CHECK_THROWS_AS(bad(x), ShapeError);
  CHECK_THROWS_WITH(bad(x), Contains("rs") && Contains("[2,12]"));
  CHECK_THROWS_AS(layers::Reshape({7})(x), ShapeError);
  CHECK_THROWS_AS(layers::Reshape({-1, -1}), ValueError);
  CHECK_THROWS_AS(layers::Reshape({0, 3}), ValueError);
}

TEST_CASE("Permute takes 1-based dims and keeps the batch axis first", "[layers][reshape]") {
  // x[0] = [[1, 2, 3], [4, 5, 6]] -> transposed [[1, 4], [2, 5], [3, 6]].
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {1, 2, 3});
  layers::Permute permute({2, 1});
  const Tensor y = permute(x);
  CHECK(y.shape() == Shape{1, 3, 2});
  check_values(y, {1, 4, 2, 5, 3, 6});
  CHECK(layers::Permute({3, 1, 2})(ones({2, 4, 5, 6})).shape() == Shape{2, 6, 4, 5});
  CHECK(permute.get_config()["dims"] == nlohmann::json::array({2, 1}));
  CHECK_THROWS_AS(layers::Permute({0, 1}), ValueError);  // 0-based: not Keras
  CHECK_THROWS_AS(layers::Permute({1, 1}), ValueError);
  CHECK_THROWS_AS(layers::Permute({1, 3}), ValueError);
  CHECK_THROWS_AS(layers::Permute({2, 1})(ones({2, 3})), ShapeError);
  check_gradients([](const std::vector<Tensor>& in) { return layers::Permute({3, 1, 2})(in[0]); },
                  {random::normal({2, 2, 3, 2}, 0, 1, DType::float64)});
}

// ---- Dropout -----------------------------------------------------------------------------------

TEST_CASE("Dropout is the identity when not training", "[layers][dropout]") {
  const Tensor x = random::normal({4, 8});
  layers::Dropout drop(0.5);
  const Tensor y = drop(x);
  CHECK(y.impl() == x.impl());
  CHECK(drop(x, false).impl() == x.impl());
  CHECK(drop.count_params() == 0);
  // predict-style call of a model: no dropout either.
  models::Sequential model{layers::InputLayer({8}), layers::Dropout(0.9)};
  check_values(model(x), x.to_vector<double>());
}

TEST_CASE("Dropout in training zeroes a fraction rate and scales the rest by 1/(1-rate)", "[layers][dropout]") {
  random::set_seed(11);
  layers::Dropout drop(0.25);
  const Tensor y = drop(ones({20000}), true);
  const auto v = y.to_vector<double>();
  std::int64_t zeros_seen = 0;
  bool scaled = true;
  for (double e : v) {
    if (e == 0) ++zeros_seen;
    else scaled = scaled && std::abs(e - 1 / 0.75) < 1e-6;
  }
  CHECK(scaled);
  // Binomial(20000, 0.25): standard deviation ~61, the band is > 6 of them.
  CHECK(std::abs(static_cast<double>(zeros_seen) / 20000 - 0.25) < 0.02);

  // training = true on a model reaches the Dropout inside it.
  models::Sequential model{layers::InputLayer({1000}), layers::Dropout(0.5)};
  const auto m = model(ones({1, 1000}), true).to_vector<double>();
  std::int64_t dropped = 0;
  for (double e : m) dropped += e == 0;
  CHECK(dropped > 300);
  CHECK(dropped < 700);
}

TEST_CASE("Dropout with a seed is reproducible and draws a new mask on each training call", "[layers][dropout]") {
  layers::Dropout a(0.5, {.seed = 42}), b(0.5, {.seed = 42}), c(0.5, {.seed = 43});
  const Tensor x = ones({256});
  const auto a1 = a(x, true).to_vector<double>(), a2 = a(x, true).to_vector<double>();
  const auto b1 = b(x, true).to_vector<double>();
  const auto c1 = c(x, true).to_vector<double>();
  CHECK(a1 == b1);  // same seed, same sequence
  CHECK(a1 != a2);  // a new mask each step
  CHECK(a1 != c1);
  const auto config = a.get_config();
  CHECK(config["rate"] == 0.5);
  CHECK(config["seed"] == 42);
  CHECK(config["noise_shape"].is_null());
}

TEST_CASE("Dropout with noise_shape drops whole slices along the axes of size 1", "[layers][dropout]") {
  layers::Dropout drop(0.5, {.noise_shape = {-1, 1, 6}, .seed = 5});
  const Tensor y = drop(ones({4, 10, 6}), true);
  CHECK(y.shape() == Shape{4, 10, 6});
  const auto v = y.to_vector<double>();
  // The same keep/drop decision for every timestep of a (batch, feature) pair.
  bool constant_in_time = true;
  std::int64_t dropped = 0;
  for (int b = 0; b < 4; ++b)
    for (int f = 0; f < 6; ++f) {
      const double first = v[static_cast<std::size_t>(b * 60 + f)];
      dropped += first == 0;
      CHECK((first == 0 || first == Approx(2.0)));
      for (int t = 1; t < 10; ++t) constant_in_time = constant_in_time && v[static_cast<std::size_t>(b * 60 + t * 6 + f)] == first;
    }
  CHECK(constant_in_time);
  CHECK(dropped > 0);
  CHECK(dropped < 24);
  CHECK(drop.get_config()["noise_shape"] == nlohmann::json::parse("[null, 1, 6]"));
  CHECK_THROWS_AS(drop(ones({4, 10, 5}), true), ShapeError);
  CHECK_THROWS_AS(drop(ones({4, 6}), true), ShapeError);
  // d(x * mask)/dx = mask: a fresh layer with the same seed gives the same mask each evaluation.
  check_gradients(
      [](const std::vector<Tensor>& in) {
        return layers::Dropout(0.5, {.noise_shape = {-1, 1, 3}, .seed = 9})(in[0], true);
      },
      {random::normal({2, 3, 3}, 0, 1, DType::float64)});
}

TEST_CASE("Dropout rejects rates below 0, of 1 and above, and NaN", "[layers][dropout][errors]") {
  CHECK_THROWS_AS(layers::Dropout(1.0), ValueError);
  CHECK_THROWS_AS(layers::Dropout(-0.1), ValueError);
  CHECK_THROWS_AS(layers::Dropout(std::numeric_limits<double>::quiet_NaN()), ValueError);
  CHECK_THROWS_WITH(layers::Dropout(1.5, {.name = "drop_it"}), Contains("drop_it") && Contains("1.5"));
  CHECK_THROWS_AS(layers::Dropout(0.5, {.noise_shape = {0, 1}}), ValueError);
  CHECK_NOTHROW(layers::Dropout(0.0));
  const Tensor x = ones({3, 3});
  CHECK(layers::Dropout(0.0)(x, true).impl() == x.impl());
}

// ---- merging -----------------------------------------------------------------------------------

TEST_CASE("Add, Multiply and Concatenate combine a list of inputs", "[layers][merge]") {
  const Tensor a = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  const Tensor b = constant({10.f, 20.f, 30.f, 40.f}, {2, 2});
  const Tensor c = constant({-1.f, 1.f}, {2, 1});
  check_values(layers::Add()({a, b}), {11, 22, 33, 44});
  check_values(layers::Add()({a, b, a}), {12, 24, 36, 48});
  check_values(layers::Add()({a, c}), {0, 1, 4, 5});  // size-1 dimensions broadcast
  check_values(layers::Multiply()({a, b}), {10, 40, 90, 160});
  check_values(layers::Multiply()({a, c}), {-1, -2, 3, 4});
  const Tensor cat = layers::Concatenate()({a, c, b});
  CHECK(cat.shape() == Shape{2, 5});
  check_values(cat, {1, 2, -1, 10, 20, 3, 4, 1, 30, 40});
  const Tensor rows = layers::Concatenate({.axis = 0})({a, b});
  CHECK(rows.shape() == Shape{4, 2});
  check_values(rows, {1, 2, 3, 4, 10, 20, 30, 40});
  CHECK(layers::Concatenate({.axis = 1})({ones({2, 3, 4}), ones({2, 5, 4})}).shape() == Shape{2, 8, 4});
  CHECK(layers::Concatenate({.axis = 1}).get_config()["axis"] == 1);
  layers::Add add;
  add({a, b});
  CHECK(add.count_params() == 0);
}

TEST_CASE("merge layers reject mismatched shapes, bad axes and single tensors", "[layers][merge][errors]") {
  layers::Add add({.name = "plus"});
  CHECK_THROWS_AS(add({ones({2, 3}), ones({2, 4})}), ShapeError);
  CHECK_THROWS_WITH(add({ones({2, 3}), ones({2, 4})}), Contains("plus") && Contains("[2,3]") && Contains("[2,4]"));
  CHECK_THROWS_AS(add({ones({2, 3}), ones({3, 3})}), ShapeError);  // batch sizes differ
  CHECK_THROWS_AS(add({ones({2, 3}), ones({2, 3, 1})}), ShapeError);
  CHECK_THROWS_AS(add(ones({2, 3})), ValueError);
  CHECK_THROWS_AS(layers::Multiply()({ones({2, 3}), ones({2, 2})}), ShapeError);
  CHECK_THROWS_AS(layers::Multiply()(ones({2, 3})), ValueError);
  CHECK_THROWS_AS(layers::Concatenate()({ones({2, 3}), ones({3, 3})}), ShapeError);
  CHECK_THROWS_AS(layers::Concatenate()({ones({2, 3}), ones({2, 3, 1})}), ShapeError);
  CHECK_THROWS_AS(layers::Concatenate({.axis = 2})({ones({2, 3}), ones({2, 3})}), ValueError);
  CHECK_THROWS_AS(layers::Concatenate({.axis = -3})({ones({2, 3}), ones({2, 3})}), ValueError);
  CHECK_THROWS_AS(layers::Concatenate()(ones({2, 3})), ValueError);
  // A built merge layer still checks each later call.
  layers::Concatenate cat;
  cat({ones({2, 3}), ones({2, 1})});
  CHECK_THROWS_AS(cat({ones({2, 3}), ones({4, 1})}), ShapeError);
}

TEST_CASE("merge layers' gradients match finite differences", "[layers][merge][gradcheck]") {
  random::set_seed(21);
  const Tensor a = random::normal({2, 3}, 0, 1, DType::float64);
  const Tensor b = random::normal({2, 3}, 0, 1, DType::float64);
  const Tensor c = random::normal({2, 1}, 0, 1, DType::float64);
  check_gradients([](const std::vector<Tensor>& in) { return layers::Add()({in[0], in[1], in[2]}); }, {a, b, c});
  check_gradients([](const std::vector<Tensor>& in) { return layers::Multiply()({in[0], in[1], in[2]}); }, {a, b, c});
  check_gradients([](const std::vector<Tensor>& in) { return layers::Concatenate()({in[0], in[2], in[1]}); }, {a, b, c});
}

// ---- Rescaling ---------------------------------------------------------------------------------

TEST_CASE("Rescaling computes x * scale + offset and turns integer images into float32", "[layers][rescaling]") {
  const Tensor img = constant(std::vector<std::int32_t>{0, 51, 255, 102}, {1, 2, 2, 1}).astype(DType::uint8);
  const Tensor y = layers::Rescaling(1.0 / 255)(img);
  CHECK(y.dtype() == DType::float32);
  CHECK(y.shape() == Shape{1, 2, 2, 1});
  check_values(y, {0, 0.2, 1, 0.4});
  // [-1, 1]: scale 1/127.5, offset -1 (Keras' example).
  check_values(layers::Rescaling(1 / 127.5, {.offset = -1})(img), {-1, 51 / 127.5 - 1, 1, 102 / 127.5 - 1});
  layers::Rescaling r(2.0, {.offset = 0.5});
  check_values(r(constant({1.f, -1.f}, {1, 2})), {2.5, -1.5});
  const auto config = r.get_config();
  CHECK(config["scale"] == 2.0);
  CHECK(config["offset"] == 0.5);
  CHECK(r.count_params() == 0);
  const Tensor d = layers::Rescaling(3.0, {.offset = 1})(constant(std::vector<double>{1.0}, {1, 1}));
  CHECK(d.dtype() == DType::float64);  // floating inputs keep their dtype
  check_gradients([](const std::vector<Tensor>& in) { return layers::Rescaling(-0.5, {.offset = 2})(in[0]); },
                  {random::normal({3, 2}, 0, 1, DType::float64)});
}

// ---- Embedding ---------------------------------------------------------------------------------

TEST_CASE("Embedding looks up rows of its input_dim x output_dim table", "[layers][embedding]") {
  layers::Embedding emb(4, 3, {.name = "tokens"});
  const Tensor ids = constant(std::vector<std::int64_t>{0, 2, 3, 1, 1, 0}, {2, 3});
  const Tensor y0 = emb(ids);
  CHECK(y0.shape() == Shape{2, 3, 3});
  CHECK(emb.count_params() == 4 * 3);
  REQUIRE(emb.weights().size() == 1);
  CHECK(emb.weights()[0]->name() == "tokens/embeddings");
  // Keras' "uniform": RandomUniform(-0.05, 0.05).
  CHECK(reduce_max(abs(emb.embeddings().value())).item<double>() <= 0.05);

  emb.embeddings().assign(arange(0, 12).reshape({4, 3}));
  check_values(emb(ids), {0, 1, 2, 6, 7, 8, 9, 10, 11, 3, 4, 5, 3, 4, 5, 0, 1, 2});
  // int32 ids, another sequence length, and float ids (cast to integers, as Keras does).
  CHECK(emb(constant(std::vector<std::int32_t>{3, 3, 3, 3, 3}, {1, 5})).shape() == Shape{1, 5, 3});
  check_values(emb(constant({2.f}, {1, 1})), {6, 7, 8});
  CHECK_FALSE(layers::get_mask(emb(ids)).defined());  // mask_zero is off

  CHECK_THROWS_AS(emb(constant(std::vector<std::int64_t>{4}, {1, 1})), ValueError);  // id >= input_dim
  CHECK_THROWS_AS(emb(constant(std::vector<std::int64_t>{-1}, {1, 1})), ValueError);
  CHECK_THROWS_AS(layers::Embedding(0, 3), ValueError);
  CHECK_THROWS_AS(layers::Embedding(3, -1), ValueError);
  layers::Embedding fixed(5, 2, {.input_length = 3});
  CHECK(fixed(constant(std::vector<std::int64_t>{1, 2, 3}, {1, 3})).shape() == Shape{1, 3, 2});
  CHECK_THROWS_AS(fixed(constant(std::vector<std::int64_t>{1, 2}, {1, 2})), ShapeError);
}

TEST_CASE("Embedding's gradient adds dy into the looked-up rows", "[layers][embedding]") {
  layers::Embedding emb(4, 2);
  const Tensor ids = constant(std::vector<std::int64_t>{1, 3, 3, 0}, {1, 4});
  emb(ids);
  GradientTape tape;
  const Tensor loss = reduce_sum(emb(ids));
  // Row r collects one ones-vector per occurrence of r in ids: row 2 none, row 3 twice.
  check_values(tape.gradient(loss, emb.embeddings()), {1, 1, 1, 1, 0, 0, 2, 2});
}

TEST_CASE("Embedding with mask_zero carries the mask ids != 0 through the layers after it", "[layers][embedding]") {
  layers::Embedding emb(5, 2, {.mask_zero = true});
  const Tensor ids = constant(std::vector<std::int64_t>{3, 1, 0, 0, 2, 4, 4, 0}, {2, 4});
  const Tensor y = emb(ids);
  const Tensor mask = layers::get_mask(y);
  REQUIRE(mask.defined());
  CHECK(mask.dtype() == DType::bool_);
  CHECK(mask.shape() == Shape{2, 4});
  CHECK(mask.to_vector<bool>() == std::vector<bool>{true, true, false, false, true, true, true, false});
  CHECK(emb.get_config()["mask_zero"].get<bool>());

  // Layers that support masking in Keras pass it on; Add combines masks.
  const Tensor after = layers::Dense(3)(layers::Dropout(0.5)(layers::ReLU()(y), true));
  CHECK(layers::get_mask(after).to_vector<bool>() == mask.to_vector<bool>());
  const Tensor other = layers::with_mask(ones({2, 4, 2}), constant(std::vector<bool>{true, true, true, true, false,
                                                                                     false, false, false}, {2, 4}));
  CHECK(layers::get_mask(layers::Add()({y, other})).to_vector<bool>() ==
        std::vector<bool>{true, true, false, false, false, false, false, false});

  // The masked output is still differentiable with respect to the table.
  GradientTape tape;
  const Tensor loss = reduce_sum(emb(ids));
  const Tensor g = tape.gradient(loss, emb.embeddings());
  REQUIRE(g.defined());
  check_values(g, {3, 3, 1, 1, 1, 1, 1, 1, 2, 2});
}

TEST_CASE("Embedding's regularizer adds a loss and its config names Keras' options", "[layers][embedding]") {
  layers::Embedding emb(3, 2, {.embeddings_regularizer = "l2"});
  emb(constant(std::vector<std::int64_t>{0}, {1, 1}));
  emb.embeddings().assign(constant({1.f, 2.f, 0.f, 0.f, -1.f, 1.f}, {3, 2}));
  REQUIRE(emb.losses().size() == 1);
  CHECK(emb.losses()[0].item<double>() == Approx(0.01 * 7));
  const auto c = emb.get_config();
  CHECK(c["input_dim"] == 3);
  CHECK(c["output_dim"] == 2);
  CHECK(c["embeddings_initializer"] == "random_uniform");
  CHECK(c["embeddings_regularizer"]["class_name"] == "L2");
  CHECK(c["embeddings_regularizer"]["config"]["l2"] == Approx(0.01));
  CHECK_FALSE(c["mask_zero"].get<bool>());
  CHECK(c["input_length"].is_null());
}

// ---- configs and shapes ------------------------------------------------------------------------

TEST_CASE("Dense's get_config holds Keras' keyword arguments", "[layers][config]") {
  layers::Dense dense(16, {.activation = "relu", .use_bias = false, .kernel_initializer = "he_normal",
                           .kernel_regularizer = regularizers::l1_l2(0.1, 0.2), .name = "hidden"});
  const auto c = dense.get_config();
  CHECK(c["name"] == "hidden");
  CHECK(c["trainable"].get<bool>());
  CHECK(c["dtype"] == "float32");
  CHECK(c["units"] == 16);
  CHECK(c["activation"] == "relu");
  CHECK_FALSE(c["use_bias"].get<bool>());
  CHECK(c["kernel_initializer"] == "he_normal");
  CHECK(c["bias_initializer"] == "zeros");
  CHECK(c["kernel_regularizer"]["class_name"] == "L1L2");
  CHECK(c["kernel_regularizer"]["config"]["l1"] == Approx(0.1));
  CHECK(c["kernel_regularizer"]["config"]["l2"] == Approx(0.2));
  CHECK(c["bias_regularizer"].is_null());
  CHECK(c["activity_regularizer"].is_null());
  CHECK(dense.class_name() == "Dense");
  CHECK(layers::Dense(1).get_config()["activation"] == "linear");
}

TEST_CASE("every core layer's output shape and parameter count follow Keras' formulas", "[layers][shapes]") {
  struct Case {
    std::shared_ptr<layers::Layer> layer;
    Shape input, output;
    std::int64_t params;
  };
  const std::vector<Case> cases = {
      {std::make_shared<layers::Dense>(10), {8, 20}, {8, 10}, 20 * 10 + 10},
      {std::make_shared<layers::Dense>(10, layers::DenseOptions{.use_bias = false}), {8, 3, 20}, {8, 3, 10}, 200},
      {std::make_shared<layers::Activation>("tanh"), {8, 3}, {8, 3}, 0},
      {std::make_shared<layers::ReLU>(), {8, 3, 2}, {8, 3, 2}, 0},
      {std::make_shared<layers::LeakyReLU>(), {8, 3}, {8, 3}, 0},
      {std::make_shared<layers::Softmax>(), {8, 3}, {8, 3}, 0},
      {std::make_shared<layers::Flatten>(), {8, 4, 4, 3}, {8, 48}, 0},
      {std::make_shared<layers::Reshape>(Shape{4, -1}), {8, 48}, {8, 4, 12}, 0},
      {std::make_shared<layers::Permute>(std::vector<int>{2, 1}), {8, 3, 5}, {8, 5, 3}, 0},
      {std::make_shared<layers::Dropout>(0.3), {8, 3}, {8, 3}, 0},
      {std::make_shared<layers::Rescaling>(0.5), {8, 3}, {8, 3}, 0},
      {std::make_shared<layers::Embedding>(1000, 64), {8, 10}, {8, 10, 64}, 1000 * 64},
  };
  for (const auto& c : cases) {
    INFO(c.layer->class_name() << " on " << c.input.to_string());
    const Tensor x = c.layer->class_name() == "Embedding" ? zeros(c.input, DType::int64) : zeros(c.input);
    const Tensor y = (*c.layer)(x);
    CHECK(y.shape() == c.output);
    CHECK(c.layer->count_params() == c.params);
    CHECK(c.layer->output_shape() == c.output);
  }
}

TEST_CASE("Masking masks the steps whose features all equal mask_value and zeroes them", "[layers][masking]") {
  // steps: [5, 5] (all equal 5: masked), [1, 5] and [2, 3] (kept)
  const Tensor x = constant({5.f, 5.f, 1.f, 5.f, 2.f, 3.f}, {1, 3, 2});
  layers::Masking masking(5.0);
  const Tensor y = masking(x);
  check_values(y, {0, 0, 1, 5, 2, 3});
  const Tensor mask = layers::get_mask(y);
  REQUIRE(mask.defined());
  CHECK(mask.shape() == Shape{1, 3});
  CHECK(mask.to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(masking.get_config()["mask_value"].get<double>() == 5.0);
  CHECK(layers::deserialize(layers::serialize(masking))->class_name() == "Masking");
  // the mask reaches a mask-aware layer: an LSTM over [masked, a, b] ends where it would on [a, b]
  random::set_seed(3);
  auto lstm = std::make_shared<layers::LSTM>(3);
  models::Sequential with_masking{layers::Masking(5.0), layers::LayerRef(lstm)};
  const Tensor full_out = with_masking(x);
  const Tensor short_out = (*lstm)(constant({1.f, 5.f, 2.f, 3.f}, {1, 2, 2}));
  const auto a = full_out.to_vector<double>(), b = short_out.to_vector<double>();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6));
}

TEST_CASE("initializers::Constant fills every element and round-trips through the config", "[layers][initializers]") {
  layers::Dense dense(2, {.kernel_initializer = initializers::Constant(0.5), .bias_initializer = initializers::Constant(-1)});
  const Tensor y = dense(ones({1, 3}));
  // each output: 3 inputs of 1 times 0.5, plus -1 = 0.5
  check_values(y, {0.5, 0.5});
  const auto config = dense.get_config();
  CHECK(config["kernel_initializer"]["class_name"] == "Constant");
  CHECK(config["kernel_initializer"]["config"]["value"].get<double>() == 0.5);
  auto copy = layers::deserialize(layers::serialize(dense));
  CHECK(copy->get_config()["bias_initializer"]["config"]["value"].get<double>() == -1.0);
  check_values((*copy)(ones({1, 3})), {0.5, 0.5});
  CHECK(initializers::Constant()(Shape{2}).to_vector<float>() == std::vector<float>{0.f, 0.f});  // Keras' default 0
}
