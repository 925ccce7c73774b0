// Shape ops. Views (reshape, transpose, expand_dims, squeeze, slice, broadcast_to, split,
// unstack) only rewrite shape/strides/offset; the ops that move data (concat, tile, gather, pad,
// one_hot, unsorted_segment_sum) go through one strided byte copier, so they work for every dtype
// without dispatch. Each differentiable op records its gradient rule right after its forward.
#include "keel/ops/shape.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "keel/core/config.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "ops/gather_adjoint.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

using detail::list_str;

// Axis for inserting a new dimension: [-rank-1, rank] (normalize_axis would name rank + 1).
int insert_axis(int axis, const Tensor& x, const char* op) {
  const std::int64_t r = x.rank();
  if (axis < -r - 1 || axis > r)
    throw ValueError(fmt::format("{}: axis {} is out of range [{}, {}] for a tensor of shape {}", op,
                                 axis, -r - 1, r, x.shape().to_string()));
  return axis < 0 ? static_cast<int>(axis + r + 1) : axis;
}

// Copies a `shape`-shaped block from src's elements (its storage, at src's offset, with
// `src_strides`; a stride of 0 broadcasts) into out's storage at element `dst_offset` with
// `dst_strides`. Both sides are views of tensors, so that the copy is a kernel call on tensors
// (what a traced function replays), not on raw pointers.
void strided_copy(const Tensor& out, std::int64_t dst_offset, const std::vector<std::int64_t>& dst_strides,
                  const Tensor& src, const std::vector<std::int64_t>& src_strides,
                  const std::vector<std::int64_t>& shape) {
  backend::copy(detail::make_view(src, Shape(shape), src_strides, src.offset()),
                detail::make_view(out, Shape(shape), dst_strides, out.offset() + dst_offset), "copy");
}

std::int64_t product(const std::vector<std::int64_t>& d, std::size_t from, std::size_t to) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::int64_t r = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> out(static_cast<std::size_t>(r));
  for (std::int64_t i = 0; i < r; ++i) {
    const std::int64_t ia = a.rank() - r + i, ib = b.rank() - r + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == db || db == 1)
      out[static_cast<std::size_t>(i)] = da;
    else if (da == 1)
      out[static_cast<std::size_t>(i)] = db;
    else
      throw ShapeError(
          fmt::format("{}: incompatible shapes {} and {}", op, a.to_string(), b.to_string()));
  }
  return Shape(std::move(out));
}

// ---------------------------------------------------------------------------------------------
Tensor reshape(const Tensor& x, Shape shape) {
  detail::check_defined(x, "reshape");
  std::int64_t known = 1;
  int infer = -1;
  for (std::int64_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        throw ValueError(fmt::format("reshape: only one dimension may be -1, got {}",
                                     shape.to_string()));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw ShapeError(fmt::format("reshape: negative dimension in {}", shape.to_string()));
    } else if (known != 0 && shape[i] != 0 && __builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError(fmt::format("reshape: cannot reshape {} ({} elements) into {}, which has more elements than "
                                   "a 64-bit count holds", detail::shape_str(x), x.size(), shape.to_string()));
    } else if (shape[i] == 0) {
      known = 0;
    }
  }
  const std::int64_t n = x.size();
  if (infer >= 0) {
    // With a zero among the known dims any size would fit, so -1 is ambiguous.
    if (known == 0 || n % known != 0)
      throw ShapeError(fmt::format("reshape: cannot reshape {} ({} elements) into {}",
                                   detail::shape_str(x), n, shape.to_string()));
    shape[infer] = n / known;
  } else if (known != n) {
    throw ShapeError(fmt::format("reshape: cannot reshape {} ({} elements) into {} ({} elements)",
                                 detail::shape_str(x), n, shape.to_string(), known));
  }
  const Tensor src = x.contiguous();
  auto strides = contiguous_strides(shape);
  Tensor y = detail::make_view(src, shape, std::move(strides), src.offset());
  if (autograd::recording())
    autograd::record("reshape", {x}, {y}, [in = x.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? reshape(g[0], in) : Tensor()};
    });
  return y;
}

Tensor transpose(const Tensor& x, std::vector<int> perm) {
  detail::check_defined(x, "transpose");
  const std::int64_t r = x.rank();
  if (perm.empty()) {
    for (std::int64_t i = r - 1; i >= 0; --i) perm.push_back(static_cast<int>(i));
  } else if (static_cast<std::int64_t>(perm.size()) != r) {
    throw ShapeError(fmt::format("transpose: perm {} has {} entries but the tensor of shape {} has rank {}",
                                 list_str(perm), perm.size(), detail::shape_str(x), r));
  }
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  for (auto& p : perm) {
    const int orig = p;
    p = detail::normalize_axis(p, r, "transpose");
    if (seen[static_cast<std::size_t>(p)])
      throw ValueError(fmt::format("transpose: perm {} repeats axis {}; it must be a permutation of 0..{}",
                                   list_str(perm), orig, r - 1));
    seen[static_cast<std::size_t>(p)] = true;
  }
  std::vector<std::int64_t> dims(static_cast<std::size_t>(r)), strides(static_cast<std::size_t>(r));
  std::vector<int> inverse(static_cast<std::size_t>(r));
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const auto p = static_cast<std::size_t>(perm[i]);
    dims[i] = x.shape().dims()[p];
    strides[i] = x.strides()[p];
    inverse[p] = static_cast<int>(i);
  }
  Tensor y = detail::make_view(x, Shape(std::move(dims)), std::move(strides), x.offset());
  if (autograd::recording())
    autograd::record("transpose", {x}, {y}, [inverse](const Grads& g, const Needs& n) {
      return Grads{n[0] ? transpose(g[0], inverse) : Tensor()};
    });
  return y;
}

Tensor expand_dims(const Tensor& x, int axis) {
  detail::check_defined(x, "expand_dims");
  const std::int64_t r = x.rank();
  const int ax = insert_axis(axis, x, "expand_dims");
  auto dims = x.shape().dims();
  auto strides = x.strides();
  // The new axis has size 1, so its stride never matters; keep it row-major-looking.
  const std::int64_t st = ax < r ? strides[static_cast<std::size_t>(ax)] * dims[static_cast<std::size_t>(ax)] : 1;
  dims.insert(dims.begin() + ax, 1);
  strides.insert(strides.begin() + ax, st);
  Tensor y = detail::make_view(x, Shape(std::move(dims)), std::move(strides), x.offset());
  if (autograd::recording())
    autograd::record("expand_dims", {x}, {y}, [in = x.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? reshape(g[0], in) : Tensor()};
    });
  return y;
}

Tensor squeeze(const Tensor& x, std::vector<int> axes) {
  detail::check_defined(x, "squeeze");
  const auto& in = x.shape().dims();
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int a : detail::normalize_axes(axes, x.rank(), "squeeze", false)) {
      if (in[static_cast<std::size_t>(a)] != 1)
        throw ShapeError(fmt::format("squeeze: cannot squeeze axis {} of size {} (shape {})", a,
                                     in[static_cast<std::size_t>(a)], detail::shape_str(x)));
      drop[static_cast<std::size_t>(a)] = true;
    }
  }
  std::vector<std::int64_t> dims, strides;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (drop[i]) continue;
    dims.push_back(in[i]);
    strides.push_back(x.strides()[i]);
  }
  Tensor y = detail::make_view(x, Shape(std::move(dims)), std::move(strides), x.offset());
  if (autograd::recording())
    autograd::record("squeeze", {x}, {y}, [in = x.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? reshape(g[0], in) : Tensor()};
    });
  return y;
}

Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin,
             const std::vector<std::int64_t>& size) {
  detail::check_defined(x, "slice");
  const std::int64_t r = x.rank();
  if (static_cast<std::int64_t>(begin.size()) != r || static_cast<std::int64_t>(size.size()) != r)
    throw ShapeError(fmt::format("slice: begin {} and size {} need one entry per axis of shape {}",
                                 list_str(begin), list_str(size), detail::shape_str(x)));
  const auto& in = x.shape().dims();
  std::vector<std::int64_t> dims(static_cast<std::size_t>(r));
  std::int64_t offset = x.offset();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t b = begin[i];
    std::int64_t s = size[i];
    if (b < 0 || b > in[i])
      throw ValueError(fmt::format("slice: begin {} is out of range for shape {} (axis {})",
                                   list_str(begin), detail::shape_str(x), i));
    if (s == -1) s = in[i] - b;
    if (s < 0 || s > in[i] - b)  // not b + s > in[i], which wraps for sizes near INT64_MAX
      throw ValueError(fmt::format("slice: begin {} with size {} is out of range for shape {} (axis {})",
                                   list_str(begin), list_str(size), detail::shape_str(x), i));
    dims[i] = s;
    if (s > 0) offset += b * x.strides()[i];
  }
  const Shape out_shape(dims);
  Tensor y = detail::make_view(x, out_shape, x.strides(), offset);
  if (autograd::recording()) {
    std::vector<std::array<std::int64_t, 2>> pads(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) pads[i] = {begin[i], in[i] - begin[i] - dims[i]};
    autograd::record("slice", {x}, {y}, [pads](const Grads& g, const Needs& n) {
      return Grads{n[0] ? pad(g[0], pads, 0.0) : Tensor()};
    });
  }
  return y;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "broadcast_to");
  const std::int64_t r = x.rank(), t = shape.rank();
  auto fail = [&]() {
    throw ShapeError(fmt::format("broadcast_to: cannot broadcast {} to {}", detail::shape_str(x),
                                 shape.to_string()));
  };
  if (t < r) fail();
  std::vector<std::int64_t> strides(static_cast<std::size_t>(t), 0);
  for (std::int64_t i = 0; i < t; ++i) {
    if (shape[i] < 0) fail();
    const std::int64_t j = i - (t - r);
    if (j < 0) continue;
    if (x.shape()[j] == shape[i])
      strides[static_cast<std::size_t>(i)] = x.strides()[static_cast<std::size_t>(j)];
    else if (x.shape()[j] != 1)
      fail();
  }
  detail::checked_elements(shape, "broadcast_to");  // a view, but one whose size must be countable
  Tensor y = detail::make_view(x, shape, std::move(strides), x.offset());
  if (autograd::recording())
    autograd::record("broadcast_to", {x}, {y}, [in = x.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? sum_to(g[0], in) : Tensor()};
    });
  return y;
}

// ---------------------------------------------------------------------------------------------
Tensor concat(const std::vector<Tensor>& values, int axis) {
  if (values.empty()) throw ValueError("concat: needs at least one tensor");
  for (const auto& v : values) detail::check_defined(v, "concat");
  const Tensor& first = values[0];
  const std::int64_t r = first.rank();
  if (r == 0) throw ShapeError("concat: cannot concatenate scalars (shape [])");
  const int ax = detail::normalize_axis(axis, r, "concat");
  auto out_dims = first.shape().dims();
  out_dims[static_cast<std::size_t>(ax)] = 0;
  std::vector<std::int64_t> sizes;
  sizes.reserve(values.size());
  for (std::size_t k = 0; k < values.size(); ++k) {
    const Tensor& v = values[k];
    detail::check_same_dtype(first, v, "concat");
    detail::check_same_device(first, v, "concat");
    bool ok = v.rank() == r;
    for (std::int64_t i = 0; ok && i < r; ++i) ok = i == ax || v.shape()[i] == first.shape()[i];
    if (!ok)
      throw ShapeError(fmt::format("concat: input {} has shape {}, incompatible with input 0's {} "
                                   "(only axis {} may differ)",
                                   k, detail::shape_str(v), detail::shape_str(first), ax));
    sizes.push_back(v.shape()[ax]);
    auto& total = out_dims[static_cast<std::size_t>(ax)];
    total = detail::checked_add(total, v.shape()[ax], "concat", fmt::format("the sum of axis {}", ax));
  }
  if (values.size() == 1) return first;

  const Shape out_shape(out_dims);
  Tensor out = detail::empty_tensor(out_shape, first.dtype(), first.device(), "concat");
  const auto out_strides = contiguous_strides(out_shape);
  const std::int64_t step = out_strides[static_cast<std::size_t>(ax)];
  std::int64_t pos = 0;
  for (const auto& v : values) {
    strided_copy(out, pos * step, out_strides, v, v.strides(), v.shape().dims());
    pos += v.shape()[ax];
  }
  if (autograd::recording())
    autograd::record("concat", values, {out}, [sizes, ax](const Grads& g, const Needs& n) {
      // split gives views, and its own gradient is one concat: cheaper at second order than
      // one padded slice per input.
      auto parts = split(g[0], sizes, ax);
      for (std::size_t i = 0; i < parts.size(); ++i)
        if (!n[i]) parts[i] = Tensor();
      return parts;
    });
  return out;
}

Tensor stack(const std::vector<Tensor>& values, int axis) {
  if (values.empty()) throw ValueError("stack: needs at least one tensor");
  for (const auto& v : values) detail::check_defined(v, "stack");
  const Tensor& first = values[0];
  for (std::size_t k = 1; k < values.size(); ++k)
    if (values[k].shape() != first.shape())
      throw ShapeError(fmt::format("stack: input {} has shape {}, but input 0 has shape {}", k,
                                   detail::shape_str(values[k]), detail::shape_str(first)));
  const int ax = insert_axis(axis, first, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(values.size());
  for (const auto& v : values) expanded.push_back(expand_dims(v, ax));
  return concat(expanded, ax);
}

namespace {

// Views of consecutive pieces of x along `ax` (no recording).
std::vector<Tensor> split_views(const Tensor& x, const std::vector<std::int64_t>& sizes, int ax,
                                bool drop_axis) {
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  auto dims = x.shape().dims();
  auto strides = x.strides();
  const auto a = static_cast<std::size_t>(ax);
  const std::int64_t stride = strides[a];
  if (drop_axis) {
    dims.erase(dims.begin() + ax);
    strides.erase(strides.begin() + ax);
  }
  std::int64_t pos = 0;
  for (auto s : sizes) {
    if (!drop_axis) dims[a] = s;
    out.push_back(detail::make_view(x, Shape(dims), strides, x.offset() + (s > 0 ? pos * stride : 0)));
    pos += s;
  }
  return out;
}

}  // namespace

std::vector<Tensor> unstack(const Tensor& x, int axis) {
  detail::check_defined(x, "unstack");
  if (x.rank() == 0) throw ShapeError("unstack: cannot unstack a scalar (shape [])");
  const int ax = detail::normalize_axis(axis, x.rank(), "unstack");
  const std::int64_t n = x.shape()[ax];
  auto outs = split_views(x, std::vector<std::int64_t>(static_cast<std::size_t>(n), 1), ax, true);
  // One node for all outputs: one stack in backward instead of n zero-padded gradients.
  if (autograd::recording() && !outs.empty())
    autograd::record("unstack", {x}, outs, [ax](const Grads& g, const Needs& need) {
      return Grads{need[0] ? stack(g, ax) : Tensor()};
    });
  return outs;
}

std::vector<Tensor> split(const Tensor& x, int num, int axis) {
  detail::check_defined(x, "split");
  if (x.rank() == 0) throw ShapeError("split: cannot split a scalar (shape [])");
  const int ax = detail::normalize_axis(axis, x.rank(), "split");
  const std::int64_t dim = x.shape()[ax];
  if (num <= 0)
    throw ValueError(fmt::format("split: number of parts must be positive, got {}", num));
  if (dim % num != 0)
    throw ValueError(fmt::format("split: axis {} of size {} (shape {}) does not divide into {} equal parts",
                                 ax, dim, detail::shape_str(x), num));
  return split(x, std::vector<std::int64_t>(static_cast<std::size_t>(num), dim / num), ax);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes_in, int axis) {
  detail::check_defined(x, "split");
  if (x.rank() == 0) throw ShapeError("split: cannot split a scalar (shape [])");
  const int ax = detail::normalize_axis(axis, x.rank(), "split");
  const std::int64_t dim = x.shape()[ax];
  if (sizes_in.empty()) throw ValueError("split: sizes must not be empty");
  auto sizes = sizes_in;
  std::int64_t known = 0;
  int infer = -1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      throw ValueError(fmt::format("split: invalid sizes {} (at most one -1, others >= 0)",
                                   list_str(sizes_in)));
    } else {
      known += sizes[i];
    }
  }
  if (infer >= 0 && known <= dim) sizes[static_cast<std::size_t>(infer)] = dim - known;
  else if (infer >= 0 || known != dim)
    throw ValueError(fmt::format("split: sizes {} do not add up to {}, the size of axis {} of shape {}",
                                 list_str(sizes_in), dim, ax, detail::shape_str(x)));
  auto outs = split_views(x, sizes, ax, false);
  if (autograd::recording())
    autograd::record("split", {x}, outs, [ax](const Grads& g, const Needs& n) {
      return Grads{n[0] ? concat(g, ax) : Tensor()};
    });
  return outs;
}

Tensor tile(const Tensor& x, const std::vector<std::int64_t>& multiples) {
  detail::check_defined(x, "tile");
  const std::int64_t r = x.rank();
  if (static_cast<std::int64_t>(multiples.size()) != r)
    throw ShapeError(fmt::format("tile: multiples {} need one entry per axis of shape {}",
                                 list_str(multiples), detail::shape_str(x)));
  for (auto m : multiples)
    if (m < 0)
      throw ValueError(fmt::format("tile: multiples {} must be >= 0", list_str(multiples)));
  if (r == 0) return x;
  // Seen as [m0, d0, m1, d1, ...], the output is x broadcast along the multiple axes.
  std::vector<std::int64_t> out_dims(static_cast<std::size_t>(r)), split_dims, src_strides;
  for (std::size_t i = 0; i < out_dims.size(); ++i) {
    const std::int64_t d = x.shape().dims()[i];
    out_dims[i] = detail::checked_mul(d, multiples[i], "tile", fmt::format("axis {} of shape {} times {}", i,
                                                                          detail::shape_str(x), list_str(multiples)));
    split_dims.insert(split_dims.end(), {multiples[i], d});
    src_strides.insert(src_strides.end(), {0, x.strides()[i]});
  }
  detail::checked_elements(Shape(out_dims), "tile");
  Tensor out = detail::empty_tensor(Shape(out_dims), x.dtype(), x.device(), "tile");
  strided_copy(out, 0, contiguous_strides(Shape(split_dims)), x, src_strides, split_dims);
  if (autograd::recording())
    autograd::record("tile", {x}, {out}, [split_dims, r](const Grads& g, const Needs& n) {
      if (!n[0]) return Grads{Tensor()};
      std::vector<int> axes;
      for (int i = 0; i < r; ++i) axes.push_back(2 * i);
      return Grads{reduce_sum(reshape(g[0], Shape(split_dims)), axes)};
    });
  return out;
}

// ---------------------------------------------------------------------------------------------
Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  detail::check_defined(params, "gather");
  detail::check_defined(indices, "gather");
  if (params.rank() == 0)
    throw ShapeError("gather: params must have rank >= 1, got shape []");
  const int ax = detail::normalize_axis(axis, params.rank(), "gather");
  detail::check_same_device(params, indices, "gather");
  const auto& pd = params.shape().dims();
  const std::int64_t dim = pd[static_cast<std::size_t>(ax)];
  auto out_of_range = [&](std::int64_t index, std::int64_t position) {
    return ValueError(fmt::format(
        "gather: index {} out of range [0, {}) at position {} of indices {} (params {}, axis {})",
        index, dim, position, detail::shape_str(indices), detail::shape_str(params), ax));
  };
  std::vector<std::int64_t> out_dims(pd.begin(), pd.begin() + ax);
  out_dims.insert(out_dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
  out_dims.insert(out_dims.end(), pd.begin() + ax + 1, pd.end());
  const std::int64_t outer = product(pd, 0, static_cast<std::size_t>(ax));
  const auto row = static_cast<std::size_t>(product(pd, static_cast<std::size_t>(ax) + 1, pd.size())) *
                   itemsize(params.dtype());

  // The kernel checks the indices where they are; the first bad one comes back for the message.
  detail::dispatch_index(indices.dtype(), "gather", []<class I>() {});
  Tensor out = detail::empty_tensor(Shape(out_dims), params.dtype(), params.device());
  const backend::BadIndex bad =
      backend::gather_rows(params.contiguous(), outer, dim, row, indices.contiguous(), out);
  if (bad.position >= 0) throw out_of_range(bad.value, bad.position);

  if (autograd::recording())
    autograd::record(
        "gather", {params}, {out},
        [indices, pshape = params.shape(), ax](const Grads& g, const Needs& need) {
          if (!need[0]) return Grads{Tensor()};
          const auto& p = pshape.dims();
          const std::int64_t n_idx = indices.size();
          const std::int64_t dim = p[static_cast<std::size_t>(ax)];
          const Tensor ids = reshape(indices, Shape{n_idx});
          // Rows of params picked by the indices: [pre..., N, post...].
          std::vector<std::int64_t> rows(p.begin(), p.begin() + ax);
          rows.push_back(n_idx);
          rows.insert(rows.end(), p.begin() + ax + 1, p.end());
          return Grads{detail::gather_adjoint(reshape(g[0], Shape(rows)), ids, ax, dim)};
        },
        {indices});
  return out;
}

Tensor detail::gather_adjoint(const Tensor& g, const Tensor& ids, int axis, std::int64_t dim) {
  if (axis == 0) return unsorted_segment_sum(g, ids, dim);
  // Move the gathered axis to the front, scatter-add there, move it back.
  std::vector<int> to_front{axis}, back;
  for (int i = 0; i < g.rank(); ++i)
    if (i != axis) to_front.push_back(i);
  for (int i = 1; i <= axis; ++i) back.push_back(i);
  back.push_back(0);
  for (int i = axis + 1; i < g.rank(); ++i) back.push_back(i);
  return transpose(unsorted_segment_sum(transpose(g, to_front), ids, dim), back);
}

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids,
                            std::int64_t num_segments) {
  detail::check_defined(data, "unsorted_segment_sum");
  detail::check_defined(segment_ids, "unsorted_segment_sum");
  if (num_segments < 0)
    throw ValueError(fmt::format("unsorted_segment_sum: num_segments must be >= 0, got {}", num_segments));
  const auto& dd = data.shape().dims();
  const auto& sd = segment_ids.shape().dims();
  if (sd.size() > dd.size() || !std::equal(sd.begin(), sd.end(), dd.begin()))
    throw ShapeError(fmt::format("unsorted_segment_sum: segment_ids shape {} must be a prefix of data shape {}",
                                 detail::shape_str(segment_ids), detail::shape_str(data)));
  detail::check_same_device(data, segment_ids, "unsorted_segment_sum");
  auto too_large = [&](std::int64_t id, std::int64_t position) {
    return ValueError(fmt::format(
        "unsorted_segment_sum: segment id {} out of range [0, {}) at position {} of segment_ids {}", id,
        num_segments, position, detail::shape_str(segment_ids)));
  };
  std::vector<std::int64_t> out_dims{num_segments};
  out_dims.insert(out_dims.end(), dd.begin() + static_cast<std::ptrdiff_t>(sd.size()), dd.end());
  const std::int64_t inner = product(dd, sd.size(), dd.size());
  // Sums where the data is; the ids are checked there and the first too-large one comes back.
  detail::dispatch_index(segment_ids.dtype(), "unsorted_segment_sum", []<class I>() {});
  detail::dispatch_numeric(data.dtype(), "unsorted_segment_sum", []<class T>() {});
  Tensor out = detail::empty_tensor(Shape(out_dims), data.dtype(), data.device());
  const backend::SegmentIds r = backend::segment_sum(data.contiguous(), inner, segment_ids.contiguous(), out);
  if (r.bad.position >= 0) throw too_large(r.bad.value, r.bad.position);
  const bool has_negative = r.has_negative;
  if (autograd::recording())
    autograd::record(
        "unsorted_segment_sum", {data}, {out},
        [segment_ids, has_negative, dshape = data.shape()](const Grads& g, const Needs& need) {
          if (!need[0]) return Grads{Tensor()};
          if (!has_negative) return Grads{gather(g[0], segment_ids, 0)};
          // Dropped (negative) ids get zero gradient: gather row 0 for them, then mask it out.
          auto mdims = segment_ids.shape().dims();
          mdims.resize(dshape.dims().size(), 1);
          // Dropped (negative) ids get zero gradient: gather row 0 for them, then mask it out
          // (with ops, so the ids never travel to the host).
          const Tensor keep = cast(reshape(segment_ids >= 0.0, Shape(mdims)), g[0].dtype());
          return Grads{gather(g[0], maximum(segment_ids, 0.0), 0) * keep};
        },
        {segment_ids});
  return out;
}

Tensor one_hot(const Tensor& indices, int depth, double on_value, double off_value, DType dtype) {
  detail::check_defined(indices, "one_hot");
  if (depth < 0) throw ValueError(fmt::format("one_hot: depth must be >= 0, got {}", depth));
  if (indices.dtype() != DType::uint8) detail::dispatch_index(indices.dtype(), "one_hot", []<class I>() {});
  auto dims = indices.shape().dims();
  dims.push_back(depth);
  Tensor out = detail::empty_tensor(Shape(dims), dtype, indices.device(), "one_hot");
  backend::one_hot(indices.contiguous(), depth, on_value, off_value, out);
  return out;
}

Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings,
           double value) {
  detail::check_defined(x, "pad");
  const std::int64_t r = x.rank();
  auto pads_str = [&]() {
    std::string s = "[";
    for (std::size_t i = 0; i < paddings.size(); ++i)
      s += fmt::format("{}[{},{}]", i ? "," : "", paddings[i][0], paddings[i][1]);
    return s + "]";
  };
  if (static_cast<std::int64_t>(paddings.size()) != r)
    throw ShapeError(fmt::format("pad: paddings {} need one pair per axis of shape {}", pads_str(),
                                 detail::shape_str(x)));
  for (const auto& p : paddings)
    if (p[0] < 0 || p[1] < 0)
      throw ValueError(fmt::format("pad: paddings {} must be >= 0 (shape {})", pads_str(),
                                   detail::shape_str(x)));
  std::vector<std::int64_t> dims(static_cast<std::size_t>(r));
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::string what = fmt::format("axis {} of shape {} padded by {}", i, detail::shape_str(x), pads_str());
    dims[i] = detail::checked_add(detail::checked_add(x.shape().dims()[i], paddings[i][0], "pad", what), paddings[i][1],
                                  "pad", what);
  }
  const Shape out_shape(dims);
  Tensor out = detail::empty_tensor(out_shape, x.dtype(), x.device(), "pad");
  backend::fill(out, value);
  const auto strides = contiguous_strides(out_shape);
  std::int64_t start = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) start += paddings[i][0] * strides[i];
  strided_copy(out, start, strides, x, x.strides(), x.shape().dims());
  if (autograd::recording()) {
    std::vector<std::int64_t> begin(static_cast<std::size_t>(r));
    for (std::size_t i = 0; i < begin.size(); ++i) begin[i] = paddings[i][0];
    autograd::record("pad", {x}, {out}, [begin, in = x.shape()](const Grads& g, const Needs& n) {
      return Grads{n[0] ? slice(g[0], begin, in.dims()) : Tensor()};
    });
  }
  return out;
}

}  // namespace keel
