#pragma once
// A model's loss and metrics in its saved compile config, as Keras serialises them, and back: the
// losses and metrics modules read their own classes' configs; what cannot be rebuilt (a function,
// a custom class) is a ValueError that says to load with compile = false.
#include <nlohmann/json_fwd.hpp>

#include <memory>

#include "keel/losses/loss.hpp"
#include "keel/metrics/metric.hpp"

namespace keel::models::detail {

nlohmann::json loss_json(const losses::Loss& loss);
nlohmann::json metric_json(const metrics::MetricRef& m);
std::shared_ptr<losses::Loss> loss_from_json(const nlohmann::json& j);  // null: none
metrics::MetricRef metric_from_json(const nlohmann::json& j);

}  // namespace keel::models::detail
