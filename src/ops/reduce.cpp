// Reductions: each forward with its gradient rule; mean, logsumexp, variance and std are
// composites of the others and get their gradients from them.
#include "keel/ops/reduce.hpp"

#include <algorithm>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

struct ReducedShapes {
  std::vector<int> axes;  // sorted, normalised
  Shape kept;             // keepdims = true shape
  Shape out;              // the requested output shape
};

ReducedShapes reduced_shapes(const Tensor& x, const std::vector<int>& axes, bool keepdims, const char* op) {
  detail::check_defined(x, op);
  ReducedShapes r;
  r.axes = detail::normalize_axes(axes, x.rank(), op);
  std::vector<std::int64_t> kept = x.shape().dims(), out;
  for (int a : r.axes) kept[static_cast<std::size_t>(a)] = 1;
  for (std::int64_t d = 0; d < x.rank(); ++d)
    if (!std::binary_search(r.axes.begin(), r.axes.end(), static_cast<int>(d))) out.push_back(x.shape()[d]);
  r.kept = Shape(kept);
  r.out = keepdims ? r.kept : Shape(out);
  return r;
}


Tensor reduce_forward(kernel::ReduceOp op, const Tensor& x, const ReducedShapes& r, const char* name) {
  if (!is_half(x.dtype())) detail::check_numeric(x, name);
  if ((op == kernel::ReduceOp::max || op == kernel::ReduceOp::min) && x.size() == 0)
    throw ValueError(fmt::format("{}: cannot reduce an empty tensor of shape {}", name, x.shape().to_string()));
  Tensor y = detail::empty_tensor(r.out, x.dtype(), x.device());
  backend::reduce(op, x, r.axes, y);
  return y;
}

// The upstream gradient broadcast back over the reduced axes.
Tensor expand_grad(const Tensor& g, const ReducedShapes& r, const Shape& x_shape) {
  return broadcast_to(reshape(g, r.kept), x_shape);
}

}  // namespace

Tensor reduce_sum(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, "reduce_sum");
  Tensor y = reduce_forward(kernel::ReduceOp::sum, x, r, "reduce_sum");
  if (autograd::recording())
    autograd::record("reduce_sum", {x}, {y}, [r, xs = x.shape()](const Grads& g, const Needs&) {
      return Grads{expand_grad(g[0], r, xs)};
    });
  return y;
}

Tensor reduce_mean(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, "reduce_mean");
  std::int64_t count = 1;
  for (int a : r.axes) count *= x.shape()[a];
  const Tensor s = reduce_sum(x, axes, keepdims);
  if (!is_floating(x.dtype())) return cast(div(s, scalar_like(s, static_cast<double>(count))), x.dtype());
  return div(s, scalar_like(s, static_cast<double>(count)));
}

namespace {
// max/min: the gradient is shared equally by the elements equal to the extremum (TF's rule).
Tensor reduce_extremum(kernel::ReduceOp op, const char* name, const Tensor& x, const std::vector<int>& axes,
                       bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, name);
  Tensor y = reduce_forward(op, x, r, name);
  if (autograd::recording())
    autograd::record(name, {x}, {y}, [r, x, y](const Grads& g, const Needs&) {
      const Tensor hit = cast(equal(x, reshape(y, r.kept)), x.dtype());
      const Tensor count = reduce_sum(hit, r.axes, true);
      return Grads{mul(expand_grad(g[0], r, x.shape()), div(hit, count))};
    }, {x, y});
  return y;
}
}  // namespace

Tensor reduce_max(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum(kernel::ReduceOp::max, "reduce_max", x, axes, keepdims);
}

Tensor reduce_min(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return reduce_extremum(kernel::ReduceOp::min, "reduce_min", x, axes, keepdims);
}

namespace {
// Product of all other elements of each reduced group, for inputs that may contain zeros:
// an [..., n, n] tensor with ones on the diagonal, reduced over its last axis. O(n^2) memory,
// but only used when a zero makes y / x undefined, and differentiable for higher orders.
Tensor product_of_others(const Tensor& x, const std::vector<int>& axes) {
  std::vector<int> perm;
  std::vector<std::int64_t> kept_dims, red_dims;
  std::int64_t n = 1;
  for (int d = 0; d < x.rank(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) {
      perm.push_back(d);
      kept_dims.push_back(x.shape()[d]);
    }
  for (int a : axes) {
    perm.push_back(a);
    red_dims.push_back(x.shape()[a]);
    n *= x.shape()[a];
  }
  std::vector<std::int64_t> flat = kept_dims;
  flat.push_back(n);
  const Tensor xt = reshape(transpose(x, perm), Shape(flat));
  std::vector<std::int64_t> square_dims = kept_dims;
  square_dims.push_back(n);
  square_dims.push_back(n);
  const Tensor rows = broadcast_to(expand_dims(xt, -2), Shape(square_dims));
  const Tensor diag = cast(eye(n), DType::bool_);
  const Tensor others = reduce_prod(where(diag, ones_like(rows), rows), {-1});
  std::vector<std::int64_t> unflat = kept_dims;
  unflat.insert(unflat.end(), red_dims.begin(), red_dims.end());
  std::vector<int> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  return transpose(reshape(others, Shape(unflat)), inverse);
}
}  // namespace

Tensor reduce_prod(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, "reduce_prod");
  Tensor y = reduce_forward(kernel::ReduceOp::prod, x, r, "reduce_prod");
  if (autograd::recording())
    autograd::record("reduce_prod", {x}, {y}, [r, x, y](const Grads& g, const Needs&) {
      const Tensor gb = expand_grad(g[0], r, x.shape());
      // The quotient y / x is cheaper, but needs no zero in x: a value tested on the host, which a
      // traced function cannot do (there the product of the others is right either way).
      const bool has_zero = backend::recorder() ||
                            reduce_sum(cast(equal(x, scalar_like(x, 0.0)), DType::int32)).item<std::int32_t>() > 0;
      if (!has_zero) return Grads{mul(gb, div(broadcast_to(reshape(y, r.kept), x.shape()), x))};
      return Grads{mul(gb, product_of_others(x, r.axes))};
    }, {x, y});
  return y;
}

Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, "reduce_logsumexp");
  if (!is_floating(x.dtype())) throw DTypeError(fmt::format("reduce_logsumexp: expected a float tensor, got {}", name(x.dtype())));
  // Shift by the max so exp never overflows; the shift carries no gradient of its own.
  return detail::in_op("reduce_logsumexp", [&] {
    Tensor m = stop_gradient(reduce_max(x, r.axes, true));
    m = where(is_finite(m), m, zeros_like(m));
    const Tensor lse = add(log(reduce_sum(exp(sub(x, m)), r.axes, true)), m);
    return keepdims ? lse : reshape(lse, r.out);
  });
}

Tensor reduce_variance(const Tensor& x, std::vector<int> axes, bool keepdims) {
  const ReducedShapes r = reduced_shapes(x, axes, keepdims, "reduce_variance");
  if (!is_floating(x.dtype())) throw DTypeError(fmt::format("reduce_variance: expected a float tensor, got {}", name(x.dtype())));
  return moments(x, r.axes, keepdims).second;
}

Tensor reduce_std(const Tensor& x, std::vector<int> axes, bool keepdims) {
  return sqrt(reduce_variance(x, std::move(axes), keepdims));
}

Tensor reduce_any(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::check_defined(x, "reduce_any");
  if (x.dtype() != DType::bool_) throw DTypeError(fmt::format("reduce_any: expected a bool tensor, got {}", name(x.dtype())));
  return cast(reduce_max(cast(x, DType::int32), std::move(axes), keepdims), DType::bool_);
}

Tensor reduce_all(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::check_defined(x, "reduce_all");
  if (x.dtype() != DType::bool_) throw DTypeError(fmt::format("reduce_all: expected a bool tensor, got {}", name(x.dtype())));
  return cast(reduce_min(cast(x, DType::int32), std::move(axes), keepdims), DType::bool_);
}

namespace {
Tensor arg_extremum(kernel::ArgReduceOp op, const Tensor& x, int axis) {
  const char* name = op == kernel::ArgReduceOp::argmax ? "argmax" : "argmin";
  detail::check_defined(x, name);
  const int a = detail::normalize_axis(axis, x.rank(), name);
  if (x.shape()[a] == 0)
    throw ValueError(fmt::format("{}: axis {} of shape {} is empty", name, axis, x.shape().to_string()));
  if (is_half(x.dtype())) {
    autograd::NoRecordScope no_record;
    return arg_extremum(op, cast(x, DType::float32), axis);  // exact: halves widen losslessly
  }
  detail::check_numeric(x, name);
  std::vector<std::int64_t> out;
  for (std::int64_t d = 0; d < x.rank(); ++d)
    if (d != a) out.push_back(x.shape()[d]);
  Tensor y = detail::empty_tensor(Shape(out), DType::int64, x.device());
  backend::arg_reduce(op, x, a, y);
  return y;
}
}  // namespace

Tensor argmax(const Tensor& x, int axis) { return arg_extremum(kernel::ArgReduceOp::argmax, x, axis); }
Tensor argmin(const Tensor& x, int axis) { return arg_extremum(kernel::ArgReduceOp::argmin, x, axis); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "sum_to");
  if (x.shape() == shape) return x;
  const std::int64_t lead = x.rank() - shape.rank();
  if (lead < 0)
    throw ShapeError(fmt::format("sum_to: cannot reduce shape {} to the larger rank of {}",
                                 x.shape().to_string(), shape.to_string()));
  std::vector<int> axes;
  for (std::int64_t d = 0; d < x.rank(); ++d) {
    if (d < lead) {
      axes.push_back(static_cast<int>(d));
      continue;
    }
    const std::int64_t want = shape[d - lead];
    if (want == x.shape()[d]) continue;
    if (want != 1)
      throw ShapeError(fmt::format("sum_to: shape {} does not broadcast to {}", shape.to_string(),
                                   x.shape().to_string()));
    axes.push_back(static_cast<int>(d));
  }
  if (axes.empty()) return reshape(x, shape);
  return reshape(reduce_sum(x, axes, true), shape);
}

}  // namespace keel
