// Cumulative sums and products (tf.math.cumsum, tf.math.cumprod), each with its gradient.
#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/scan_sort.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/scan_sort.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// Scans are defined for the numeric dtypes and the half storage types (computed in float32).
void check_scannable(const Tensor& x, const char* op) {
  detail::check_defined(x, op, "x");
  if (!is_half(x.dtype())) detail::check_numeric(x, op);
}

Tensor scan_forward(backend::ScanOp kind, const char* op, const Tensor& x, int& axis, bool exclusive, bool reverse) {
  check_scannable(x, op);
  axis = detail::normalize_axis(axis, x.rank(), op);
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device(), op);
  backend::scan(kind, x, axis, exclusive, reverse, y);
  return y;
}

// d cumprod / dx, exact also where x has zeros. TensorFlow's rule (_CumprodGrad) is
//   dx = cumsum(cumprod(x) * g, reverse = !reverse) / x
// (the same exclusive flag throughout), which is exact wherever x != 0 but divides by zero at a
// zero entry (TensorFlow returns NaN there, or 0 since it switched to div_no_nan; neither is the
// derivative). keel keeps that rule where it is exact and fills in the zeros:
//   * before the first zero of a scan (in scan order) x != 0 and the rule holds;
//   * after it every product that reaches an entry also holds that zero: the rule gives 0
//     (cumprod(x) is 0 there), which is right, for later zeros as well;
//   * at the first zero the derivative is the same rule applied to x with that zero set to 1:
//     each product through it, with the zero left out, is the product of that modified x.
Tensor cumprod_grad(const Tensor& x, const Tensor& g, int axis, bool exclusive, bool reverse) {
  const Tensor zero = scalar_like(x, 0.0), one = scalar_like(x, 1.0);
  const Tensor is_zero = equal(x, zero);
  const auto rule = [&](const Tensor& v) {
    return cumsum(mul(cumprod(v, axis, exclusive, reverse), g), axis, exclusive, !reverse);
  };
  const Tensor nonzero_part = div(rule(x), where(is_zero, one, x));
  const Tensor zeros_before = cumsum(cast(is_zero, x.dtype()), axis, true, reverse);
  const Tensor first_zero = logical_and(is_zero, equal(zeros_before, zero));
  const Tensor at_first_zero = rule(where(first_zero, one, x));
  return where(is_zero, where(first_zero, at_first_zero, zero), nonzero_part);
}

}  // namespace

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  Tensor y = scan_forward(backend::ScanOp::sum, "cumsum", x, axis, exclusive, reverse);
  if (autograd::recording())
    // TensorFlow's _CumsumGrad: the scan of g run the other way, with the same exclusive flag.
    autograd::record("cumsum", {x}, {y}, [axis, exclusive, reverse](const Grads& g, const Needs&) {
      return Grads{cumsum(g[0], axis, exclusive, !reverse)};
    });
  return y;
}

Tensor cumprod(const Tensor& x, int axis, bool exclusive, bool reverse) {
  Tensor y = scan_forward(backend::ScanOp::prod, "cumprod", x, axis, exclusive, reverse);
  if (autograd::recording())
    autograd::record("cumprod", {x}, {y}, [x, axis, exclusive, reverse](const Grads& g, const Needs&) {
      return Grads{cumprod_grad(x, g[0], axis, exclusive, reverse)};
    }, {x});
  return y;
}

}  // namespace keel
