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
#include <cstdint>
#include <functional>
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
// y_true == (y_pred > threshold), elementwise.
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
  double threshold() const { return threshold_; }

 private:
  double threshold_;
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
  int k() const { return k_; }

 private:
  int k_;
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
  int k() const { return k_; }

 private:
  int k_;
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
// A prediction is positive when y_pred > threshold, a label when y_true != 0; every element of
// y_pred counts (multi-label outputs are flattened), weighted by its sample's weight.

struct PrecisionOptions {
  // In [0, 1]. Default 0.5, or with top_k set, none (every top-k prediction is positive).
  std::optional<double> thresholds = std::nullopt;
  // Only the k largest predictions of each row (last axis) may be positive.
  std::optional<int> top_k = std::nullopt;
  // Only this class (last-axis index) counts.
  std::optional<int> class_id = std::nullopt;
  std::string name = "precision";
};
// TP / (TP + FP), 0 when nothing was predicted positive.
class Precision : public Metric {
 public:
  explicit Precision(PrecisionOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Precision"; }
  double true_positives() const { return tp_; }
  double false_positives() const { return fp_; }

 private:
  std::optional<double> init_thresholds_;
  double threshold_;
  std::optional<int> top_k_, class_id_;
  double tp_ = 0, fp_ = 0;
};

struct RecallOptions {
  std::optional<double> thresholds = std::nullopt;
  std::optional<int> top_k = std::nullopt;
  std::optional<int> class_id = std::nullopt;
  std::string name = "recall";
};
// TP / (TP + FN), 0 when there was no positive label.
class Recall : public Metric {
 public:
  explicit Recall(RecallOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Recall"; }
  double true_positives() const { return tp_; }
  double false_negatives() const { return fn_; }

 private:
  std::optional<double> init_thresholds_;
  double threshold_;
  std::optional<int> top_k_, class_id_;
  double tp_ = 0, fn_ = 0;
};

// Area under the ROC or precision-recall curve, approximated on a grid of thresholds as Keras
// does: by default 0 - 1e-7, i / (num_thresholds - 1) for i = 1 .. num_thresholds - 2, 1 + 1e-7.
// Predictions should be probabilities (from_logits applies a sigmoid first).
//   ROC + "interpolation": trapezoids, sum_i (FPR_i - FPR_i+1) (TPR_i + TPR_i+1) / 2.
//   PR + "interpolation": Davis & Goadrich's interpolation of precision between thresholds.
//   "minoring" / "majoring": rectangles of the smaller / larger neighbouring height.
struct AUCOptions {
  int num_thresholds = 200;
  std::string curve = "ROC";                      // "ROC" or "PR"
  std::string summation_method = "interpolation";  // "interpolation", "minoring", "majoring"
  std::string name = "auc";
  std::vector<double> thresholds = {};  // explicit interior thresholds (overrides num_thresholds)
  bool from_logits = false;
};
class AUC : public Metric {
 public:
  explicit AUC(AUCOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "AUC"; }

  int num_thresholds() const { return num_thresholds_; }
  const std::vector<double>& thresholds() const { return thresholds_; }  // with the end points
  const std::vector<double>& true_positives() const { return tp_; }
  const std::vector<double>& false_positives() const { return fp_; }
  const std::vector<double>& true_negatives() const { return tn_; }
  const std::vector<double>& false_negatives() const { return fn_; }

 private:
  double interpolate_pr_auc() const;
  int num_thresholds_;
  std::string curve_, summation_method_;
  bool from_logits_;
  bool init_from_thresholds_;
  bool evenly_;  // evenly spaced thresholds: bucketed update, as Keras' optimised path
  std::vector<double> thresholds_;
  std::vector<double> tp_, fp_, tn_, fn_;
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
// "mae"/"mean_absolute_error", the cross-entropy and KL-divergence loss names (their running
// mean), or a class name ("AUC", "Precision", ...). ValueError for any other name.
std::shared_ptr<Metric> get(const std::string& identifier, const std::string& loss_name = "");

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
