#pragma once
// The model factories for "Sequential" and "Functional", which models/ registers with the layer
// registry (src/layers/registry.cpp calls register_model_layers when it is first used).
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"
#include "keel/layers/registry.hpp"

namespace keel::models::detail {

std::shared_ptr<layers::Layer> sequential_from_config(const nlohmann::json& config);
std::shared_ptr<layers::Layer> functional_from_config(const nlohmann::json& config);

void register_model_layers(std::map<std::string, layers::LayerFactory>& factories);

// A shape as Keras writes it: the batch dimension (first) as None.
nlohmann::json batch_shape_json(const Shape& s);
// Models are rebuilt on one example of each input: ValueError for shapes no example can have.
void check_example_size(const std::vector<std::int64_t>& dims, const std::string& where);

}  // namespace keel::models::detail
