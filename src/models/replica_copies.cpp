// The copies of a model that a MirroredStrategy's replicas on threads of this process train
// (fit in training_loops.cpp): clone_model's rebuild on the replica's device, compiled as the
// original with an optimizer and metrics of its own, and the original's weights copied in before
// each step (PyTorch's DataParallel replicates its module so).
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "keel/models/model.hpp"
#include "models/compile_config.hpp"

namespace keel::models {

namespace {

std::vector<metrics::MetricRef> fresh(const std::vector<metrics::MetricRef>& ms) {
  std::vector<metrics::MetricRef> out;
  for (const auto& m : ms) out.push_back(detail::metric_from_json(detail::metric_json(m)));
  return out;
}

}  // namespace

std::shared_ptr<Model> Model::replica_copy(Device device) {
  const DeviceScope on(device);
  try {
    std::shared_ptr<Model> copy = clone_model(*this);
    CompileOptions o = compile_options_;
    // Losses compute and hold nothing between calls: the copy shares them. Metrics and the
    // optimizer keep state: the copy gets its own, rebuilt from their configs.
    o.optimizer = optimizers::deserialize(optimizers::serialize(*optimizer_));
    o.metrics.flat = fresh(o.metrics.flat);
    for (auto& list : o.metrics.per_output) list = fresh(list);
    for (auto& [output, list] : o.metrics.by_name) list = fresh(list);
    copy->compile(std::move(o));
    return copy;
  } catch (const Error& e) {
    throw ValueError(fmt::format("{}.fit under a MirroredStrategy over several devices: each replica trains a copy "
                                 "made by clone_model and compiled like the model, which failed for {}: {}",
                                 name(), device.to_string(), e.what()));
  }
}

void Model::copy_weights_to(Model& copy) {
  const std::vector<Variable*> from = weights(), to = copy.weights();
  if (from.size() != to.size())
    throw ValueError(
        fmt::format("{}: the replica's copy holds {} weights, the model {}", name(), to.size(), from.size()));
  // assign copies into the copy's own memory (on its device), checking shape and dtype.
  for (std::size_t i = 0; i < from.size(); ++i) to[i]->assign(from[i]->peek());
}

}  // namespace keel::models
