// ConvLSTM2D: the gate maths by hand on a 1x1 image, output and state shapes for each padding
// and stride, go_backwards, channels_first, float64 gradients through the unrolled loop, errors
// and the config round trip.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <vector>

#include "conv_family_fixtures.hpp"
#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;
using keel_test::check_round_trip;
using keel_test::max_abs_diff;
using keel_test::values;
using keel_test::wavy;

namespace {

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// Keras' cell on scalars (a 1x1 image, one channel, one filter), gates i, f, c, o:
// z_g = x w_g + h u_g + b_g; c' = s(z_f) c + s(z_i) tanh(z_c); h' = s(z_o) tanh(c').
std::vector<double> scalar_lstm(const std::vector<double>& xs, const double* w, const double* u, const double* b) {
  double h = 0, c = 0;
  std::vector<double> hs;
  for (double x : xs) {
    double z[4];
    for (int g = 0; g < 4; ++g) z[g] = x * w[g] + h * u[g] + b[g];
    c = sigmoid(z[1]) * c + sigmoid(z[0]) * std::tanh(z[2]);
    h = sigmoid(z[3]) * std::tanh(c);
    hs.push_back(h);
  }
  return hs;
}

}  // namespace

TEST_CASE("ConvLSTM2D follows Keras' gates on a 1x1 image", "[conv_lstm]") {
  const double w[4] = {0.5, -0.3, 0.8, 0.2}, u[4] = {0.1, 0.4, -0.6, 0.7}, b[4] = {0.05, 1.0, -0.1, 0.2};
  const std::vector<double> xs{0.9, -0.4, 0.3};
  layers::ConvLSTM2D lstm(1, 1, {.return_sequences = true});
  const Tensor x = constant(std::vector<float>{0.9f, -0.4f, 0.3f}, Shape{1, 3, 1, 1, 1});
  lstm(x);
  lstm.kernel().assign(constant(std::vector<float>{0.5f, -0.3f, 0.8f, 0.2f}, Shape{1, 1, 1, 4}));
  lstm.recurrent_kernel().assign(constant(std::vector<float>{0.1f, 0.4f, -0.6f, 0.7f}, Shape{1, 1, 1, 4}));
  lstm.bias().assign(constant(std::vector<float>{0.05f, 1.0f, -0.1f, 0.2f}, Shape{4}));
  const auto r = lstm.call_with_state(x);
  const auto expected = scalar_lstm(xs, w, u, b);
  const auto got = values(r[0]);
  REQUIRE(got.size() == 3);
  for (int t = 0; t < 3; ++t) CHECK(got[t] == Approx(expected[t]).epsilon(1e-5));
  CHECK(values(r[1])[0] == Approx(expected[2]).epsilon(1e-5));  // h = the last output
  // go_backwards reads the steps last to first.
  layers::ConvLSTM2D back(1, 1, {.go_backwards = true});
  back(x);
  for (std::size_t i = 0; i < 3; ++i) back.weights()[i]->assign(lstm.weights()[i]->value());
  CHECK(values(back(x))[0] == Approx(scalar_lstm({0.3, -0.4, 0.9}, w, u, b)[2]).epsilon(1e-5));
}

TEST_CASE("ConvLSTM2D shapes, unit_forget_bias, channels_first and errors", "[conv_lstm]") {
  const Tensor x = cast(wavy({2, 3, 6, 5, 2}), DType::float32);
  layers::ConvLSTM2D valid(4, {3, 2});
  CHECK(valid(x).shape() == Shape{2, 4, 4, 4});  // (6-3)+1, (5-2)+1
  CHECK(valid.kernel().value().shape() == Shape{3, 2, 2, 16});
  CHECK(valid.recurrent_kernel().value().shape() == Shape{3, 2, 4, 16});
  // unit_forget_bias: the forget block [4, 8) starts at ones.
  const auto bias = values(valid.bias().value());
  for (int i = 0; i < 16; ++i) CHECK(bias[static_cast<std::size_t>(i)] == (i >= 4 && i < 8 ? 1.0 : 0.0));
  layers::ConvLSTM2D strided(3, 3, {.strides = {2, 2}, .padding = "same", .return_sequences = true});
  const auto r = strided.call_with_state(x);
  CHECK(r[0].shape() == Shape{2, 3, 3, 3, 3});  // ceil(6/2), ceil(5/2)
  CHECK(r[1].shape() == Shape{2, 3, 3, 3});
  CHECK(r[2].shape() == Shape{2, 3, 3, 3});
  check_round_trip(strided, x);

  layers::ConvLSTM2D cf(2, 3, {.padding = "same", .data_format = "channels_first"});
  const Tensor xcf = transpose(x, {0, 1, 4, 2, 3});
  const Tensor ycf = cf(xcf);
  CHECK(ycf.shape() == Shape{2, 2, 6, 5});
  layers::ConvLSTM2D cl(2, 3, {.padding = "same"});
  cl(x);
  for (std::size_t i = 0; i < 3; ++i) cl.weights()[i]->assign(cf.weights()[i]->value());
  CHECK(max_abs_diff(transpose(ycf, {0, 2, 3, 1}), cl(x)) < 1e-5);

  // Dropout only in training; with a seed the training output is reproducible.
  layers::ConvLSTM2D drop(2, 1, {.dropout = 0.5, .recurrent_dropout = 0.5, .seed = 7});
  const Tensor y_inf = drop(x);
  CHECK(max_abs_diff(drop(x, false), y_inf) == 0);
  CHECK(max_abs_diff(drop(x, true), y_inf) > 0);

  CHECK_THROWS_AS(layers::ConvLSTM2D(2, 3, {.padding = "causal"}), ValueError);
  CHECK_THROWS_AS(layers::ConvLSTM2D(2, 3, {.dropout = 1.0}), ValueError);
  CHECK_THROWS_AS(layers::ConvLSTM2D(0, 3), ValueError);
  CHECK_THROWS_AS(layers::ConvLSTM2D(2, 3)(cast(wavy({2, 6, 5, 2}), DType::float32)), ShapeError);
  CHECK_THROWS_AS(layers::ConvLSTM2D(2, 7)(x), ShapeError);  // a 7x7 kernel on 6x5, valid
}

TEST_CASE("ConvLSTM2D has float64 gradients with respect to its input", "[conv_lstm][grad]") {
  layers::ConvLSTM2D lstm(2, 2, {.padding = "same", .return_sequences = true});
  const Tensor x = wavy({1, 2, 3, 3, 2});
  lstm(x);
  keel_test::check_gradients([&](const std::vector<Tensor>& v) { return lstm(v[0]); }, {x}, 1e-6, 1e-5);
}
