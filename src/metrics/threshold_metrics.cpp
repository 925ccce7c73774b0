// Keras 3's F-scores (keras/src/metrics/f_score_metrics.py) and the threshold-count metrics of
// keras/src/metrics/confusion_metrics.py: TruePositives .. FalseNegatives and the
// SensitivitySpecificityBase family. The counting is Precision's (confusion_counting.hpp).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/metrics/metric.hpp"
#include "keel/ops/shape.hpp"
#include "metrics/confusion_counting.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

using util::divide_no_nan;
using util::kEpsilon;

// ---- FBetaScore -----------------------------------------------------------------------------------

FBetaScore::FBetaScore(FBetaScoreOptions o) : Metric(o.name), options_(std::move(o)) {
  const auto& a = options_.average;
  if (a && *a != "micro" && *a != "macro" && *a != "weighted")
    throw ValueError(fmt::format(
        "{}: invalid average \"{}\"; expected none, \"micro\", \"macro\" or \"weighted\"", "FBetaScore", *a));
  if (!(options_.beta > 0)) throw ValueError(fmt::format("FBetaScore: beta must be > 0, got {}", options_.beta));
  if (options_.threshold && !(*options_.threshold > 0 && *options_.threshold <= 1))
    throw ValueError(fmt::format("FBetaScore: threshold must satisfy 0 < threshold <= 1, got {}", *options_.threshold));
  set_direction("up");
}

void FBetaScore::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const Tensor t = util::host_as(y_true, DType::float64, name(), "y_true");
  const Tensor p = util::host_as(y_pred, DType::float64, name(), "y_pred");
  if (t.rank() != 2 || p.rank() != 2 || t.shape() != p.shape())
    throw ShapeError(fmt::format(
        "{} ({}): expects y_true and y_pred of one shape [batch_size, output_dim], got y_true {} and y_pred {}",
        name(), class_name(), y_true.shape().to_string(), y_pred.shape().to_string()));
  const auto rows = static_cast<std::size_t>(p.shape()[0]);
  const auto classes = static_cast<std::size_t>(p.shape()[1]);
  const bool micro = options_.average && *options_.average == "micro";
  if (tp_.empty()) {
    classes_ = classes;
    const std::size_t size = micro ? 1 : classes;
    for (auto* v : {&tp_, &fp_, &fn_, &weights_}) v->assign(size, 0.0);
  } else if (classes != classes_) {
    throw ShapeError(fmt::format("{} ({}): the metric was built for {} classes, but y_pred {} has {}", name(),
                                 class_name(), classes_, y_pred.shape().to_string(), classes));
  }
  std::vector<double> w(rows * classes, 1.0);
  if (sample_weight.defined()) {
    // Weights of lower rank get trailing axes ([samples] -> [samples, 1]) and broadcast.
    Tensor sw = util::host_as(sample_weight, DType::float64, name(), "sample_weight");
    while (sw.rank() < 2 && sw.rank() > 0) sw = expand_dims(sw, -1);
    try {
      w = broadcast_to(sw, p.shape()).to_vector<double>();
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("{} ({}): sample_weight {} does not broadcast to y_pred {}", name(), class_name(),
                                   sample_weight.shape().to_string(), y_pred.shape().to_string()));
    }
  }
  const auto yt = t.to_vector<double>(), yp = p.to_vector<double>();
  for (std::size_t r = 0; r < rows; ++r) {
    const double* row = yp.data() + r * classes;
    const double row_max = classes ? *std::max_element(row, row + classes) : 0.0;
    for (std::size_t c = 0; c < classes; ++c) {
      const std::size_t i = r * classes + c;
      // Without a threshold the row's maximum is the prediction, unless it is 0 ([0, 0, 0] is
      // not [1, 1, 1]); with one, y_pred > threshold.
      const double pred = options_.threshold ? (row[c] > *options_.threshold ? 1.0 : 0.0)
                                             : (row[c] >= row_max && std::abs(row[c]) > 1e-9 ? 1.0 : 0.0);
      const std::size_t at = micro ? 0 : c;
      tp_[at] += w[i] * pred * yt[i];
      fp_[at] += w[i] * pred * (1.0 - yt[i]);
      fn_[at] += w[i] * (1.0 - pred) * yt[i];
      weights_[at] += w[i] * yt[i];
    }
  }
}

std::vector<double> FBetaScore::results() const {
  if (tp_.empty()) return {0.0};
  const double b2 = options_.beta * options_.beta;
  std::vector<double> f(tp_.size());
  for (std::size_t c = 0; c < f.size(); ++c) {
    const double precision = tp_[c] / (tp_[c] + fp_[c] + kEpsilon);
    const double recall = tp_[c] / (tp_[c] + fn_[c] + kEpsilon);
    f[c] = (1 + b2) * precision * recall / (b2 * precision + recall + kEpsilon);
  }
  if (!options_.average) return f;
  if (*options_.average == "weighted") {
    const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
    double score = 0;
    for (std::size_t c = 0; c < f.size(); ++c) score += f[c] * weights_[c] / (total + kEpsilon);
    return {score};
  }
  return {std::accumulate(f.begin(), f.end(), 0.0) / static_cast<double>(f.size())};  // micro, macro
}

double FBetaScore::result() const {
  const std::vector<double> scores = results();
  if (scores.size() == 1) return scores[0];
  throw ValueError(fmt::format(
      "{} '{}': result() gives one number, but average is none and there are {} classes; read results() for one "
      "score per class",
      class_name(), name(), scores.size()));
}

void FBetaScore::reset_state() {
  for (auto* v : {&tp_, &fp_, &fn_, &weights_}) v->assign(v->size(), 0.0);
}

F1Score::F1Score(F1ScoreOptions o)
    : FBetaScore({.average = o.average, .beta = 1.0, .threshold = o.threshold, .name = o.name}) {}

// ---- TruePositives .. FalseNegatives ------------------------------------------------------------------

namespace {

const char* class_of(ConfusionMatrixConditionCount::Condition c) {
  using C = ConfusionMatrixConditionCount::Condition;
  return c == C::true_positives ? "TruePositives"
         : c == C::false_positives ? "FalsePositives"
         : c == C::true_negatives  ? "TrueNegatives"
                                   : "FalseNegatives";
}

}  // namespace

ConfusionMatrixConditionCount::ConfusionMatrixConditionCount(Condition condition, Thresholds thresholds,
                                                             std::string name)
    : Metric(std::move(name)),
      condition_(condition),
      init_thresholds_(std::move(thresholds)),
      thresholds_(detail::applied_thresholds(init_thresholds_, std::nullopt, class_of(condition))),
      evenly_(detail::evenly_distributed(thresholds_)) {
  reset_state();
}

void ConfusionMatrixConditionCount::update_state(const Tensor& y_true, const Tensor& y_pred,
                                                 const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const auto in = detail::confusion_inputs(y_true, y_pred, sample_weight, std::nullopt, std::nullopt, name());
  detail::count(in, thresholds_, evenly_, 1, counts_);
}

std::vector<double> ConfusionMatrixConditionCount::results() const {
  switch (condition_) {
    case Condition::true_positives: return counts_.tp;
    case Condition::false_positives: return counts_.fp;
    case Condition::true_negatives: return counts_.tn;
    case Condition::false_negatives: break;
  }
  return counts_.fn;
}

double ConfusionMatrixConditionCount::result() const {
  return detail::single(results(), thresholds_, *this, "result");
}

void ConfusionMatrixConditionCount::reset_state() { counts_.reset(thresholds_.size()); }

TruePositives::TruePositives(TruePositivesOptions o)
    : ConfusionMatrixConditionCount(Condition::true_positives, std::move(o.thresholds), std::move(o.name)) {}
FalsePositives::FalsePositives(FalsePositivesOptions o)
    : ConfusionMatrixConditionCount(Condition::false_positives, std::move(o.thresholds), std::move(o.name)) {}
TrueNegatives::TrueNegatives(TrueNegativesOptions o)
    : ConfusionMatrixConditionCount(Condition::true_negatives, std::move(o.thresholds), std::move(o.name)) {}
FalseNegatives::FalseNegatives(FalseNegativesOptions o)
    : ConfusionMatrixConditionCount(Condition::false_negatives, std::move(o.thresholds), std::move(o.name)) {}

// ---- SensitivitySpecificityBase ---------------------------------------------------------------------

namespace {

double checked_value(const char* cls, const char* what, std::optional<double> value) {
  if (!value) throw ValueError(fmt::format("{}: the argument {} is required", cls, what));
  if (!(*value >= 0 && *value <= 1))
    throw ValueError(fmt::format("{}: {} must be in the range [0, 1], got {}", cls, what, *value));
  return *value;
}

// Keras' grid: 0, (i + 1) / (n - 1) for i < n - 2, 1 (evenly spaced, so bucketed); 0.5 for n = 1.
std::vector<double> grid_of(const char* cls, int num_thresholds) {
  if (num_thresholds <= 0)
    throw ValueError(fmt::format("{}: num_thresholds must be an integer > 0, got {}", cls, num_thresholds));
  if (num_thresholds == 1) return {0.5};
  std::vector<double> grid{0.0};
  for (int i = 0; i < num_thresholds - 2; ++i) grid.push_back((i + 1) * 1.0 / (num_thresholds - 1));
  grid.push_back(1.0);
  return grid;
}

}  // namespace

SensitivitySpecificityBase::SensitivitySpecificityBase(std::string name, const char* cls, const char* what,
                                                       std::optional<double> value, int num_thresholds,
                                                       std::optional<int> class_id)
    : Metric(std::move(name)),
      value_(checked_value(cls, what, value)),
      class_id_(class_id),
      thresholds_(grid_of(cls, num_thresholds)),
      evenly_(num_thresholds > 1) {
  if (class_id_ && *class_id_ < 0) throw ValueError(fmt::format("{}: class_id must be >= 0, got {}", cls, *class_id_));
  reset_state();
  set_direction("up");
}

void SensitivitySpecificityBase::update_state(const Tensor& y_true, const Tensor& y_pred,
                                              const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const auto in = detail::confusion_inputs(y_true, y_pred, sample_weight, std::nullopt, class_id_, name());
  detail::count(in, thresholds_, evenly_, 1, counts_);
}

void SensitivitySpecificityBase::reset_state() { counts_.reset(thresholds_.size()); }

double SensitivitySpecificityBase::max_under_constraint(const std::vector<double>& constrained,
                                                        const std::vector<double>& dependent) const {
  double best = 0;  // Keras' max(where(feasible, dependent, 0), initial=0)
  for (std::size_t i = 0; i < constrained.size(); ++i)
    if (constrained[i] >= value_) best = std::max(best, dependent[i]);
  return best;
}

std::vector<double> SensitivitySpecificityBase::sensitivities() const {
  std::vector<double> out(counts_.tp.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = divide_no_nan(counts_.tp[i], counts_.tp[i] + counts_.fn[i]);
  return out;
}

std::vector<double> SensitivitySpecificityBase::specificities() const {
  std::vector<double> out(counts_.tn.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = divide_no_nan(counts_.tn[i], counts_.tn[i] + counts_.fp[i]);
  return out;
}

std::vector<double> SensitivitySpecificityBase::precisions() const {
  std::vector<double> out(counts_.tp.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = divide_no_nan(counts_.tp[i], counts_.tp[i] + counts_.fp[i]);
  return out;
}

PrecisionAtRecall::PrecisionAtRecall(PrecisionAtRecallOptions o)
    : SensitivitySpecificityBase(o.name, "PrecisionAtRecall", "recall", o.recall, o.num_thresholds, o.class_id),
      options_(std::move(o)) {}
double PrecisionAtRecall::result() const { return max_under_constraint(sensitivities(), precisions()); }

RecallAtPrecision::RecallAtPrecision(RecallAtPrecisionOptions o)
    : SensitivitySpecificityBase(o.name, "RecallAtPrecision", "precision", o.precision, o.num_thresholds,
                                 o.class_id),
      options_(std::move(o)) {}
double RecallAtPrecision::result() const { return max_under_constraint(precisions(), sensitivities()); }

SensitivityAtSpecificity::SensitivityAtSpecificity(SensitivityAtSpecificityOptions o)
    : SensitivitySpecificityBase(o.name, "SensitivityAtSpecificity", "specificity", o.specificity, o.num_thresholds,
                                 o.class_id),
      options_(std::move(o)) {}
double SensitivityAtSpecificity::result() const { return max_under_constraint(specificities(), sensitivities()); }

SpecificityAtSensitivity::SpecificityAtSensitivity(SpecificityAtSensitivityOptions o)
    : SensitivitySpecificityBase(o.name, "SpecificityAtSensitivity", "sensitivity", o.sensitivity, o.num_thresholds,
                                 o.class_id),
      options_(std::move(o)) {}
double SpecificityAtSensitivity::result() const { return max_under_constraint(sensitivities(), specificities()); }

}  // namespace keel::metrics
