#pragma once
// Elementwise fusion: a chain of elementwise kernel calls over one shape becomes one node that
// runs the whole chain tile by tile, so that the values between its calls stay in cache. Pattern
// fusion: a few pairs of other kernels become one fused kernel.
#include "graph/plan.hpp"

namespace keel::graph::detail {

void fuse_elementwise(Plan& plan);
// Kernel pairs that one fused backend kernel runs in a pass (fuse_patterns.cpp lists them).
void fuse_patterns(Plan& plan);

}  // namespace keel::graph::detail
