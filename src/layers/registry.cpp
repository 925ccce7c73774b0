// The layer registry: class name -> factory(config). Each family of built-in layers registers its
// own classes beside its field lists (the *_config.cpp files), and models/ registers Sequential
// and Functional; custom layers add theirs with register_layer or KEEL_REGISTER_LAYER.
#include "keel/layers/registry.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>

#include <fmt/core.h>

#include "layers/builtin_layers.hpp"
#include "layers/config_args.hpp"
#include "models/serialization.hpp"

namespace keel::layers {

namespace {

using detail::show;

// Every built-in layer's factory.
detail::Factories builtin_factories() {
  detail::Factories f;
  detail::register_core_layers(f);
  detail::register_convolutional_layers(f);
  detail::register_normalization_layers(f);
  detail::register_recurrent_layers(f);
  detail::register_attention_layers(f);
  detail::register_preprocessing_layers(f);
  detail::register_conv_variant_layers(f);
  detail::register_pooling_layers(f);
  detail::register_reshaping_layers(f);
  detail::register_conv_lstm_layers(f);
  detail::register_merging_layers(f);
  detail::register_regularization_layers(f);
  detail::register_activation_layers(f);
  detail::register_image_preprocessing_layers(f);
  detail::register_text_preprocessing_layers(f);
  detail::register_pruning_layers(f);
  detail::register_quantization_layers(f);
  models::detail::register_model_layers(f);
  return f;
}

struct Registry {
  Registry() : factories(builtin_factories()) {}
  std::mutex mutex;
  detail::Factories factories;
};

// Built on first use, so registering from a static initialiser in another file is safe.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_layer(const std::string& class_name, LayerFactory factory) {
  if (class_name.empty()) throw ValueError("register_layer: the class name is empty");
  if (!factory) throw ValueError(fmt::format("register_layer: the factory for '{}' is empty", class_name));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[class_name] = std::move(factory);
}

bool is_registered(const std::string& class_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.count(class_name) != 0;
}

std::vector<std::string> registered_layers() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, factory] : r.factories) out.push_back(name);
  return out;
}

std::shared_ptr<Layer> from_config(const std::string& class_name, const nlohmann::json& config) {
  LayerFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(class_name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    if (class_name == "Model")
      throw ValueError("from_config: 'Model' is a subclassed model without a class name of its own; give the class "
                       "KEEL_LAYER_BOILERPLATE(YourModel) and register it with KEEL_REGISTER_LAYER(YourModel) to load it");
    throw ValueError(fmt::format("from_config: unknown layer class '{}'; register its factory with "
                                 "KEEL_REGISTER_LAYER({}) or layers::register_layer(\"{}\", ...) before loading",
                                 class_name, class_name, class_name));
  }
  if (!config.is_object())
    throw ValueError(fmt::format("{}.from_config: the config must be a JSON object, got {}", class_name, show(config)));
  std::shared_ptr<Layer> layer = factory(config);
  if (!layer) throw ValueError(fmt::format("{}.from_config: the factory returned no layer", class_name));
  // Applied here so that custom factories need not: the saved name (weights are named after it)
  // and a frozen layer (trainable defaults to true, and set_trainable(true) would unfreeze
  // sublayers saved frozen).
  if (auto it = config.find("name"); it != config.end() && it->is_string() && !it->get<std::string>().empty())
    layer->set_name(it->get<std::string>());
  if (auto it = config.find("trainable"); it != config.end() && it->is_boolean() && !it->get<bool>())
    layer->set_trainable(false);
  // The dtype policy: a policy name, or Keras 3's {"class_name": "DTypePolicy", "config": {"name": ...}}.
  // Other dtype names (an input's "int32") are not policies and leave the layer's as it is.
  if (auto it = config.find("dtype"); it != config.end()) {
    std::string policy;
    if (it->is_string()) policy = it->get<std::string>();
    else if (it->is_object() && it->contains("config") && (*it)["config"].is_object() &&
             (*it)["config"].contains("name") && (*it)["config"]["name"].is_string())
      policy = (*it)["config"]["name"].get<std::string>();
    if (policy == "float32" || policy == "mixed_float16" || policy == "mixed_bfloat16") layer->set_dtype_policy(policy);
  }
  return layer;
}

nlohmann::json serialize(const Layer& layer) {
  return {{"module", "keel.layers"},
          {"class_name", layer.class_name()},
          {"config", layer.get_config()},
          {"registered_name", layer.class_name()}};
}

std::shared_ptr<Layer> deserialize(const nlohmann::json& serialized) {
  if (!serialized.is_object())
    throw ValueError(fmt::format("layers::deserialize: expected {{\"class_name\": ..., \"config\": ...}}, got {}",
                                 show(serialized)));
  auto cls = serialized.find("class_name");
  if (cls == serialized.end() || !cls->is_string())
    throw ValueError(fmt::format("layers::deserialize: no \"class_name\" string in {}", show(serialized)));
  auto config = serialized.find("config");
  if (config == serialized.end())
    throw ValueError(fmt::format("layers::deserialize: no \"config\" for the {}", cls->get<std::string>()));
  return from_config(cls->get<std::string>(), *config);
}

}  // namespace keel::layers
