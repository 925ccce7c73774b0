// The compile config of a saved model: its loss and metrics as Keras serialises them, and back.
#include "models/compile_config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <type_traits>

#include <fmt/core.h>

#include "layers/config_args.hpp"

namespace keel::models::detail {

namespace {

using layers::detail::show;
using nlohmann::json;

// A config's key as a type, or its default; ValueError naming `what` and the key otherwise.
template <class T>
T config_value(const json& c, const char* key, T def, const std::string& what) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  const bool ok = std::is_same_v<T, bool>          ? it->is_boolean()
                  : std::is_same_v<T, std::string> ? it->is_string()
                  : std::is_integral_v<T>          ? it->is_number_integer()
                                                   : it->is_number();
  if (!ok) throw ValueError(fmt::format("{}: '{}' has the wrong type: {}", what, key, show(*it)));
  return it->get<T>();
}

// A serialized loss or metric's class name and config ({} when it has none); ValueError otherwise.
std::pair<std::string, json> class_and_config(const json& j, const char* what) {
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw ValueError(fmt::format("expected a {} name or {{\"class_name\", \"config\"}}, got {}", what, show(j)));
  const json& c = j.contains("config") && j["config"].is_object() ? j["config"] : json::object();
  return {j["class_name"].get<std::string>(), c};
}

}  // namespace

json loss_json(const losses::Loss& loss) {
  return {{"module", "keel.losses"}, {"class_name", loss.class_name()}, {"config", loss.get_config()},
          {"registered_name", nullptr}};
}

json metric_json(const metrics::MetricRef& m) {
  if (m.is_name()) return m.name();
  const auto metric = m.get();
  return {{"module", "keel.metrics"}, {"class_name", metric->class_name()}, {"config", metric->get_config()},
          {"registered_name", nullptr}};
}

std::shared_ptr<losses::Loss> loss_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (j.is_string()) return losses::get(j.get<std::string>());
  const auto [cls, c] = class_and_config(j, "loss");
  const auto known = losses::registered_losses();
  if (std::find(known.begin(), known.end(), cls) != known.end()) return losses::from_config(cls, c);
  throw ValueError(fmt::format("the loss class '{}' cannot be rebuilt (a function or a custom class); load with "
                               "compile = false and compile the model again", cls));
}

metrics::MetricRef metric_from_json(const json& j) {
  if (j.is_string()) return metrics::MetricRef(j.get<std::string>());
  const auto [cls, c] = class_and_config(j, "metric");
  const std::string what = "metric " + cls;
  if (cls == "MeanMetricWrapper" || cls == "Metric") {
    throw ValueError(fmt::format("the metric '{}' is a function or a custom class and cannot be rebuilt; load with "
                                 "compile = false and compile the model again", config_value<std::string>(c, "name", cls, what)));
  }
  // Every built-in metric class with all of its options (Precision's thresholds lists, AUC's
  // multi_label, the cross-entropy metrics, ...): the metrics module reads its own configs.
  std::shared_ptr<metrics::Metric> m = metrics::from_config(cls, c);
  m->set_name(config_value<std::string>(c, "name", m->name(), what));
  return metrics::MetricRef(m);
}

}  // namespace keel::models::detail
