// fit / evaluate / predict steps, traced (see step_functions.hpp).
#include "models/step_functions.hpp"

#include <iostream>

#include "distribute/hooks.hpp"
#include "graph/plan.hpp"
#include "keel/distribute/strategy.hpp"

namespace keel::models::detail {

namespace {

const char* step_name(Step s) {
  switch (s) {
    case Step::train: return "train_step";
    case Step::test: return "test_step";
    case Step::predict: return "predict_step";
  }
  return "step";
}

}  // namespace

std::vector<Tensor> StepFunctions::run(Step step, const std::vector<Tensor>& args, const Fn& eager, bool trace,
                                       bool jit_compile, const std::string& model_name) {
  Entry& e = entries_[static_cast<int>(step)];
  if (!trace || e.eager_only) return eager(args);
  // A train step traced among data-parallel replicas replays its gradient all-reduce on their
  // communicator: among others, or none, it traces again.
  const void* replicas =
      distribute::detail::multi_replica() ? distribute::get_strategy().communicator().get() : nullptr;
  if (e.traced && e.replicas != replicas) e.traced.reset();
  e.replicas = replicas;
  if (!e.traced) {
    // The traced function calls whatever step the latest call handed in (the model's `this`
    // may have moved since the trace); it runs only while tracing.
    e.current = std::make_shared<Fn>(eager);
    std::shared_ptr<Fn> current = e.current;
    e.traced.emplace(std::function<std::vector<Tensor>(const std::vector<Tensor>&)>(
                         [current](const std::vector<Tensor>& a) { return (*current)(a); }),
                     // Keras 3 traces its steps with reduce_retracing: the last partial batch
                     // traces once more, generalised over the batch, and every other batch size
                     // (evaluate's, predict's) replays that graph.
                     FunctionOptions{.jit_compile = jit_compile, .reduce_retracing = true,
                                     .name = model_name + "." + step_name(step)});
  }
  *e.current = eager;
  try {
    std::vector<Tensor> out = (*e.traced)(args);
    if (!e.first_graph) e.first_graph = e.traced->concrete_graph(args);
    return out;
  } catch (const graph::detail::UntraceableError& err) {
    // These errors arise in the forward pass, the loss or the gradient, before the optimizer's
    // update (a host step at the end): the weights have not moved, and the step runs again
    // eagerly. (State a layer updates in its forward pass, such as batch norm's moving
    // statistics, may have moved once more for this batch.)
    std::cerr << "keel: " << model_name << "." << step_name(step) << " runs eagerly: it cannot be traced (" << err.what()
              << ")" << std::endl;
    e.eager_only = true;
    return eager(args);
  }
}

const graph::Graph* StepFunctions::first_graph(Step step) const {
  const Entry& e = entries_[static_cast<int>(step)];
  return e.first_graph && !e.eager_only ? &*e.first_graph : nullptr;
}

}  // namespace keel::models::detail
