// Masks: boolean_mask and where(condition) with one argument. Their output sizes depend on the
// mask's values, so the mask is read on the host (a traced function then runs eagerly). The
// selection itself is a gather, whose gradient scatters back.
#include <cstring>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

// An int64 host tensor of `values` with `shape`, moved to `device`.
Tensor int64_on(const std::vector<std::int64_t>& values, const Shape& shape, Device device, const char* op) {
  Tensor host = detail::factory_output(shape, DType::int64, op);
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(std::int64_t));
  return backend::to_device(host, device);
}

}  // namespace

Tensor boolean_mask(const Tensor& x, const Tensor& mask, int axis) {
  detail::check_defined(x, "boolean_mask", "tensor");
  detail::check_defined(mask, "boolean_mask", "mask");
  detail::check_same_device(x, mask, "boolean_mask");
  if (mask.dtype() != DType::bool_)
    throw DTypeError(fmt::format("boolean_mask: the mask must be bool, got {}", name(mask.dtype())));
  const std::int64_t k = mask.rank();
  if (k == 0) throw ShapeError("boolean_mask: the mask must have rank >= 1, got shape []");
  if (x.rank() == 0) throw ShapeError("boolean_mask: the tensor must have rank >= 1, got shape []");
  const int ax = detail::normalize_axis(axis, x.rank(), "boolean_mask");
  const auto& xd = x.shape().dims();
  bool fits = ax + k <= x.rank();
  for (std::int64_t i = 0; fits && i < k; ++i) fits = xd[static_cast<std::size_t>(ax + i)] == mask.shape()[i];
  if (!fits)
    throw ShapeError(fmt::format("boolean_mask: mask of shape {} does not match axes {}.. of tensor {}",
                                 detail::shape_str(mask), ax, detail::shape_str(x)));
  const std::vector<bool> m = mask.to_vector<bool>();
  std::vector<std::int64_t> picked;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]) picked.push_back(static_cast<std::int64_t>(i));
  // x as [outer, mask elements, inner]; the picked rows of the middle axis, then x's other axes back.
  std::vector<std::int64_t> before(xd.begin(), xd.begin() + ax), after(xd.begin() + ax + k, xd.end());
  std::int64_t outer = 1, inner = 1;
  for (auto d : before) outer *= d;
  for (auto d : after) inner *= d;  // products of x's dims: they fit, x exists
  const Tensor ids = int64_on(picked, Shape{static_cast<std::int64_t>(picked.size())}, x.device(), "boolean_mask");
  const Tensor rows = gather(reshape(x, Shape{outer, mask.size(), inner}), ids, 1);
  std::vector<std::int64_t> out = before;
  out.push_back(static_cast<std::int64_t>(picked.size()));
  out.insert(out.end(), after.begin(), after.end());
  return reshape(rows, Shape(out));
}

Tensor where(const Tensor& condition) {
  detail::check_defined(condition, "where", "condition");
  // Non-zero counts as true (NaN too), as tf.where reads a numeric condition.
  const std::vector<bool> c = condition.to_vector<bool>();
  const auto& dims = condition.shape().dims();
  const std::size_t r = dims.size();
  std::vector<std::int64_t> coords;
  std::vector<std::int64_t> at(r, 0);
  std::int64_t n = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i]) {
      coords.insert(coords.end(), at.begin(), at.end());
      ++n;
    }
    for (std::size_t d = r; d-- > 0;) {  // the next row-major coordinate
      if (++at[d] < dims[d]) break;
      at[d] = 0;
    }
  }
  return int64_on(coords, Shape{n, static_cast<std::int64_t>(r)}, condition.device(), "where");
}

}  // namespace keel
