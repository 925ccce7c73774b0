// Rearrangements built from differentiable ops, so their gradients come with them: roll (two
// slices concatenated per axis: the gradient rolls back), repeat (a gather: the gradient sums
// the copies back) and meshgrid (broadcast views: the gradient sums over the grid).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

using detail::list_str;

}  // namespace

Tensor roll(const Tensor& x, std::int64_t shift, int axis) {
  return roll(x, std::vector<std::int64_t>{shift}, std::vector<int>{axis});
}

Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<int>& axes) {
  detail::check_defined(x, "roll");
  if (shifts.size() != axes.size())
    throw ValueError(fmt::format("roll: {} shifts {} for {} axes {}; give one shift per axis", shifts.size(),
                                 list_str(shifts), axes.size(), list_str(axes)));
  const std::int64_t r = x.rank();
  // Shifts of a repeated axis add up (modulo the axis size, so the sum cannot overflow).
  std::vector<std::int64_t> total(static_cast<std::size_t>(r), 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const int ax = detail::normalize_axis(axes[i], r, "roll");
    const std::int64_t n = x.shape()[ax];
    if (n == 0) continue;
    auto& t = total[static_cast<std::size_t>(ax)];
    t = ((t + shifts[i] % n) % n + n) % n;
  }
  Tensor y = x;
  for (std::int64_t ax = 0; ax < r; ++ax) {
    const std::int64_t s = total[static_cast<std::size_t>(ax)], n = x.shape()[ax];
    if (s == 0) continue;
    // y[i] = x[i - s]: the last s elements come first.
    std::vector<std::int64_t> begin(static_cast<std::size_t>(r), 0), tail = y.shape().dims(), head = tail;
    begin[static_cast<std::size_t>(ax)] = n - s;
    tail[static_cast<std::size_t>(ax)] = s;
    head[static_cast<std::size_t>(ax)] = n - s;
    y = concat({slice(y, begin, tail), slice(y, std::vector<std::int64_t>(begin.size(), 0), head)},
               static_cast<int>(ax));
  }
  return y;
}

namespace {

Tensor repeat_impl(const Tensor& x, std::vector<std::int64_t> repeats, std::optional<int> axis) {
  detail::check_defined(x, "repeat");
  const Tensor src = axis ? x : reshape(x, Shape{-1});
  if (src.rank() == 0) throw ShapeError("repeat: cannot repeat along an axis of a scalar (shape []); give no axis");
  const int ax = detail::normalize_axis(axis.value_or(0), src.rank(), "repeat");
  const std::int64_t n = src.shape()[ax];
  if (repeats.size() == 1) repeats.assign(static_cast<std::size_t>(n), repeats[0]);
  if (static_cast<std::int64_t>(repeats.size()) != n)
    throw ValueError(fmt::format("repeat: {} repeats for axis {} of size {} (shape {}); give one per element or one "
                                 "for all", repeats.size(), ax, n, detail::shape_str(src)));
  std::int64_t count = 0;
  for (auto k : repeats) {
    if (k < 0) throw ValueError(fmt::format("repeat: repeats must be >= 0, got {}", k));
    count = detail::checked_add(count, k, "repeat", "the sum of repeats");
  }
  // The output's size bounds the index list: check it before building the list.
  auto dims = src.shape().dims();
  dims[static_cast<std::size_t>(ax)] = count;
  detail::checked_elements(Shape(dims), "repeat");
  Tensor host = detail::factory_output(Shape{count}, DType::int64, "repeat");
  auto* ids = static_cast<std::int64_t*>(host.raw_data());
  for (std::int64_t i = 0, at = 0; i < n; ++i)
    for (std::int64_t j = 0; j < repeats[static_cast<std::size_t>(i)]; ++j) ids[at++] = i;
  return gather(src, backend::to_device(host, src.device()), ax);
}

}  // namespace

Tensor repeat(const Tensor& x, std::int64_t repeats, std::optional<int> axis) {
  return repeat_impl(x, {repeats}, axis);
}

Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats, std::optional<int> axis) {
  if (repeats.empty()) throw ValueError("repeat: repeats must not be empty");
  return repeat_impl(x, repeats, axis);
}

Tensor repeat(const Tensor& x, const Tensor& repeats, std::optional<int> axis) {
  detail::check_defined(repeats, "repeat", "repeats");
  if (repeats.rank() > 1)
    throw ShapeError(fmt::format("repeat: repeats must be a scalar or 1-D, got shape {}", detail::shape_str(repeats)));
  if (repeats.size() == 0) throw ValueError("repeat: repeats must not be empty");
  return repeat_impl(x, backend::read_indices(repeats, "repeat"), axis);
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  std::string mode = indexing;
  for (char& c : mode) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (mode != "xy" && mode != "ij")
    throw ValueError(fmt::format("meshgrid: indexing must be \"xy\" or \"ij\", got \"{}\"", indexing));
  for (const auto& t : tensors) detail::check_defined(t, "meshgrid");
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    detail::check_same_dtype(tensors[0], tensors[i], "meshgrid");
    detail::check_same_device(tensors[0], tensors[i], "meshgrid");
  }
  const std::size_t k = tensors.size();
  std::vector<std::int64_t> grid(k);
  for (std::size_t i = 0; i < k; ++i) grid[i] = tensors[i].size();
  // Cartesian indexing swaps the first two output axes: x varies along the columns.
  std::vector<std::size_t> axis_of(k);
  for (std::size_t i = 0; i < k; ++i) axis_of[i] = i;
  if (mode == "xy" && k >= 2) {
    std::swap(axis_of[0], axis_of[1]);
    std::swap(grid[0], grid[1]);
  }
  detail::checked_elements(Shape(grid), "meshgrid");
  std::vector<Tensor> out;
  out.reserve(k);
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<std::int64_t> dims(k, 1);
    dims[axis_of[i]] = tensors[i].size();
    out.push_back(broadcast_to(reshape(tensors[i], Shape(dims)), Shape(grid)));
  }
  return out;
}

}  // namespace keel
