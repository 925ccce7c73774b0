// Searching and counting values: searchsorted (tf.searchsorted), unique (tf.unique) and
// bincount (tf.math.bincount). None of them has a gradient (their outputs are integers, or
// counts of integers).
#include <algorithm>
#include <limits>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/scan_sort.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/scan_sort.hpp"

namespace keel {

namespace {

void check_int32_positions(std::int64_t n, const Tensor& x, const char* op, const char* what) {
  if (n > std::numeric_limits<std::int32_t>::max())
    throw ValueError(fmt::format("{}: {} {} has more positions than int32 indices hold", op, what, detail::shape_str(x)));
}

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, std::string side) {
  constexpr const char* op = "searchsorted";
  detail::check_defined(sorted_sequence, op, "sorted_sequence");
  detail::check_defined(values, op, "values");
  bool right = false;
  if (side == "right")
    right = true;
  else if (side != "left")
    throw ValueError(fmt::format("searchsorted: side must be \"left\" or \"right\", got \"{}\"", side));
  detail::check_same_device(sorted_sequence, values, op);
  detail::check_same_dtype(sorted_sequence, values, op);
  if (!is_half(values.dtype())) detail::check_numeric(values, op);
  const std::int64_t rs = sorted_sequence.rank(), rv = values.rank();
  if (rs < 1 || rv < 1)
    throw ShapeError(fmt::format("searchsorted: sorted_sequence {} and values {} need at least one axis each",
                                 detail::shape_str(sorted_sequence), detail::shape_str(values)));
  // One row of values per row of sorted_sequence: the leading axes agree.
  const auto& ds = sorted_sequence.shape().dims();
  const auto& dv = values.shape().dims();
  if (rs != rv || !std::equal(ds.begin(), ds.end() - 1, dv.begin()))
    throw ShapeError(fmt::format("searchsorted: the leading axes of sorted_sequence {} and values {} differ (all "
                                 "but the innermost must be equal)",
                                 detail::shape_str(sorted_sequence), detail::shape_str(values)));
  check_int32_positions(ds.back(), sorted_sequence, op, "sorted_sequence");
  Tensor out = detail::empty_tensor(values.shape(), DType::int32, values.device(), op);
  backend::search_sorted(sorted_sequence, values, right, out);
  return out;
}

Unique unique(const Tensor& x) {
  detail::check_defined(x, "unique", "x");
  if (x.rank() != 1) throw ShapeError(fmt::format("unique: x must be 1-D, got shape {}", detail::shape_str(x)));
  check_int32_positions(x.size(), x, "unique", "x");
  Unique r;
  r.idx = detail::empty_tensor(x.shape(), DType::int32, x.device(), "unique");
  r.y = backend::unique(x, r.idx);
  return r;
}

Tensor bincount(const Tensor& x, int minlength) { return bincount(x, Tensor(), minlength); }

Tensor bincount(const Tensor& x, const Tensor& weights, int minlength) {
  constexpr const char* op = "bincount";
  detail::check_defined(x, op, "x");
  if (x.dtype() != DType::int32 && x.dtype() != DType::int64)
    throw DTypeError(fmt::format("bincount: x must be int32 or int64, got {} {}", name(x.dtype()), detail::shape_str(x)));
  if (minlength < 0) throw ValueError(fmt::format("bincount: minlength must be non-negative, got {}", minlength));
  DType out_dtype = DType::int32;
  if (weights.defined()) {
    detail::check_same_device(x, weights, op);
    if (weights.shape() != x.shape())
      throw ShapeError(fmt::format("bincount: weights {} must have the shape of x {}", detail::shape_str(weights),
                                   detail::shape_str(x)));
    const DType w = weights.dtype();
    if (w != DType::float32 && w != DType::float64 && w != DType::int32 && w != DType::int64)
      throw DTypeError(fmt::format("bincount: weights must be float32, float64, int32 or int64, got {} {}", name(w),
                                   detail::shape_str(weights)));
    out_dtype = w;
  }
  // The output's length is max(x) + 1: a value read on the host (a traced function stops here).
  const std::vector<std::int64_t> v = backend::read_indices(x, op);
  std::int64_t length = minlength;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0)
      throw ValueError(fmt::format("bincount: x must be non-negative, got {} at position {} of x {}", v[i], i,
                                   detail::shape_str(x)));
    length = std::max(length, detail::checked_add(v[i], 1, op, "the output length max(x) + 1"));
  }
  Tensor out = detail::empty_tensor(Shape{length}, out_dtype, x.device(), op);
  backend::bincount(x, weights, out);
  return out;
}

}  // namespace keel
