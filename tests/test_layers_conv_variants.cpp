// Conv1DTranspose, Conv3D, Conv3DTranspose, SeparableConv1D/2D, DepthwiseConv1D and their ops
// (conv3d, conv3d_transpose, conv1d_transpose, depthwise_conv1d): values against plain loops or
// the 2-D ops they reduce to, output shapes, float64 gradients, errors, config round trips.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <vector>

#include "conv_family_fixtures.hpp"
#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;
using keel_test::check_round_trip;
using keel_test::conv3d_reference;
using keel_test::max_abs_diff;
using keel_test::wavy;

namespace {

// sum(a * b): the inner product the adjoint checks use.
double dot(const Tensor& a, const Tensor& b) {
  const auto x = keel_test::values(a), y = keel_test::values(b);
  REQUIRE(x.size() == y.size());
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

TEST_CASE("conv3d matches a plain loop for every padding, stride and dilation", "[conv_variants][conv3d]") {
  const Tensor x = wavy({2, 5, 4, 6, 3});
  const Tensor k = wavy({3, 2, 3, 3, 2}, 0.7);
  for (bool same : {false, true})
    for (std::array<int, 3> s : {std::array<int, 3>{1, 1, 1}, {2, 1, 2}, {3, 2, 1}}) {
      const Tensor y = conv3d(x, k, s, same ? "same" : "valid");
      const Tensor ref = conv3d_reference(x, k, s, same);
      CHECK(y.shape() == ref.shape());
      CHECK(max_abs_diff(y, ref) < 1e-9);
    }
  const Tensor yd = conv3d(x, k, {1, 1, 1}, "same", {2, 1, 2});
  CHECK(max_abs_diff(yd, conv3d_reference(x, k, {1, 1, 1}, true, {2, 1, 2})) < 1e-9);
  // Shapes: valid (5-3)/1+1 = 3, (4-2)+1 = 3, (6-3)+1 = 4; same ceil(5/2) = 3, 2, 3.
  CHECK(conv3d(x, k).shape() == Shape{2, 3, 3, 4, 2});
  CHECK(conv3d(x, k, {2, 2, 2}, "same").shape() == Shape{2, 3, 2, 3, 2});
  // A non-contiguous input (a transposed view) gives the same values as its copy.
  const Tensor xt = transpose(wavy({2, 4, 5, 6, 3}), {0, 2, 1, 3, 4});
  CHECK(max_abs_diff(conv3d(xt, k), conv3d(xt.contiguous(), k)) < 1e-12);
  // An empty batch keeps its shape.
  CHECK(conv3d(wavy({0, 5, 4, 6, 3}), k).shape() == Shape{0, 3, 3, 4, 2});
}

TEST_CASE("conv3d errors name the op and the shapes", "[conv_variants][conv3d]") {
  const Tensor x = wavy({1, 2, 4, 4, 3});
  CHECK_THROWS_AS(conv3d(x, wavy({3, 1, 1, 3, 2})), ShapeError);  // depth 3 > 2 with valid
  CHECK_THROWS_AS(conv3d(x, wavy({1, 1, 1, 2, 2})), ShapeError);  // 2 in-channels vs 3
  CHECK_THROWS_AS(conv3d(wavy({2, 4, 4, 3}), wavy({1, 1, 1, 3, 2})), ShapeError);
  CHECK_THROWS_AS(conv3d(x, wavy({1, 1, 1, 3, 2}), {0, 1, 1}), ValueError);
  CHECK_THROWS_AS(conv3d(x, wavy({1, 1, 1, 3, 2}), {1, 1, 1}, "full"), ValueError);
  CHECK_THROWS_WITH(conv3d(x, wavy({1, 1, 1, 2, 2})), Catch::Contains("conv3d") && Catch::Contains("[1,2,4,4,3]"));
}

TEST_CASE("conv3d_transpose is the adjoint of conv3d", "[conv_variants][conv3d_transpose]") {
  // <conv3d(a, K), b> = <a, conv3d_transpose(b, K)>: the defining property of the transpose,
  // with sizes whose deconv length is a's (valid s=1: (3-1)+2 = 4; same s=2: 2*2 = 4; valid s=2,
  // k=3: 2*2 + max(3-2, 0) = 5).
  struct Case {
    Shape a;
    Shape k;
    std::array<int, 3> s;
    const char* padding;
  };
  for (const Case& c : {Case{{2, 4, 4, 5, 3}, {2, 2, 3, 3, 2}, {1, 1, 1}, "valid"},
                        Case{{1, 4, 6, 4, 2}, {3, 3, 2, 2, 3}, {2, 2, 2}, "same"},
                        Case{{1, 5, 5, 5, 2}, {3, 3, 3, 2, 2}, {2, 2, 2}, "valid"}}) {
    const Tensor a = wavy(c.a), k = wavy(c.k, 1.3);
    const Tensor y = conv3d(a, k, c.s, c.padding);
    const Tensor b = wavy(y.shape(), 2.1);
    const Tensor t = conv3d_transpose(b, k, c.s, c.padding);
    REQUIRE(t.shape() == a.shape());
    CHECK(dot(y, b) == Approx(dot(a, t)).epsilon(1e-10));
  }
  // output_padding adds rows at the end: depth (2-1)*2 + 3 + 1 = 6.
  CHECK(conv3d_transpose(wavy({1, 2, 2, 2, 1}), wavy({3, 3, 3, 4, 1}), {2, 2, 2}, "valid",
                         std::array<int, 3>{1, 0, 1})
            .shape() == Shape{1, 6, 5, 6, 4});
  CHECK_THROWS_AS(conv3d_transpose(wavy({1, 2, 2, 2, 1}), wavy({3, 3, 3, 4, 1}), {2, 2, 2}, "valid",
                                   std::array<int, 3>{2, 0, 0}),
                  ValueError);
  CHECK_THROWS_AS(conv3d_transpose(wavy({1, 2, 2, 2, 2}), wavy({3, 3, 3, 4, 1})), ShapeError);
}

TEST_CASE("1-D transposed and depthwise convolutions reduce to the 2-D ops", "[conv_variants][conv1d]") {
  const Tensor x = wavy({2, 5, 3});
  const Tensor kt = wavy({3, 4, 3}, 0.5);
  const Tensor y = conv1d_transpose(x, kt, 2, "same");
  CHECK(y.shape() == Shape{2, 10, 4});  // same: 5 * 2
  const Tensor y2 = conv2d_transpose(expand_dims(x, 1), expand_dims(kt, 0), {1, 2}, "same");
  CHECK(max_abs_diff(y, squeeze(y2, {1})) < 1e-12);
  CHECK(conv1d_transpose(x, kt, 2, "valid").shape() == Shape{2, 11, 4});  // 5*2 + max(3-2, 0)
  // depthwise_conv1d by hand: x [1, 3, 1] = [1, 2, 3], kernel [2, 1, 2] taps (1, 10) and (-1, 1):
  // multiplier 0: 1*1 + 2*10 = 21, 2 + 30 = 32; multiplier 1: -1 + 2 = 1, -2 + 3 = 1.
  const Tensor d = depthwise_conv1d(keel_test::f64({1, 2, 3}, {1, 3, 1}), keel_test::f64({1, -1, 10, 1}, {2, 1, 2}));
  CHECK(keel_test::values(d) == std::vector<double>{21, 1, 32, 1});
  CHECK_THROWS_AS(depthwise_conv1d(wavy({2, 5}), wavy({2, 1, 2})), ShapeError);
}

TEST_CASE("the 3-D and 1-D convolution ops have float64 gradients", "[conv_variants][grad]") {
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return conv3d(v[0], v[1], {2, 1, 1}, "same"); },
                             {wavy({1, 3, 3, 2, 2}), wavy({2, 2, 1, 2, 2}, 0.9)});
  keel_test::check_gradients(
      [](const std::vector<Tensor>& v) { return conv3d_transpose(v[0], v[1], {2, 1, 2}, "same"); },
      {wavy({1, 2, 2, 2, 2}), wavy({2, 2, 2, 3, 2}, 0.9)});
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return conv1d_transpose(v[0], v[1], 2); },
                             {wavy({2, 3, 2}), wavy({3, 2, 2}, 0.4)});
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return depthwise_conv1d(v[0], v[1], 1, "same"); },
                             {wavy({2, 4, 2}), wavy({3, 2, 2}, 0.4)});
}

TEST_CASE("Conv3D and Conv3DTranspose layers: bias, shapes, channels_first, groups", "[conv_variants][layers]") {
  const Tensor x = cast(wavy({2, 4, 5, 6, 4}), DType::float32);
  layers::Conv3D conv(3, {2, 3, 3}, {.strides = {1, 2, 2}, .padding = "same", .bias_initializer = "ones"});
  const Tensor y = conv(x);
  CHECK(y.shape() == Shape{2, 4, 3, 3, 3});
  CHECK(conv.kernel().value().shape() == Shape{2, 3, 3, 4, 3});
  // The layer is conv3d + bias (bias ones).
  CHECK(max_abs_diff(y, conv3d(x, conv.kernel().value(), {1, 2, 2}, "same") + 1.0) < 1e-5);
  check_round_trip(conv, x);

  layers::Conv3D grouped(4, 1, {.groups = 2});
  CHECK(grouped(x).shape() == Shape{2, 4, 5, 6, 4});
  CHECK(grouped.kernel().value().shape() == Shape{1, 1, 1, 2, 4});
  CHECK_THROWS_AS(layers::Conv3D(3, 1, {.groups = 2}), ValueError);

  // channels_first sees the transposed input and returns the transposed output.
  layers::Conv3D cf(3, 2, {.data_format = "channels_first"});
  const Tensor ycf = cf(transpose(x, {0, 4, 1, 2, 3}));
  CHECK(ycf.shape() == Shape{2, 3, 3, 4, 5});
  CHECK(max_abs_diff(transpose(ycf, {0, 2, 3, 4, 1}), conv3d(x, cf.kernel().value()) + cf.bias().value()) < 1e-5);

  layers::Conv3DTranspose up(2, 3, {.strides = {2, 2, 2}, .padding = "same"});
  CHECK(up(x).shape() == Shape{2, 8, 10, 12, 2});
  CHECK(up.kernel().value().shape() == Shape{3, 3, 3, 2, 4});
  check_round_trip(up, x);
  layers::Conv3DTranspose opad(2, 3, {.strides = {2, 2, 2}, .output_padding = {1, 0, 1}});
  CHECK(opad(x).shape() == Shape{2, 10, 11, 14, 2});  // (4-1)*2 + 3 + 1 = 10, (5-1)*2+3 = 11, 13+1
  check_round_trip(opad, x);
  CHECK_THROWS_AS(layers::Conv3DTranspose(2, 3, {.strides = {2, 2, 2}, .output_padding = 2}), ValueError);
  CHECK_THROWS_AS(layers::Conv3D(2, 3)(cast(wavy({2, 4, 4, 3}), DType::float32)), ShapeError);
}

TEST_CASE("Conv1DTranspose, SeparableConv1D/2D and DepthwiseConv1D layers", "[conv_variants][layers]") {
  const Tensor x1 = cast(wavy({2, 7, 3}), DType::float32);
  layers::Conv1DTranspose t(4, 3, {.strides = 2, .padding = "same"});
  CHECK(t(x1).shape() == Shape{2, 14, 4});
  CHECK(t.kernel().value().shape() == Shape{3, 4, 3});
  check_round_trip(t, x1);
  layers::Conv1DTranspose tp(4, 3, {.strides = 2, .output_padding = 1});
  CHECK(tp(x1).shape() == Shape{2, 16, 4});  // (7-1)*2 + 3 + 1
  check_round_trip(tp, x1);
  CHECK_THROWS_AS(layers::Conv1DTranspose(4, 3, {.strides = 2, .output_padding = 2}), ValueError);

  // SeparableConv1D = depthwise then pointwise then bias.
  layers::SeparableConv1D s1(5, 3, {.padding = "same", .depth_multiplier = 2, .bias_initializer = "ones"});
  const Tensor y1 = s1(x1);
  CHECK(y1.shape() == Shape{2, 7, 5});
  CHECK(s1.depthwise_kernel().value().shape() == Shape{3, 3, 2});
  CHECK(s1.pointwise_kernel().value().shape() == Shape{1, 6, 5});
  const Tensor ref1 = conv1d(depthwise_conv1d(x1, s1.depthwise_kernel().value(), 1, "same"),
                             s1.pointwise_kernel().value()) + 1.0;
  CHECK(max_abs_diff(y1, ref1) < 1e-5);
  check_round_trip(s1, x1);

  const Tensor x2 = cast(wavy({2, 6, 5, 3}), DType::float32);
  layers::SeparableConv2D s2(4, {3, 2}, {.strides = {2, 1}, .depth_multiplier = 1});
  const Tensor y2 = s2(x2);
  CHECK(y2.shape() == Shape{2, 2, 4, 4});  // valid: (6-3)/2+1 = 2, 5-2+1 = 4
  CHECK(max_abs_diff(y2, conv2d(depthwise_conv2d(x2, s2.depthwise_kernel().value(), {2, 1}),
                                s2.pointwise_kernel().value())) < 1e-5);
  check_round_trip(s2, x2);
  CHECK_THROWS_AS(layers::SeparableConv2D(4, 3, {.depth_multiplier = 0}), ValueError);

  layers::DepthwiseConv1D dw(3, {.strides = 2, .depth_multiplier = 2, .data_format = "channels_first"});
  const Tensor ycf = dw(transpose(x1, {0, 2, 1}));
  CHECK(ycf.shape() == Shape{2, 6, 3});  // valid (7-3)/2+1 = 3 steps, 3 * 2 channels
  CHECK(max_abs_diff(transpose(ycf, {0, 2, 1}), depthwise_conv1d(x1, dw.depthwise_kernel().value(), 2)) < 1e-5);
  check_round_trip(dw, transpose(x1, {0, 2, 1}));
  CHECK_THROWS_AS(layers::DepthwiseConv1D(3, {.padding = "causal"}), ValueError);
}
