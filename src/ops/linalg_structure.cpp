// Matrix structure: matrix_transpose, band_part (and tril / triu on it), diag, diag_part, trace.
// These are composites or views of differentiable ops, so their gradients come with them, except
// diag_part (a strided view of the diagonal) which records its own.
//
// They move values without arithmetic, so like TensorFlow they take every numeric dtype, not
// only the float32 / float64 the factorizations need.
#include <limits>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/linalg_checks.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using linalg_detail::cols;
using linalg_detail::rows;

namespace {

void check_structure(const Tensor& x, const char* op, std::int64_t min_rank = 2) {
  detail::check_defined(x, op, "input");
  detail::check_numeric(x, op);
  if (x.rank() < min_rank)
    throw ShapeError(fmt::format("{}: input must have rank >= {}, got {}", op, min_rank, x.shape().to_string()));
}

// x * mask with mask[i, j] = 1 where lo <= j - i <= hi (the bounds may be infinite).
Tensor keep_band(const Tensor& x, std::int64_t lo, std::int64_t hi, const char* op) {
  check_structure(x, op);
  const std::int64_t m = rows(x), n = cols(x);
  detail::checked_mul(m, n, op, "the matrix size");
  std::vector<double> mask(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) mask[static_cast<std::size_t>(i * n + j)] = (j - i >= lo && j - i <= hi);
  DeviceScope scope(x.device());
  return mul(x, constant(mask, Shape{m, n}, x.dtype()));
}

constexpr std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();

}  // namespace

Tensor tril(const Tensor& x, std::int64_t k) { return keep_band(x, -unbounded, k, "tril"); }
Tensor triu(const Tensor& x, std::int64_t k) { return keep_band(x, k, unbounded, "triu"); }

namespace linalg {

Tensor band_part(const Tensor& x, std::int64_t num_lower, std::int64_t num_upper) {
  return keep_band(x, num_lower < 0 ? -unbounded : -num_lower, num_upper < 0 ? unbounded : num_upper, "band_part");
}

Tensor matrix_transpose(const Tensor& x, bool /*conjugate: real dtypes only*/) {
  detail::check_defined(x, "matrix_transpose", "input");
  if (x.rank() < 2)
    throw ShapeError(fmt::format("matrix_transpose: input must have rank >= 2, got {}", x.shape().to_string()));
  std::vector<int> perm(static_cast<std::size_t>(x.rank()));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(x, perm);
}

Tensor diag(const Tensor& v) {
  check_structure(v, "diag", 1);
  const std::int64_t n = v.shape()[v.rank() - 1];
  detail::checked_mul(n, n, "diag", "the matrix size");
  // [..., n, 1] * I_n: row i keeps v_i on the diagonal; the gradient (mul's) is the diagonal of g.
  return mul(expand_dims(v, -1), linalg_detail::eye_like(v, n));
}

Tensor diag_part(const Tensor& x) {
  check_structure(x, "diag_part");
  const std::int64_t m = rows(x), n = cols(x), k = std::min(m, n);
  std::vector<std::int64_t> dims(x.shape().dims().begin(), x.shape().dims().end() - 1);
  std::vector<std::int64_t> strides(x.strides().begin(), x.strides().end() - 1);
  dims.back() = k;
  strides.back() = x.strides()[x.strides().size() - 2] + x.strides().back();
  Tensor y = detail::make_view(x, Shape(dims), strides, x.offset());
  if (autograd::recording())
    autograd::record("diag_part", {x}, {y}, [m, n, k, r = x.rank()](const Grads& g, const Needs&) {
      Tensor d = diag(g[0]);  // [..., k, k]
      if (m == k && n == k) return Grads{d};
      std::vector<std::array<std::int64_t, 2>> pads(static_cast<std::size_t>(r), {0, 0});
      pads[static_cast<std::size_t>(r - 2)] = {0, m - k};
      pads[static_cast<std::size_t>(r - 1)] = {0, n - k};
      return Grads{pad(d, pads)};
    });
  return y;
}

Tensor trace(const Tensor& x) {
  check_structure(x, "trace");
  return reduce_sum(diag_part(x), {-1});
}

}  // namespace linalg
}  // namespace keel
