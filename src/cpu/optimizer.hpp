#pragma once
// The CPU's fused float32 optimizer update: one pass that reads each element of the gradient,
// weight and slots once (the training step of small models is dominated by per-op overhead),
// with the rules of core/optimizer_rules.hpp on SIMD batches.
#include <cstdint>

#include "core/optimizer_rules.hpp"

namespace keel::cpu {

// Updates n contiguous float32 elements in place: StepContext's scaling, clamping and decay
// (params.grad_scale, clipvalue, decay), then the rule on w and the slots slot[0..2] (nullptr
// where the rule has none). None of the arrays overlaps another.
void optimizer_update(const kernel::OptimizerParams& params, std::int64_t n, float* w, const float* g,
                      float* const slot[3]);

}  // namespace keel::cpu
