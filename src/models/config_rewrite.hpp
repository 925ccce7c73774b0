#pragma once
// Model rewrites on the config, as tfmot's clone_model with a clone_function does (pruning's
// wrappers, quantization's): each layer entry is replaced (its references in a functional graph
// renamed with it), the model is rebuilt from the new config and the weights are copied over by
// weight name.
#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "keel/models/model.hpp"

namespace keel::models::detail {

// Replaces the layer entries of a Sequential or functional config (nested models too) with
// what `replace` returns (null: unchanged).
nlohmann::json rewrite_model(nlohmann::json cfg, const std::function<nlohmann::json(const nlohmann::json&)>& replace);
// The model of class `cls` ("Sequential" or "Functional") from a rewritten config.
std::shared_ptr<Model> rebuild(const std::string& cls, const nlohmann::json& cfg, const char* op);
// ValueError naming `op` for a subclassed model.
void check_model(Model& model, const char* op);
// Every weight of `to` that `from` has by name gets `from`'s value (or the override's).
void copy_weights(Model& from, Model& to, const std::map<std::string, Tensor>& overrides, const char* op);

}  // namespace keel::models::detail
