#pragma once
// A fused chain of elementwise kernels (what graph mode's fusion pass builds): steps over one
// output shape of n elements, run tile by tile so that the values between steps stay in cache
// and values used only inside the chain never reach memory.
#include <cstdint>
#include <vector>

#include "core/kernel_kinds.hpp"

namespace keel::kernel {

// How an input of the program is read: every element (n of them, contiguous), one element for
// all (a scalar), or `row_length` contiguous elements repeated along the leading axes (a bias).
enum class ProgramInput : std::uint8_t { full, scalar, row };

// A step's operand or result: an input (index >= 0 into the inputs), an output (the result
// lands in memory), or a register (a tile of scratch).
struct ProgramRef {
  enum Kind : std::uint8_t { input, output, reg } kind = reg;
  int index = 0;
};

struct ProgramStep {
  bool binary = false;
  UnaryOp unary_op = UnaryOp::neg;
  BinaryOp binary_op = BinaryOp::add;
  double alpha = 0;  // leaky_relu, elu
  ProgramRef a, b;   // b: binary steps only
  ProgramRef out;    // an output or a register
};

struct ElementwiseProgram {
  std::vector<ProgramStep> steps;
  std::vector<ProgramInput> inputs;
  std::int64_t row_length = 1;  // of the row inputs (one length per program)
  int num_outputs = 0;
  int num_registers = 0;
};

}  // namespace keel::kernel
