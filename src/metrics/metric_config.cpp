// The configs of the built-in metrics: one field list per options struct drives get_config and
// metrics::from_config (Keras' Metric.from_config), and the metric registry (class name ->
// factory) is filled from the same lists. The name and dtype are the base Metric's, written by
// Metric::get_config. Model saving (src/models/compile_config.cpp) calls from_config for the
// compiled metrics it restores.
#include "keel/metrics/metric.hpp"

#include <concepts>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "io/config_fields.hpp"

namespace keel::metrics {

// Precision's and Recall's thresholds as they were given: null, a number or a list of numbers.
static void to_json(nlohmann::json& j, const Thresholds& t) {
  if (!t.has_value())
    j = nullptr;
  else if (t.is_list())
    j = t.values();
  else
    j = t.values()[0];
}

template <class Wrong>
static Thresholds read_field(const nlohmann::json& v, const char* key, const Wrong& wrong, Thresholds*) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_array()) wrong(key, v);
  std::vector<double> values;
  for (const auto& x : v) {
    if (!x.is_number()) wrong(key, v);
    values.push_back(x.get<double>());
  }
  return values;
}

}  // namespace keel::metrics

namespace keel::config_fields {

template <class V>
void fields(V&& v, metrics::BinaryAccuracyOptions& o) {
  v("threshold", o.threshold);
}

template <class V, class O>
  requires std::same_as<O, metrics::TopKCategoricalAccuracyOptions> ||
           std::same_as<O, metrics::SparseTopKCategoricalAccuracyOptions>
void fields(V&& v, O& o) {
  v("k", o.k);
}

template <class V, class O>
  requires std::same_as<O, metrics::PrecisionOptions> || std::same_as<O, metrics::RecallOptions>
void fields(V&& v, O& o) {
  v("thresholds", o.thresholds);
  v("top_k", o.top_k);
  v("class_id", o.class_id);
}

template <class V>
void fields(V&& v, metrics::AUCOptions& o) {
  v("num_thresholds", o.num_thresholds);
  v("curve", o.curve);
  v("summation_method", o.summation_method);
  v("thresholds", o.thresholds);
  v("multi_label", o.multi_label);
  v("num_labels", o.num_labels);
  v("label_weights", o.label_weights);
  v("from_logits", o.from_logits);
}

template <class V>
void fields(V&& v, metrics::BinaryCrossentropyOptions& o) {
  v("from_logits", o.from_logits);
  v("label_smoothing", o.label_smoothing);
}

template <class V>
void fields(V&& v, metrics::CategoricalCrossentropyOptions& o) {
  v("from_logits", o.from_logits);
  v("label_smoothing", o.label_smoothing);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, metrics::SparseCategoricalCrossentropyOptions& o) {
  v("from_logits", o.from_logits);
  v("ignore_class", o.ignore_class);
  v("axis", o.axis);
}

// The metrics whose options hold only the base field (name).
template <class V> void fields(V&&, metrics::MeanOptions&) {}
template <class V> void fields(V&&, metrics::AccuracyOptions&) {}
template <class V> void fields(V&&, metrics::CategoricalAccuracyOptions&) {}
template <class V> void fields(V&&, metrics::SparseCategoricalAccuracyOptions&) {}
template <class V> void fields(V&&, metrics::MeanSquaredErrorOptions&) {}
template <class V> void fields(V&&, metrics::MeanAbsoluteErrorOptions&) {}

}  // namespace keel::config_fields

namespace keel::metrics {

using config_fields::with_fields;

nlohmann::json BinaryAccuracy::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json TopKCategoricalAccuracy::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json SparseTopKCategoricalAccuracy::get_config() const {
  return with_fields(Metric::get_config(), options_);
}
nlohmann::json Precision::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json Recall::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json BinaryCrossentropy::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json CategoricalCrossentropy::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json SparseCategoricalCrossentropy::get_config() const {
  return with_fields(Metric::get_config(), options_);
}

// AUC writes its options as it applies them (the curve and summation method normalised, the
// explicit thresholds sorted, without the end points), so that a config round-trips.
nlohmann::json AUC::get_config() const {
  AUCOptions o;
  o.num_thresholds = num_thresholds_;
  o.curve = curve_;
  o.summation_method = summation_method_;
  if (init_from_thresholds_) o.thresholds.assign(thresholds_.begin() + 1, thresholds_.end() - 1);
  o.multi_label = multi_label_;
  o.num_labels = init_num_labels_;
  o.label_weights = label_weights_;
  o.from_logits = from_logits_;
  auto c = with_fields(Metric::get_config(), o);
  if (!init_from_thresholds_) c.erase("thresholds");
  return c;
}

namespace {

using json = nlohmann::json;
using Factory = std::shared_ptr<Metric> (*)(const std::string& cls, const json& config);

// A metric of class M from a config: its name and M's own options, each kept at its default
// where the config has none; a ValueError names the class and the entry of the wrong type.
template <class M, class O>
std::shared_ptr<Metric> make_from_config(const std::string& cls, const json& config) {
  const config_fields::Reader reader{config, [&cls](const char* key, const json& v) {
    throw ValueError(fmt::format("metrics::from_config: {} config entry '{}' has the wrong type: {}", cls, key,
                                 v.dump()));
  }};
  O o;
  reader("name", o.name);
  fields(reader, o);
  return std::make_shared<M>(std::move(o));
}

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> table = {
      {"Mean", &make_from_config<Mean, MeanOptions>},
      {"Accuracy", &make_from_config<Accuracy, AccuracyOptions>},
      {"BinaryAccuracy", &make_from_config<BinaryAccuracy, BinaryAccuracyOptions>},
      {"CategoricalAccuracy", &make_from_config<CategoricalAccuracy, CategoricalAccuracyOptions>},
      {"SparseCategoricalAccuracy", &make_from_config<SparseCategoricalAccuracy, SparseCategoricalAccuracyOptions>},
      {"TopKCategoricalAccuracy", &make_from_config<TopKCategoricalAccuracy, TopKCategoricalAccuracyOptions>},
      {"SparseTopKCategoricalAccuracy",
       &make_from_config<SparseTopKCategoricalAccuracy, SparseTopKCategoricalAccuracyOptions>},
      {"MeanSquaredError", &make_from_config<MeanSquaredError, MeanSquaredErrorOptions>},
      {"MeanAbsoluteError", &make_from_config<MeanAbsoluteError, MeanAbsoluteErrorOptions>},
      {"Precision", &make_from_config<Precision, PrecisionOptions>},
      {"Recall", &make_from_config<Recall, RecallOptions>},
      {"AUC", &make_from_config<AUC, AUCOptions>},
      {"BinaryCrossentropy", &make_from_config<BinaryCrossentropy, BinaryCrossentropyOptions>},
      {"CategoricalCrossentropy", &make_from_config<CategoricalCrossentropy, CategoricalCrossentropyOptions>},
      {"SparseCategoricalCrossentropy",
       &make_from_config<SparseCategoricalCrossentropy, SparseCategoricalCrossentropyOptions>},
  };
  return table;
}

}  // namespace

std::vector<std::string> registered_metrics() { return config_fields::names_of(registry()); }

std::shared_ptr<Metric> from_config(const std::string& class_name, const nlohmann::json& config) {
  const auto& table = registry();
  const auto it = table.find(class_name);
  if (it == table.end())
    throw ValueError(fmt::format(
        "metrics::from_config: the metric class '{}' cannot be rebuilt from a config (a MeanMetricWrapper of a "
        "function, the Metric base or a custom class is not registered); known classes: Mean, Accuracy, "
        "BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, TopKCategoricalAccuracy, "
        "SparseTopKCategoricalAccuracy, MeanSquaredError, MeanAbsoluteError, Precision, Recall, AUC, "
        "BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy",
        class_name));
  return it->second(class_name, config);
}

}  // namespace keel::metrics
