#pragma once
// Elementwise ops with NumPy broadcasting. Each one's gradient sits beside its forward in
// src/ops/elementwise.cpp (the tf.math functions and Keras 3 activations of the second block in
// src/ops/elementwise_math.cpp).
#include "keel/core/tensor.hpp"

namespace keel {

Tensor add(const Tensor& x, const Tensor& y);
Tensor sub(const Tensor& x, const Tensor& y);
Tensor mul(const Tensor& x, const Tensor& y);
Tensor div(const Tensor& x, const Tensor& y);  // true division: integers give float64
Tensor pow(const Tensor& x, const Tensor& y);
Tensor pow(const Tensor& x, double y);
Tensor maximum(const Tensor& x, const Tensor& y);
Tensor minimum(const Tensor& x, const Tensor& y);
Tensor maximum(const Tensor& x, double y);
Tensor minimum(const Tensor& x, double y);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor softplus(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);

// tf.math's rounding, trigonometric, hyperbolic and logarithmic functions. floor, ceil and round
// return an integer tensor unchanged and have a zero gradient; round is half to even (2.5 -> 2).
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erfc(const Tensor& x);
// atan2(y, x): the angle of the point (x, y) in [-pi, pi], as tf.math.atan2.
Tensor atan2(const Tensor& y, const Tensor& x);
// tf.math.floormod: x - floor(x / y) * y, with the divisor's sign (mod(-7, 3) = 2,
// mod(7, -3) = -2). Integers and floats; an integer divisor of 0 is a ValueError.
Tensor mod(const Tensor& x, const Tensor& y);
Tensor mod(const Tensor& x, double y);
// tf.math.floordiv: floor(x / y), rounding toward -inf (floordiv(-7, 2) = -4). Integers and
// floats; an integer divisor of 0 is a ValueError. No gradient, as TensorFlow.
Tensor floordiv(const Tensor& x, const Tensor& y);
Tensor floordiv(const Tensor& x, double y);

// Keras 3 activations: selu (alpha 1.67326324..., scale 1.05070098...), softsign x / (1 + |x|),
// hard_sigmoid relu6(x + 3) / 6, hard_swish x * relu6(x + 3) / 6 (Keras' hard_silu) and
// mish x * tanh(softplus(x)).
Tensor selu(const Tensor& x);
Tensor softsign(const Tensor& x);
Tensor hard_sigmoid(const Tensor& x);
Tensor hard_swish(const Tensor& x);
Tensor mish(const Tensor& x);

Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y);
Tensor clip_by_value(const Tensor& x, double clip_min, double clip_max);
Tensor clip_by_value(const Tensor& x, const Tensor& clip_min, const Tensor& clip_max);
Tensor cast(const Tensor& x, DType dtype);

// Comparisons and logic: bool results, no gradient.
Tensor equal(const Tensor& x, const Tensor& y);
Tensor not_equal(const Tensor& x, const Tensor& y);
Tensor less(const Tensor& x, const Tensor& y);
Tensor less_equal(const Tensor& x, const Tensor& y);
Tensor greater(const Tensor& x, const Tensor& y);
Tensor greater_equal(const Tensor& x, const Tensor& y);
Tensor logical_and(const Tensor& x, const Tensor& y);
Tensor logical_or(const Tensor& x, const Tensor& y);
Tensor logical_xor(const Tensor& x, const Tensor& y);
Tensor logical_not(const Tensor& x);
Tensor is_finite(const Tensor& x);
Tensor is_nan(const Tensor& x);
Tensor is_inf(const Tensor& x);  // +inf or -inf

// A scalar tensor of x's dtype and device (how C++ scalars join tensor ops).
Tensor scalar_like(const Tensor& x, double value);

}  // namespace keel
