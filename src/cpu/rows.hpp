#pragma once
// Work partitioning shared by the row-wise CPU kernels (normalisation, cross-entropies).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/strided.hpp"

namespace keel::cpu {

// Rows per parallel task so that a task touches about kParallelGrain elements.
inline std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(cols, 1));
}

// A tensor seen as [outer, n, inner] around one axis: the kernels that run along an axis (scans,
// sorts) walk `outer * inner` lines of n elements, `inner` apart.
struct AxisLines {
  std::int64_t outer = 1, n = 1, inner = 1;
};
inline AxisLines axis_lines(const std::vector<std::int64_t>& dims, int axis) {
  AxisLines l;
  for (int i = 0; i < axis; ++i) l.outer *= dims[static_cast<std::size_t>(i)];
  for (std::size_t i = static_cast<std::size_t>(axis) + 1; i < dims.size(); ++i) l.inner *= dims[i];
  l.n = dims[static_cast<std::size_t>(axis)];
  return l;
}

}  // namespace keel::cpu
