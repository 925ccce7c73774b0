#pragma once
// Model topologies between keel's configs (Keras 3 style: model_config.cpp, the layers'
// *_config.cpp) and TensorFlow.js Layers' (Keras 2 style, tfjs-layers' own serialization:
// snake_case keys, initializers as {"class_name", "config"}, "batch_input_shape", inbound nodes
// as lists of [layer, node, tensor, kwargs]). Internal to keel: not a public header.
#include <nlohmann/json_fwd.hpp>

#include <string>

namespace keel::io::detail {

// keel's {"class_name": "Sequential" | "Functional", "config": get_config()} as tfjs's
// modelTopology {"class_name", "config", "keras_version", "backend"}. ValueError names the first
// layer, activation or setting TensorFlow.js has not.
nlohmann::json tfjs_topology_from_keel(const nlohmann::json& model_class_and_config);

// tfjs's modelTopology (or Keras' {"model_config": ...} around it) as keel's
// {"class_name": "Sequential" | "Functional", "config"}. IOError naming `file` for a topology
// that is not well formed; ValueError naming a layer class or setting keel has not.
nlohmann::json keel_config_from_tfjs(const nlohmann::json& topology, const std::string& file);

}  // namespace keel::io::detail
