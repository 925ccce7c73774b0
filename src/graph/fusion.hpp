#pragma once
// Elementwise fusion: a chain of elementwise kernel calls over one shape becomes one node that
// runs the whole chain tile by tile, so that the values between its calls stay in cache.
#include "graph/plan.hpp"

namespace keel::graph::detail {

void fuse_elementwise(Plan& plan);

}  // namespace keel::graph::detail
