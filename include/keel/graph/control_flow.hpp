#pragma once
// Data-dependent control flow that works eagerly and inside keel::function (TensorFlow's
// tf.cond and tf.while_loop). Eagerly, the predicate is read and one branch (or the loop) runs
// as ordinary C++; gradients flow through the ops that ran. Inside a traced function both
// branches (and the loop's condition and body) are traced, once each, into the graph, and each
// call picks at run time: an `if` on a tensor's value inside keel::function would be fixed at
// trace time instead (it is an error: the value cannot be read while tracing).
#include <functional>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

// then_fn() where pred (a one-element tensor) is nonzero, else else_fn(). Both branches must
// return tensors of one shape and dtype.
Tensor cond(const Tensor& pred, std::function<Tensor()> then_fn, std::function<Tensor()> else_fn);

// vars = body_fn(vars) while cond_fn(vars) is nonzero and fewer than maximum_iterations (-1: no
// limit) have run; returns the final vars. body_fn keeps each variable's shape and dtype.
std::vector<Tensor> while_loop(std::function<Tensor(const std::vector<Tensor>&)> cond_fn,
                               std::function<std::vector<Tensor>(const std::vector<Tensor>&)> body_fn,
                               std::vector<Tensor> loop_vars, int maximum_iterations = -1);

}  // namespace keel
