// Shared argument checks and small building blocks of the keel::linalg ops.
#include "ops/linalg_checks.hpp"

#include <climits>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel::linalg_detail {

Shape batch_shape(const Tensor& x) {
  return Shape(std::vector<std::int64_t>(x.shape().dims().begin(), x.shape().dims().end() - 2));
}

Shape with_matrix(const Shape& batch, std::int64_t m, std::int64_t n, const char* op) {
  std::vector<std::int64_t> dims = batch.dims();
  dims.push_back(m);
  if (n >= 0) dims.push_back(n);
  Shape s(dims);
  detail::checked_elements(s, op);
  return s;
}

void check_matrix(const Tensor& x, const char* op, const char* what) {
  detail::check_float(x, op, what);
  if (x.rank() < 2)
    throw ShapeError(fmt::format("{}: {} must have rank >= 2 (a batch of matrices [..., M, N]), got {}", op, what,
                                 x.shape().to_string()));
  // LAPACK indexes with 32-bit integers, and a matrix's own element count must fit too.
  if (rows(x) > INT_MAX || cols(x) > INT_MAX || rows(x) * cols(x) > INT_MAX)
    throw ValueError(fmt::format("{}: {} {} has matrices too large for LAPACK's 32-bit indices", op, what,
                                 x.shape().to_string()));
}

void check_square(const Tensor& x, const char* op, const char* what) {
  check_matrix(x, op, what);
  if (rows(x) != cols(x))
    throw ShapeError(fmt::format("{}: {} must be a batch of square matrices, got {}", op, what,
                                 x.shape().to_string()));
}

void check_rhs(const Tensor& matrix, const Tensor& rhs, const char* op) {
  check_matrix(rhs, op, "rhs");
  detail::check_same_device(matrix, rhs, op);
  detail::check_same_dtype(matrix, rhs, op);
  if (rows(rhs) != rows(matrix))
    throw ShapeError(fmt::format("{}: rhs must have {} rows to match matrix {}, got {}", op, rows(matrix),
                                 matrix.shape().to_string(), rhs.shape().to_string()));
  try {
    broadcast_shapes(batch_shape(matrix), batch_shape(rhs), op);
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("{}: batch dimensions of matrix {} and rhs {} do not broadcast", op,
                                 matrix.shape().to_string(), rhs.shape().to_string()));
  }
}

std::pair<Tensor, Tensor> broadcast_batch(const Tensor& matrix, const Tensor& rhs, const char* op) {
  const Shape ba = batch_shape(matrix), bb = batch_shape(rhs);
  if (ba == bb) return {matrix, rhs};
  const Shape batch = broadcast_shapes(ba, bb, op);
  const Tensor a = ba == batch ? matrix : broadcast_to(matrix, with_matrix(batch, rows(matrix), cols(matrix), op));
  const Tensor b = bb == batch ? rhs : broadcast_to(rhs, with_matrix(batch, rows(rhs), cols(rhs), op));
  return {a, b};
}

void throw_failed(const char* op, std::int64_t index, const char* problem, const Tensor& x) {
  const Shape batch = batch_shape(x);
  std::vector<std::int64_t> at(static_cast<std::size_t>(batch.rank()));
  std::int64_t rest = index;
  for (std::int64_t d = batch.rank() - 1; d >= 0; --d) {
    at[static_cast<std::size_t>(d)] = rest % batch[d];
    rest /= batch[d];
  }
  throw ValueError(fmt::format("{}: matrix {} of the batch (batch index {}) {} (input {})", op, index,
                               Shape(at).to_string(), problem, x.shape().to_string()));
}

Tensor swapped_view(const Tensor& x) {
  std::vector<std::int64_t> dims = x.shape().dims(), strides = x.strides();
  const std::size_t r = dims.size();
  std::swap(dims[r - 1], dims[r - 2]);
  std::swap(strides[r - 1], strides[r - 2]);
  return detail::make_view(x, Shape(dims), strides, x.offset());
}

Tensor column_slice(const Tensor& x, std::int64_t begin, std::int64_t count) {
  std::vector<std::int64_t> b(static_cast<std::size_t>(x.rank()), 0), s(static_cast<std::size_t>(x.rank()), -1);
  b.back() = begin;
  s.back() = count;
  return slice(x, b, s);
}

Tensor output_like(const Shape& shape, const Tensor& x, const char* op) {
  return detail::empty_tensor(shape, x.dtype(), x.device(), op);
}

Tensor eye_like(const Tensor& x, std::int64_t n) {
  DeviceScope scope(x.device());
  return eye(n, x.dtype());
}

Tensor safe_reciprocal(const Tensor& x) { return x / (x * x + 1e-20); }

}  // namespace keel::linalg_detail
