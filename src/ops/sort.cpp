// Sorting and selection: sort, argsort (tf.sort, tf.argsort) and top_k (tf.math.top_k). The
// gradient of sort and top_k sends each output's gradient back to the element it came from
// (the adjoint of a gather: a scatter-add into x's shape).
#include <limits>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/scan_sort.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/scan_sort.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// Sorting needs an order: every numeric dtype, and the half types (sorted as float32).
void check_sortable(const Tensor& x, const char* op) {
  detail::check_defined(x, op, "x");
  if (!is_half(x.dtype())) detail::check_numeric(x, op);
}

bool descending(const std::string& direction, const char* op) {
  if (direction == "ASCENDING") return false;
  if (direction == "DESCENDING") return true;
  throw ValueError(fmt::format("{}: direction must be \"ASCENDING\" or \"DESCENDING\", got \"{}\"", op, direction));
}

// Positions along the sorted axis are int32, as in TensorFlow.
void check_positions_fit(std::int64_t n, const Tensor& x, const char* op) {
  if (n > std::numeric_limits<std::int32_t>::max())
    throw ValueError(fmt::format("{}: the axis of size {} of x {} has more positions than int32 indices hold", op, n,
                                 detail::shape_str(x)));
}

// The gradient of y = x gathered along `axis` at positions idx (int32, y's shape): each element
// of g added into the element of x it came from.
Tensor scatter_back(const Tensor& g, const Tensor& idx, const Shape& x_shape, int axis) {
  DeviceScope scope(g.device());
  if (is_half(g.dtype()))  // the scatter-add accumulates in float32
    return cast(scatter_back(cast(g, DType::float32), idx, x_shape, axis), g.dtype());
  if (g.size() == 0) return zeros(x_shape, g.dtype());
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x_shape[d];
  for (std::int64_t d = axis + 1; d < x_shape.rank(); ++d) inner *= x_shape[d];
  const std::int64_t n = x_shape[axis], m = g.shape()[axis];
  // The flat position in x of y[o, j, i] is o * n * inner + idx[o, j, i] * inner + i.
  const Tensor row_start = reshape(arange(0, static_cast<double>(outer), 1, DType::int64) *
                                   static_cast<double>(n * inner), {outer, 1, 1});
  const Tensor column = reshape(arange(0, static_cast<double>(inner), 1, DType::int64), {1, 1, inner});
  const Tensor pos = cast(reshape(idx, {outer, m, inner}), DType::int64) * static_cast<double>(inner) + row_start + column;
  const Tensor flat = unsorted_segment_sum(reshape(g, {-1}), reshape(pos, {-1}), x_shape.num_elements());
  return reshape(flat, x_shape);
}

}  // namespace

Tensor sort(const Tensor& x, int axis, std::string direction) {
  const bool desc = descending(direction, "sort");
  check_sortable(x, "sort");
  const int ax = detail::normalize_axis(axis, x.rank(), "sort");
  check_positions_fit(x.shape()[ax], x, "sort");
  Tensor values = detail::empty_tensor(x.shape(), x.dtype(), x.device(), "sort");
  // The positions are needed only for the gradient.
  const bool grad = autograd::recording() && is_floating(x.dtype());
  Tensor idx = grad ? detail::empty_tensor(x.shape(), DType::int32, x.device(), "sort") : Tensor();
  backend::sort(x, ax, desc, values, idx);
  if (grad)
    autograd::record("sort", {x}, {values}, [idx, xs = x.shape(), ax](const Grads& g, const Needs&) {
      return Grads{scatter_back(g[0], idx, xs, ax)};
    }, {idx});
  return values;
}

Tensor argsort(const Tensor& x, int axis, std::string direction, bool /*stable: always*/) {
  const bool desc = descending(direction, "argsort");
  check_sortable(x, "argsort");
  const int ax = detail::normalize_axis(axis, x.rank(), "argsort");
  check_positions_fit(x.shape()[ax], x, "argsort");
  Tensor idx = detail::empty_tensor(x.shape(), DType::int32, x.device(), "argsort");
  backend::sort(x, ax, desc, Tensor(), idx);
  return idx;
}

TopK top_k(const Tensor& x, int k, bool sorted) {
  check_sortable(x, "top_k");
  if (x.rank() < 1)
    throw ShapeError(fmt::format("top_k: x must have at least one axis, got shape {}", detail::shape_str(x)));
  const std::int64_t n = x.shape()[x.rank() - 1];
  if (k < 0) throw ValueError(fmt::format("top_k: k must be non-negative, got {}", k));
  if (k > n)
    throw ValueError(fmt::format("top_k: k = {} is larger than the last axis (size {}) of x {}", k, n,
                                 detail::shape_str(x)));
  check_positions_fit(n, x, "top_k");
  auto dims = x.shape().dims();
  dims.back() = k;
  const Shape out_shape(dims);
  TopK r{detail::empty_tensor(out_shape, x.dtype(), x.device(), "top_k"),
         detail::empty_tensor(out_shape, DType::int32, x.device(), "top_k")};
  backend::top_k(x, k, sorted, r.values, r.indices);
  if (autograd::recording())
    autograd::record("top_k", {x}, {r.values}, [idx = r.indices, xs = x.shape()](const Grads& g, const Needs&) {
      return Grads{scatter_back(g[0], idx, xs, static_cast<int>(xs.rank()) - 1)};
    }, {r.indices});
  return r;
}

}  // namespace keel
