#pragma once
// The gradient of a traced call while a tape records it (a tape around the one asking: a gradient
// of the gradient, a gradient penalty). The traced backward replays kernels, which no tape sees,
// so here f runs again, eagerly, on the call's own arguments under a tape of its own, and the
// vector-Jacobian product is taken with ops: the recording tape sees all of it, as it would for
// an eager f. Refused (a ValueError naming the function) when a second run could not give the
// call's values: f draws random numbers, writes variables, or an argument or variable it read
// was written since the call. The C++ code in f runs once more, as during a trace.
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/record.hpp"
#include "graph/plan.hpp"

namespace keel::graph::detail {

struct CallInputs {
  std::vector<Tensor> args;              // the call's arguments, as the caller passed them
  std::vector<std::uint64_t> versions;   // of the args' and then the plan's var_sources' memory
};
CallInputs call_inputs(const Plan& plan, const std::vector<Tensor>& args);

// The gradients the call's tape node returns (the floating arguments', then var_sources'), from
// the upstream gradients g of its results.
autograd::Grads recorded_backward(const Plan& plan, const TraceFn& f, const CallInputs& call, const autograd::Grads& g,
                                  const std::string& who);

}  // namespace keel::graph::detail
