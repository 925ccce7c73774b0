// Strided slicing: Tensor::slice (NumPy's basic indexing), strided_slice (TensorFlow's, without
// masks) and reverse. A slice with positive steps is a view; a negative step reads the same
// elements as a positive-step view, reversed by a kernel (views keep non-negative strides, which
// every kernel and the graph's memory plans rely on). The gradient of a view scatters into zeros.
#include "ops/indexing_slice.hpp"

#include <algorithm>
#include <string>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/indexing_nd.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

using detail::list_str;

// begin:end:step of an axis of size n, clamped as Python's slice.indices(n) does. Gives the
// first element read, and the number of elements.
void resolve_range(const SliceRange& r, std::int64_t n, std::int64_t& first, std::int64_t& count) {
  const std::int64_t step = r.step;
  auto clamp = [n](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v += n;  // v >= INT64_MIN and n >= 0: no overflow
    return std::clamp(v, lo, hi);
  };
  if (step > 0) {
    const std::int64_t b = r.begin.given() ? clamp(r.begin.value(), 0, n) : 0;
    const std::int64_t e = r.end.given() ? clamp(r.end.value(), 0, n) : n;
    first = b;
    count = e > b ? (e - b - 1) / step + 1 : 0;
  } else {
    // Walking backwards, -1 stands for "before the first element".
    const std::int64_t b = r.begin.given() ? clamp(r.begin.value(), -1, n - 1) : n - 1;
    const std::int64_t e = r.end.given() ? clamp(r.end.value(), -1, n - 1) : -1;
    first = b;
    // -step overflows for INT64_MIN: compute the magnitude unsigned.
    const auto mag = static_cast<std::uint64_t>(-(step + 1)) + 1;
    count = b > e ? static_cast<std::int64_t>(static_cast<std::uint64_t>(b - e - 1) / mag) + 1 : 0;
  }
}

Tensor slice_grad(const Tensor& g, const Shape& in, const std::vector<std::int64_t>& begin,
                  const std::vector<std::int64_t>& step);

// The view x[begin : : step] of `count` elements per axis (steps positive), differentiable.
Tensor strided_view(const Tensor& x, const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& step,
                    const std::vector<std::int64_t>& count) {
  bool whole = true;
  for (std::size_t i = 0; i < count.size(); ++i)
    whole = whole && begin[i] == 0 && count[i] == x.shape().dims()[i];
  if (whole) return x;
  detail::SlicePlan plan;
  plan.begin = begin;
  plan.step = step;
  plan.count = count;
  Tensor y = detail::plan_view(x, plan);
  if (autograd::recording())
    autograd::record("strided_slice", {x}, {y}, [in = x.shape(), begin, step](const Grads& g, const Needs& n) {
      return Grads{n[0] ? slice_grad(g[0], in, begin, step) : Tensor()};
    });
  return y;
}

// zeros(in) with g written at the elements strided_view(begin, step) reads: its adjoint.
Tensor slice_grad(const Tensor& g, const Shape& in, const std::vector<std::int64_t>& begin,
                  const std::vector<std::int64_t>& step) {
  Tensor out = detail::empty_tensor(in, g.dtype(), g.device(), "strided_slice");
  backend::fill(out, 0.0);
  if (g.size() > 0) {
    const auto cs = contiguous_strides(in);
    std::vector<std::int64_t> strides(cs.size());
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      strides[i] = cs[i] * step[i];
      offset += begin[i] * cs[i];
    }
    backend::copy(g, detail::make_view(out, g.shape(), strides, out.offset() + offset), "strided_slice");
  }
  if (autograd::recording())
    autograd::record("strided_slice_grad", {g}, {out}, [begin, step, count = g.shape().dims()](const Grads& gg,
                                                                                              const Needs& n) {
      return Grads{n[0] ? strided_view(gg[0], begin, step, count) : Tensor()};
    });
  return out;
}

}  // namespace

namespace detail {

SlicePlan plan_slice(const Shape& shape, const SliceSpec& spec, const char* op) {
  const std::int64_t rank = shape.rank();
  std::int64_t consuming = 0, ellipses = 0;
  for (const auto& item : spec) {
    if (item.kind() == SliceItem::Kind::ellipsis) ++ellipses;
    else if (item.kind() != SliceItem::Kind::newaxis) ++consuming;
  }
  if (ellipses > 1)
    throw ValueError(fmt::format("{}: a slice spec may hold one ellipsis, got {} (shape {})", op, ellipses,
                                 shape.to_string()));
  if (consuming > rank)
    throw ValueError(fmt::format("{}: {} indexed axes for a tensor of shape {} (rank {})", op, consuming,
                                 shape.to_string(), rank));
  SlicePlan p;
  const auto r = static_cast<std::size_t>(rank);
  p.begin.assign(r, 0);
  p.step.assign(r, 1);
  p.count = shape.dims();
  std::size_t axis = 0;
  auto whole_axes = [&](std::int64_t k) {
    for (std::int64_t i = 0; i < k; ++i, ++axis) p.out_dims.push_back(shape.dims()[axis]);
  };
  for (const auto& item : spec) {
    switch (item.kind()) {
      case SliceItem::Kind::ellipsis: whole_axes(rank - consuming); break;
      case SliceItem::Kind::newaxis:
        p.new_axes.push_back(static_cast<int>(p.out_dims.size()));
        p.out_dims.push_back(1);
        break;
      case SliceItem::Kind::all: whole_axes(1); break;
      case SliceItem::Kind::index: {
        const std::int64_t n = shape.dims()[axis], i = item.index();
        if (i < -n || i >= n)
          throw ValueError(fmt::format("{}: index {} is out of range [{}, {}) for axis {} of shape {}", op, i, -n, n,
                                       axis, shape.to_string()));
        p.begin[axis] = i < 0 ? i + n : i;
        p.count[axis] = 1;
        p.dropped.push_back(static_cast<int>(axis));
        ++axis;
        break;
      }
      case SliceItem::Kind::range: {
        const SliceRange& rg = item.range();
        if (rg.step == 0)
          throw ValueError(fmt::format("{}: the step for axis {} of shape {} is 0; it must be non-zero", op, axis,
                                       shape.to_string()));
        std::int64_t first = 0, count = 0;
        resolve_range(rg, shape.dims()[axis], first, count);
        p.count[axis] = count;
        if (count > 1) {
          if (rg.step > 0) {
            p.begin[axis] = first;
            p.step[axis] = rg.step;
          } else {
            // The same elements from the lowest one upwards, then reversed. count > 1 bounds the
            // step by the axis size, so -step fits.
            p.step[axis] = -rg.step;
            p.begin[axis] = first - (count - 1) * p.step[axis];
            p.flip.push_back(static_cast<int>(axis));
          }
        } else if (count == 1) {
          p.begin[axis] = first;  // step 1: any step reads the one element
        }
        p.out_dims.push_back(count);
        ++axis;
        break;
      }
    }
  }
  whole_axes(rank - static_cast<std::int64_t>(axis));  // axes after the last entry: whole
  return p;
}

Tensor plan_view(const Tensor& x, const SlicePlan& plan) {
  const auto r = static_cast<std::size_t>(x.rank());
  std::vector<std::int64_t> strides(r);
  std::int64_t offset = x.offset();
  bool empty = false;
  for (std::size_t i = 0; i < r; ++i) {
    strides[i] = x.strides()[i] * plan.step[i];
    offset += plan.begin[i] * x.strides()[i];
    empty = empty || plan.count[i] == 0;
  }
  return make_view(x, Shape(plan.count), std::move(strides), empty ? x.offset() : offset);
}

}  // namespace detail

namespace {

// The view, the reversal of the negative-step axes, then the integer entries' axes removed and
// the new axes inserted (views): each step differentiable.
Tensor apply_spec(const Tensor& x, const SliceSpec& spec, const char* op) {
  detail::check_defined(x, op);
  const detail::SlicePlan p = detail::plan_slice(x.shape(), spec, op);
  Tensor y = strided_view(x, p.begin, p.step, p.count);
  if (!p.flip.empty()) y = reverse(y, p.flip);
  if (!p.dropped.empty()) y = squeeze(y, p.dropped);
  for (int a : p.new_axes) y = expand_dims(y, a);
  return y;
}

}  // namespace

Tensor Tensor::slice(const SliceSpec& spec) const { return apply_spec(*this, spec, "slice"); }

Tensor strided_slice(const Tensor& x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                     std::vector<std::int64_t> strides) {
  detail::check_defined(x, "strided_slice");
  if (strides.empty()) strides.assign(begin.size(), 1);
  if (begin.size() != end.size() || begin.size() != strides.size())
    throw ValueError(fmt::format("strided_slice: begin {}, end {} and strides {} must have the same length",
                                 list_str(begin), list_str(end), list_str(strides)));
  if (static_cast<std::int64_t>(begin.size()) > x.rank())
    throw ValueError(fmt::format("strided_slice: begin {} has more entries than shape {} has axes", list_str(begin),
                                 detail::shape_str(x)));
  SliceSpec spec;
  spec.reserve(begin.size());
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (strides[i] == 0)
      throw ValueError(fmt::format("strided_slice: strides {} has a 0 at axis {} (shape {})", list_str(strides), i,
                                   detail::shape_str(x)));
    spec.emplace_back(range(begin[i], end[i], strides[i]));
  }
  return apply_spec(x, spec, "strided_slice");
}

Tensor reverse(const Tensor& x, std::vector<int> axes) {
  detail::check_defined(x, "reverse");
  const std::int64_t r = x.rank();
  std::vector<bool> flip(static_cast<std::size_t>(r), false);
  bool any = false;
  for (int a : axes) {
    const int ax = detail::normalize_axis(a, r, "reverse");
    if (flip[static_cast<std::size_t>(ax)])
      throw ValueError(fmt::format("reverse: axis {} is given more than once for shape {}", a, detail::shape_str(x)));
    flip[static_cast<std::size_t>(ax)] = true;
    any = any || x.shape()[ax] > 1;
  }
  if (!any) return x;  // nothing moves: x itself, whose gradient is g
  Tensor out = detail::empty_tensor(x.shape(), x.dtype(), x.device(), "reverse");
  backend::reverse(x, flip, out);
  if (autograd::recording())
    autograd::record("reverse", {x}, {out}, [axes = std::move(axes)](const Grads& g, const Needs& n) {
      return Grads{n[0] ? reverse(g[0], axes) : Tensor()};
    });
  return out;
}

}  // namespace keel
