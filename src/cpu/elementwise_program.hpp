#pragma once
// Runs a fused elementwise program (core/elementwise_program.hpp) on contiguous float32 or
// float64 memory, tile by tile over the pool.
#include <cstdint>

#include "core/elementwise_program.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

// inputs[i]: the program's input i (n, 1 or row_length elements as its kind says); outputs[j]:
// n elements each.
void run_elementwise_program(const kernel::ElementwiseProgram& program, DType dtype, std::int64_t n,
                             const void* const* inputs, void* const* outputs);

}  // namespace keel::cpu
