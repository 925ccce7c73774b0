#pragma once
// Keras metrics: stateful objects that accumulate over batches (update_state), report a number
// (result) and start again (reset_state). Metrics are never differentiated, so their state is
// plain C++ numbers (doubles) and their arithmetic runs on the host.
//
//   metrics::AUC auc;
//   auc.update_state(labels, probabilities);
//   double value = auc.result();
//
// A custom metric subclasses Metric and implements the three functions.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/core/tensor.hpp"

namespace keel::losses { class Loss; }

namespace keel::metrics {

class Metric {
 public:
  explicit Metric(std::string name = "metric") : name_(std::move(name)) {}
  virtual ~Metric() = default;

  virtual void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) = 0;
  virtual double result() const = 0;
  // Every value the metric reports: one for most, one per threshold for Precision and Recall
  // given a list. fit() logs a metric with several as "<name>_0", "<name>_1", ...
  virtual std::vector<double> results() const { return {result()}; }
  virtual void reset_state() = 0;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  // "up" when larger is better (accuracy, AUC), "down" when smaller is (errors, cross-entropies),
  // "" when unknown: what EarlyStopping's mode "auto" asks, as Keras' metric._direction.
  const std::string& direction() const { return direction_; }
  // Keras' {"name": ..., "dtype": "float32"} plus each subclass's own arguments.
  virtual nlohmann::json get_config() const;
  virtual std::string class_name() const { return "Metric"; }

 protected:
  void set_direction(std::string direction) { direction_ = std::move(direction); }

 private:
  std::string name_;
  std::string direction_;
};

// ---- means ----------------------------------------------------------------------------------------

// The (weighted) mean of the values given: Keras' Mean. Values of rank > 1 are first averaged to
// one value per sample (over every axis but the first); each sample counts once, or by its
// weight: result = sum(w_i v_i) / sum(w_i).
struct MeanOptions {
  std::string name = "mean";
};
class Mean : public Metric {
 public:
  explicit Mean(MeanOptions options = {});
  void update_state(const Tensor& values, const Tensor& sample_weight = {});
  // Mean takes values, not (y_true, y_pred): ValueError, as Keras' Mean rejects them. To average
  // a function of (y_true, y_pred), use MeanMetricWrapper.
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override;  // total / count, 0 before any update
  void reset_state() override;
  std::string class_name() const override { return "Mean"; }
  double total() const { return total_; }
  double count() const { return count_; }

 protected:
  // update_state's arithmetic, for subclasses that compute their own values and weights.
  void accumulate(const Tensor& values, const Tensor& sample_weight);

 private:
  double total_ = 0;
  double count_ = 0;
};

// A running mean of fn(y_true, y_pred), a per-example function (Keras' MeanMetricWrapper): how
// the accuracies, the error metrics and custom metric functions are built.
struct MeanMetricWrapperOptions {
  std::string name = "mean_metric_wrapper";
};
class MeanMetricWrapper : public Mean {
 public:
  using Fn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;
  explicit MeanMetricWrapper(Fn fn, MeanMetricWrapperOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  std::string class_name() const override { return "MeanMetricWrapper"; }

 protected:
  // For subclasses that name their direction (accuracies "up", errors "down").
  MeanMetricWrapper(Fn fn, std::string name, std::string direction);

 private:
  Fn fn_;
};

// ---- per-example metric functions (Keras' keras.metrics.<name> functions) --------------------------
// Each returns float32 1/0 matches (computed on the host, returned on the CPU).

// y_true == y_pred, elementwise (y_true cast to y_pred's dtype).
Tensor accuracy(const Tensor& y_true, const Tensor& y_pred);
// y_true == (y_pred > threshold), elementwise. The comparison is made in y_pred's dtype when it
// is float64, in float32 otherwise, as Keras 3 promotes (a bool prediction true is 1.0 > 0.5,
// not compared with the threshold cast to bool); the 0/1 result is then cast to y_true's dtype.
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);
// argmax(y_true) == argmax(y_pred) over the last axis (one-hot labels).
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
// y_true == argmax(y_pred) over the last axis (integer labels, [N] or [N, 1]).
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
// argmax(y_true) among the k largest of y_pred (ties at the boundary count as in, as
// tf.math.in_top_k).
Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k = 5);
Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k = 5);

// ---- accuracies -------------------------------------------------------------------------------------

struct AccuracyOptions {
  std::string name = "accuracy";
};
class Accuracy : public MeanMetricWrapper {
 public:
  explicit Accuracy(AccuracyOptions options = {});
  std::string class_name() const override { return "Accuracy"; }
};

struct BinaryAccuracyOptions {
  std::string name = "binary_accuracy";
  double threshold = 0.5;  // in (0, 1), as Keras requires
};
class BinaryAccuracy : public MeanMetricWrapper {
 public:
  explicit BinaryAccuracy(BinaryAccuracyOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "BinaryAccuracy"; }
  double threshold() const { return options_.threshold; }

 private:
  BinaryAccuracyOptions options_;
};

struct CategoricalAccuracyOptions {
  std::string name = "categorical_accuracy";
};
class CategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit CategoricalAccuracy(CategoricalAccuracyOptions options = {});
  std::string class_name() const override { return "CategoricalAccuracy"; }
};

struct SparseCategoricalAccuracyOptions {
  std::string name = "sparse_categorical_accuracy";
};
class SparseCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit SparseCategoricalAccuracy(SparseCategoricalAccuracyOptions options = {});
  std::string class_name() const override { return "SparseCategoricalAccuracy"; }
};

struct TopKCategoricalAccuracyOptions {
  int k = 5;
  std::string name = "top_k_categorical_accuracy";
};
class TopKCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit TopKCategoricalAccuracy(TopKCategoricalAccuracyOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "TopKCategoricalAccuracy"; }
  int k() const { return options_.k; }

 private:
  TopKCategoricalAccuracyOptions options_;
};

struct SparseTopKCategoricalAccuracyOptions {
  int k = 5;
  std::string name = "sparse_top_k_categorical_accuracy";
};
class SparseTopKCategoricalAccuracy : public MeanMetricWrapper {
 public:
  explicit SparseTopKCategoricalAccuracy(SparseTopKCategoricalAccuracyOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SparseTopKCategoricalAccuracy"; }
  int k() const { return options_.k; }

 private:
  SparseTopKCategoricalAccuracyOptions options_;
};

// ---- regression metrics ---------------------------------------------------------------------------

struct MeanSquaredErrorOptions {
  std::string name = "mean_squared_error";
};
class MeanSquaredError : public MeanMetricWrapper {
 public:
  explicit MeanSquaredError(MeanSquaredErrorOptions options = {});
  std::string class_name() const override { return "MeanSquaredError"; }
};

struct MeanAbsoluteErrorOptions {
  std::string name = "mean_absolute_error";
};
class MeanAbsoluteError : public MeanMetricWrapper {
 public:
  explicit MeanAbsoluteError(MeanAbsoluteErrorOptions options = {});
  std::string class_name() const override { return "MeanAbsoluteError"; }
};

// ---- confusion-matrix metrics ---------------------------------------------------------------------
// A prediction is positive at threshold t when y_pred > t (compared in float32, as Keras), a
// label when y_true != 0; every element of y_pred counts (multi-label outputs are flattened),
// weighted by its sample's weight. With evenly spaced thresholds (such as AUC's default grid, or
// Precision's {0, 0.5, 1}) the counts are bucketed as Keras' optimised update does, which first
// clips predictions to [0, 1].

namespace detail {
// Confusion counts at each threshold, laid out [threshold][label] (one label unless AUC keeps a
// curve per label).
struct ConfusionCounts {
  std::vector<double> tp, fp, tn, fn;
  void reset(std::size_t size);
};
}  // namespace detail

// Keras' `thresholds` argument of Precision and Recall: none (the default), one value
// (`.thresholds = 0.3`), or a list (`.thresholds = {0.3, 0.5, 0.7}` or a std::vector<double>),
// which gives one result per threshold. A list of one is still a list, as in Keras: get_config
// reports [0.5] for {0.5} and 0.5 for 0.5.
class Thresholds {
 public:
  Thresholds() = default;
  Thresholds(std::nullopt_t) {}                 // NOLINT: implicit, as Keras' None
  Thresholds(double value) : values_{value} {}  // NOLINT: implicit, as Keras' float
  Thresholds(std::optional<double> value)       // NOLINT
      : values_(value ? std::vector<double>{*value} : std::vector<double>{}) {}
  Thresholds(std::vector<double> values) : values_(std::move(values)), list_(true) {}  // NOLINT: a list
  Thresholds(std::initializer_list<double> values) : Thresholds(std::vector<double>(values)) {}

  bool has_value() const { return list_ || !values_.empty(); }
  bool is_list() const { return list_; }
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> values_;
  bool list_ = false;
};

struct PrecisionOptions {
  // Each in [0, 1]. Default 0.5, or with top_k set, none (every top-k prediction is positive).
  Thresholds thresholds = {};
  // Only the k largest predictions of each row (last axis) may be positive.
  std::optional<int> top_k = std::nullopt;
  // Only this class (last-axis index) counts.
  std::optional<int> class_id = std::nullopt;
  std::string name = "precision";
};
// TP / (TP + FP) at each threshold, 0 where nothing was predicted positive.
class Precision : public Metric {
 public:
  explicit Precision(PrecisionOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  // The precision at the one threshold. With several thresholds a metric has no single number
  // (Keras returns a vector), so this is a ValueError that points to results(): silently
  // reporting one of them would mislead a History or an EarlyStopping.
  double result() const override;
  // One precision per threshold, in the order the thresholds were given.
  std::vector<double> results() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Precision"; }
  // The thresholds applied: those given, 0.5, or with top_k and none given, -1e10.
  const std::vector<double>& thresholds() const { return thresholds_; }
  // The counts at the one threshold (ValueError with several, as result()).
  double true_positives() const;
  double false_positives() const;

 private:
  PrecisionOptions options_;  // as given: what get_config writes
  std::vector<double> thresholds_;
  bool evenly_;
  detail::ConfusionCounts counts_;
};

struct RecallOptions {
  Thresholds thresholds = {};
  std::optional<int> top_k = std::nullopt;
  std::optional<int> class_id = std::nullopt;
  std::string name = "recall";
};
// TP / (TP + FN) at each threshold, 0 when there was no positive label. result(), results()
// and the counts as Precision's.
class Recall : public Metric {
 public:
  explicit Recall(RecallOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;  // ValueError with several thresholds: read results()
  std::vector<double> results() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Recall"; }
  const std::vector<double>& thresholds() const { return thresholds_; }
  double true_positives() const;
  double false_negatives() const;

 private:
  RecallOptions options_;  // as given: what get_config writes
  std::vector<double> thresholds_;
  bool evenly_;
  detail::ConfusionCounts counts_;
};

// Area under the ROC or precision-recall curve, approximated on a grid of thresholds as Keras
// does: by default 0 - 1e-7, i / (num_thresholds - 1) for i = 1 .. num_thresholds - 2, 1 + 1e-7.
// Predictions should be probabilities (from_logits applies a sigmoid first).
//   ROC + "interpolation": trapezoids, sum_i (FPR_i - FPR_i+1) (TPR_i + TPR_i+1) / 2.
//   PR + "interpolation": Davis & Goadrich's interpolation of precision between thresholds.
//   "minoring" / "majoring": rectangles of the smaller / larger neighbouring height.
// Multi-label outputs [samples, labels]:
//   multi_label = false: every element is one point of a single curve; label_weights (one per
//     label, the last axis of y_pred) weight each element by its label's weight.
//   multi_label = true: one curve per label (counts [num_thresholds, labels]), whose areas are
//     averaged, or weighted by label_weights: sum(w_l AUC_l) / sum(w_l). y_pred must have rank 2;
//     the number of labels is num_labels, or y_pred's last axis at the first update.
struct AUCOptions {
  int num_thresholds = 200;
  std::string curve = "ROC";                      // "ROC" or "PR"
  std::string summation_method = "interpolation";  // "interpolation", "minoring", "majoring"
  std::string name = "auc";
  std::vector<double> thresholds = {};  // explicit interior thresholds (overrides num_thresholds)
  bool multi_label = false;
  std::optional<int> num_labels = std::nullopt;  // only with multi_label (ValueError otherwise)
  std::vector<double> label_weights = {};        // non-negative, one per label; empty: none
  bool from_logits = false;
};
class AUC : public Metric {
 public:
  explicit AUC(AUCOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;  // 0 before a multi-label AUC without num_labels has seen data
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "AUC"; }

  int num_thresholds() const { return num_thresholds_; }
  const std::vector<double>& thresholds() const { return thresholds_; }  // with the end points
  bool multi_label() const { return multi_label_; }
  // The curves kept: 1 without multi_label; with it, num_labels or the labels of the first
  // batch (0 before it).
  int num_labels() const { return labels_; }
  const std::vector<double>& label_weights() const { return label_weights_; }
  // Laid out [threshold][label]: num_thresholds() * num_labels() values.
  const std::vector<double>& true_positives() const { return counts_.tp; }
  const std::vector<double>& false_positives() const { return counts_.fp; }
  const std::vector<double>& true_negatives() const { return counts_.tn; }
  const std::vector<double>& false_negatives() const { return counts_.fn; }

 private:
  void check_labels(const Tensor& y_pred);  // multi-label shape rules; sizes the counts once
  double label_area(std::size_t label) const;
  int num_thresholds_;
  std::string curve_, summation_method_;
  bool multi_label_;
  std::optional<int> init_num_labels_;
  int labels_;
  std::vector<double> label_weights_;
  bool from_logits_;
  bool init_from_thresholds_;
  bool evenly_;  // evenly spaced thresholds: bucketed update, as Keras' optimised path
  std::vector<double> thresholds_;
  detail::ConfusionCounts counts_;
};

// ---- cross-entropy metrics ------------------------------------------------------------------------
// Running means of the cross-entropy loss functions (Keras' probabilistic metrics): each sample's
// loss (averaged over any axes after the first) counts once, or by its sample weight. Labels
// [N] against binary predictions [N, 1] are read as [N, 1] (one loss per sample); half-precision
// predictions are widened to float32 first. Errors name the metric and the shapes given.

struct BinaryCrossentropyOptions {
  std::string name = "binary_crossentropy";
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]: labels move towards 0.5, y (1 - s) + s / 2
};
class BinaryCrossentropy : public MeanMetricWrapper {
 public:
  explicit BinaryCrossentropy(BinaryCrossentropyOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "BinaryCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  double label_smoothing() const { return options_.label_smoothing; }

 private:
  BinaryCrossentropyOptions options_;
};

struct CategoricalCrossentropyOptions {
  std::string name = "categorical_crossentropy";
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]: one-hot labels become y (1 - s) + s / num_classes
  int axis = -1;                 // the class axis
};
class CategoricalCrossentropy : public MeanMetricWrapper {
 public:
  explicit CategoricalCrossentropy(CategoricalCrossentropyOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CategoricalCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  double label_smoothing() const { return options_.label_smoothing; }
  int axis() const { return options_.axis; }

 private:
  CategoricalCrossentropyOptions options_;
};

struct SparseCategoricalCrossentropyOptions {
  std::string name = "sparse_categorical_crossentropy";
  bool from_logits = false;
  // A label to leave out (padding, a "void" class): its entries are neither summed nor counted,
  // so the result is the mean over the other entries (with sample weights, their weighted mean).
  // Keras 3 does the same when given sample weights; without them it still counts the ignored
  // entries (as zeros) in the denominator, which keel does not copy.
  std::optional<std::int64_t> ignore_class = std::nullopt;
  int axis = -1;  // the class axis (only the last is supported, as the loss function)
};
class SparseCategoricalCrossentropy : public MeanMetricWrapper {
 public:
  explicit SparseCategoricalCrossentropy(SparseCategoricalCrossentropyOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SparseCategoricalCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  const std::optional<std::int64_t>& ignore_class() const { return options_.ignore_class; }
  int axis() const { return options_.axis; }

 private:
  SparseCategoricalCrossentropyOptions options_;
};

// ---- by name ------------------------------------------------------------------------------------

// The accuracy that "accuracy" means for a loss: SparseCategoricalAccuracy for
// sparse_categorical_crossentropy, CategoricalAccuracy for categorical_crossentropy,
// BinaryAccuracy for binary_crossentropy, Accuracy otherwise. The metric is named `metric_name`
// (Keras reports "accuracy" under the name it was asked for, "acc" as "acc").
std::shared_ptr<Metric> resolve_accuracy(const std::string& loss_name, const std::string& metric_name = "accuracy");
// The same from a loss object: its class decides (a renamed loss still resolves), then its name.
std::shared_ptr<Metric> resolve_accuracy(const losses::Loss& loss, const std::string& metric_name = "accuracy");
// Keras 3's own rule, from the shapes of the first batch (compile_utils.get_metric): binary when
// y_pred's last axis is 1; sparse when y_true has lower rank than y_pred, or a last axis of 1
// against more than one class; categorical otherwise.
std::shared_ptr<Metric> resolve_accuracy(const Shape& y_true_shape, const Shape& y_pred_shape,
                                         const std::string& metric_name = "accuracy");

// A new metric for a Keras name, named by that name as Keras' History does: "accuracy"/"acc"
// (resolved for loss_name), "binary_accuracy", "categorical_accuracy",
// "sparse_categorical_accuracy", "top_k_categorical_accuracy",
// "sparse_top_k_categorical_accuracy", "precision", "recall", "auc", "mse"/"mean_squared_error",
// "mae"/"mean_absolute_error", "binary_crossentropy"/"bce", "categorical_crossentropy",
// "sparse_categorical_crossentropy" (the cross-entropy metric classes), "kl_divergence"/"kld"
// (its running mean), "rmse"/"root_mean_squared_error", "mape"/"mean_absolute_percentage_error",
// "msle"/"mean_squared_logarithmic_error", "cosine_similarity", "logcosh"/"log_cosh_error",
// "r2_score", "hinge", "squared_hinge", "categorical_hinge", "f1_score", "fbeta_score",
// "true_positives", "false_positives", "true_negatives", "false_negatives", "binary_io_u", "sum",
// or a class name ("AUC", "Precision", "RootMeanSquaredError", ...), each with its default
// options. Metrics with a required argument (IoU's num_classes, PrecisionAtRecall's recall, ...)
// have no default and are not found by name, as in Keras. ValueError for any other name.
std::shared_ptr<Metric> get(const std::string& identifier, const std::string& loss_name = "");

// A built-in metric rebuilt from its class_name() and get_config() (Keras' Metric.from_config,
// as keras.metrics.deserialize calls it): the options a config names are restored (Precision's
// thresholds as a number or a list, AUC's multi_label, num_labels and label_weights, the
// cross-entropies' from_logits, ...), missing ones take their defaults, "name" renames.
// ValueError naming the class for an entry of the wrong type, and for classes that cannot be
// rebuilt from a config: MeanMetricWrapper (a function), Metric or a custom subclass.
std::shared_ptr<Metric> from_config(const std::string& class_name, const nlohmann::json& config);
// The metric classes from_config rebuilds, by class name.
std::vector<std::string> registered_metrics();

// What compile() takes as a metric: a name (resolved when compile knows the loss), a Metric
// object (copied: pass a shared_ptr to read its state afterwards) or shared_ptr (shared), or a
// function (y_true, y_pred) -> per-example values, averaged by a MeanMetricWrapper.
class MetricRef {
 public:
  MetricRef(const char* name) : identifier_(name ? name : "") {}  // NOLINT: implicit, as Keras' strings
  MetricRef(std::string name) : identifier_(std::move(name)) {}  // NOLINT
  template <class M, std::enable_if_t<std::is_base_of_v<Metric, std::decay_t<M>>, int> = 0>
  MetricRef(M&& metric)  // NOLINT
      : ptr_(std::make_shared<std::decay_t<M>>(std::forward<M>(metric))) {}
  template <class M, std::enable_if_t<std::is_base_of_v<Metric, M>, int> = 0>
  MetricRef(std::shared_ptr<M> metric) : ptr_(std::move(metric)) {}  // NOLINT
  template <class F,
            std::enable_if_t<!std::is_base_of_v<Metric, std::decay_t<F>> &&
                                 !std::is_convertible_v<F, std::string> &&
                                 std::is_invocable_r_v<Tensor, std::decay_t<F>&, const Tensor&, const Tensor&>,
                             int> = 0>
  MetricRef(F&& fn, std::string name = "mean_metric_wrapper")  // NOLINT
      : ptr_(wrap(MeanMetricWrapper::Fn(std::forward<F>(fn)), std::move(name))) {}

  // The metric: for a name, a new one (the accuracy for `loss_name`); for an object, itself.
  std::shared_ptr<Metric> get(const std::string& loss_name = "") const;
  std::shared_ptr<Metric> get(const losses::Loss& loss) const;
  bool is_name() const { return ptr_ == nullptr; }
  // The name it will report: the identifier string, or the object's name.
  std::string name() const { return ptr_ ? ptr_->name() : identifier_; }

 private:
  static std::shared_ptr<Metric> wrap(MeanMetricWrapper::Fn fn, std::string name);
  std::string identifier_;
  std::shared_ptr<Metric> ptr_;
};

}  // namespace keel::metrics

// The further metric families, declared in their own headers (each includes this one, so the
// definitions above are complete by then).
#include "keel/metrics/classification_metrics.hpp"
#include "keel/metrics/iou_metrics.hpp"
#include "keel/metrics/regression_metrics.hpp"
