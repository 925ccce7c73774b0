#pragma once
// The fused optimizer update (one pass over a variable and its slots) on the device it lives on.
#include <array>

#include "core/optimizer_rules.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

// Updates the weight w and the slots (undefined where the rule of p has none) in place from grad,
// with StepContext's scaling, clamping and decay from p, where a fused kernel takes these
// operands: contiguous float32 on the CPU, contiguous float32 or float64 on a GPU, the gradient
// (any strides) and the slots of w's dtype, shape and device. Returns false, doing nothing,
// otherwise: the optimizer then runs the same rule with ops. Bumps no version.
bool optimizer_update(const kernel::OptimizerParams& p, const Tensor& w, const Tensor& grad,
                      const std::array<Tensor, 3>& slots);

}  // namespace keel::backend
