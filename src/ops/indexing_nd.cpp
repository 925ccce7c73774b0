// n-d gathers and scatters: gather_nd, scatter_nd and tensor_scatter_nd_update / add / max /
// min, each with its gradient (gather_nd and scatter_nd are each other's adjoints).
#include "ops/indexing_nd.hpp"

#include <string>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/indexing.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using backend::ScatterMode;

namespace {

// The index depth M of indices [..., M] for a tensor of `shape` (what = its argument name).
std::int64_t index_depth(const Shape& shape, const Tensor& indices, const char* op, const char* what) {
  detail::dispatch_index(indices.dtype(), op, []<class I>() {});
  if (indices.rank() == 0)
    throw ShapeError(fmt::format("{}: indices must have rank >= 1 (index tuples along the last axis), got shape []",
                                 op));
  const std::int64_t m = indices.shape()[indices.rank() - 1];
  if (m > shape.rank())
    throw ShapeError(fmt::format("{}: index tuples of length {} (indices {}) exceed the rank of {} {}", op, m,
                                 detail::shape_str(indices), what, shape.to_string()));
  return m;
}

// indices.shape[:-1] + shape[m:]: the shape of the gathered (or scattered) slices.
Shape slices_shape(const Shape& shape, const Tensor& indices, std::int64_t m) {
  std::vector<std::int64_t> d(indices.shape().dims().begin(), indices.shape().dims().end() - 1);
  d.insert(d.end(), shape.dims().begin() + m, shape.dims().end());
  return Shape(std::move(d));
}

// "indices[1,0] = 5 is out of range [-3, 3) for axis 0 of params [3,2]".
[[noreturn]] void throw_bad(const char* op, const backend::NdBadIndex& b, const Tensor& indices, const Shape& shape,
                            const char* what) {
  std::vector<std::int64_t> at(static_cast<std::size_t>(indices.rank()));
  at.back() = b.component;
  std::int64_t rest = b.position;
  for (std::size_t i = at.size() - 1; i-- > 0;) {
    at[i] = rest % indices.shape().dims()[i];
    rest /= indices.shape().dims()[i];
  }
  std::string where;
  for (std::size_t i = 0; i < at.size(); ++i) where += (i ? "," : "") + std::to_string(at[i]);
  const std::int64_t dim = shape.dims()[static_cast<std::size_t>(b.component)];
  throw ValueError(fmt::format("{}: indices[{}] = {} is out of range [{}, {}) for axis {} of {} {}", op, where,
                               b.value, -dim, dim, b.component, what, shape.to_string()));
}

Tensor tensor_scatter(const char* op, ScatterMode mode, const Tensor& tensor, const Tensor& indices,
                      const Tensor& updates) {
  detail::check_defined(tensor, op, "tensor");
  detail::check_defined(indices, op, "indices");
  detail::check_defined(updates, op, "updates");
  detail::check_same_device(tensor, indices, op);
  detail::check_same_device(tensor, updates, op);
  Tensor out = detail::empty_tensor(tensor.shape(), tensor.dtype(), tensor.device(), op);
  detail::scatter_into(op, mode, tensor.contiguous(), indices, updates, out);
  return out;
}

}  // namespace

namespace detail {

void scatter_into(const char* op, ScatterMode mode, const Tensor& base, const Tensor& indices, const Tensor& updates,
                  const Tensor& out) {
  const std::int64_t m = index_depth(out.shape(), indices, op, "tensor");
  const Shape expected = slices_shape(out.shape(), indices, m);
  if (updates.shape() != expected)
    throw ShapeError(fmt::format("{}: updates of shape {} do not match indices {} for tensor {} (expected {} = "
                                 "indices.shape[:-1] + tensor.shape[{}:])", op, shape_str(updates),
                                 shape_str(indices), out.shape().to_string(), expected.to_string(), m));
  if (updates.dtype() != out.dtype())
    throw DTypeError(fmt::format("{}: updates have dtype {} but the tensor has dtype {}", op, name(updates.dtype()),
                                 name(out.dtype())));
  if (mode != ScatterMode::update) dispatch_numeric(out.dtype(), op, []<class T>() {});
  const backend::NdBadIndex bad = backend::scatter_nd(mode, base, indices.contiguous(), updates.contiguous(), out);
  if (bad.position >= 0) throw_bad(op, bad, indices, out.shape(), "tensor");
}

}  // namespace detail

Tensor gather_nd(const Tensor& params, const Tensor& indices) {
  detail::check_defined(params, "gather_nd", "params");
  detail::check_defined(indices, "gather_nd", "indices");
  detail::check_same_device(params, indices, "gather_nd");
  const std::int64_t m = index_depth(params.shape(), indices, "gather_nd", "params");
  Tensor out = detail::empty_tensor(slices_shape(params.shape(), indices, m), params.dtype(), params.device(),
                                    "gather_nd");
  const backend::NdBadIndex bad = backend::gather_nd(params.contiguous(), indices.contiguous(), out);
  if (bad.position >= 0) throw_bad("gather_nd", bad, indices, params.shape(), "params");
  if (autograd::recording())
    autograd::record("gather_nd", {params}, {out}, [indices, in = params.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? scatter_nd(indices, g[0], in) : Tensor()};
    }, {indices});
  return out;
}

Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Shape& shape) {
  detail::check_defined(indices, "scatter_nd", "indices");
  detail::check_defined(updates, "scatter_nd", "updates");
  detail::check_same_device(indices, updates, "scatter_nd");
  detail::check_dims(shape, "scatter_nd");
  detail::dispatch_numeric(updates.dtype(), "scatter_nd", []<class T>() {});
  Tensor out = detail::empty_tensor(shape, updates.dtype(), updates.device(), "scatter_nd");
  detail::scatter_into("scatter_nd", ScatterMode::add, Tensor(), indices, updates, out);
  if (autograd::recording())
    autograd::record("scatter_nd", {updates}, {out}, [indices](const Grads& g, const Needs& n) {
      return Grads{n[0] ? gather_nd(g[0], indices) : Tensor()};
    }, {indices});
  return out;
}

Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  Tensor out = tensor_scatter("tensor_scatter_nd_update", ScatterMode::update, tensor, indices, updates);
  if (autograd::recording())
    autograd::record("tensor_scatter_nd_update", {tensor, updates}, {out},
                     [indices, updates](const Grads& g, const Needs& n) {
                       // The overwritten elements of tensor get no gradient; the updates get theirs.
                       return Grads{n[0] ? tensor_scatter_nd_update(g[0], indices, zeros_like(updates)) : Tensor(),
                                    n[1] ? gather_nd(g[0], indices) : Tensor()};
                     }, {indices, updates});
  return out;
}

Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  Tensor out = tensor_scatter("tensor_scatter_nd_add", ScatterMode::add, tensor, indices, updates);
  if (autograd::recording())
    autograd::record("tensor_scatter_nd_add", {tensor, updates}, {out}, [indices](const Grads& g, const Needs& n) {
      return Grads{n[0] ? g[0] : Tensor(), n[1] ? gather_nd(g[0], indices) : Tensor()};
    }, {indices});
  return out;
}

namespace {

// TensorFlow's rule for TensorScatterMax / Min: the gradient goes to whichever of tensor's
// element and the updates scattered onto it equals the result, split evenly between ties.
Grads min_max_grad(const Tensor& g, const Tensor& tensor, const Tensor& indices, const Tensor& updates,
                   const Tensor& out, const Needs& n) {
  const Tensor x_won = cast(tensor == out, g.dtype());
  const Tensor u_won = cast(updates == gather_nd(out, indices), g.dtype());
  const Tensor winners = x_won + scatter_nd(indices, u_won, tensor.shape());  // >= 1 everywhere
  return Grads{n[0] ? g * x_won / winners : Tensor(), n[1] ? gather_nd(g / winners, indices) * u_won : Tensor()};
}

Tensor scatter_min_max(const char* op, ScatterMode mode, const Tensor& tensor, const Tensor& indices,
                       const Tensor& updates) {
  Tensor out = tensor_scatter(op, mode, tensor, indices, updates);
  if (autograd::recording())
    autograd::record(op, {tensor, updates}, {out}, [tensor, indices, updates, out](const Grads& g, const Needs& n) {
      return min_max_grad(g[0], tensor, indices, updates, out, n);
    }, {tensor, indices, updates, out});
  return out;
}

}  // namespace

Tensor tensor_scatter_nd_max(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  return scatter_min_max("tensor_scatter_nd_max", ScatterMode::max, tensor, indices, updates);
}

Tensor tensor_scatter_nd_min(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  return scatter_min_max("tensor_scatter_nd_min", ScatterMode::min, tensor, indices, updates);
}

}  // namespace keel
