#pragma once
// The tensor work of fit, evaluate and predict's steps as traced functions (keel::function,
// TensorFlow's tf.function around train_step): the forward pass, the loss, the gradient and
// the optimizer's update of a step replay as one graph; the metric bookkeeping stays on the
// host. A model whose step cannot be traced (it reads a tensor's value on the host, say) runs
// it eagerly after a one-line warning naming the reason.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/graph/function.hpp"

namespace keel::models::detail {

enum class Step { train, test, predict };

class StepFunctions {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  // `eager` is the step as it is; traced (and replayed) unless `trace` is false.
  std::vector<Tensor> run(Step step, const std::vector<Tensor>& args, const Fn& eager, bool trace, bool jit_compile,
                          const std::string& model_name);
  // The graph of the step's first traced call; nullptr before it, or when the step runs eagerly.
  const graph::Graph* first_graph(Step step) const;

 private:
  struct Entry {
    std::shared_ptr<Fn> current;  // what the traced function calls: this call's eager step
    std::optional<Function<std::function<std::vector<Tensor>(const std::vector<Tensor>&)>>> traced;
    bool eager_only = false;
    std::optional<graph::Graph> first_graph;  // what TensorBoard(write_graph) shows
    const void* replicas = nullptr;  // the communicator a traced gradient all-reduce runs on
  };
  Entry entries_[3];
};

}  // namespace keel::models::detail
