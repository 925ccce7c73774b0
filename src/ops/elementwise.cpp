// Elementwise ops: each forward with its gradient rule right below it. The tf.math functions and
// Keras 3 activations added later live in elementwise_math.cpp.
#include "keel/ops/elementwise.hpp"

#include <cmath>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/elementwise_internal.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using kernel::BinaryOp;
using kernel::CompareOp;
using kernel::FloatTest;
using kernel::LogicalOp;
using kernel::UnaryOp;
using detail::binary_op;
using detail::check_binary;
using detail::Reads;
using detail::record_unary;
using detail::unary_op;

namespace {

// Integer tensors support only the unary ops that stay integers.
bool integer_ok(UnaryOp op) {
  return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sign || op == UnaryOp::square ||
         op == UnaryOp::relu;
}

}  // namespace

namespace detail {

// float16/bfloat16 run as stored on a GPU; on the CPU the backend computes them in float32 and
// rounds the result once, as a GPU kernel does.
Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, double alpha) {
  detail::check_defined(x, name);
  if (!is_half(x.dtype())) {
    if (integer_ok(op)) detail::check_numeric(x, name); else detail::check_float(x, name);
  }
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  backend::unary(op, x, y, alpha);
  return y;
}

Shape check_binary(const Tensor& x, const Tensor& y, const char* op) {
  detail::check_defined(x, op);
  detail::check_defined(y, op);
  detail::check_same_device(x, y, op);
  detail::check_same_dtype(x, y, op);
  return broadcast_shapes(x.shape(), y.shape(), op);
}

Tensor binary_op(const char* name, BinaryOp op, const Tensor& x, const Tensor& y) {
  Shape shape = check_binary(x, y, name);
  if (!is_half(x.dtype())) detail::check_numeric(x, name);
  Tensor z = detail::empty_tensor(std::move(shape), x.dtype(), x.device());
  backend::binary(op, x, y, z);
  return z;
}

}  // namespace detail

namespace {

Tensor zero_of(const Tensor& g) { return scalar_like(g, 0.0); }

}  // namespace

Tensor scalar_like(const Tensor& x, double value) {
  DeviceScope scope(x.device());
  return full(Shape{}, value, x.dtype());
}

// ---- binary arithmetic -------------------------------------------------------------------

Tensor add(const Tensor& x, const Tensor& y) {
  Tensor z = binary_op("add", BinaryOp::add, x, y);
  if (autograd::recording())
    autograd::record("add", {x, y}, {z}, [sx = x.shape(), sy = y.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(g[0], sx) : Tensor(), n[1] ? sum_to(g[0], sy) : Tensor()};
    });
  return z;
}

Tensor sub(const Tensor& x, const Tensor& y) {
  Tensor z = binary_op("sub", BinaryOp::sub, x, y);
  if (autograd::recording())
    autograd::record("sub", {x, y}, {z}, [sx = x.shape(), sy = y.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(g[0], sx) : Tensor(), n[1] ? sum_to(neg(g[0]), sy) : Tensor()};
    });
  return z;
}

Tensor mul(const Tensor& x, const Tensor& y) {
  Tensor z = binary_op("mul", BinaryOp::mul, x, y);
  if (autograd::recording())
    autograd::record("mul", {x, y}, {z}, [x, y](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(mul(g[0], y), x.shape()) : Tensor(),
                   n[1] ? sum_to(mul(g[0], x), y.shape()) : Tensor()};
    }, {x, y});
  return z;
}

Tensor div(const Tensor& x, const Tensor& y) {
  check_binary(x, y, "div");
  if (!is_floating(x.dtype())) {  // true division, as tf.math.truediv
    detail::check_numeric(x, "div");
    return div(cast(x, DType::float64), cast(y, DType::float64));
  }
  Tensor z = binary_op("div", BinaryOp::div, x, y);
  if (autograd::recording())
    autograd::record("div", {x, y}, {z}, [x, y](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(div(g[0], y), x.shape()) : Tensor(),
                   n[1] ? sum_to(neg(div(mul(g[0], x), mul(y, y))), y.shape()) : Tensor()};
    }, {x, y});
  return z;
}

Tensor pow(const Tensor& x, const Tensor& y) {
  Tensor z = binary_op("pow", BinaryOp::pow, x, y);
  if (autograd::recording())
    autograd::record("pow", {x, y}, {z}, [x, y, z](const Grads& g, const Needs& n) {
      Tensor gx, gy;
      if (n[0]) gx = sum_to(mul(g[0], mul(y, pow(x, sub(y, scalar_like(y, 1.0))))), x.shape());
      if (n[1]) {
        // d/dy x^y = x^y log x, defined for x > 0 (0 elsewhere, as TensorFlow).
        const Tensor positive = greater(x, zero_of(x));
        const Tensor safe_x = where(positive, x, ones_like(x));
        gy = sum_to(where(positive, mul(g[0], mul(z, log(safe_x))), zero_of(z)), y.shape());
      }
      return Grads{gx, gy};
    }, {x, y, z});
  return z;
}

Tensor pow(const Tensor& x, double y) { return pow(x, scalar_like(x, y)); }

namespace {
// maximum/minimum send the gradient to x where `x_wins` (ties go to x, as TensorFlow).
Tensor extremum(const char* name, BinaryOp op, const Tensor& x, const Tensor& y) {
  Tensor z = binary_op(name, op, x, y);
  if (autograd::recording())
    autograd::record(name, {x, y}, {z}, [x, y, op](const Grads& g, const Needs& n) {
      const Tensor x_wins = op == BinaryOp::maximum ? greater_equal(x, y) : less_equal(x, y);
      const Tensor zero = zero_of(g[0]);
      return Grads{n[0] ? sum_to(where(x_wins, g[0], zero), x.shape()) : Tensor(),
                   n[1] ? sum_to(where(x_wins, zero, g[0]), y.shape()) : Tensor()};
    }, {x, y});
  return z;
}
}  // namespace

Tensor maximum(const Tensor& x, const Tensor& y) { return extremum("maximum", BinaryOp::maximum, x, y); }
Tensor minimum(const Tensor& x, const Tensor& y) { return extremum("minimum", BinaryOp::minimum, x, y); }
Tensor maximum(const Tensor& x, double y) { return maximum(x, scalar_like(x, y)); }
Tensor minimum(const Tensor& x, double y) { return minimum(x, scalar_like(x, y)); }

// ---- unary ---------------------------------------------------------------------------------

Tensor neg(const Tensor& x) {
  Tensor y = unary_op("neg", UnaryOp::neg, x);
  record_unary("neg", x, y, [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); }, Reads::neither);
  return y;
}

Tensor abs(const Tensor& x) {
  Tensor y = unary_op("abs", UnaryOp::abs, x);
  record_unary("abs", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sign(x)); }, Reads::input);
  return y;
}

Tensor sign(const Tensor& x) {
  Tensor y = unary_op("sign", UnaryOp::sign, x);
  record_unary("sign", x, y, [](const Tensor& g, const Tensor&, const Tensor&) { return zeros_like(g); }, Reads::neither);
  return y;
}

Tensor square(const Tensor& x) {
  Tensor y = unary_op("square", UnaryOp::square, x);
  record_unary("square", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(g, mul(x, scalar_like(x, 2.0)));
  }, Reads::input);
  return y;
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_op("sqrt", UnaryOp::sqrt, x);
  record_unary("sqrt", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return div(g, mul(y, scalar_like(y, 2.0)));
  }, Reads::output);
  return y;
}

Tensor rsqrt(const Tensor& x) {
  Tensor y = unary_op("rsqrt", UnaryOp::rsqrt, x);
  record_unary("rsqrt", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, mul(mul(y, mul(y, y)), scalar_like(y, -0.5)));
  }, Reads::output);
  return y;
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_op("exp", UnaryOp::exp, x);
  record_unary("exp", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return detail::grad_from_output(UnaryOp::exp, g, y);
  }, Reads::output);
  return y;
}

Tensor log(const Tensor& x) {
  Tensor y = unary_op("log", UnaryOp::log, x);
  record_unary("log", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); }, Reads::input);
  return y;
}

Tensor log1p(const Tensor& x) {
  Tensor y = unary_op("log1p", UnaryOp::log1p, x);
  record_unary("log1p", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return div(g, add(x, scalar_like(x, 1.0)));
  }, Reads::input);
  return y;
}

Tensor sin(const Tensor& x) {
  Tensor y = unary_op("sin", UnaryOp::sin, x);
  record_unary("sin", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, cos(x)); }, Reads::input);
  return y;
}

Tensor cos(const Tensor& x) {
  Tensor y = unary_op("cos", UnaryOp::cos, x);
  record_unary("cos", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return neg(mul(g, sin(x))); }, Reads::input);
  return y;
}

Tensor tanh(const Tensor& x) {
  Tensor y = unary_op("tanh", UnaryOp::tanh, x);
  record_unary("tanh", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return detail::grad_from_output(UnaryOp::tanh, g, y);
  }, Reads::output);
  return y;
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = unary_op("sigmoid", UnaryOp::sigmoid, x);
  record_unary("sigmoid", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return detail::grad_from_output(UnaryOp::sigmoid, g, y);
  }, Reads::output);
  return y;
}

// TensorFlow's ReluGrad and Relu6Grad multiply by the mask rather than select: an upstream NaN
// stays NaN where the mask is 0 (NaN * 0), so a NaN loss reaches every weight before it.
namespace {
Tensor masked_grad(const Tensor& g, const Tensor& mask) { return mul(g, cast(mask, g.dtype())); }
}  // namespace

namespace {
// g * (x > 0) in one kernel (BinaryOp::relu_grad); its own gradient, for higher-order tapes, is
// the same mask applied to the incoming gradient (the mask is piecewise constant in x).
Tensor relu_grad(const Tensor& g, const Tensor& x) {
  Tensor z = binary_op("relu_grad", BinaryOp::relu_grad, g, x);
  if (autograd::recording())
    autograd::record("relu_grad", {g, x}, {z}, [x, sg = g.shape()](const Grads& gg, const Needs& n) {
      return Grads{n[0] ? sum_to(relu_grad(gg[0], x), sg) : Tensor(), Tensor()};
    });
  return z;
}
}  // namespace

namespace detail {
// The derivatives that are functions of the output: exp' = y, tanh' = 1 - y^2,
// sigmoid' = y (1 - y), relu' = (y > 0), the last from the output as TensorFlow's ReluGrad (y > 0
// exactly where x > 0). Shared by those ops and by bias_add's fused activations.
Tensor grad_from_output(UnaryOp op, const Tensor& g, const Tensor& y) {
  switch (op) {
    case UnaryOp::exp: return mul(g, y);
    case UnaryOp::tanh: return mul(g, sub(scalar_like(y, 1.0), mul(y, y)));
    case UnaryOp::sigmoid: return mul(g, mul(y, sub(scalar_like(y, 1.0), y)));
    case UnaryOp::relu: return relu_grad(g, y);
    default: break;
  }
  throw ValueError(fmt::format("grad_from_output: unary op {} has no derivative from its output", int(op)));
}
}  // namespace detail

Tensor relu(const Tensor& x) {
  Tensor y = unary_op("relu", UnaryOp::relu, x);
  // From the output, as TensorFlow's ReluGrad: y > 0 exactly where x > 0, and the input need not
  // be kept for the backward.
  record_unary("relu", x, y, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return detail::grad_from_output(UnaryOp::relu, g, y);
  }, Reads::output);
  return y;
}

Tensor relu6(const Tensor& x) {
  Tensor y = unary_op("relu6", UnaryOp::relu6, x);
  record_unary("relu6", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return masked_grad(g, logical_and(greater(x, zero_of(x)), less(x, scalar_like(x, 6.0))));
  }, Reads::input);
  return y;
}

Tensor leaky_relu(const Tensor& x, double alpha) {
  Tensor y = unary_op("leaky_relu", UnaryOp::leaky_relu, x, alpha);
  record_unary("leaky_relu", x, y, [alpha](const Tensor& g, const Tensor& x, const Tensor&) {
    return where(greater(x, zero_of(x)), g, mul(g, scalar_like(g, alpha)));
  }, Reads::input);
  return y;
}

Tensor elu(const Tensor& x, double alpha) {
  Tensor y = unary_op("elu", UnaryOp::elu, x, alpha);
  record_unary("elu", x, y, [alpha](const Tensor& g, const Tensor& x, const Tensor& y) {
    // For x <= 0: d/dx alpha*(e^x - 1) = alpha*e^x = y + alpha.
    return where(greater(x, zero_of(x)), g, mul(g, add(y, scalar_like(y, alpha))));
  }, Reads::both);
  return y;
}

Tensor gelu(const Tensor& x, bool approximate) {
  Tensor y = unary_op("gelu", approximate ? UnaryOp::gelu_tanh : UnaryOp::gelu, x);
  record_unary("gelu", x, y, [approximate](const Tensor& g, const Tensor& x, const Tensor&) {
    auto c = [&](double v) { return scalar_like(x, v); };
    if (!approximate) {
      // d/dx x*Phi(x) = Phi(x) + x*phi(x)
      const Tensor cdf = mul(c(0.5), add(c(1.0), erf(mul(x, c(0.70710678118654752440)))));
      const Tensor pdf = mul(c(0.39894228040143267794), exp(mul(square(x), c(-0.5))));
      return mul(g, add(cdf, mul(x, pdf)));
    }
    // y = 0.5 x (1 + t), t = tanh(u), u = s (x + k x^3):
    // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 k x^2)
    const double s = 0.79788456080286535588, k = 0.044715;
    const Tensor x2 = square(x);
    const Tensor t = tanh(mul(c(s), add(x, mul(c(k), mul(x2, x)))));
    const Tensor du = mul(c(s), add(c(1.0), mul(c(3 * k), x2)));
    const Tensor d = add(mul(c(0.5), add(c(1.0), t)), mul(mul(c(0.5), x), mul(sub(c(1.0), square(t)), du)));
    return mul(g, d);
  }, Reads::input);
  return y;
}

Tensor softplus(const Tensor& x) {
  Tensor y = unary_op("softplus", UnaryOp::softplus, x);
  record_unary("softplus", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, sigmoid(x)); }, Reads::input);
  return y;
}

Tensor silu(const Tensor& x) {
  Tensor y = unary_op("silu", UnaryOp::silu, x);
  record_unary("silu", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    // d/dx x s(x) = s (1 + x (1 - s))
    const Tensor s = sigmoid(x);
    const Tensor one = scalar_like(x, 1.0);
    return mul(g, mul(s, add(one, mul(x, sub(one, s)))));
  }, Reads::input);
  return y;
}

Tensor erf(const Tensor& x) {
  Tensor y = unary_op("erf", UnaryOp::erf, x);
  record_unary("erf", x, y, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(g, mul(scalar_like(x, 1.12837916709551257390), exp(neg(square(x)))));
  }, Reads::input);
  return y;
}

// ---- selection, clipping, casting -----------------------------------------------------------

Tensor where(const Tensor& condition, const Tensor& x, const Tensor& y) {
  detail::check_defined(condition, "where");
  if (condition.dtype() != DType::bool_)
    throw DTypeError(fmt::format("where: condition must be bool, got {} {}", name(condition.dtype()),
                                 condition.shape().to_string()));
  const Shape xy = check_binary(x, y, "where");
  detail::check_same_device(condition, x, "where");
  const Shape shape = broadcast_shapes(condition.shape(), xy, "where");
  Tensor z = detail::empty_tensor(shape, x.dtype(), x.device());
  backend::where(condition, x, y, z);
  if (autograd::recording())
    autograd::record("where", {condition, x, y}, {z},
                     [condition, sx = x.shape(), sy = y.shape()](const Grads& g, const Needs& n) {
                       const Tensor zero = zero_of(g[0]);
                       return Grads{Tensor(), n[1] ? sum_to(where(condition, g[0], zero), sx) : Tensor(),
                                    n[2] ? sum_to(where(condition, zero, g[0]), sy) : Tensor()};
                     }, {condition});
  return z;
}

// maximum and minimum propagate NaN, so clip_by_value(NaN, lo, hi) is NaN, as in TensorFlow
// (a clipped probability of NaN must not turn into a finite loss).
Tensor clip_by_value(const Tensor& x, double clip_min, double clip_max) {
  detail::check_defined(x, "clip_by_value");
  if (clip_min > clip_max)
    throw ValueError(fmt::format("clip_by_value: clip_min {} is greater than clip_max {}", clip_min, clip_max));
  return minimum(maximum(x, clip_min), clip_max);
}

Tensor clip_by_value(const Tensor& x, const Tensor& clip_min, const Tensor& clip_max) {
  return minimum(maximum(x, clip_min), clip_max);
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::check_defined(x, "cast");
  if (x.dtype() == dtype) return x;
  Tensor y = detail::empty_tensor(x.shape(), dtype, x.device());
  backend::copy(x, y, "cast");
  if (autograd::recording() && is_floating(x.dtype()) && is_floating(dtype))
    autograd::record("cast", {x}, {y}, [from = x.dtype()](const Grads& g, const Needs&) {
      return Grads{cast(g[0], from)};
    });
  return y;
}

// ---- comparisons and logic (no gradients) ---------------------------------------------------

namespace {
Tensor compare_op(const char* name, CompareOp op, const Tensor& x, const Tensor& y) {
  const Shape shape = check_binary(x, y, name);
  Tensor z = detail::empty_tensor(shape, DType::bool_, x.device());
  backend::compare(op, x, y, z);
  return z;
}

Tensor logical_op(const char* name, LogicalOp op, const Tensor& x, const Tensor& y) {
  const Shape shape = check_binary(x, y, name);
  if (x.dtype() != DType::bool_)
    throw DTypeError(fmt::format("{}: expected bool tensors, got {} {}", name, keel::name(x.dtype()),
                                 x.shape().to_string()));
  Tensor z = detail::empty_tensor(shape, DType::bool_, x.device());
  backend::logical(op, x, y, z);
  return z;
}
}  // namespace

Tensor equal(const Tensor& x, const Tensor& y) { return compare_op("equal", CompareOp::eq, x, y); }
Tensor not_equal(const Tensor& x, const Tensor& y) { return compare_op("not_equal", CompareOp::ne, x, y); }
Tensor less(const Tensor& x, const Tensor& y) { return compare_op("less", CompareOp::lt, x, y); }
Tensor less_equal(const Tensor& x, const Tensor& y) { return compare_op("less_equal", CompareOp::le, x, y); }
Tensor greater(const Tensor& x, const Tensor& y) { return compare_op("greater", CompareOp::gt, x, y); }
Tensor greater_equal(const Tensor& x, const Tensor& y) {
  return compare_op("greater_equal", CompareOp::ge, x, y);
}
Tensor logical_and(const Tensor& x, const Tensor& y) { return logical_op("logical_and", LogicalOp::and_, x, y); }
Tensor logical_or(const Tensor& x, const Tensor& y) { return logical_op("logical_or", LogicalOp::or_, x, y); }
Tensor logical_xor(const Tensor& x, const Tensor& y) { return logical_op("logical_xor", LogicalOp::xor_, x, y); }

Tensor logical_not(const Tensor& x) {
  detail::check_defined(x, "logical_not");
  if (x.dtype() != DType::bool_)
    throw DTypeError(fmt::format("logical_not: expected a bool tensor, got {} {}", name(x.dtype()),
                                 x.shape().to_string()));
  Tensor z = detail::empty_tensor(x.shape(), DType::bool_, x.device());
  backend::logical_not(x, z);
  return z;
}

namespace {
// One kernel answers both tests.
Tensor float_test(const char* name, const Tensor& x, FloatTest test) {
  detail::check_defined(x, name);
  if (is_half(x.dtype())) {
    autograd::NoRecordScope no_record;
    return float_test(name, cast(x, DType::float32), test);  // every half value is exact in float32
  }
  detail::check_float(x, name);
  Tensor z = detail::empty_tensor(x.shape(), DType::bool_, x.device());
  backend::float_test(test, x, z);
  return z;
}
}  // namespace

Tensor is_finite(const Tensor& x) { return float_test("is_finite", x, FloatTest::finite); }
Tensor is_nan(const Tensor& x) { return float_test("is_nan", x, FloatTest::nan); }
Tensor is_inf(const Tensor& x) { return float_test("is_inf", x, FloatTest::inf); }

// ---- operators -------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return equal(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return not_equal(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return less(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return less_equal(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return greater(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return greater_equal(a, b); }
Tensor operator==(const Tensor& a, double b) { return equal(a, scalar_like(a, b)); }
Tensor operator!=(const Tensor& a, double b) { return not_equal(a, scalar_like(a, b)); }
Tensor operator<(const Tensor& a, double b) { return less(a, scalar_like(a, b)); }
Tensor operator<=(const Tensor& a, double b) { return less_equal(a, scalar_like(a, b)); }
Tensor operator>(const Tensor& a, double b) { return greater(a, scalar_like(a, b)); }
Tensor operator>=(const Tensor& a, double b) { return greater_equal(a, scalar_like(a, b)); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }

}  // namespace keel
