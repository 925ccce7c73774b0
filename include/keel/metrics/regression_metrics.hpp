#pragma once
// Keras 3's regression, hinge and reduction metrics (keras/src/metrics/regression_metrics.py,
// hinge_metrics.py, reduction_metrics.py): running means of per-example errors, the root mean
// squared error, R2 and a weighted sum. Included by keel/metrics/metric.hpp.
//
//   metrics::R2Score r2;
//   r2.update_state(y, predictions);
//   double score = r2.result();
#include <optional>
#include <string>
#include <vector>

#include "keel/metrics/metric.hpp"

namespace keel::metrics {

// ---- per-example functions (keras.metrics.<name>) ----------------------------------------------------
// y_true is cast to y_pred's dtype (integer, bool and half-precision predictions are computed in
// float32), the ranks are aligned as Keras' squeeze_or_expand_to_same_rank, and the last axis is
// reduced: one value per example. Computed on the host; the result is on the CPU.

// 100 * mean(|y_true - y_pred| / max(|y_true|, 1e-7), axis=-1).
Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred);
// mean((log(max(y_pred, 1e-7) + 1) - log(max(y_true, 1e-7) + 1))^2, axis=-1).
Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred);
// sum(l2_normalize(y_true) * l2_normalize(y_pred), axis), where l2_normalize(x) =
// x / sqrt(max(sum(x^2, axis), 1e-14)) (Keras' ops.normalize with epsilon 1e-7, squared).
Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis = -1);
// mean(log(cosh(y_pred - y_true)), axis=-1), as x + softplus(-2x) - log(2) (no overflow).
Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred);
// Labels that are all 0 or 1 become -1 / 1 first (Keras' convert_binary_labels_to_hinge);
// hinge = mean(max(1 - y_true y_pred, 0), axis=-1), squared_hinge its square's mean.
Tensor hinge(const Tensor& y_true, const Tensor& y_pred);
Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred);
// max(max((1 - y_true) y_pred, axis=-1) - sum(y_true y_pred, axis=-1) + 1, 0) (one-hot labels).
Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred);

// ---- means of per-example errors -------------------------------------------------------------------

struct MeanAbsolutePercentageErrorOptions {
  std::string name = "mean_absolute_percentage_error";
};
class MeanAbsolutePercentageError : public MeanMetricWrapper {
 public:
  explicit MeanAbsolutePercentageError(MeanAbsolutePercentageErrorOptions options = {});
  std::string class_name() const override { return "MeanAbsolutePercentageError"; }
};

struct MeanSquaredLogarithmicErrorOptions {
  std::string name = "mean_squared_logarithmic_error";
};
class MeanSquaredLogarithmicError : public MeanMetricWrapper {
 public:
  explicit MeanSquaredLogarithmicError(MeanSquaredLogarithmicErrorOptions options = {});
  std::string class_name() const override { return "MeanSquaredLogarithmicError"; }
};

struct CosineSimilarityOptions {
  std::string name = "cosine_similarity";
  int axis = -1;  // the axis the similarity is taken over
};
// Larger is better ("up"). Keras' get_config leaves the axis out (so a rebuilt metric loses it);
// keel writes it, so that from_config gives back the same metric.
class CosineSimilarity : public MeanMetricWrapper {
 public:
  explicit CosineSimilarity(CosineSimilarityOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CosineSimilarity"; }
  int axis() const { return options_.axis; }

 private:
  CosineSimilarityOptions options_;
};

struct LogCoshErrorOptions {
  std::string name = "logcosh";  // Keras' default name
};
class LogCoshError : public MeanMetricWrapper {
 public:
  explicit LogCoshError(LogCoshErrorOptions options = {});
  std::string class_name() const override { return "LogCoshError"; }
};

struct HingeOptions {
  std::string name = "hinge";
};
class Hinge : public MeanMetricWrapper {
 public:
  explicit Hinge(HingeOptions options = {});
  std::string class_name() const override { return "Hinge"; }
};

struct SquaredHingeOptions {
  std::string name = "squared_hinge";
};
class SquaredHinge : public MeanMetricWrapper {
 public:
  explicit SquaredHinge(SquaredHingeOptions options = {});
  std::string class_name() const override { return "SquaredHinge"; }
};

struct CategoricalHingeOptions {
  std::string name = "categorical_hinge";
};
class CategoricalHinge : public MeanMetricWrapper {
 public:
  explicit CategoricalHinge(CategoricalHingeOptions options = {});
  std::string class_name() const override { return "CategoricalHinge"; }
};

// ---- root mean squared error -----------------------------------------------------------------------

struct RootMeanSquaredErrorOptions {
  std::string name = "root_mean_squared_error";
};
// sqrt of Mean over (y_pred - y_true)^2: each sample's squared errors are averaged to one value
// (over every axis but the first) and weighted by its sample weight, as Keras' Mean does, and
// the square root is taken of the running mean, not averaged per batch.
class RootMeanSquaredError : public Mean {
 public:
  explicit RootMeanSquaredError(RootMeanSquaredErrorOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;
  std::string class_name() const override { return "RootMeanSquaredError"; }
};

// ---- R2 ----------------------------------------------------------------------------------------------

struct R2ScoreOptions {
  // "uniform_average" (the mean of the outputs' scores), "variance_weighted_average" (weighted
  // by each output's total sum of squares) or none (std::nullopt: one score per output, read
  // with results()).
  std::optional<std::string> class_aggregation = "uniform_average";
  int num_regressors = 0;  // >= 0; above 0, the adjusted R2 for that many regressors
  std::string name = "r2_score";
};
// Keras' R2Score on inputs [samples, outputs] (ShapeError for other ranks, or for a number of
// outputs that changes between updates). Per output o, over every update:
//   R2_o = 1 - sum(w (y - p)^2) / (sum(w y^2) - sum(w y)^2 / sum(w)),
// 0 where that is infinite (a constant target with a residual). The adjusted score is
// 1 - (1 - R2) (n - 1) / (n - p - 1), n the samples with a non-zero weight in some output,
// p = num_regressors; it falls back to the plain R2 when p >= n - 1, as Keras does.
class R2Score : public Metric {
 public:
  explicit R2Score(R2ScoreOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  // The aggregated score; without aggregation, the score of a single output (ValueError with
  // several: read results()). 0 before the first update.
  double result() const override;
  std::vector<double> results() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "R2Score"; }
  const std::optional<std::string>& class_aggregation() const { return options_.class_aggregation; }
  int num_regressors() const { return options_.num_regressors; }
  double num_samples() const { return num_samples_; }

 private:
  std::vector<double> raw_scores() const;
  R2ScoreOptions options_;
  std::vector<double> sum_, squared_sum_, total_mse_, count_;  // per output; empty until built
  double num_samples_ = 0;
};

// ---- Sum ---------------------------------------------------------------------------------------------

struct SumOptions {
  std::string name = "sum";
};
// The (weighted) sum of every value given, Keras' Sum: values of higher rank than the weights are
// summed down to the weights' rank, multiplied by them, and everything is added up.
class Sum : public Metric {
 public:
  explicit Sum(SumOptions options = {});
  void update_state(const Tensor& values, const Tensor& sample_weight = {});
  // Sum takes values, not (y_true, y_pred): ValueError, as for Mean.
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) override;
  double result() const override { return total_; }
  void reset_state() override { total_ = 0; }
  std::string class_name() const override { return "Sum"; }

 private:
  double total_ = 0;
};

}  // namespace keel::metrics
