#pragma once
// The random factories' sampling loops (keel::random's uniform, normal, truncated_normal and
// uniform_int): element i of a draw is a pure function of (key, counter, i), so the split
// between threads cannot change results. The op reserves the blocks (random_blocks) and hands
// their start here.
#include <cstdint>

#include "core/kernel_kinds.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

using kernel::RandomDraw;

// Philox blocks a draw of n elements of dtype reserves.
std::int64_t random_blocks(kernel::Distribution d, DType dtype, std::int64_t n);

// Writes n elements of dtype at out from the blocks reserved at {key, counter}.
void random_fill(const RandomDraw& draw, DType dtype, std::uint64_t key, std::uint64_t counter, std::int64_t n,
                 void* out);

}  // namespace keel::cpu
