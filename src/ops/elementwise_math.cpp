// tf.math's rounding, trigonometric, hyperbolic, logarithmic and flooring-division functions,
// and Keras 3's activations: each forward with its gradient rule (TensorFlow's) right below it.
#include <numbers>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "ops/elementwise_internal.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using detail::binary_op;
using detail::Reads;
using detail::record_unary;
using detail::unary_op;
using kernel::BinaryOp;
using kernel::UnaryOp;

namespace {

// Keras 3's selu constants (keras.activations.selu); the kernels hold the same numbers.
constexpr double kSeluAlpha = 1.67326324235437728481704299;
constexpr double kSeluScale = 1.05070098735548049341933498;

Tensor c(const Tensor& like, double v) { return scalar_like(like, v); }

// 1 - x^2, the argument of asin's, acos's and atanh's derivatives.
Tensor one_minus_square(const Tensor& x) { return sub(c(x, 1.0), square(x)); }

// floor, ceil and round: an integer tensor is its own result (TensorFlow returns it unchanged);
// the gradient is zero (piecewise constant).
Tensor rounding(const char* name, UnaryOp op, const Tensor& x) {
  detail::check_defined(x, name);
  if (is_integral(x.dtype())) return x;
  Tensor y = unary_op(name, op, x);
  record_unary(name, x, y, [](const Tensor& g, const Tensor&, const Tensor&) { return zeros_like(g); }, Reads::neither);
  return y;
}

// mod and floordiv. An integer division by zero is an error in TensorFlow (its CPU kernel
// checks every divisor); so it is here, tested on the host before the kernel runs. A traced
// function cannot test values on the host: there the kernel's result for a 0 divisor is 0.
Tensor flooring_division(const char* name, BinaryOp op, const Tensor& x, const Tensor& y) {
  const Shape shape = detail::check_binary(x, y, name);
  if (!is_half(x.dtype())) detail::check_numeric(x, name);
  if (is_integral(y.dtype()) && shape.num_elements() > 0 && !backend::recorder() &&
      reduce_any(equal(y, c(y, 0.0))).item<bool>())
    throw ValueError(fmt::format("{}: integer division by zero: the divisor {} {} holds a 0", name,
                                 keel::name(y.dtype()), y.shape().to_string()));
  Tensor z = detail::empty_tensor(shape, x.dtype(), x.device());
  backend::binary(op, x, y, z);
  return z;
}

}  // namespace

// ---- rounding ----------------------------------------------------------------------------------

Tensor floor(const Tensor& x) { return rounding("floor", UnaryOp::floor, x); }
Tensor ceil(const Tensor& x) { return rounding("ceil", UnaryOp::ceil, x); }
Tensor round(const Tensor& x) { return rounding("round", UnaryOp::round, x); }

// ---- flooring division and the angle of a point ------------------------------------------------

Tensor mod(const Tensor& x, const Tensor& y) {
  Tensor z = flooring_division("mod", BinaryOp::floor_mod, x, y);
  // x = floor(x / y) y + mod(x, y): dx = g, dy = -g floor(x / y) (TensorFlow's FloorMod grad).
  if (autograd::recording() && is_floating(x.dtype()))
    autograd::record("mod", {x, y}, {z}, [x, y](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(g[0], x.shape()) : Tensor(),
                   n[1] ? sum_to(mul(neg(g[0]), floor(div(x, y))), y.shape()) : Tensor()};
    }, {x, y});
  return z;
}

Tensor mod(const Tensor& x, double y) { return mod(x, scalar_like(x, y)); }

// No gradient, as TensorFlow's FloorDiv (piecewise constant; TensorFlow returns None).
Tensor floordiv(const Tensor& x, const Tensor& y) { return flooring_division("floordiv", BinaryOp::floor_div, x, y); }
Tensor floordiv(const Tensor& x, double y) { return floordiv(x, scalar_like(x, y)); }

Tensor atan2(const Tensor& y, const Tensor& x) {
  detail::check_binary(y, x, "atan2");
  if (!is_half(y.dtype())) detail::check_float(y, "atan2", "y");
  Tensor z = binary_op("atan2", BinaryOp::atan2, y, x);
  // d/dy atan2(y, x) = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2).
  if (autograd::recording())
    autograd::record("atan2", {y, x}, {z}, [y, x](const Grads& g, const Needs& n) {
      const Tensor r2 = add(square(x), square(y));
      return Grads{n[0] ? sum_to(div(mul(g[0], x), r2), y.shape()) : Tensor(),
                   n[1] ? sum_to(neg(div(mul(g[0], y), r2)), x.shape()) : Tensor()};
    }, {y, x});
  return z;
}

// ---- trigonometric and hyperbolic --------------------------------------------------------------

Tensor tan(const Tensor& x) {
  Tensor y = unary_op("tan", UnaryOp::tan, x);
  // d tan = sec^2 x = 1 / cos^2 x (TensorFlow's TanGrad).
  record_unary("tan", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, square(cos(x))); }, Reads::input);
  return y;
}

Tensor asin(const Tensor& x) {
  Tensor y = unary_op("asin", UnaryOp::asin, x);
  record_unary("asin", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, sqrt(one_minus_square(x)));  // 1 / sqrt(1 - x^2)
  }, Reads::input);
  return y;
}

Tensor acos(const Tensor& x) {
  Tensor y = unary_op("acos", UnaryOp::acos, x);
  record_unary("acos", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return neg(div(g, sqrt(one_minus_square(x))));  // -1 / sqrt(1 - x^2)
  }, Reads::input);
  return y;
}

Tensor atan(const Tensor& x) {
  Tensor y = unary_op("atan", UnaryOp::atan, x);
  record_unary("atan", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, add(c(x, 1.0), square(x)));  // 1 / (1 + x^2)
  }, Reads::input);
  return y;
}

Tensor sinh(const Tensor& x) {
  Tensor y = unary_op("sinh", UnaryOp::sinh, x);
  record_unary("sinh", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, cosh(x)); }, Reads::input);
  return y;
}

Tensor cosh(const Tensor& x) {
  Tensor y = unary_op("cosh", UnaryOp::cosh, x);
  record_unary("cosh", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sinh(x)); }, Reads::input);
  return y;
}

// The inverse hyperbolic functions' derivatives from their outputs, as TensorFlow: d asinh x =
// 1 / cosh(asinh x), d acosh x = 1 / sinh(acosh x).
Tensor asinh(const Tensor& x) {
  Tensor y = unary_op("asinh", UnaryOp::asinh, x);
  record_unary("asinh", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, cosh(y)); }, Reads::output);
  return y;
}

Tensor acosh(const Tensor& x) {
  Tensor y = unary_op("acosh", UnaryOp::acosh, x);
  record_unary("acosh", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) { return div(g, sinh(y)); }, Reads::output);
  return y;
}

Tensor atanh(const Tensor& x) {
  Tensor y = unary_op("atanh", UnaryOp::atanh, x);
  record_unary("atanh", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, one_minus_square(x));  // 1 / (1 - x^2)
  }, Reads::input);
  return y;
}

// ---- exponential and logarithmic ---------------------------------------------------------------

Tensor expm1(const Tensor& x) {
  Tensor y = unary_op("expm1", UnaryOp::expm1, x);
  record_unary("expm1", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, exp(x)); }, Reads::input);
  return y;
}

// Kernels rather than log(x) / ln 2: exact at the powers of the base (log2(8) = 3).
Tensor log2(const Tensor& x) {
  Tensor y = unary_op("log2", UnaryOp::log2, x);
  record_unary("log2", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, mul(x, c(x, std::numbers::ln2)));  // 1 / (x ln 2)
  }, Reads::input);
  return y;
}

Tensor log10(const Tensor& x) {
  Tensor y = unary_op("log10", UnaryOp::log10, x);
  record_unary("log10", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, mul(x, c(x, std::numbers::ln10)));  // 1 / (x ln 10)
  }, Reads::input);
  return y;
}

Tensor reciprocal(const Tensor& x) {
  Tensor y = unary_op("reciprocal", UnaryOp::reciprocal, x);
  // d (1/x) = -1/x^2 = -y^2 (TensorFlow's ReciprocalGrad).
  record_unary("reciprocal", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) { return neg(mul(g, square(y))); }, Reads::output);
  return y;
}

Tensor erfc(const Tensor& x) {
  Tensor y = unary_op("erfc", UnaryOp::erfc, x);
  record_unary("erfc", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    // d erfc x = -2/sqrt(pi) e^(-x^2)
    return mul(g, mul(c(x, -2.0 * std::numbers::inv_sqrtpi), exp(neg(square(x)))));
  }, Reads::input);
  return y;
}

// ---- Keras 3 activations -----------------------------------------------------------------------

Tensor selu(const Tensor& x) {
  Tensor y = unary_op("selu", UnaryOp::selu, x);
  record_unary("selu", x, y, [](const Tensor& g, const Tensor& x, const Tensor& y) {
    // x > 0: scale; else d scale alpha (e^x - 1) = scale alpha e^x = y + scale alpha.
    return where(greater(x, c(x, 0.0)), mul(g, c(g, kSeluScale)), mul(g, add(y, c(y, kSeluScale * kSeluAlpha))));
  }, Reads::both);
  return y;
}

Tensor softsign(const Tensor& x) {
  Tensor y = unary_op("softsign", UnaryOp::softsign, x);
  record_unary("softsign", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, square(add(c(x, 1.0), abs(x))));  // 1 / (1 + |x|)^2
  }, Reads::input);
  return y;
}

namespace {
// relu6(x + 3)'s gradient mask, as relu6's: 1 where 0 < x + 3 < 6, else 0 (the kinks get 0).
Tensor hard_mask(const Tensor& x) {
  return cast(logical_and(greater(x, c(x, -3.0)), less(x, c(x, 3.0))), x.dtype());
}
}  // namespace

Tensor hard_sigmoid(const Tensor& x) {
  Tensor y = unary_op("hard_sigmoid", UnaryOp::hard_sigmoid, x);
  record_unary("hard_sigmoid", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(div(g, c(g, 6.0)), hard_mask(x));
  }, Reads::input);
  return y;
}

Tensor hard_swish(const Tensor& x) {
  Tensor y = unary_op("hard_swish", UnaryOp::hard_swish, x);
  record_unary("hard_swish", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    // The product rule on x * hard_sigmoid(x): hard_sigmoid(x) + x mask / 6.
    return mul(g, add(hard_sigmoid(x), div(mul(x, hard_mask(x)), c(x, 6.0))));
  }, Reads::input);
  return y;
}

Tensor mish(const Tensor& x) {
  Tensor y = unary_op("mish", UnaryOp::mish, x);
  record_unary("mish", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    // t = tanh(softplus(x)): d x t = t + x (1 - t^2) sigmoid(x)
    const Tensor t = tanh(softplus(x));
    return mul(g, add(t, mul(mul(x, sub(c(x, 1.0), square(t))), sigmoid(x))));
  }, Reads::input);
  return y;
}

}  // namespace keel
