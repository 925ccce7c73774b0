#pragma once
// Work partitioning shared by the row-wise CPU kernels (normalisation, cross-entropies).
#include <algorithm>
#include <cstdint>

#include "cpu/strided.hpp"

namespace keel::cpu {

// Rows per parallel task so that a task touches about kParallelGrain elements.
inline std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(cols, 1));
}

}  // namespace keel::cpu
