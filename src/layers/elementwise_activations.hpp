#pragma once
// The Keras activations that are one elementwise kernel: ActivationFn calls the op, and a kernel
// that applies an activation in its own epilogue (the int8 GEMM and convolutions) runs the same
// kernel with the same parameter, so both give the same numbers. Kept once, here.
#include <string>

#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::activations::detail {

struct ElementwiseActivation {
  const char* name;
  Tensor (*op)(const Tensor&);  // the op (with its gradient)
  kernel::UnaryOp kernel;       // the kernel it runs
  double alpha;                 // and that kernel's parameter
};

// The entry for a Keras activation name, or null for one that is not a single elementwise
// kernel ("linear", "softmax", "log_softmax", "hard_sigmoid_keras2", an unknown name).
const ElementwiseActivation* elementwise_activation(const std::string& name);

}  // namespace keel::activations::detail
