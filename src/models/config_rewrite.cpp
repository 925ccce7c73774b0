// Model rewrites on the config (models/config_rewrite.hpp).
#include "models/config_rewrite.hpp"

#include <fmt/core.h>

#include "keel/layers/registry.hpp"

namespace keel::models::detail {

namespace {

using nlohmann::json;
using Renames = std::map<std::string, std::string>;

bool is_model_class(const std::string& cls) { return cls == "Sequential" || cls == "Functional"; }

// [layer, node, tensor] references: keras_history in inbound nodes, input_layers, output_layers.
void rename_refs(json& j, const Renames& renames) {
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      if (key == "keras_history" && value.is_array() && !value.empty() && value[0].is_string()) {
        auto it = renames.find(value[0].get<std::string>());
        if (it != renames.end()) value[0] = it->second;
      } else {
        rename_refs(value, renames);
      }
    }
  } else if (j.is_array()) {
    for (auto& e : j) rename_refs(e, renames);
  }
}

void rename_keys(json& keys, const Renames& renames) {
  if (!keys.is_array()) return;
  if (!keys.empty() && keys[0].is_string()) {  // one [name, node, tensor]
    auto it = renames.find(keys[0].get<std::string>());
    if (it != renames.end()) keys[0] = it->second;
    return;
  }
  for (auto& k : keys) rename_keys(k, renames);
}

}  // namespace

// Replaces the layer entries of a Sequential or functional config (nested models too) with
// what `replace` returns (null: unchanged).
json rewrite_model(json cfg, const std::function<json(const json&)>& replace) {
  auto layers_it = cfg.find("layers");
  if (layers_it == cfg.end() || !layers_it->is_array()) return cfg;
  Renames renames;
  for (json& entry : *layers_it) {
    if (!entry.is_object() || !entry.contains("class_name") || !entry["class_name"].is_string()) continue;
    if (is_model_class(entry["class_name"].get<std::string>())) {
      if (entry.contains("config")) entry["config"] = rewrite_model(entry["config"], replace);
      continue;
    }
    json rep = replace(entry);
    if (rep.is_null()) continue;
    const std::string old_name = entry["config"].value("name", "");
    const std::string new_name = rep["config"].value("name", "");
    if (entry.contains("name")) rep["name"] = new_name;
    if (entry.contains("inbound_nodes")) rep["inbound_nodes"] = entry["inbound_nodes"];
    if (old_name != new_name) renames[old_name] = new_name;
    entry = std::move(rep);
  }
  if (!renames.empty()) {
    for (json& entry : *layers_it)
      if (entry.is_object() && entry.contains("inbound_nodes")) rename_refs(entry["inbound_nodes"], renames);
    if (cfg.contains("input_layers")) rename_keys(cfg["input_layers"], renames);
    if (cfg.contains("output_layers")) rename_keys(cfg["output_layers"], renames);
  }
  return cfg;
}

std::shared_ptr<models::Model> rebuild(const std::string& cls, const json& cfg, const char* op) {
  auto model = std::dynamic_pointer_cast<models::Model>(layers::from_config(cls, cfg));
  if (!model) throw ValueError(fmt::format("{}: the rewritten config did not rebuild a model", op));
  return model;
}

void check_model(models::Model& model, const char* op) {
  if (!is_model_class(model.class_name()))
    throw ValueError(fmt::format("{}: '{}' is a subclassed model ({}); only Sequential and functional models can be "
                                 "rewritten (wrap its layers one by one instead)", op, model.name(), model.class_name()));
}

// Every weight of `to` that `from` has by name gets `from`'s value (or the override).
void copy_weights(models::Model& from, models::Model& to, const std::map<std::string, Tensor>& overrides,
                  const char* op) {
  std::map<std::string, Variable*> source;
  for (Variable* v : from.weights()) source[v->name()] = v;
  for (Variable* v : to.weights()) {
    auto it = source.find(v->name());
    if (it == source.end()) continue;
    auto o = overrides.find(v->name());
    const Tensor& value = o != overrides.end() ? o->second : it->second->peek();
    if (value.shape() != v->shape())
      throw ShapeError(fmt::format("{}: weight '{}' is {} in the source model but {} in the rebuilt one", op, v->name(),
                                   value.shape().to_string(), v->shape().to_string()));
    v->assign(value);
  }
}

}  // namespace keel::models::detail
