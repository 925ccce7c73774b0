#pragma once
// The kinds of work a kernel family does, as both backends (src/cpu/, cuda/) and the backend
// layer between them and the ops (src/backend/) name them. Plain enums with no dependencies, so
// that nvcc's C++17 and the library's C++20 read the same header.
#include <cstdint>

namespace keel::kernel {

enum class UnaryOp : std::uint8_t {
  neg, abs, sign, square, sqrt, rsqrt, exp, log, log1p, sin, cos, tanh, sigmoid,
  relu, relu6, leaky_relu, elu, gelu, gelu_tanh, softplus, silu, erf,
  // tf.math's rounding (round: half to even), trigonometric, hyperbolic and logarithmic
  // functions, then Keras 3's activations (see src/cpu/simd/kernels_math_impl.hpp).
  floor, ceil, round, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, expm1, log2, log10,
  reciprocal, erfc, selu, softsign, hard_sigmoid, hard_swish, mish,
};
// relu_grad(g, x) = g * (x > 0 ? 1 : 0): ReLU's gradient in one pass. A product, not a select,
// as TensorFlow's ReluGrad: an upstream NaN stays NaN where the mask is 0.
// floor_mod and floor_div are TensorFlow's FloorMod (the result has the divisor's sign) and
// FloorDiv (floor(a / b) for floats); atan2(a, b) is the angle of the point (b, a).
enum class BinaryOp : std::uint8_t {
  add, sub, mul, div, pow, maximum, minimum, relu_grad, floor_mod, floor_div, atan2,
};
enum class CompareOp : std::uint8_t { eq, ne, lt, le, gt, ge };
enum class LogicalOp : std::uint8_t { and_, or_, xor_ };
// is_finite (neither NaN nor infinite), is_nan or is_inf (either infinity).
enum class FloatTest : std::uint8_t { finite, nan, inf };
enum class ReduceOp : std::uint8_t { sum, max, min, prod };
// argmax / argmin: the first index of the extreme value wins ties.
enum class ArgReduceOp : std::uint8_t { argmax, argmin };
// Running sums / products along an axis (cumsum, cumprod).
enum class ScanOp : std::uint8_t { sum, prod };
// How scatter_nd combines an update with the value at its index: replace, add, max or min.
enum class ScatterMode : std::uint8_t { update, add, max, min };

// The sliding-window kernels (see core/window.hpp for their geometry). Each forward comes with
// the kernels its gradients need: backward_input is the adjoint in the image, backward_filter
// the adjoint in the kernel.
enum class ConvKernel : std::uint8_t {
  conv2d_forward, conv2d_backward_input, conv2d_backward_filter,
  depthwise_forward, depthwise_backward_input, depthwise_backward_filter,
};
enum class PoolKernel : std::uint8_t {
  max_forward,   // y = the max of each window
  max_backward,  // dx[argmax of each window] += dy
  max_gather,    // the adjoint of max_backward in dy: out[window] = dx[argmax of the window]
  avg_forward,   // the mean over each window's pixels inside the image
  avg_backward,
  // max_backward then relu_grad(that, x) (the pool's input x being a ReLU's output): the
  // gradient through ReLU and max pool in one pass over the images. Only graph fusion makes it
  // (graph/fuse_patterns.cpp); the bits are those of the two kernels.
  max_backward_relu,
  // max_backward and max_backward_relu from the choices a max pool's forward kept
  // (backend::max_pool_with_argmax) instead of x: (arg, dy) -> dx, the same bits. Only graph
  // fusion makes them, where the forward is in the same graph.
  max_backward_arg,
  max_backward_arg_relu,
};

// What keel::random's factories sample: uniform [a, b) and normal (mean a, stddev b; truncated
// at two stddevs) for float32 and float64, uniform_int [int_min, int_min + int_range) for int32
// and int64.
enum class Distribution : std::uint8_t { uniform, normal, truncated_normal, uniform_int };
struct RandomDraw {
  Distribution distribution = Distribution::uniform;
  double a = 0, b = 1;
  std::int64_t int_min = 0;
  std::uint64_t int_range = 1;
};

}  // namespace keel::kernel
