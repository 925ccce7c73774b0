// bias_add: the bias along the last axis with a fused activation (one pass on the CPU), its
// gradients, its errors, and the Dense and convolution layers that end with it.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

// The activations bias_add fuses, in double: Keras' definitions.
double activate(const std::string& name, double z) {
  if (name == "relu") return z > 0 ? z : 0.0;                // max(z, 0)
  if (name == "sigmoid") return 1.0 / (1.0 + std::exp(-z));  // 1 / (1 + e^-z)
  if (name == "tanh") return std::tanh(z);
  if (name == "exponential") return std::exp(z);
  return z;  // linear
}

const std::vector<std::string> kActivations = {"linear", "relu", "sigmoid", "tanh", "exponential"};

// Values in [-2, 2] that differ from element to element (never exactly 0 after the bias below).
std::vector<double> wavy(std::size_t n, double salt) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 2.0 * std::sin(1.3 * static_cast<double>(i) + salt) + 0.01;
  return v;
}

// activation(x + bias) element by element in double, x [rows, c] flattened.
std::vector<double> by_hand(const std::vector<double>& x, const std::vector<double>& bias, const std::string& act) {
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = activate(act, x[i] + bias[i % bias.size()]);
  return y;
}

void check_values(DType dtype, const Shape& shape, const std::string& act, double tol) {
  const std::int64_t c = shape[shape.rank() - 1];
  const auto xv = wavy(static_cast<std::size_t>(shape.num_elements()), 0.3);
  const auto bv = wavy(static_cast<std::size_t>(c), 1.1);
  const Tensor y = bias_add(constant(xv, shape, dtype), constant(bv, Shape{c}, dtype), act);
  REQUIRE(y.shape() == shape);
  REQUIRE(y.dtype() == dtype);
  const auto got = y.to_vector<double>();
  const auto want = by_hand(xv, bv, act);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO(act << " element " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

}  // namespace

TEST_CASE("bias_add: two rows by hand", "[bias_add]") {
  // x = [[1, -2, 3], [-4, 5, -6]], bias = [0.5, 1, -1]: x + bias = [[1.5, -1, 2], [-3.5, 6, -7]]
  const Tensor x = constant({1.0, -2.0, 3.0, -4.0, 5.0, -6.0}, Shape{2, 3});
  const Tensor b = constant({0.5, 1.0, -1.0}, Shape{3});
  CHECK(bias_add(x, b).to_vector<float>() == std::vector<float>{1.5f, -1.f, 2.f, -3.5f, 6.f, -7.f});
  CHECK(bias_add(x, b, "relu").to_vector<float>() == std::vector<float>{1.5f, 0.f, 2.f, 0.f, 6.f, 0.f});
}

TEST_CASE("bias_add matches the activation of the sum in double for every fused activation and SIMD level",
          "[bias_add]") {
  // Shapes: one short row; rows of 37 (no tile is a whole number of SIMD vectors); 4-D NHWC
  // with 16 channels and over 64k elements (the pool splits it); a row longer than a tile.
  const std::vector<Shape> shapes = {Shape{1, 5}, Shape{300, 37}, Shape{8, 32, 32, 16}, Shape{3, 5000}};
  keel::testing::at_every_simd_level([&](const std::string&) {
    for (const Shape& s : shapes)
      for (const auto& act : kActivations) {
        INFO("shape " << s.to_string());
        check_values(DType::float64, s, act, 1e-14);
        check_values(DType::float32, s, act, 2e-6);
      }
  });
}

TEST_CASE("bias_add's gradients match finite differences in float64", "[bias_add][gradcheck]") {
  for (const auto& act : kActivations) {
    INFO(act);
    keel_test::check_gradients([&](const std::vector<Tensor>& in) { return bias_add(in[0], in[1], act); },
                               {constant(wavy(24, 0.7), Shape{2, 3, 4}, DType::float64),
                                constant(wavy(4, 0.2), Shape{4}, DType::float64)});
  }
}

TEST_CASE("bias_add's gradients equal those of the unfused ops, also the second derivative", "[bias_add]") {
  const Tensor x = constant(wavy(60, 0.5), Shape{5, 12}, DType::float64);
  const Tensor b = constant(wavy(12, 0.9), Shape{12}, DType::float64);
  const Tensor w = constant(wavy(60, 2.0), Shape{5, 12}, DType::float64);
  const auto unfused = [](const std::string& act, const Tensor& z) {
    if (act == "relu") return relu(z);
    if (act == "sigmoid") return sigmoid(z);
    if (act == "tanh") return keel::tanh(z);
    if (act == "exponential") return keel::exp(z);
    return z;
  };
  for (const auto& act : kActivations) {
    INFO(act);
    // First and second derivatives of sum(y * w) with respect to x and bias, both ways.
    const auto grads = [&](bool fused) {
      GradientTape outer;
      outer.watch(x);
      outer.watch(b);
      std::vector<Tensor> g;
      {
        GradientTape inner;
        inner.watch(x);
        inner.watch(b);
        const Tensor y = fused ? bias_add(x, b, act) : unfused(act, x + b);
        g = inner.gradient(reduce_sum(y * w), {x, b});
      }
      std::vector<Tensor> out = g;
      const auto g2 = outer.gradient(reduce_sum(g[0] * g[0]) + reduce_sum(g[1]), {x, b});
      out.insert(out.end(), g2.begin(), g2.end());
      return out;
    };
    const auto f = grads(true), u = grads(false);
    for (std::size_t i = 0; i < f.size(); ++i) {
      INFO("derivative " << i);
      REQUIRE(f[i].defined() == u[i].defined());
      if (!f[i].defined()) continue;
      const auto fv = f[i].to_vector<double>(), uv = u[i].to_vector<double>();
      REQUIRE(fv.size() == uv.size());
      for (std::size_t e = 0; e < fv.size(); ++e) CHECK(fv[e] == Approx(uv[e]).epsilon(1e-12).margin(1e-12));
    }
  }
}

TEST_CASE("bias_add keeps NaN and infinities as the activation of the sum does", "[bias_add]") {
  const double nan = std::nan(""), inf = INFINITY;
  const Tensor x = constant({nan, inf, -inf, 1.0}, Shape{2, 2});
  const Tensor b = constant({0.0, -inf}, Shape{2});
  // x + b = [[NaN, NaN (inf - inf)], [-inf, -inf]]
  const auto relu_v = bias_add(x, b, "relu").to_vector<float>();
  CHECK(std::isnan(relu_v[0]));
  CHECK(std::isnan(relu_v[1]));
  CHECK(relu_v[2] == 0.f);
  CHECK(relu_v[3] == 0.f);
  const auto sig = bias_add(x, b, "sigmoid").to_vector<float>();
  CHECK(std::isnan(sig[0]));
  CHECK(sig[2] == 0.f);
}

TEST_CASE("bias_add names its argument errors", "[bias_add][errors]") {
  const Tensor x = ones({4, 3});
  CHECK_THROWS_AS(bias_add(ones({3}), ones({3})), ShapeError);  // TensorFlow's BiasAdd needs 2-D
  CHECK_THROWS_WITH(bias_add(x, ones({4})), Catch::Contains("bias_add") && Catch::Contains("[4,3]"));
  CHECK_THROWS_AS(bias_add(x, ones({4})), ShapeError);
  CHECK_THROWS_AS(bias_add(x, ones({1, 3})), ShapeError);
  CHECK_THROWS_AS(bias_add(x, ones({3}, DType::float64)), DTypeError);
  CHECK_THROWS_AS(bias_add(x, ones({3}), "softmax"), ValueError);
  CHECK_THROWS_AS(bias_add(x, Tensor()), Error);
  // Integers add (tf.nn.bias_add takes them); an activation needs floating point.
  CHECK(bias_add(ones({2, 2}, DType::int32), ones({2}, DType::int32)).to_vector<int>() == std::vector<int>{2, 2, 2, 2});
  CHECK_THROWS_AS(bias_add(ones({2, 2}, DType::int32), ones({2}, DType::int32), "relu"), DTypeError);
}

TEST_CASE("bias_add: a view as x, and an empty batch", "[bias_add]") {
  const Tensor base = constant(wavy(24, 0.1), Shape{4, 6}, DType::float64);
  const Tensor view = transpose(base);  // [6, 4], not contiguous
  const Tensor b = constant(wavy(4, 0.4), Shape{4}, DType::float64);
  const auto got = bias_add(view, b, "tanh").to_vector<double>();
  const auto want = by_hand(view.contiguous().to_vector<double>(), b.to_vector<double>(), "tanh");
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-15));
  CHECK(bias_add(zeros({0, 4}), ones({4}), "relu").shape() == Shape({0, 4}));
}

TEST_CASE("a traced function sees bias_add's add and activation, which its fusion pass fuses", "[bias_add][function]") {
  const Tensor b = constant(wavy(8, 0.6), Shape{8});
  auto f = keel::function([&](const Tensor& x) { return bias_add(x, b, "relu") * 2.0; });
  const Tensor x = constant(wavy(32, 0.2), Shape{4, 8});
  const auto traced = f(x).to_vector<float>();
  const auto eager = (bias_add(x, b, "relu") * 2.0).to_vector<float>();
  CHECK(traced == eager);
  for (const auto& op : f.concrete_graph(x).operations()) CHECK_THAT(op.type, !Catch::StartsWith("BiasAdd"));
}

TEST_CASE("Dense and Conv2D end with the fused bias and activation, a user's function runs as given",
          "[bias_add][layers]") {
  // Dense: relu(x k + b) by hand for every fused activation against the layer.
  const Tensor x = constant(wavy(12, 0.3), Shape{3, 4}, DType::float32);
  for (const auto& act : kActivations) {
    INFO(act);
    layers::Dense dense(5, {.activation = act, .bias_initializer = "random_normal"});
    const Tensor y = dense(x);
    const auto xk = matmul(x, dense.kernel().value()).to_vector<double>();
    const auto want = by_hand(xk, dense.bias().value().to_vector<double>(), act);
    const auto got = y.to_vector<double>();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6).margin(1e-6));
  }
  // A function the user named "relu" is the user's (here 2z), not the library's relu.
  const activations::ActivationFn doubled([](const Tensor& z) { return z * 2.0; }, "relu");
  CHECK_FALSE(doubled.is_builtin());
  CHECK(activations::ActivationFn("relu").is_builtin());
  layers::Dense custom(2, {.activation = doubled, .bias_initializer = "ones"});
  const Tensor one = constant({-1.0, 0.5}, Shape{1, 2}, DType::float32);
  const Tensor y = custom(one);
  const auto z = (matmul(one, custom.kernel().value()) + 1.0).to_vector<double>();
  const auto got = y.to_vector<double>();
  CHECK(got[0] == Approx(2 * z[0]));
  CHECK(got[1] == Approx(2 * z[1]));
  // Conv2D: sigmoid(conv + bias) by hand.
  const Tensor img = constant(wavy(2 * 5 * 5 * 3, 0.8), Shape{2, 5, 5, 3}, DType::float32);
  layers::Conv2D last(4, {3, 3}, {.padding = "same", .activation = "sigmoid", .bias_initializer = "random_normal"});
  const Tensor yl = last(img);
  const auto conv = conv2d(img, last.kernel().value(), {1, 1}, "same").to_vector<double>();
  const auto want = by_hand(conv, last.bias().value().to_vector<double>(), "sigmoid");
  const auto got_l = yl.to_vector<double>();
  for (std::size_t i = 0; i < got_l.size(); ++i) CHECK(got_l[i] == Approx(want[i]).epsilon(1e-6));
  // channels_first with the same weights: the same values, transposed; its activation sees
  // channels_first values (a softmax's last axis is the width there, as in Keras).
  for (const std::string act : {"sigmoid", "softmax"}) {
    INFO(act);
    layers::Conv2D cl(4, {3, 3}, {.padding = "same", .activation = act});
    layers::Conv2D cf(4, {3, 3}, {.padding = "same", .data_format = "channels_first", .activation = act});
    cl(img);  // builds its weights
    const Tensor img_cf = transpose(img, {0, 3, 1, 2});
    cf(img_cf);
    cf.kernel().assign(cl.kernel().value());
    cf.bias().assign(constant(wavy(4, 1.5), Shape{4}, DType::float32));
    cl.bias().assign(cf.bias().value());
    const Tensor linear_cl = conv2d(img, cl.kernel().value(), {1, 1}, "same") + cl.bias().value();
    const Tensor expect_cf = act == "softmax" ? softmax(transpose(linear_cl, {0, 3, 1, 2}), -1)
                                              : sigmoid(transpose(linear_cl, {0, 3, 1, 2}));
    const auto got_cf = cf(img_cf).to_vector<double>(), exp_cf = expect_cf.to_vector<double>();
    for (std::size_t i = 0; i < got_cf.size(); ++i) CHECK(got_cf[i] == Approx(exp_cf[i]).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("Conv3D ends like Conv2D: fused on channels_last, the activation after the layout on channels_first",
          "[bias_add][layers]") {
  // The same weights with and without the activation: tanh(linear) on channels_last, and on
  // channels_first softmax over the last axis of the channels_first result (the width).
  const Tensor x = constant(wavy(2 * 4 * 5 * 6 * 3, 0.4), Shape{2, 4, 5, 6, 3}, DType::float32);
  const Tensor bias = constant(wavy(4, 0.9), Shape{4}, DType::float32);
  layers::Conv3D linear(4, 2, {.padding = "same"});
  const Tensor y_lin = [&] {
    linear(x);
    linear.bias().assign(bias);
    return linear(x);
  }();
  layers::Conv3D with_tanh(4, 2, {.padding = "same", .activation = "tanh"});
  with_tanh(x);
  with_tanh.kernel().assign(linear.kernel().value());
  with_tanh.bias().assign(bias);
  const auto got = with_tanh(x).to_vector<double>(), want = keel::tanh(y_lin).to_vector<double>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6).margin(1e-7));

  const Tensor x_cf = transpose(x, {0, 4, 1, 2, 3});
  layers::Conv3D cf(4, 2, {.padding = "same", .data_format = "channels_first", .activation = "softmax"});
  cf(x_cf);
  cf.kernel().assign(linear.kernel().value());
  cf.bias().assign(bias);
  const auto got_cf = cf(x_cf).to_vector<double>();
  const auto want_cf = softmax(transpose(y_lin, {0, 4, 1, 2, 3}), -1).to_vector<double>();
  for (std::size_t i = 0; i < got_cf.size(); ++i) CHECK(got_cf[i] == Approx(want_cf[i]).epsilon(1e-5).margin(1e-6));
}
