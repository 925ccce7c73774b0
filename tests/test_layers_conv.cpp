// Convolution and pooling layers: parameter counts and output shapes against Keras' formulas,
// forward values against numbers worked out by hand for small fixed weights (set with
// Variable::assign), gradients through the layers, Keras' configs, argument and shape errors,
// and the parameter totals of the samples' CIFAR-10 CNN.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;
using i64 = std::int64_t;

namespace {

// 1, 2, ..., n as float32 in the given shape.
Tensor iota(const Shape& shape, double start = 1) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(start + static_cast<double>(i));
  return constant(v, shape);
}

void check_values(const Tensor& y, const std::vector<double>& expected, double eps = 1e-5) {
  const auto got = y.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(eps));
  }
}

i64 count(const std::vector<Variable*>& vars) {
  i64 n = 0;
  for (const auto* v : vars) n += v->shape().num_elements();
  return n;
}

}  // namespace

// ---- parameter counts and shapes --------------------------------------------------------------

TEST_CASE("Conv2D has kh*kw*in*out + out parameters and Keras' output shapes") {
  SECTION("valid, stride 1: out = in - k + 1") {
    layers::Conv2D conv(8, {3, 3});
    const Tensor y = conv(zeros({2, 9, 7, 3}));
    CHECK(y.shape() == Shape{2, 7, 5, 8});
    CHECK(conv.count_params() == 3 * 3 * 3 * 8 + 8);
    CHECK(conv.kernel().shape() == Shape{3, 3, 3, 8});
    CHECK(conv.bias().shape() == Shape{8});
    CHECK(conv.trainable_weights().size() == 2);
    CHECK(conv.non_trainable_weights().empty());
  }
  SECTION("same, stride 2: out = ceil(in / 2)") {
    layers::Conv2D conv(4, {3, 3}, {.strides = {2, 2}, .padding = "same"});
    CHECK(conv(zeros({1, 9, 8, 2})).shape() == Shape{1, 5, 4, 4});
    CHECK(conv.count_params() == 3 * 3 * 2 * 4 + 4);
  }
  SECTION("rectangular kernel, dilation 2: k_eff = (k - 1) * 2 + 1") {
    layers::Conv2D conv(5, {3, 2}, {.dilation_rate = {2, 2}});
    CHECK(conv(zeros({1, 10, 10, 3})).shape() == Shape{1, 10 - 4, 10 - 2, 5});
    CHECK(conv.count_params() == 3 * 2 * 3 * 5 + 5);
  }
  SECTION("no bias: kh*kw*in*out") {
    layers::Conv2D conv(8, 3, {.use_bias = false});
    conv(zeros({1, 5, 5, 3}));
    CHECK(conv.count_params() == 3 * 3 * 3 * 8);
    CHECK(conv.weights().size() == 1);
    CHECK_THROWS_AS(conv.bias(), ValueError);
  }
  SECTION("groups: kh*kw*(in/groups)*out + out") {
    layers::Conv2D conv(6, {3, 3}, {.groups = 2});
    CHECK(conv(zeros({1, 5, 5, 4})).shape() == Shape{1, 3, 3, 6});
    CHECK(conv.kernel().shape() == Shape{3, 3, 2, 6});
    CHECK(conv.count_params() == 3 * 3 * 2 * 6 + 6);
  }
  SECTION("channels_first: [N, C, H, W] in and out") {
    layers::Conv2D conv(4, {3, 3}, {.data_format = "channels_first"});
    CHECK(conv(zeros({2, 3, 6, 5})).shape() == Shape{2, 4, 4, 3});
    CHECK(conv.kernel().shape() == Shape{3, 3, 3, 4});
  }
}

TEST_CASE("Conv1D has k*in*out + out parameters and valid, same and causal output lengths") {
  layers::Conv1D valid(4, 3);
  CHECK(valid(zeros({2, 10, 5})).shape() == Shape{2, 8, 4});
  CHECK(valid.count_params() == 3 * 5 * 4 + 4);
  CHECK(valid.kernel().shape() == Shape{3, 5, 4});
  layers::Conv1D same(4, 3, {.strides = 2, .padding = "same"});
  CHECK(same(zeros({2, 9, 5})).shape() == Shape{2, 5, 4});
  layers::Conv1D causal(4, 3, {.padding = "causal", .dilation_rate = 2});
  CHECK(causal(zeros({2, 10, 5})).shape() == Shape{2, 10, 4});
}

TEST_CASE("Conv2DTranspose has a [kh, kw, out, in] kernel and Keras' deconvolution output sizes") {
  SECTION("valid: (in - 1) * s + k") {
    layers::Conv2DTranspose up(4, {3, 3}, {.strides = {2, 2}});
    CHECK(up(zeros({1, 5, 5, 2})).shape() == Shape{1, 11, 11, 4});
    CHECK(up.kernel().shape() == Shape{3, 3, 4, 2});
    CHECK(up.count_params() == 3 * 3 * 2 * 4 + 4);
  }
  SECTION("same: in * s") {
    layers::Conv2DTranspose up(4, {3, 3}, {.strides = {2, 2}, .padding = "same"});
    CHECK(up(zeros({1, 5, 6, 2})).shape() == Shape{1, 10, 12, 4});
  }
  SECTION("output_padding adds to one side: (in - 1) * s + k - 2 * pad + output_padding") {
    layers::Conv2DTranspose up(1, {3, 3}, {.strides = {2, 2}, .padding = "same", .output_padding = {1, 0}});
    // same padding of a 3-wide kernel is 1 per side: (5 - 1) * 2 + 3 - 2 + 1 = 10, and 9 with 0.
    CHECK(up(zeros({1, 5, 5, 1})).shape() == Shape{1, 10, 9, 1});
  }
}

TEST_CASE("DepthwiseConv2D has kh*kw*in*mult + in*mult parameters") {
  layers::DepthwiseConv2D dw({3, 3}, {.depth_multiplier = 2});
  CHECK(dw(zeros({1, 6, 6, 3})).shape() == Shape{1, 4, 4, 6});
  CHECK(dw.depthwise_kernel().shape() == Shape{3, 3, 3, 2});
  CHECK(dw.bias().shape() == Shape{6});
  CHECK(dw.count_params() == 3 * 3 * 3 * 2 + 3 * 2);
  CHECK(dw.depthwise_kernel().name() == dw.name() + "/depthwise_kernel");
}

TEST_CASE("pooling layers have no parameters and Keras' output shapes") {
  CHECK(layers::MaxPooling2D()(zeros({2, 7, 8, 3})).shape() == Shape{2, 3, 4, 3});  // floor(7 / 2)
  CHECK(layers::MaxPooling2D({2, 2}, {.padding = "same"})(zeros({2, 7, 8, 3})).shape() == Shape{2, 4, 4, 3});
  CHECK(layers::MaxPooling2D({3, 3}, {.strides = {1, 1}})(zeros({1, 5, 5, 1})).shape() == Shape{1, 3, 3, 1});
  CHECK(layers::AveragePooling2D(3)(zeros({1, 9, 6, 2})).shape() == Shape{1, 3, 2, 2});
  CHECK(layers::GlobalAveragePooling2D()(zeros({2, 5, 4, 3})).shape() == Shape{2, 3});
  CHECK(layers::GlobalMaxPooling2D({.keepdims = true})(zeros({2, 5, 4, 3})).shape() == Shape{2, 1, 1, 3});
  CHECK(layers::GlobalAveragePooling2D({.data_format = "channels_first", .keepdims = true})(zeros({2, 3, 5, 4}))
            .shape() == Shape{2, 3, 1, 1});
  layers::MaxPooling2D pool;
  pool(zeros({1, 4, 4, 1}));
  CHECK(pool.count_params() == 0);
  CHECK(pool.strides() == std::array<int, 2>{2, 2});  // Keras: strides default to pool_size
  // Pooling keeps no channel count: another number of channels is fine once built.
  CHECK(pool(zeros({1, 4, 4, 5})).shape() == Shape{1, 2, 2, 5});
}

// ---- values -----------------------------------------------------------------------------------

TEST_CASE("Conv2D computes hand-derived values from fixed weights") {
  // x: one 3x3 image, 1..9. Filter 0 sums a 2x2 window; filter 1 is x[i][j] - x[i+1][j+1] = -4.
  layers::Conv2D conv(2, {2, 2}, {.activation = "relu"});
  const Tensor x = iota({1, 3, 3, 1});
  conv(x);
  // [kh, kw, in, out] row-major: (i, j) -> {filter 0, filter 1}.
  conv.kernel().assign(constant({1.f, 1.f, 1.f, 0.f, 1.f, 0.f, 1.f, -1.f}, Shape{2, 2, 1, 2}));
  conv.bias().assign(constant({1.f, 0.5f}, Shape{2}));
  // Windows: 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24, 5+6+8+9 = 28; + bias 1.
  // Filter 1: -4 + 0.5 = -3.5, which relu clips to 0.
  const Tensor y = conv(x);
  CHECK(y.shape() == Shape{1, 2, 2, 2});
  check_values(y, {13, 0, 17, 0, 25, 0, 29, 0});
}

TEST_CASE("Conv2D with same padding sums only the positions inside the image") {
  layers::Conv2D conv(1, {3, 3}, {.padding = "same", .use_bias = false});
  const Tensor x = iota({1, 2, 2, 1});
  conv(x);
  conv.kernel().assign(ones({3, 3, 1, 1}));
  // Every 3x3 window centred on a pixel of a 2x2 image covers the whole image: 1+2+3+4.
  check_values(conv(x), {10, 10, 10, 10});
}

TEST_CASE("Conv2D channels_first equals channels_last on transposed data") {
  layers::Conv2D last(3, {2, 2}, {.kernel_initializer = "he_normal", .bias_initializer = "ones"});
  layers::Conv2D first(3, {2, 2}, {.data_format = "channels_first"});
  const Tensor x = random::normal({2, 4, 5, 2});
  const Tensor y = last(x);
  first(transpose(x, {0, 3, 1, 2}));
  first.kernel().assign(last.kernel().value());
  first.bias().assign(last.bias().value());
  const Tensor y_first = first(transpose(x, {0, 3, 1, 2}));
  CHECK(y_first.shape() == Shape{2, 3, 3, 4});
  check_values(transpose(y_first, {0, 2, 3, 1}), y.to_vector<double>());
}

TEST_CASE("Conv2D with groups convolves each channel group with its own filters") {
  // in 2, filters 2, groups 2: output channel g sees only input channel g.
  layers::Conv2D conv(2, {1, 1}, {.groups = 2, .use_bias = false});
  const Tensor x = constant({1.f, 10.f, 2.f, 20.f}, Shape{1, 1, 2, 2});
  conv(x);
  conv.kernel().assign(constant({3.f, 5.f}, Shape{1, 1, 1, 2}));
  check_values(conv(x), {3, 50, 6, 100});
}

TEST_CASE("Conv1D computes hand-derived values, with and without causal padding") {
  const Tensor x = iota({1, 4, 1});  // 1 2 3 4
  const Tensor k = constant({2.f, 1.f}, Shape{2, 1, 1});  // y[t] = 2 x[t] + x[t+1]
  layers::Conv1D valid(1, 2, {.use_bias = false});
  valid(x);
  valid.kernel().assign(k);
  check_values(valid(x), {4, 7, 10});
  // causal: one zero before, so y[t] = 2 x[t-1] + x[t]: 0+1, 2+2, 4+3, 6+4.
  layers::Conv1D causal(1, 2, {.padding = "causal", .use_bias = false});
  causal(x);
  causal.kernel().assign(k);
  check_values(causal(x), {1, 4, 7, 10});
}

TEST_CASE("Conv2DTranspose spreads each input pixel over its kernel") {
  // stride 2, 2x2 kernel of ones: pixel (i, j) fills the 2x2 block at (2i, 2j).
  layers::Conv2DTranspose up(1, {2, 2}, {.strides = {2, 2}, .bias_initializer = "ones"});
  const Tensor x = iota({1, 2, 2, 1});
  up(x);
  up.kernel().assign(ones({2, 2, 1, 1}));
  check_values(up(x), {2, 2, 3, 3, 2, 2, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5});
}

TEST_CASE("DepthwiseConv2D filters each channel separately, output channel c*mult + m") {
  // Channel 0: 1 2 3 4 (sum 10); channel 1: 10 20 30 40 (sum 100). One 2x2 window.
  const Tensor x = constant({1.f, 10.f, 2.f, 20.f, 3.f, 30.f, 4.f, 40.f}, Shape{1, 2, 2, 2});
  layers::DepthwiseConv2D dw({2, 2}, {.depth_multiplier = 2});
  dw(x);
  // [kh, kw, in, mult]: (c0, m0) = 1, (c0, m1) = -1, (c1, m0) = 0.5, (c1, m1) = 0 at every tap.
  const std::vector<float> per_tap{1.f, -1.f, 0.5f, 0.f};
  std::vector<float> k;
  for (int i = 0; i < 16; ++i) k.push_back(per_tap[static_cast<std::size_t>(i % 4)]);
  dw.depthwise_kernel().assign(constant(k, Shape{2, 2, 2, 2}));
  dw.bias().assign(constant({0.f, 1.f, 2.f, 3.f}, Shape{4}));
  check_values(dw(x), {10, -10 + 1, 50 + 2, 0 + 3});
}

TEST_CASE("MaxPooling2D and AveragePooling2D compute window maxima and means") {
  const Tensor x = iota({1, 4, 4, 1});  // rows 1-4, 5-8, 9-12, 13-16
  check_values(layers::MaxPooling2D()(x), {6, 8, 14, 16});
  check_values(layers::AveragePooling2D()(x), {3.5, 5.5, 11.5, 13.5});
  // Stride 1: overlapping 3x3 windows of the 4x4 image.
  check_values(layers::MaxPooling2D({3, 3}, {.strides = {1, 1}})(x), {11, 12, 15, 16});
  // same padding on 3x3 (1..9): windows at rows/cols {0,1} and {2}; the mean skips the padding.
  const Tensor x3 = iota({1, 3, 3, 1});
  check_values(layers::AveragePooling2D({2, 2}, {.padding = "same"})(x3), {3, 4.5, 7.5, 9});
  check_values(layers::MaxPooling2D({2, 2}, {.padding = "same"})(x3), {5, 6, 8, 9});
}

TEST_CASE("global pooling layers reduce height and width per channel") {
  // Two channels over a 2x2 image: channel 0 = 1 3 5 7, channel 1 = 2 4 6 8.
  const Tensor x = iota({1, 2, 2, 2});
  check_values(layers::GlobalAveragePooling2D()(x), {4, 5});
  check_values(layers::GlobalMaxPooling2D()(x), {7, 8});
  check_values(layers::GlobalMaxPooling2D({.data_format = "channels_first"})(transpose(x, {0, 3, 1, 2})), {7, 8});
}

TEST_CASE("integer images are computed in float32, as Keras") {
  const Tensor x = constant(std::vector<std::uint8_t>{1, 2, 3, 4}, Shape{1, 2, 2, 1});
  const Tensor y = layers::MaxPooling2D()(x);
  CHECK(y.dtype() == DType::float32);
  check_values(y, {4});
  layers::Conv2D conv(2, {1, 1});
  CHECK(conv(x).dtype() == DType::float32);
}

// ---- gradients --------------------------------------------------------------------------------

TEST_CASE("gradients flow through the convolution layers to their inputs") {
  const auto input = [](const Shape& s) { return random::normal(s, 0, 1, DType::float64); };
  layers::Conv2D conv(3, {2, 2}, {.strides = {2, 1}, .padding = "same", .activation = "tanh"});
  check_gradients([&](const std::vector<Tensor>& in) { return conv(in[0]); }, {input({2, 4, 3, 2})});
  layers::Conv1D conv1(2, 3, {.padding = "causal", .groups = 2});
  check_gradients([&](const std::vector<Tensor>& in) { return conv1(in[0]); }, {input({1, 5, 4})});
  layers::Conv2DTranspose up(2, {3, 3}, {.strides = {2, 2}, .padding = "same"});
  check_gradients([&](const std::vector<Tensor>& in) { return up(in[0]); }, {input({1, 2, 3, 2})});
  layers::DepthwiseConv2D dw({2, 2}, {.depth_multiplier = 2, .data_format = "channels_first"});
  check_gradients([&](const std::vector<Tensor>& in) { return dw(in[0]); }, {input({1, 2, 3, 3})});
  layers::AveragePooling2D avg({2, 2}, {.strides = {1, 1}, .padding = "same"});
  check_gradients([&](const std::vector<Tensor>& in) { return avg(in[0]); }, {input({1, 3, 3, 2})});
}

TEST_CASE("a GradientTape reaches the kernel and bias of a Conv2D") {
  layers::Conv2D conv(4, {3, 3}, {.padding = "same"});
  const Tensor x = random::normal({2, 5, 5, 3});
  conv(x);
  GradientTape tape;
  const Tensor loss = reduce_sum(square(conv(x)));
  const auto grads = tape.gradient(loss, conv.trainable_weights());
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].shape() == Shape{3, 3, 3, 4});
  CHECK(grads[1].shape() == Shape{4});
  // d/db sum(y^2) = 2 * sum of y over the positions of each filter.
  const auto y = conv(x).to_vector<double>();
  std::vector<double> expected(4, 0.0);
  for (std::size_t i = 0; i < y.size(); ++i) expected[i % 4] += 2 * y[i];
  check_values(grads[1], expected, 1e-3);
}

TEST_CASE("activity_regularizer adds a loss on the layer's output") {
  layers::Conv2D conv(1, {1, 1}, {.use_bias = false, .activity_regularizer = regularizers::l2(0.5)});
  const Tensor x = iota({1, 1, 2, 1});
  conv(x);
  conv.kernel().assign(full({1, 1, 1, 1}, 2.0));
  conv(x);  // outputs 2 and 4: 0.5 * (4 + 16)
  const auto losses = conv.losses();
  REQUIRE(losses.size() == 1);
  CHECK(losses[0].item<double>() == Approx(10.0));
}

// ---- configs ----------------------------------------------------------------------------------

TEST_CASE("get_config carries the Keras options under Keras' names") {
  layers::Conv2D conv(32, {3, 3}, {.strides = {1, 1}, .padding = "same", .activation = "relu",
                                   .kernel_regularizer = "l2", .name = "c1"});
  const auto c = conv.get_config();
  CHECK(c["name"] == "c1");
  CHECK(c["filters"] == 32);
  CHECK(c["kernel_size"] == nlohmann::json::array({3, 3}));
  CHECK(c["strides"] == nlohmann::json::array({1, 1}));
  CHECK(c["padding"] == "same");
  CHECK(c["data_format"] == "channels_last");
  CHECK(c["dilation_rate"] == nlohmann::json::array({1, 1}));
  CHECK(c["groups"] == 1);
  CHECK(c["activation"] == "relu");
  CHECK(c["use_bias"] == true);
  CHECK(c["kernel_initializer"] == "glorot_uniform");
  CHECK(c["bias_initializer"] == "zeros");
  CHECK(c["kernel_regularizer"]["class_name"] == "L2");
  CHECK(c["bias_regularizer"].is_null());

  const auto p = layers::MaxPooling2D({3, 3}).get_config();
  CHECK(p["pool_size"] == nlohmann::json::array({3, 3}));
  CHECK(p["strides"] == nlohmann::json::array({3, 3}));
  CHECK(p["padding"] == "valid");
  CHECK(layers::Conv1D(4, 5, {.padding = "CAUSAL"}).get_config()["padding"] == "causal");
  CHECK(layers::Conv2DTranspose(4, 3).get_config()["output_padding"].is_null());
  CHECK(layers::DepthwiseConv2D(3, {.depth_multiplier = 4}).get_config()["depth_multiplier"] == 4);
  CHECK(layers::GlobalAveragePooling2D({.keepdims = true}).get_config()["keepdims"] == true);
  CHECK(layers::Conv2D(8, 3).class_name() == "Conv2D");
}

// ---- bad arguments and shapes -----------------------------------------------------------------

TEST_CASE("bad constructor arguments are ValueErrors naming the layer and the value") {
  CHECK_THROWS_WITH(layers::Conv2D(0, {3, 3}, {.name = "bad_conv"}),
                    Contains("bad_conv") && Contains("filters") && Contains("0"));
  CHECK_THROWS_AS(layers::Conv2D(-1, {3, 3}), ValueError);
  CHECK_THROWS_WITH(layers::Conv2D(8, {3, 3}, {.padding = "full"}), Contains("Conv2D") && Contains("\"full\""));
  CHECK_THROWS_AS(layers::Conv2D(8, {3, 0}), ValueError);
  CHECK_THROWS_AS(layers::Conv2D(8, {3, 3}, {.strides = {0, 1}}), ValueError);
  CHECK_THROWS_WITH(layers::Conv2D(6, {3, 3}, {.groups = 4}), Contains("groups"));
  CHECK_THROWS_WITH(layers::Conv2D(8, {3, 3}, {.data_format = "nchw"}), Contains("data_format"));
  CHECK_THROWS_AS(layers::Conv2D(8, {3, 3}, {.padding = "causal"}), ValueError);  // Conv1D only
  CHECK_THROWS_AS(layers::Conv1D(0, 3), ValueError);
  CHECK_THROWS_WITH(layers::Conv2DTranspose(4, 3, {.strides = {2, 2}, .output_padding = {2, 0}}),
                    Contains("output_padding"));
  CHECK_THROWS_WITH(layers::DepthwiseConv2D(3, {.depth_multiplier = 0}), Contains("depth_multiplier"));
  CHECK_THROWS_WITH(layers::MaxPooling2D({0, 2}), Contains("MaxPooling2D") && Contains("pool_size"));
  CHECK_THROWS_AS(layers::AveragePooling2D({2, 2}, {.strides = {2, -1}}), ValueError);
  CHECK_THROWS_WITH(layers::AveragePooling2D({2, 2}, {.padding = "reflect"}), Contains("\"reflect\""));
  CHECK_THROWS_AS(layers::GlobalMaxPooling2D({.data_format = "channels_middle"}), ValueError);
}

TEST_CASE("inputs of the wrong rank or channel count are ShapeErrors naming the layer and shapes") {
  layers::Conv2D conv(4, {3, 3}, {.name = "conv_a"});
  CHECK_THROWS_WITH(conv(zeros({5, 5, 3})), Contains("conv_a") && Contains("[5,5,3]"));
  CHECK_THROWS_AS(conv(zeros({5, 5, 3})), ShapeError);
  conv(zeros({1, 5, 5, 3}));
  // Spatial sizes may change after build; channels may not.
  CHECK(conv(zeros({2, 7, 6, 3})).shape() == Shape{2, 5, 4, 4});
  CHECK_THROWS_WITH(conv(zeros({1, 5, 5, 2})), Contains("conv_a") && Contains("[1,5,5,2]") && Contains("[1,5,5,3]"));
  CHECK_THROWS_AS(conv(zeros({1, 5, 5, 2})), ShapeError);
  // An image smaller than a valid kernel: the op's message, prefixed with the layer.
  CHECK_THROWS_WITH(conv(zeros({1, 2, 2, 3})), Contains("conv_a"));
  CHECK_THROWS_AS(conv(zeros({1, 2, 2, 3})), ShapeError);

  layers::Conv2D grouped(4, {1, 1}, {.groups = 2});
  CHECK_THROWS_AS(grouped(zeros({1, 2, 2, 3})), ShapeError);  // 3 channels, 2 groups
  CHECK_THROWS_AS(layers::Conv1D(2, 2)(zeros({4, 3})), ShapeError);
  CHECK_THROWS_AS(layers::MaxPooling2D()(zeros({4, 4, 3})), ShapeError);
  CHECK_THROWS_AS(layers::GlobalAveragePooling2D()(zeros({2, 3})), ShapeError);
  layers::DepthwiseConv2D dw(3, {.data_format = "channels_first"});
  dw(zeros({1, 2, 5, 5}));
  CHECK_THROWS_AS(dw(zeros({1, 3, 5, 5})), ShapeError);
  CHECK_THROWS_AS(conv.kernel().assign(zeros({3, 3, 3, 5})), Error);
  CHECK_THROWS_WITH(layers::Conv2D(2, 3).kernel(), Contains("built"));
}

// ---- a whole model ----------------------------------------------------------------------------

TEST_CASE("the samples' CIFAR-10 CNN has Keras' 156,074 parameters") {
  // Keras' counts, layer by layer (3x3 "same" convolutions keep 32x32, each pooling halves):
  //   Conv2D(16) on 3 channels:  3*3*3*16  + 16  =     448
  //   Conv2D(32) on 16:          3*3*16*32 + 32  =   4,640
  //   Conv2D(64) on 32:          3*3*32*64 + 64  =  18,496
  //   three poolings: 32 -> 16 -> 8 -> 4, so Flatten gives 4*4*64 = 1,024 features
  //   Dense(128) on 1,024:       1024*128  + 128 = 131,200
  //   Dense(10) on 128:          128*10    + 10  =   1,290
  //   total                                        156,074 (all trainable)
  models::Sequential model{
      layers::InputLayer(Shape{32, 32, 3}),
      layers::Conv2D(16, {3, 3}, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D({2, 2}),
      layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D({2, 2}),
      layers::Conv2D(64, {3, 3}, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D({2, 2}),
      layers::Flatten(),
      layers::Dense(128, {.activation = "relu"}),
      layers::Dense(10),
  };
  const auto list = model.layers();
  REQUIRE(list.size() == 9);
  const std::vector<i64> params{448, 0, 4640, 0, 18496, 0, 0, 131200, 1290};
  for (std::size_t i = 0; i < list.size(); ++i) {
    INFO(list[i]->name());
    CHECK(list[i]->count_params() == params[i]);
  }
  CHECK(list[4]->output_shape() == Shape{1, 8, 8, 64});
  CHECK(list[5]->output_shape() == Shape{1, 4, 4, 64});
  CHECK(list[6]->output_shape() == Shape{1, 4 * 4 * 64});
  CHECK(count(model.trainable_weights()) == 156074);
  CHECK(model.non_trainable_weights().empty());

  std::ostringstream out;
  model.summary(out);
  const std::string table = out.str();
  INFO(table);
  CHECK_THAT(table, Contains("Total params: 156,074"));
  CHECK_THAT(table, Contains("Trainable params: 156,074"));
  CHECK_THAT(table, Contains("Non-trainable params: 0"));
  CHECK_THAT(table, Contains("(Conv2D)"));
  CHECK_THAT(table, Contains("(MaxPooling2D)"));
  CHECK_THAT(table, Contains("18,496"));
  CHECK_THAT(table, Contains("131,200"));

  CHECK(model(zeros({2, 32, 32, 3})).shape() == Shape{2, 10});
}
