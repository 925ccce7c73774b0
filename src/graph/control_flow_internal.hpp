#pragma once
// What keel::cond and keel::while_loop share while tracing (control_flow.cpp), with the loop
// traced under a tape (while_gradient.cpp).
#include <memory>
#include <vector>

#include "autograd/tape_state.hpp"
#include "keel/core/tensor.hpp"

namespace keel::graph::detail {

void check_pred(const Tensor& pred, const char* op);
// pred's value now, read by the trace itself (not part of the graph).
bool traced_truth(const Tensor& pred);
// body_fn's results, checked against the loop variables they replace.
void check_next(const std::vector<Tensor>& vars, const std::vector<Tensor>& next);
// Copies the body's results into the loop state (a result that is a state variable copied
// first, so that writing one variable cannot change another's new value).
void update_state(const std::vector<Tensor>& state, std::vector<Tensor> next);

// The nodes a recording tape took while control flow was traced: from `begin` (a cond: up to
// `middle` from the branch taken, then from the one run dry).
struct TapeStretch {
  std::shared_ptr<keel::detail::TapeState> tape;
  std::size_t begin = 0, middle = 0;
};
// This thread's recording tapes, each with a stretch beginning now.
std::vector<TapeStretch> recording_tapes();

}  // namespace keel::graph::detail
