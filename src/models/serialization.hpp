#pragma once
// The model factories the layer registry (src/layers/registry.cpp) registers for "Sequential" and
// "Functional", defined with the rest of model saving in serialization.cpp.
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

#include "keel/layers/layer.hpp"

namespace keel::models::detail {

std::shared_ptr<layers::Layer> sequential_from_config(const nlohmann::json& config);
std::shared_ptr<layers::Layer> functional_from_config(const nlohmann::json& config);

}  // namespace keel::models::detail
