// tf.norm: vector norms over all elements or one axis, matrix norms over two axes. Composites of
// differentiable ops (the matrix 2-norm through svd), so the gradients come with them; like
// TensorFlow's, the Euclidean norm's gradient at exactly zero is NaN (sqrt at 0).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel::linalg {

std::string NormOrder::to_string() const {
  if (is_named()) return "'" + name_ + "'";
  return std::isinf(p_) ? (p_ > 0 ? "inf" : "-inf") : fmt::format("{}", p_);
}

namespace {

bool is_inf(const NormOrder& o) { return !o.is_named() && std::isinf(o.p()) && o.p() > 0; }
bool is_p(const NormOrder& o, double p) { return !o.is_named() && o.p() == p; }

Tensor vector_norm(const Tensor& x, const NormOrder& ord, const std::vector<int>& axes, bool keepdims) {
  if (ord.is_named() || is_p(ord, 2)) return sqrt(reduce_sum(x * x, axes, keepdims));
  if (is_p(ord, 1)) return reduce_sum(abs(x), axes, keepdims);
  if (is_inf(ord)) return reduce_max(abs(x), axes, keepdims);
  return pow(reduce_sum(pow(abs(x), ord.p()), axes, keepdims), 1.0 / ord.p());
}

// Matrix norms with rows along axis r and columns along axis c (normalized, distinct).
Tensor matrix_norm(const Tensor& x, const NormOrder& ord, int r, int c, bool keepdims) {
  Tensor y;
  if (ord.is_named()) {
    y = sqrt(reduce_sum(x * x, {r, c}, true));
  } else if (is_p(ord, 1)) {  // the largest column sum
    y = reduce_max(reduce_sum(abs(x), {r}, true), {c}, true);
  } else if (is_inf(ord)) {  // the largest row sum
    y = reduce_max(reduce_sum(abs(x), {c}, true), {r}, true);
  } else {  // 2: the largest singular value, of x with the two axes moved last
    std::vector<int> perm;
    for (int d = 0; d < static_cast<int>(x.rank()); ++d)
      if (d != r && d != c) perm.push_back(d);
    perm.push_back(r);
    perm.push_back(c);
    const Tensor s = svd(transpose(x, perm), false, false).s;
    Shape kept = x.shape();
    std::vector<std::int64_t> dims = kept.dims();
    dims[static_cast<std::size_t>(r)] = dims[static_cast<std::size_t>(c)] = 1;
    y = reshape(reduce_max(s, {-1}), Shape(dims));
  }
  return keepdims ? y : squeeze(y, {r, c});
}

}  // namespace

Tensor norm(const Tensor& x, NormOrder ord, std::vector<int> axes, bool keepdims) {
  detail::check_float(x, "norm");
  if (axes.size() > 2)
    throw ValueError(fmt::format("norm: axes must be {{}} (all elements), one axis or two axes, got {} axes for input {}",
                                 axes.size(), x.shape().to_string()));
  const bool matrix = axes.size() == 2;
  if (ord.is_named() && ord.name() != "euclidean" && ord.name() != "fro")
    throw ValueError(fmt::format("norm: unknown ord {} (expected 'euclidean', 'fro', 1, 2, inf or p > 0)",
                                 ord.to_string()));
  if (matrix) {
    const int r = detail::normalize_axis(axes[0], x.rank(), "norm");
    const int c = detail::normalize_axis(axes[1], x.rank(), "norm");
    if (r == c)
      throw ValueError(fmt::format("norm: the two axes of a matrix norm must differ, got {} and {} for input {}",
                                   axes[0], axes[1], x.shape().to_string()));
    if (!ord.is_named() && !is_p(ord, 1) && !is_p(ord, 2) && !is_inf(ord))
      throw ValueError(fmt::format("norm: ord {} is not a matrix norm (expected 'euclidean', 'fro', 1, 2 or inf)",
                                   ord.to_string()));
    return detail::in_op("norm", [&] { return matrix_norm(x, ord, r, c, keepdims); });
  }
  if (ord.is_named() && ord.name() == "fro")
    throw ValueError(fmt::format("norm: ord 'fro' is a matrix norm: give two axes (input {})", x.shape().to_string()));
  if (!ord.is_named() && !(ord.p() > 0))
    throw ValueError(fmt::format("norm: a vector norm's ord must be > 0, got {}", ord.to_string()));
  if (axes.size() == 1) axes[0] = detail::normalize_axis(axes[0], x.rank(), "norm");
  return detail::in_op("norm", [&] { return vector_norm(x, ord, axes, keepdims); });
}

}  // namespace keel::linalg
