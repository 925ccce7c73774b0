#pragma once
// Elementwise ops with NumPy broadcasting. Each one's gradient sits beside its forward in
// src/ops/elementwise.cpp.
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
Tensor logical_not(const Tensor& x);
Tensor is_finite(const Tensor& x);
Tensor is_nan(const Tensor& x);

// A scalar tensor of x's dtype and device (how C++ scalars join tensor ops).
Tensor scalar_like(const Tensor& x, double value);

}  // namespace keel
