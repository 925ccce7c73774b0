// prune_low_magnitude on a whole model, strip_pruning and sparsity (tfmot's prune.py), as config
// rewrites (models/config_rewrite.hpp).
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>

#include "keel/layers/registry.hpp"
#include "models/config_rewrite.hpp"
#include "keel/ops/elementwise.hpp"
#include "pruning/pruning_internal.hpp"

namespace keel::pruning {

namespace {

using nlohmann::json;
using models::detail::check_model;
using models::detail::copy_weights;
using models::detail::rebuild;
using models::detail::rewrite_model;

void collect(models::Model& model, std::vector<PruneLowMagnitude*>& out) {
  for (const auto& l : model.layers()) {
    if (auto* w = dynamic_cast<PruneLowMagnitude*>(l.get())) out.push_back(w);
    else if (auto* m = dynamic_cast<models::Model*>(l.get())) collect(*m, out);
  }
}

void count_zeros(const Tensor& t, double& zeros, double& total) {
  for (float v : t.to(Device::cpu()).to_vector<float>()) zeros += v == 0.0f ? 1 : 0;
  total += static_cast<double>(t.size());
}

void count_model(models::Model& model, double& zeros, double& total) {
  for (const auto& l : model.layers()) {
    if (auto* w = dynamic_cast<PruneLowMagnitude*>(l.get())) {
      for (const auto& p : w->pruning_vars()) count_zeros(mul(p.weight->peek(), p.mask->peek()), zeros, total);
      if (w->pruning_vars().empty())
        for (Variable* v : detail::prunable_weights(*w->layer())) count_zeros(v->peek(), zeros, total);
    } else if (auto* m = dynamic_cast<models::Model*>(l.get())) {
      count_model(*m, zeros, total);
    } else {
      for (Variable* v : detail::prunable_weights(*l)) count_zeros(v->peek(), zeros, total);
    }
  }
}

}  // namespace

std::vector<PruneLowMagnitude*> collect_prunable_layers(models::Model& model) {
  std::vector<PruneLowMagnitude*> out;
  collect(model, out);
  return out;
}

std::shared_ptr<models::Model> prune_low_magnitude(models::Model& model, PruningSchedule schedule,
                                                   PruningOptions options) {
  const char* op = "prune_low_magnitude";
  check_model(model, op);
  validate(schedule);
  detail::validate_options(options);
  const json cfg = rewrite_model(model.get_config(), [&](const json& entry) -> json {
    const std::string cls = entry["class_name"].get<std::string>();
    if (!detail::prunable_class(cls)) return nullptr;  // wrappers and unprunable layers stay
    // The entry the wrapper itself would write (its config holds the layer's).
    PruneLowMagnitude wrapper(layers::deserialize(entry), schedule, options);
    return layers::serialize(wrapper);
  });
  auto pruned = rebuild(model.class_name(), cfg, op);
  copy_weights(model, *pruned, {}, op);
  return pruned;
}

std::shared_ptr<models::Model> strip_pruning(models::Model& model) {
  const char* op = "strip_pruning";
  check_model(model, op);
  std::map<std::string, Tensor> masked;
  for (PruneLowMagnitude* w : collect_prunable_layers(model))
    for (const auto& p : w->pruning_vars()) masked[p.weight->name()] = mul(p.weight->peek(), p.mask->peek());
  const json cfg = rewrite_model(model.get_config(), [](const json& entry) -> json {
    if (entry["class_name"].get<std::string>() != "PruneLowMagnitude") return nullptr;
    const json& c = entry["config"];
    if (!c.is_object() || !c.contains("layer"))
      throw ValueError(fmt::format("strip_pruning: a PruneLowMagnitude entry has no 'layer': {}", entry.dump()));
    return c["layer"];
  });
  auto stripped = rebuild(model.class_name(), cfg, op);
  copy_weights(model, *stripped, masked, op);
  return stripped;
}

double sparsity(models::Model& model) {
  double zeros = 0, total = 0;
  count_model(model, zeros, total);
  return total == 0 ? 0.0 : zeros / total;
}

}  // namespace keel::pruning
