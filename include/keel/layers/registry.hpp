#pragma once
// Layers from their configs: the registry models::load_model rebuilds a saved architecture with.
//
// Every built-in layer (and InputLayer, Sequential, Functional) is registered under its Keras class
// name, with a factory that reads what the layer's get_config() writes: keyword arguments by
// Keras name, initializers and activations by name, regularizers as {"class_name": "L1" | "L2" |
// "L1L2", "config": {...}} (or "l1", "l2", "l1_l2"), null for Keras' None. Keys a factory does
// not know are ignored, missing keys take the Keras defaults, and a key of the wrong type or
// value is a ValueError naming the class and the key.
//
// A custom layer registers a factory under its class_name() (KEEL_LAYER_BOILERPLATE's name) so
// that saved models holding it load without rebuilding it by hand:
//
//   class Scale : public layers::Layer {
//    public:
//     explicit Scale(double factor, std::string name = "") : Layer(std::move(name)), factor_(factor) {}
//     KEEL_LAYER_BOILERPLATE(Scale)
//     nlohmann::json get_config() const override {
//       auto c = Layer::get_config();  // name, trainable, dtype
//       c["factor"] = factor_;
//       return c;
//     }
//     static std::shared_ptr<Scale> from_config(const nlohmann::json& c) {
//       return std::make_shared<Scale>(c.at("factor").get<double>(), c.at("name").get<std::string>());
//     }
//     ...
//   };
//   KEEL_REGISTER_LAYER(Scale);   // at namespace scope, in one .cpp file
//
// (or call layers::register_layer("Scale", factory) before loading). A subclassed Model is a
// layer too: to load it, register its class the same way; load_model then calls the factory with
// the model's get_config(), builds the result on the saved input shape and loads its weights.
// Factories see the "config" object; the name and trainable flag in it are applied after the
// factory returns, so a factory may ignore them.
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::layers {

using LayerFactory = std::function<std::shared_ptr<Layer>(const nlohmann::json& config)>;

// Registers (or replaces) the factory for class_name. Thread-safe.
void register_layer(const std::string& class_name, LayerFactory factory);
bool is_registered(const std::string& class_name);
// Every registered class name, sorted.
std::vector<std::string> registered_layers();

// A new, unbuilt layer of class_name from its config. ValueError for an unregistered class
// (naming it and how to register it) or a config the factory rejects.
std::shared_ptr<Layer> from_config(const std::string& class_name, const nlohmann::json& config);

// Keras' serialized form {"module", "class_name", "config", "registered_name"} and back
// (deserialize also takes plain {"class_name", "config"}).
nlohmann::json serialize(const Layer& layer);
std::shared_ptr<Layer> deserialize(const nlohmann::json& serialized);

namespace detail {
// Registers at static initialisation (what KEEL_REGISTER_LAYER expands to).
struct LayerRegistration {
  LayerRegistration(const char* class_name, LayerFactory factory) { register_layer(class_name, std::move(factory)); }
};
}  // namespace detail

}  // namespace keel::layers

#define KEEL_REGISTRATION_CONCAT_INNER(a, b) a##b
#define KEEL_REGISTRATION_CONCAT(a, b) KEEL_REGISTRATION_CONCAT_INNER(a, b)

// Registers Class under its name, with the factory Class::from_config(const nlohmann::json&)
// (returning a shared_ptr to Class or to Layer). Use at namespace scope in one .cpp file; the
// name is the spelling given, which must be what Class::class_name() returns.
#define KEEL_REGISTER_LAYER(Class)                                                                 \
  static const ::keel::layers::detail::LayerRegistration KEEL_REGISTRATION_CONCAT(                  \
      keel_layer_registration_, __LINE__)(#Class, [](const ::nlohmann::json& config) {              \
    return std::shared_ptr<::keel::layers::Layer>(Class::from_config(config));                      \
  })
