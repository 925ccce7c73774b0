// metrics::from_config: a built-in metric rebuilt from its class name and get_config(), as Keras'
// Metric.from_config. What a config holds is what each get_config writes; model saving
// (src/models/serialization.cpp) calls this for the compiled metrics it restores.
#include "keel/metrics/metric.hpp"

#include <functional>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace keel::metrics {

namespace {

using json = nlohmann::json;

// The entries of one class's config, read with their defaults; a ValueError names the class and
// the entry when one has the wrong type.
class ConfigReader {
 public:
  ConfigReader(const std::string& cls, const json& c) : cls_(cls), c_(c) {}

  template <class T>
  T get(const char* key, T def) const {
    const json* v = find(key);
    if (v == nullptr) return def;
    if (!has_type<T>(*v)) wrong(key, *v);
    return v->get<T>();
  }
  template <class T>
  std::optional<T> optional(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!has_type<T>(*v)) wrong(key, *v);
    return v->get<T>();
  }
  std::vector<double> numbers(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) wrong(key, *v);
    std::vector<double> out;
    for (const auto& x : *v) {
      if (!x.is_number()) wrong(key, *v);
      out.push_back(x.get<double>());
    }
    return out;
  }
  // Precision's and Recall's thresholds: null, a number or a list of numbers.
  Thresholds thresholds() const {
    const json* v = find("thresholds");
    if (v == nullptr) return {};
    if (v->is_number()) return v->get<double>();
    return numbers("thresholds");
  }
  std::string name(const char* def) const { return get<std::string>("name", def); }

 private:
  const json* find(const char* key) const {
    if (!c_.is_object()) return nullptr;
    const auto it = c_.find(key);
    return it == c_.end() || it->is_null() ? nullptr : &*it;
  }
  template <class T>
  static bool has_type(const json& v) {
    if constexpr (std::is_same_v<T, bool>) return v.is_boolean();
    if constexpr (std::is_same_v<T, std::string>) return v.is_string();
    if constexpr (std::is_integral_v<T>) return v.is_number_integer();
    return v.is_number();
  }
  [[noreturn]] void wrong(const char* key, const json& v) const {
    throw ValueError(fmt::format("metrics::from_config: {} config entry '{}' has the wrong type: {}", cls_, key,
                                 v.dump()));
  }
  const std::string& cls_;
  const json& c_;
};

using Make = std::function<std::shared_ptr<Metric>(const ConfigReader&)>;

template <class M, class O>
std::shared_ptr<Metric> named(const ConfigReader& r, const char* def) {
  O o;
  o.name = r.name(def);
  return std::make_shared<M>(std::move(o));
}

std::shared_ptr<Metric> precision(const ConfigReader& r) {
  return std::make_shared<Precision>(
      PrecisionOptions{r.thresholds(), r.optional<int>("top_k"), r.optional<int>("class_id"), r.name("precision")});
}

std::shared_ptr<Metric> recall(const ConfigReader& r) {
  return std::make_shared<Recall>(
      RecallOptions{r.thresholds(), r.optional<int>("top_k"), r.optional<int>("class_id"), r.name("recall")});
}

std::shared_ptr<Metric> auc(const ConfigReader& r) {
  return std::make_shared<AUC>(AUCOptions{.num_thresholds = r.get("num_thresholds", 200),
                                          .curve = r.get<std::string>("curve", "ROC"),
                                          .summation_method = r.get<std::string>("summation_method", "interpolation"),
                                          .name = r.name("auc"),
                                          .thresholds = r.numbers("thresholds"),
                                          .multi_label = r.get("multi_label", false),
                                          .num_labels = r.optional<int>("num_labels"),
                                          .label_weights = r.numbers("label_weights"),
                                          .from_logits = r.get("from_logits", false)});
}

std::shared_ptr<Metric> binary_crossentropy(const ConfigReader& r) {
  return std::make_shared<BinaryCrossentropy>(BinaryCrossentropyOptions{
      r.name("binary_crossentropy"), r.get("from_logits", false), r.get("label_smoothing", 0.0)});
}

std::shared_ptr<Metric> categorical_crossentropy(const ConfigReader& r) {
  return std::make_shared<CategoricalCrossentropy>(
      CategoricalCrossentropyOptions{r.name("categorical_crossentropy"), r.get("from_logits", false),
                                     r.get("label_smoothing", 0.0), r.get("axis", -1)});
}

std::shared_ptr<Metric> sparse_categorical_crossentropy(const ConfigReader& r) {
  return std::make_shared<SparseCategoricalCrossentropy>(SparseCategoricalCrossentropyOptions{
      r.name("sparse_categorical_crossentropy"), r.get("from_logits", false),
      r.optional<std::int64_t>("ignore_class"), r.get("axis", -1)});
}

const std::map<std::string, Make>& registry() {
  static const std::map<std::string, Make> table = {
      {"Mean", [](const ConfigReader& r) { return named<Mean, MeanOptions>(r, "mean"); }},
      {"Accuracy", [](const ConfigReader& r) { return named<Accuracy, AccuracyOptions>(r, "accuracy"); }},
      {"BinaryAccuracy",
       [](const ConfigReader& r) {
         return std::make_shared<BinaryAccuracy>(
             BinaryAccuracyOptions{r.name("binary_accuracy"), r.get("threshold", 0.5)});
       }},
      {"CategoricalAccuracy",
       [](const ConfigReader& r) {
         return named<CategoricalAccuracy, CategoricalAccuracyOptions>(r, "categorical_accuracy");
       }},
      {"SparseCategoricalAccuracy",
       [](const ConfigReader& r) {
         return named<SparseCategoricalAccuracy, SparseCategoricalAccuracyOptions>(r, "sparse_categorical_accuracy");
       }},
      {"TopKCategoricalAccuracy",
       [](const ConfigReader& r) {
         return std::make_shared<TopKCategoricalAccuracy>(
             TopKCategoricalAccuracyOptions{r.get("k", 5), r.name("top_k_categorical_accuracy")});
       }},
      {"SparseTopKCategoricalAccuracy",
       [](const ConfigReader& r) {
         return std::make_shared<SparseTopKCategoricalAccuracy>(
             SparseTopKCategoricalAccuracyOptions{r.get("k", 5), r.name("sparse_top_k_categorical_accuracy")});
       }},
      {"MeanSquaredError",
       [](const ConfigReader& r) { return named<MeanSquaredError, MeanSquaredErrorOptions>(r, "mean_squared_error"); }},
      {"MeanAbsoluteError",
       [](const ConfigReader& r) {
         return named<MeanAbsoluteError, MeanAbsoluteErrorOptions>(r, "mean_absolute_error");
       }},
      {"Precision", &precision},
      {"Recall", &recall},
      {"AUC", &auc},
      {"BinaryCrossentropy", &binary_crossentropy},
      {"CategoricalCrossentropy", &categorical_crossentropy},
      {"SparseCategoricalCrossentropy", &sparse_categorical_crossentropy},
  };
  return table;
}

}  // namespace

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
  return it->second(ConfigReader(class_name, config));
}

}  // namespace keel::metrics
