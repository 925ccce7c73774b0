// Model::get_weights / set_weights (Keras' weight lists) and models::clone_model.
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/layers/registry.hpp"
#include "keel/models/model.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel::models {

namespace {

// Keras 3's Layer.weights order: a layer's own weights (trainable, then not), then each
// sublayer's in tracking order. Unlike weights() (all trainable first), freezing a layer
// does not move its weights in this list.
void keras_order(layers::Layer& layer, std::vector<Variable*>& out, std::set<Variable*>& seen) {
  std::set<Variable*> in_sublayers;
  for (const auto& s : layer.sublayers())
    for (Variable* v : s->weights()) in_sublayers.insert(v);
  for (Variable* v : layer.weights())
    if (!in_sublayers.count(v) && seen.insert(v).second) out.push_back(v);
  for (const auto& s : layer.sublayers()) keras_order(*s, out, seen);
}

// A copy, not a view: the variables are written in place by training.
Tensor copy_of(const Tensor& t) {
  autograd::NoRecordScope no_record;
  return add(t, zeros_like(t));
}

std::vector<Variable*> ordered_weights(layers::Layer& layer) {
  std::vector<Variable*> out;
  std::set<Variable*> seen;
  keras_order(layer, out, seen);
  return out;
}

}  // namespace

std::vector<Tensor> Model::get_weights() {
  std::vector<Tensor> out;
  for (Variable* v : ordered_weights(*this)) out.push_back(copy_of(v->peek()));
  return out;
}

void Model::set_weights(const std::vector<Tensor>& values) {
  const std::vector<Variable*> vars = ordered_weights(*this);
  if (values.size() != vars.size())
    throw ValueError(fmt::format("{}.set_weights: the model has {} weights, got a list of {}", name(), vars.size(),
                                 values.size()));
  // Every value is checked before any is written: a bad list leaves the model as it was.
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (!values[i].defined())
      throw ValueError(fmt::format("{}.set_weights: value {} for weight '{}' is undefined", name(), i, vars[i]->name()));
    if (values[i].shape() != vars[i]->shape())
      throw ValueError(fmt::format("{}.set_weights: weight '{}' has shape {}, but value {} has shape {}", name(),
                                   vars[i]->name(), vars[i]->shape().to_string(), i, values[i].shape().to_string()));
  }
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const Tensor& cur = vars[i]->peek();
    Tensor v = values[i].dtype() == cur.dtype() ? values[i] : cast(values[i], cur.dtype());
    if (v.device() != cur.device()) v = v.to(cur.device());
    vars[i]->assign(v);
  }
}

std::shared_ptr<Model> clone_model(Model& model) {
  // Rebuilt from the config, the layers draw fresh initial weights, as Keras' clone_model does.
  std::shared_ptr<layers::Layer> layer = layers::from_config(model.class_name(), model.get_config());
  auto clone = std::dynamic_pointer_cast<Model>(layer);
  if (!clone)
    throw ValueError(fmt::format("clone_model: the config of '{}' ({}) did not rebuild a model", model.name(),
                                 model.class_name()));
  return clone;
}

}  // namespace keel::models
