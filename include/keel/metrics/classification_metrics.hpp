#pragma once
// Keras 3's F-scores (keras/src/metrics/f_score_metrics.py) and the threshold-count metrics of
// keras/src/metrics/confusion_metrics.py: TruePositives .. FalseNegatives and the metrics that
// read one rate where another reaches a value (PrecisionAtRecall, SensitivityAtSpecificity, ...).
// Included by keel/metrics/metric.hpp.
//
//   metrics::F1Score f1({.average = "macro", .threshold = 0.5});
//   metrics::PrecisionAtRecall p({.recall = 0.8});
#include <optional>
#include <string>
#include <vector>

#include "keel/metrics/metric.hpp"

namespace keel::metrics {

// ---- F-scores ------------------------------------------------------------------------------------

struct FBetaScoreOptions {
  // std::nullopt: one score per class (results()); "micro": from the counts summed over the
  // classes; "macro": the mean of the classes' scores; "weighted": their mean weighted by each
  // class's (weighted) number of true labels.
  std::optional<std::string> average = std::nullopt;
  double beta = 1.0;  // > 0: recall counts beta times as much as precision
  // A prediction is positive when > threshold, in (0, 1]; std::nullopt: the largest of each row
  // (every entry equal to the row's maximum) unless it is 0 (|p| <= 1e-9).
  std::optional<double> threshold = std::nullopt;
  std::string name = "fbeta_score";
};
// Keras' FBetaScore on [samples, classes] inputs (ShapeError otherwise, or when the number of
// classes changes). Counts per class (summed with "micro"), weighted by sample_weight ([samples]
// or [samples, classes]); then with eps = 1e-7:
//   precision = TP / (TP + FP + eps), recall = TP / (TP + FN + eps),
//   F = (1 + beta^2) precision recall / (beta^2 precision + recall + eps).
class FBetaScore : public Metric {
 public:
  explicit FBetaScore(FBetaScoreOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  // The averaged score; with average none, the score of a single class (ValueError with several:
  // read results()). 0 before the first update.
  double result() const override;
  std::vector<double> results() const override;  // one per class with average none
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "FBetaScore"; }
  const std::optional<std::string>& average() const { return options_.average; }
  double beta() const { return options_.beta; }
  const std::optional<double>& threshold() const { return options_.threshold; }

 protected:
  FBetaScoreOptions options_;

 private:
  std::vector<double> tp_, fp_, fn_, weights_;  // per class (one entry for "micro"); empty until built
  std::size_t classes_ = 0;
};

struct F1ScoreOptions {
  std::optional<std::string> average = std::nullopt;
  std::optional<double> threshold = std::nullopt;
  std::string name = "f1_score";
};
// FBetaScore with beta = 1: 2 precision recall / (precision + recall). Its config has no beta.
class F1Score : public FBetaScore {
 public:
  explicit F1Score(F1ScoreOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "F1Score"; }
};

// ---- confusion-matrix counts ------------------------------------------------------------------------
// The weighted number of true positives (etc.) at each threshold, the rules of Precision's
// counts (y_pred > threshold, y_true != 0, evenly spaced thresholds bucketed as Keras). The
// thresholds default to 0.5; a list gives one count per threshold (results()).

struct TruePositivesOptions {
  Thresholds thresholds = {};
  std::string name = "true_positives";
};
struct FalsePositivesOptions {
  Thresholds thresholds = {};
  std::string name = "false_positives";
};
struct TrueNegativesOptions {
  Thresholds thresholds = {};
  std::string name = "true_negatives";
};
struct FalseNegativesOptions {
  Thresholds thresholds = {};
  std::string name = "false_negatives";
};

// Keras' _ConfusionMatrixConditionCount: the shared body of the four count metrics.
class ConfusionMatrixConditionCount : public Metric {
 public:
  enum class Condition { true_positives, false_positives, true_negatives, false_negatives };
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;  // ValueError with several thresholds: read results()
  std::vector<double> results() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  const std::vector<double>& thresholds() const { return thresholds_; }

 protected:
  ConfusionMatrixConditionCount(Condition condition, Thresholds thresholds, std::string name);

 private:
  Condition condition_;
  Thresholds init_thresholds_;  // as given: what get_config writes
  std::vector<double> thresholds_;
  bool evenly_;
  detail::ConfusionCounts counts_;
};

class TruePositives : public ConfusionMatrixConditionCount {
 public:
  explicit TruePositives(TruePositivesOptions options = {});
  std::string class_name() const override { return "TruePositives"; }
};
class FalsePositives : public ConfusionMatrixConditionCount {
 public:
  explicit FalsePositives(FalsePositivesOptions options = {});
  std::string class_name() const override { return "FalsePositives"; }
};
class TrueNegatives : public ConfusionMatrixConditionCount {
 public:
  explicit TrueNegatives(TrueNegativesOptions options = {});
  std::string class_name() const override { return "TrueNegatives"; }
};
class FalseNegatives : public ConfusionMatrixConditionCount {
 public:
  explicit FalseNegatives(FalseNegativesOptions options = {});
  std::string class_name() const override { return "FalseNegatives"; }
};

// ---- one rate where another reaches a value -----------------------------------------------------
// Keras' SensitivitySpecificityBase: counts at num_thresholds thresholds 0, 1/(n-1), ..., 1
// (bucketed as Keras; one threshold, 0.5, when num_thresholds is 1), optionally of one class
// (class_id, the last axis). The result is the largest `dependent` rate among the thresholds
// whose `constrained` rate is >= the value, 0 when there is none. The value is required and must
// be in [0, 1] (ValueError otherwise); num_thresholds must be > 0.

struct PrecisionAtRecallOptions {
  std::optional<double> recall = std::nullopt;  // required
  int num_thresholds = 200;
  std::optional<int> class_id = std::nullopt;
  std::string name = "precision_at_recall";
};
struct RecallAtPrecisionOptions {
  std::optional<double> precision = std::nullopt;  // required
  int num_thresholds = 200;
  std::optional<int> class_id = std::nullopt;
  std::string name = "recall_at_precision";
};
struct SensitivityAtSpecificityOptions {
  std::optional<double> specificity = std::nullopt;  // required
  int num_thresholds = 200;
  std::optional<int> class_id = std::nullopt;
  std::string name = "sensitivity_at_specificity";
};
struct SpecificityAtSensitivityOptions {
  std::optional<double> sensitivity = std::nullopt;  // required
  int num_thresholds = 200;
  std::optional<int> class_id = std::nullopt;
  std::string name = "specificity_at_sensitivity";
};

class SensitivitySpecificityBase : public Metric {
 public:
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  void reset_state() override;
  const std::vector<double>& thresholds() const { return thresholds_; }
  double value() const { return value_; }
  const std::vector<double>& true_positives() const { return counts_.tp; }
  const std::vector<double>& false_positives() const { return counts_.fp; }
  const std::vector<double>& true_negatives() const { return counts_.tn; }
  const std::vector<double>& false_negatives() const { return counts_.fn; }

 protected:
  SensitivitySpecificityBase(std::string name, const char* cls, const char* what, std::optional<double> value,
                             int num_thresholds, std::optional<int> class_id);
  // max over thresholds of dependent[i] where constrained[i] >= value(), else 0.
  double max_under_constraint(const std::vector<double>& constrained, const std::vector<double>& dependent) const;
  std::vector<double> sensitivities() const;  // TP / (TP + FN), = recall
  std::vector<double> specificities() const;  // TN / (TN + FP)
  std::vector<double> precisions() const;     // TP / (TP + FP)

 private:
  double value_;
  std::optional<int> class_id_;
  std::vector<double> thresholds_;
  bool evenly_;
  detail::ConfusionCounts counts_;
};

class PrecisionAtRecall : public SensitivitySpecificityBase {
 public:
  explicit PrecisionAtRecall(PrecisionAtRecallOptions options = {});
  double result() const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "PrecisionAtRecall"; }

 private:
  PrecisionAtRecallOptions options_;
};
class RecallAtPrecision : public SensitivitySpecificityBase {
 public:
  explicit RecallAtPrecision(RecallAtPrecisionOptions options = {});
  double result() const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "RecallAtPrecision"; }

 private:
  RecallAtPrecisionOptions options_;
};
class SensitivityAtSpecificity : public SensitivitySpecificityBase {
 public:
  explicit SensitivityAtSpecificity(SensitivityAtSpecificityOptions options = {});
  double result() const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SensitivityAtSpecificity"; }

 private:
  SensitivityAtSpecificityOptions options_;
};
class SpecificityAtSensitivity : public SensitivitySpecificityBase {
 public:
  explicit SpecificityAtSensitivity(SpecificityAtSensitivityOptions options = {});
  double result() const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SpecificityAtSensitivity"; }

 private:
  SpecificityAtSensitivityOptions options_;
};

}  // namespace keel::metrics
