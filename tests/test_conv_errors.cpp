// conv2d, conv1d, depthwise_conv2d and conv2d_transpose on bad input: each error names the op and
// the shapes or values at fault.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "check_error.hpp"

using namespace keel;

// ---- bad input -----------------------------------------------------------------------------------

TEST_CASE("conv ops reject mismatched channels with both shapes in the message") {
  const Tensor x = zeros({2, 7, 5, 3}), k = zeros({3, 2, 4, 6});
  check_error<ShapeError>([&] { conv2d(x, k); }, {"conv2d", "[2,7,5,3]", "[3,2,4,6]", "channels"});
  check_error<ShapeError>([&] { depthwise_conv2d(x, zeros({3, 3, 2, 1})); },
                          {"depthwise_conv2d", "[2,7,5,3]", "[3,3,2,1]"});
  check_error<ShapeError>([&] { conv2d_transpose(x, zeros({3, 3, 3, 2})); },
                          {"conv2d_transpose", "[2,7,5,3]", "[3,3,3,2]"});
  check_error<ShapeError>([&] { conv1d(zeros({2, 7, 3}), zeros({3, 2, 4})); }, {"conv1d", "[2,7,3]", "[3,2,4]"});
}

TEST_CASE("conv ops reject a kernel larger than a valid input") {
  const Tensor x = zeros({1, 4, 4, 3});
  check_error<ShapeError>([&] { conv2d(x, zeros({5, 3, 3, 2})); }, {"conv2d", "[5,3,3,2]", "[1,4,4,3]", "valid"});
  // Dilation makes a 3x3 kernel span 5x5.
  check_error<ShapeError>([&] { conv2d(x, zeros({3, 3, 3, 2}), {1, 1}, "valid", {2, 2}); }, {"conv2d", "5x5"});
  check_error<ShapeError>([&] { depthwise_conv2d(x, zeros({5, 5, 3, 1})); }, {"depthwise_conv2d", "[5,5,3,1]"});
  check_error<ShapeError>([&] { conv1d(zeros({1, 4, 3}), zeros({5, 3, 2})); }, {"conv1d", "[5,3,2]", "[1,4,3]"});
  // "same" pads instead.
  CHECK(conv2d(x, zeros({5, 3, 3, 2}), {1, 1}, "same").shape() == Shape{1, 4, 4, 2});
}

TEST_CASE("conv ops reject zero or negative strides and dilations") {
  const Tensor x = zeros({1, 5, 5, 2}), k = zeros({3, 3, 2, 2});
  check_error<ValueError>([&] { conv2d(x, k, {0, 1}); }, {"conv2d", "strides", "[0, 1]"});
  check_error<ValueError>([&] { conv2d(x, k, {1, -2}); }, {"conv2d", "strides", "[1, -2]"});
  check_error<ValueError>([&] { conv2d(x, k, {1, 1}, "same", {0, 1}); }, {"conv2d", "dilation", "[0, 1]"});
  check_error<ValueError>([&] { depthwise_conv2d(x, zeros({3, 3, 2, 1}), {-1, 1}); },
                          {"depthwise_conv2d", "strides", "[-1, 1]"});
  check_error<ValueError>([&] { conv2d_transpose(x, k, {1, 0}); }, {"conv2d_transpose", "strides", "[1, 0]"});
  check_error<ValueError>([&] { conv1d(zeros({1, 5, 2}), zeros({3, 2, 2}), 0); }, {"conv1d", "stride", "0"});
  check_error<ValueError>([&] { conv1d(zeros({1, 5, 2}), zeros({3, 2, 2}), 1, "valid", -1); },
                          {"conv1d", "dilation", "-1"});
}

TEST_CASE("conv ops reject wrong ranks") {
  check_error<ShapeError>([&] { conv2d(zeros({7, 5, 3}), zeros({3, 3, 3, 2})); }, {"conv2d", "rank 4", "[7,5,3]"});
  check_error<ShapeError>([&] { conv2d(zeros({1, 7, 5, 3}), zeros({3, 3, 3})); }, {"conv2d", "kernel", "[3,3,3]"});
  check_error<ShapeError>([&] { depthwise_conv2d(zeros({7, 5, 3}), zeros({3, 3, 3, 1})); },
                          {"depthwise_conv2d", "[7,5,3]"});
  check_error<ShapeError>([&] { conv2d_transpose(zeros({1, 7, 5, 3, 1}), zeros({3, 3, 2, 3})); },
                          {"conv2d_transpose", "[1,7,5,3,1]"});
  check_error<ShapeError>([&] { conv1d(zeros({1, 7, 5, 3}), zeros({3, 3, 2})); }, {"conv1d", "rank 3", "[1,7,5,3]"});
}

TEST_CASE("conv ops reject unknown padding strings") {
  const Tensor x = zeros({1, 5, 5, 2}), k = zeros({3, 3, 2, 2});
  check_error<ValueError>([&] { conv2d(x, k, {1, 1}, "full"); }, {"conv2d", "padding", "\"full\""});
  check_error<ValueError>([&] { conv2d(x, k, {1, 1}, "causal"); }, {"conv2d", "\"causal\""});
  check_error<ValueError>([&] { depthwise_conv2d(x, zeros({3, 3, 2, 1}), {1, 1}, ""); }, {"depthwise_conv2d", "padding"});
  check_error<ValueError>([&] { conv2d_transpose(x, k, {1, 1}, "reflect"); }, {"conv2d_transpose", "\"reflect\""});
  check_error<ValueError>([&] { conv1d(zeros({1, 5, 2}), zeros({3, 2, 2}), 1, "full"); }, {"conv1d", "\"full\""});
}

TEST_CASE("conv ops reject mixed or non-float dtypes") {
  check_error<DTypeError>([&] { conv2d(zeros({1, 5, 5, 2}), zeros({3, 3, 2, 2}, DType::float64)); },
                          {"conv2d", "float32", "float64"});
  check_error<DTypeError>([&] { conv2d(zeros({1, 5, 5, 2}, DType::int32), zeros({3, 3, 2, 2}, DType::int32)); },
                          {"conv2d", "int32"});
  check_error<DTypeError>([&] { depthwise_conv2d(zeros({1, 5, 5, 2}, DType::float64), zeros({3, 3, 2, 1})); },
                          {"depthwise_conv2d", "float64", "float32"});
}

TEST_CASE("conv2d_transpose rejects output_padding not smaller than the stride") {
  const Tensor x = zeros({1, 3, 3, 2}), k = zeros({3, 3, 2, 2});
  check_error<ValueError>([&] { conv2d_transpose(x, k, {2, 2}, "same", std::array<int, 2>{2, 0}); },
                          {"conv2d_transpose", "output_padding", "[2, 0]", "[2, 2]"});
  check_error<ValueError>([&] { conv2d_transpose(x, k, {2, 2}, "same", std::array<int, 2>{0, -1}); },
                          {"conv2d_transpose", "output_padding"});
  // Keras' size rule for "same" with an even kernel and output_padding 0 gives a size whose
  // convolution does not map back to the input; TensorFlow rejects it as well.
  check_error<ValueError>([&] { conv2d_transpose(x, zeros({2, 2, 2, 2}), {2, 2}, "same", std::array<int, 2>{0, 0}); },
                          {"conv2d_transpose", "[1,3,3,2]"});
}

