#pragma once
// The gradient of a traced call while a tape records it (a tape around the one asking: a gradient
// of the gradient, a gradient penalty). The traced backward replays kernels, which no tape sees,
// so here the vector-Jacobian product runs as a traced function of its own, as TensorFlow traces
// a function's gradient function: f on the call's arguments under a tape of its own, and the
// product sum(result * dy) differentiated with ops, traced once per plan (and per set of results
// that have a gradient) and replayed after. Called under the recording tape, it records one node
// whose backward is traced too, and so on to any order. Refused (a ValueError naming the
// function) when running f again could not give the call's values: f draws random numbers,
// writes variables, or an argument or variable it read was written since the call.
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

// The gradients the call's tape node returns (the arguments', then var_sources'; undefined where
// `needs` says no or an argument is not floating), from the upstream gradients g of its results.
// `who` names the function in errors; the traced product is named after `name`
// (FunctionOptions::name).
autograd::Grads recorded_backward(const Plan& plan, const TraceFn& f, const CallInputs& call, const autograd::Grads& g,
                                  const autograd::Needs& needs, const std::string& who, const std::string& name);

}  // namespace keel::graph::detail
