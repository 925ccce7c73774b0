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

template <class V>
void fields(V&& v, metrics::CosineSimilarityOptions& o) {
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, metrics::R2ScoreOptions& o) {
  v("class_aggregation", o.class_aggregation);
  v("num_regressors", o.num_regressors);
}

template <class V>
void fields(V&& v, metrics::FBetaScoreOptions& o) {
  v("average", o.average);
  v("beta", o.beta);
  v("threshold", o.threshold);
}

template <class V>
void fields(V&& v, metrics::F1ScoreOptions& o) {
  v("average", o.average);
  v("threshold", o.threshold);
}

template <class V, class O>
  requires std::same_as<O, metrics::TruePositivesOptions> || std::same_as<O, metrics::FalsePositivesOptions> ||
           std::same_as<O, metrics::TrueNegativesOptions> || std::same_as<O, metrics::FalseNegativesOptions>
void fields(V&& v, O& o) {
  v("thresholds", o.thresholds);
}

// The value each of the four rate-at-rate metrics is asked for comes first, as in Keras.
template <class V>
void fields(V&& v, metrics::PrecisionAtRecallOptions& o) {
  v("recall", o.recall);
  v("num_thresholds", o.num_thresholds);
  v("class_id", o.class_id);
}

template <class V>
void fields(V&& v, metrics::RecallAtPrecisionOptions& o) {
  v("precision", o.precision);
  v("num_thresholds", o.num_thresholds);
  v("class_id", o.class_id);
}

template <class V>
void fields(V&& v, metrics::SensitivityAtSpecificityOptions& o) {
  v("specificity", o.specificity);
  v("num_thresholds", o.num_thresholds);
  v("class_id", o.class_id);
}

template <class V>
void fields(V&& v, metrics::SpecificityAtSensitivityOptions& o) {
  v("sensitivity", o.sensitivity);
  v("num_thresholds", o.num_thresholds);
  v("class_id", o.class_id);
}

template <class V>
void fields(V&& v, metrics::IoUOptions& o) {
  v("num_classes", o.num_classes);
  v("target_class_ids", o.target_class_ids);
  v("ignore_class", o.ignore_class);
  v("sparse_y_true", o.sparse_y_true);
  v("sparse_y_pred", o.sparse_y_pred);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, metrics::BinaryIoUOptions& o) {
  v("target_class_ids", o.target_class_ids);
  v("threshold", o.threshold);
}

template <class V>
void fields(V&& v, metrics::MeanIoUOptions& o) {
  v("num_classes", o.num_classes);
  v("ignore_class", o.ignore_class);
  v("sparse_y_true", o.sparse_y_true);
  v("sparse_y_pred", o.sparse_y_pred);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, metrics::OneHotIoUOptions& o) {
  v("num_classes", o.num_classes);
  v("target_class_ids", o.target_class_ids);
  v("ignore_class", o.ignore_class);
  v("sparse_y_pred", o.sparse_y_pred);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, metrics::OneHotMeanIoUOptions& o) {
  v("num_classes", o.num_classes);
  v("ignore_class", o.ignore_class);
  v("sparse_y_pred", o.sparse_y_pred);
  v("axis", o.axis);
}

// The metrics whose options hold only the base field (name).
template <class V> void fields(V&&, metrics::MeanOptions&) {}
template <class V> void fields(V&&, metrics::AccuracyOptions&) {}
template <class V> void fields(V&&, metrics::CategoricalAccuracyOptions&) {}
template <class V> void fields(V&&, metrics::SparseCategoricalAccuracyOptions&) {}
template <class V> void fields(V&&, metrics::MeanSquaredErrorOptions&) {}
template <class V> void fields(V&&, metrics::MeanAbsoluteErrorOptions&) {}
template <class V> void fields(V&&, metrics::RootMeanSquaredErrorOptions&) {}
template <class V> void fields(V&&, metrics::MeanAbsolutePercentageErrorOptions&) {}
template <class V> void fields(V&&, metrics::MeanSquaredLogarithmicErrorOptions&) {}
template <class V> void fields(V&&, metrics::LogCoshErrorOptions&) {}
template <class V> void fields(V&&, metrics::HingeOptions&) {}
template <class V> void fields(V&&, metrics::SquaredHingeOptions&) {}
template <class V> void fields(V&&, metrics::CategoricalHingeOptions&) {}
template <class V> void fields(V&&, metrics::SumOptions&) {}

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

nlohmann::json CosineSimilarity::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json R2Score::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json FBetaScore::get_config() const { return with_fields(Metric::get_config(), options_); }
// F1Score's config is FBetaScore's without beta, as Keras'.
nlohmann::json F1Score::get_config() const {
  auto c = FBetaScore::get_config();
  c.erase("beta");
  return c;
}
nlohmann::json ConfusionMatrixConditionCount::get_config() const {
  auto c = Metric::get_config();
  to_json(c["thresholds"], init_thresholds_);
  return c;
}
nlohmann::json PrecisionAtRecall::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json RecallAtPrecision::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json SensitivityAtSpecificity::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json SpecificityAtSensitivity::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json IoU::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json BinaryIoU::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json MeanIoU::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json OneHotIoU::get_config() const { return with_fields(Metric::get_config(), options_); }
nlohmann::json OneHotMeanIoU::get_config() const { return with_fields(Metric::get_config(), options_); }

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
template <class O>
O read_options(const std::string& cls, const json& config) {
  const config_fields::Reader reader{config, [&cls](const char* key, const json& v) {
    throw ValueError(fmt::format("metrics::from_config: {} config entry '{}' has the wrong type: {}", cls, key,
                                 v.dump()));
  }};
  O o;
  reader("name", o.name);
  fields(reader, o);
  return o;
}

template <class M, class O>
std::shared_ptr<Metric> make_from_config(const std::string& cls, const json& config) {
  return std::make_shared<M>(read_options<O>(cls, config));
}

// R2Score's class_aggregation may be none (null), which the field reader leaves at its default
// ("uniform_average"): a null in the config is read as none here.
std::shared_ptr<Metric> make_r2_score(const std::string& cls, const json& config) {
  auto o = read_options<R2ScoreOptions>(cls, config);
  if (config.is_object() && config.contains("class_aggregation") && config.at("class_aggregation").is_null())
    o.class_aggregation = std::nullopt;
  return std::make_shared<R2Score>(std::move(o));
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
      {"RootMeanSquaredError", &make_from_config<RootMeanSquaredError, RootMeanSquaredErrorOptions>},
      {"MeanAbsolutePercentageError",
       &make_from_config<MeanAbsolutePercentageError, MeanAbsolutePercentageErrorOptions>},
      {"MeanSquaredLogarithmicError",
       &make_from_config<MeanSquaredLogarithmicError, MeanSquaredLogarithmicErrorOptions>},
      {"CosineSimilarity", &make_from_config<CosineSimilarity, CosineSimilarityOptions>},
      {"LogCoshError", &make_from_config<LogCoshError, LogCoshErrorOptions>},
      {"R2Score", &make_r2_score},
      {"Hinge", &make_from_config<Hinge, HingeOptions>},
      {"SquaredHinge", &make_from_config<SquaredHinge, SquaredHingeOptions>},
      {"CategoricalHinge", &make_from_config<CategoricalHinge, CategoricalHingeOptions>},
      {"Sum", &make_from_config<Sum, SumOptions>},
      {"FBetaScore", &make_from_config<FBetaScore, FBetaScoreOptions>},
      {"F1Score", &make_from_config<F1Score, F1ScoreOptions>},
      {"TruePositives", &make_from_config<TruePositives, TruePositivesOptions>},
      {"FalsePositives", &make_from_config<FalsePositives, FalsePositivesOptions>},
      {"TrueNegatives", &make_from_config<TrueNegatives, TrueNegativesOptions>},
      {"FalseNegatives", &make_from_config<FalseNegatives, FalseNegativesOptions>},
      {"PrecisionAtRecall", &make_from_config<PrecisionAtRecall, PrecisionAtRecallOptions>},
      {"RecallAtPrecision", &make_from_config<RecallAtPrecision, RecallAtPrecisionOptions>},
      {"SensitivityAtSpecificity", &make_from_config<SensitivityAtSpecificity, SensitivityAtSpecificityOptions>},
      {"SpecificityAtSensitivity", &make_from_config<SpecificityAtSensitivity, SpecificityAtSensitivityOptions>},
      {"IoU", &make_from_config<IoU, IoUOptions>},
      {"BinaryIoU", &make_from_config<BinaryIoU, BinaryIoUOptions>},
      {"MeanIoU", &make_from_config<MeanIoU, MeanIoUOptions>},
      {"OneHotIoU", &make_from_config<OneHotIoU, OneHotIoUOptions>},
      {"OneHotMeanIoU", &make_from_config<OneHotMeanIoU, OneHotMeanIoUOptions>},
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
        "BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy, RootMeanSquaredError, "
        "MeanAbsolutePercentageError, MeanSquaredLogarithmicError, CosineSimilarity, LogCoshError, R2Score, Hinge, "
        "SquaredHinge, CategoricalHinge, Sum, FBetaScore, F1Score, TruePositives, FalsePositives, TrueNegatives, "
        "FalseNegatives, PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity, SpecificityAtSensitivity, "
        "IoU, BinaryIoU, MeanIoU, OneHotIoU, OneHotMeanIoU",
        class_name));
  return it->second(class_name, config);
}

}  // namespace keel::metrics
