#pragma once
// Runs a fused elementwise program (core/elementwise_program.hpp) on contiguous float32 or
// float64 memory, tile by tile over the pool.
#include <cstddef>
#include <cstdint>

#include "core/elementwise_program.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

// inputs[i]: the program's input i (n, 1 or row_length elements as its kind says); outputs[j]:
// n elements each.
void run_elementwise_program(const kernel::ElementwiseProgram& program, DType dtype, std::int64_t n,
                             const void* const* inputs, void* const* outputs);

// Outputs of at least this many bytes are written with streaming stores: three quarters of the
// last-level cache unless set (tests set it to reach that path on machines with large caches;
// 0 restores the default).
std::size_t program_stream_bytes();
void set_program_stream_bytes(std::size_t bytes);

}  // namespace keel::cpu
