// The confusion-matrix metrics: Precision, Recall and AUC, after Keras 3's
// keras/src/metrics/confusion_metrics.py and metrics_utils.update_confusion_matrix_variables.
//
// Each update flattens its batch on the host into (prediction, label, weight) triples and adds
// them to per-threshold counts of true/false positives/negatives. The counts are laid out
// [threshold][label]: one label for Precision, Recall and a flattened AUC, one per output for a
// multi-label AUC. Predictions are compared with thresholds in float32, as Keras' float32
// variables do, so that a prediction lands on the same side of a threshold.
#include "keel/metrics/metric.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "metrics/confusion_counting.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

void detail::ConfusionCounts::reset(std::size_t size) {
  tp.assign(size, 0.0);
  fp.assign(size, 0.0);
  tn.assign(size, 0.0);
  fn.assign(size, 0.0);
}

namespace {

using detail::ConfusionCounts;
using util::divide_no_nan;
using util::host_as;
using util::kEpsilon;
using util::kNegInf;

// ---- inputs -------------------------------------------------------------------------------------

// Only the k largest of each row stay; the others become NEG_INF, below every threshold. Ties go
// to the lower index, as top_k orders them.
void keep_top_k(std::vector<float>& pred, std::size_t width, std::size_t k) {
  std::vector<std::size_t> order(width);
  for (std::size_t r = 0; width > 0 && r < pred.size() / width; ++r) {
    float* row = pred.data() + r * width;
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [row](std::size_t a, std::size_t b) { return row[a] > row[b]; });
    for (std::size_t j = k; j < width; ++j) row[order[j]] = kNegInf;
  }
}

// Column `column` of rows of `width`: y[..., class_id].
std::vector<float> column_of(const std::vector<float>& v, std::size_t width, std::size_t column) {
  std::vector<float> out(v.size() / width);
  for (std::size_t r = 0; r < out.size(); ++r) out[r] = v[r * width + column];
  return out;
}

}  // namespace

namespace detail {

// Keras' update_confusion_matrix_variables up to the counting: ranks aligned, y_true and y_pred
// of one shape, per-sample weights broadcast over the rest of each sample, top_k and class_id.
ConfusionInputs confusion_inputs(const Tensor& y_true, const Tensor& y_pred_in, const Tensor& sample_weight,
                                 std::optional<int> top_k, std::optional<int> class_id, const std::string& who) {
  Tensor pred = host_as(y_pred_in, DType::float32, who, "y_pred");
  Tensor label = host_as(y_true, DType::float32, who, "y_true");
  std::tie(pred, label) = losses::squeeze_or_expand_to_same_rank(pred, label);
  if (pred.shape() != label.shape())
    throw ShapeError(fmt::format("{}: y_true and y_pred must have the same shape, got {} and {}", who,
                                 y_true.shape().to_string(), y_pred_in.shape().to_string()));
  Tensor weight;
  if (sample_weight.defined()) {
    // A trailing axis is added and then squeezed again when it is not needed: per-sample
    // weights [N] apply to whole rows of [N, K] predictions, and [N] to [N].
    weight = expand_dims(host_as(sample_weight, DType::float64, who, "sample_weight"), -1);
    weight = losses::squeeze_or_expand_to_same_rank(label, weight, /*expand_rank_1=*/false).second;
  }

  ConfusionInputs in;
  in.pred = pred.to_vector<float>();
  std::vector<float> labels = label.to_vector<float>();
  std::vector<std::int64_t> dims = pred.shape().dims();
  const std::int64_t last = dims.empty() ? 1 : dims.back();
  if (top_k) keep_top_k(in.pred, static_cast<std::size_t>(last), static_cast<std::size_t>(*top_k));
  if (class_id) {
    if (dims.size() < 2)
      throw ValueError(fmt::format("{}: class_id needs y_pred of shape [samples, classes], got {}", who,
                                   y_pred_in.shape().to_string()));
    if (*class_id < 0 || *class_id >= last)
      throw ValueError(fmt::format("{}: class_id {} is outside the {} classes of y_pred {}", who, *class_id, last,
                                   y_pred_in.shape().to_string()));
    in.pred = column_of(in.pred, static_cast<std::size_t>(last), static_cast<std::size_t>(*class_id));
    labels = column_of(labels, static_cast<std::size_t>(last), static_cast<std::size_t>(*class_id));
    dims.back() = 1;  // y[..., class_id, None]
  }
  in.positive.resize(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) in.positive[i] = labels[i] != 0.0f ? 1 : 0;
  if (weight.defined()) {
    try {
      in.weight = broadcast_to(weight, Shape(dims)).to_vector<double>();
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("{}: sample_weight {} does not broadcast to y_pred {}", who,
                                   sample_weight.shape().to_string(), y_pred_in.shape().to_string()));
    }
  }
  in.rank = dims.size();
  in.width = dims.size() >= 2 ? static_cast<std::size_t>(dims.back()) : 1;
  return in;
}

// ---- counting -----------------------------------------------------------------------------------

// Keras' is_evenly_distributed_thresholds: equal to arange(n) / (n - 1) (float32) within
// numpy.allclose's tolerances.
bool evenly_distributed(const std::vector<double>& thresholds) {
  const std::size_t n = thresholds.size();
  if (n < 3) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const double even = static_cast<double>(static_cast<float>(i) / static_cast<float>(n - 1));
    if (std::abs(thresholds[i] - even) > kEpsilon + 1e-5 * std::abs(even)) return false;
  }
  return true;
}

// Keras' optimised update for evenly spaced thresholds. Each prediction (clipped to [0, 1]) falls
// in one bucket between neighbouring thresholds, ceil(p (n - 1)) - 1 in float32 (strictly above
// its lower threshold), clipped at 0 when the first threshold is below 0; the count above
// threshold j is the sum of the buckets from j up. Element i belongs to curve i % labels.
static void count_bucketed(const ConfusionInputs& in, const std::vector<double>& thresholds, std::size_t labels,
                    ConfusionCounts& c) {
  const std::size_t n = thresholds.size();
  std::vector<double> tp_bucket(n * labels, 0.0), fp_bucket(n * labels, 0.0);
  std::vector<double> total_true(labels, 0.0), total_false(labels, 0.0);
  const auto steps = static_cast<float>(n - 1);
  const bool with_epsilon = thresholds.front() < 0.0 || thresholds.back() > 1.0;
  for (std::size_t i = 0; i < in.pred.size(); ++i) {
    const std::size_t l = i % labels;
    float bucket = std::ceil(std::clamp(in.pred[i], 0.0f, 1.0f) * steps) - 1.0f;
    if (with_epsilon) bucket = std::max(bucket, 0.0f);
    const double w = in.w(i);
    (in.positive[i] ? total_true : total_false)[l] += w;
    if (!(bucket >= 0.0f)) continue;  // above no threshold (or NaN)
    (in.positive[i] ? tp_bucket : fp_bucket)[static_cast<std::size_t>(bucket) * labels + l] += w;
  }
  for (std::size_t l = 0; l < labels; ++l) {
    double tp_above = 0, fp_above = 0;
    for (std::size_t j = n; j-- > 0;) {
      const std::size_t at = j * labels + l;
      tp_above += tp_bucket[at];
      fp_above += fp_bucket[at];
      c.tp[at] += tp_above;
      c.fp[at] += fp_above;
      c.fn[at] += total_true[l] - tp_above;
      c.tn[at] += total_false[l] - fp_above;
    }
  }
}

// The general update: every prediction against every threshold (no clipping).
static void count_direct(const ConfusionInputs& in, const std::vector<double>& thresholds, std::size_t labels,
                  ConfusionCounts& c) {
  std::vector<float> th(thresholds.begin(), thresholds.end());
  for (std::size_t i = 0; i < in.pred.size(); ++i) {
    const std::size_t l = i % labels;
    const double w = in.w(i);
    for (std::size_t j = 0; j < th.size(); ++j) {
      const bool predicted = in.pred[i] > th[j];
      const std::size_t at = j * labels + l;
      if (in.positive[i])
        (predicted ? c.tp : c.fn)[at] += w;
      else
        (predicted ? c.fp : c.tn)[at] += w;
    }
  }
}

void count(const ConfusionInputs& in, const std::vector<double>& thresholds, bool evenly, std::size_t labels,
           ConfusionCounts& c) {
  if (evenly)
    count_bucketed(in, thresholds, labels, c);
  else
    count_direct(in, thresholds, labels, c);
}

// ---- Precision / Recall helpers -------------------------------------------------------------------

// Keras' parse_init_thresholds: those given, each in [0, 1]; or 0.5; or with top_k, NEG_INF
// (every top-k prediction is positive).
std::vector<double> applied_thresholds(const Thresholds& t, const std::optional<int>& top_k, const char* who) {
  if (!t.has_value()) return {top_k ? static_cast<double>(kNegInf) : 0.5};
  if (t.values().empty()) throw ValueError(fmt::format("{}: thresholds is an empty list", who));
  for (const double v : t.values())
    if (!(v >= 0 && v <= 1))
      throw ValueError(fmt::format("{}: threshold values must be in [0, 1], got {}", who, v));
  return t.values();
}

static void check_top_k_class_id(const std::optional<int>& top_k, const std::optional<int>& class_id, const char* who) {
  if (top_k && *top_k < 1) throw ValueError(fmt::format("{}: top_k must be >= 1, got {}", who, *top_k));
  if (class_id && *class_id < 0) throw ValueError(fmt::format("{}: class_id must be >= 0, got {}", who, *class_id));
}

static std::string list_of(const std::vector<double>& v) {
  std::string s;
  for (const double x : v) s += (s.empty() ? "" : ", ") + fmt::format("{}", x);
  return "[" + s + "]";
}

// The one value of a single-threshold metric; with several, a ValueError that says what to read.
double single(const std::vector<double>& values, const std::vector<double>& thresholds, const Metric& m,
              const char* what) {
  if (values.size() == 1) return values[0];
  throw ValueError(fmt::format(
      "{} '{}': {}() gives one number, but the metric has {} thresholds {}; read results() for one value per "
      "threshold",
      m.class_name(), m.name(), what, thresholds.size(), list_of(thresholds)));
}

static std::vector<double> ratios(const std::vector<double>& tp, const std::vector<double>& other) {
  std::vector<double> out(tp.size());
  for (std::size_t i = 0; i < tp.size(); ++i) out[i] = divide_no_nan(tp[i], tp[i] + other[i]);
  return out;
}

}  // namespace detail

using namespace detail;  // NOLINT: this file is the counting's home

// ---- Precision ------------------------------------------------------------------------------------

Precision::Precision(PrecisionOptions o)
    : Metric(std::move(o.name)),
      options_(o),
      thresholds_(applied_thresholds(o.thresholds, o.top_k, "Precision")),
      evenly_(evenly_distributed(thresholds_)) {
  check_top_k_class_id(options_.top_k, options_.class_id, "Precision");
  reset_state();
  set_direction("up");
}

void Precision::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const ConfusionInputs in = confusion_inputs(y_true, y_pred, sample_weight, options_.top_k, options_.class_id, name());
  count(in, thresholds_, evenly_, 1, counts_);
}

std::vector<double> Precision::results() const { return ratios(counts_.tp, counts_.fp); }
double Precision::result() const { return single(results(), thresholds_, *this, "result"); }
double Precision::true_positives() const { return single(counts_.tp, thresholds_, *this, "true_positives"); }
double Precision::false_positives() const { return single(counts_.fp, thresholds_, *this, "false_positives"); }
void Precision::reset_state() { counts_.reset(thresholds_.size()); }

// ---- Recall ---------------------------------------------------------------------------------------

Recall::Recall(RecallOptions o)
    : Metric(std::move(o.name)),
      options_(o),
      thresholds_(applied_thresholds(o.thresholds, o.top_k, "Recall")),
      evenly_(evenly_distributed(thresholds_)) {
  check_top_k_class_id(options_.top_k, options_.class_id, "Recall");
  reset_state();
  set_direction("up");
}

void Recall::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const ConfusionInputs in = confusion_inputs(y_true, y_pred, sample_weight, options_.top_k, options_.class_id, name());
  count(in, thresholds_, evenly_, 1, counts_);
}

std::vector<double> Recall::results() const { return ratios(counts_.tp, counts_.fn); }
double Recall::result() const { return single(results(), thresholds_, *this, "result"); }
double Recall::true_positives() const { return single(counts_.tp, thresholds_, *this, "true_positives"); }
double Recall::false_negatives() const { return single(counts_.fn, thresholds_, *this, "false_negatives"); }
void Recall::reset_state() { counts_.reset(thresholds_.size()); }

// ---- AUC ------------------------------------------------------------------------------------------

namespace {

std::string checked_curve(const std::string& curve) {
  if (curve == "ROC" || curve == "roc") return "ROC";
  if (curve == "PR" || curve == "pr") return "PR";
  throw ValueError(fmt::format("AUC: invalid curve \"{}\"; expected \"ROC\" or \"PR\"", curve));
}

std::string checked_summation(const std::string& method) {
  const std::string m = util::lower(method);
  if (m != "interpolation" && m != "minoring" && m != "majoring")
    throw ValueError(fmt::format(
        "AUC: invalid summation_method \"{}\"; expected \"interpolation\", \"majoring\" or \"minoring\"", method));
  return m;
}

// The grid with its end points: the sorted thresholds given, or num_thresholds - 2 evenly spaced
// ones, between 0 - eps and 1 + eps, which put predictions of exactly 0 and 1 inside the grid
// (everything is above the first threshold, nothing above the last).
std::vector<double> threshold_grid(const AUCOptions& o) {
  std::vector<double> grid{0.0 - kEpsilon};
  if (!o.thresholds.empty()) {
    std::vector<double> interior = o.thresholds;
    std::sort(interior.begin(), interior.end());
    grid.insert(grid.end(), interior.begin(), interior.end());
  } else {
    if (o.num_thresholds <= 1)
      throw ValueError(fmt::format("AUC: num_thresholds must be an integer > 1, got {}", o.num_thresholds));
    for (int i = 0; i < o.num_thresholds - 2; ++i)
      grid.push_back(static_cast<double>(i + 1) / static_cast<double>(o.num_thresholds - 1));
  }
  grid.push_back(1.0 + kEpsilon);
  return grid;
}

// Keras tests [0, sorted thresholds..., 1] for even spacing; the default grid always is.
bool grid_is_even(const AUCOptions& o, const std::vector<double>& grid) {
  if (o.thresholds.empty()) return true;
  std::vector<double> with_ends(grid);
  with_ends.front() = 0.0;
  with_ends.back() = 1.0;
  return evenly_distributed(with_ends);
}

std::vector<double> checked_label_weights(const AUCOptions& o) {
  for (const double w : o.label_weights)
    if (!(w >= 0)) throw ValueError(fmt::format("AUC: label_weights must be non-negative, got {}", w));
  if (o.multi_label && o.num_labels && !o.label_weights.empty() &&
      o.label_weights.size() != static_cast<std::size_t>(*o.num_labels))
    throw ValueError(fmt::format("AUC: {} label_weights for num_labels = {}", o.label_weights.size(), *o.num_labels));
  return o.label_weights;
}

int initial_labels(const AUCOptions& o) {
  if (!o.num_labels) return o.multi_label ? 0 : 1;  // 0: sized at the first update
  if (!o.multi_label)
    throw ValueError(fmt::format("AUC: num_labels is needed only when multi_label is true, got num_labels = {}",
                                 *o.num_labels));
  if (*o.num_labels < 1) throw ValueError(fmt::format("AUC: num_labels must be >= 1, got {}", *o.num_labels));
  return *o.num_labels;
}

// Davis & Goadrich's interpolation of one curve, in Keras' closed form: between neighbouring
// thresholds TP and P = TP + FP vary linearly, precision = TP / P does not, and its integral
// over recall is slope (dTP + intercept log(P_i / P_i+1)) / total positives.
double interpolated_pr_area(const ConfusionCounts& c, std::size_t label, std::size_t labels) {
  const std::size_t n = c.tp.size() / labels;
  const auto at = [&](const std::vector<double>& v, std::size_t j) { return v[j * labels + label]; };
  double auc = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const double dtp = at(c.tp, i) - at(c.tp, i + 1);
    const double p0 = at(c.tp, i) + at(c.fp, i), p1 = at(c.tp, i + 1) + at(c.fp, i + 1);
    const double slope = divide_no_nan(dtp, std::max(p0 - p1, 0.0));
    const double intercept = at(c.tp, i + 1) - slope * p1;
    const double ratio = (p0 > 0 && p1 > 0) ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
    auc += divide_no_nan(slope * (dtp + intercept * std::log(ratio)),
                         std::max(at(c.tp, i + 1) + at(c.fn, i + 1), 0.0));
  }
  return auc;
}

// The Riemann sum of one curve: ROC (x = FPR, y = TPR) or PR (x = recall, y = precision).
// Thresholds rise with i, so x falls: each term is a width x_i - x_i+1 >= 0 times a height.
double riemann_area(const ConfusionCounts& c, std::size_t label, std::size_t labels, const std::string& curve,
                    const std::string& method) {
  const std::size_t n = c.tp.size() / labels;
  std::vector<double> x(n), y(n);
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t at = j * labels + label;
    const double recall = divide_no_nan(c.tp[at], c.tp[at] + c.fn[at]);
    if (curve == "ROC") {
      x[j] = divide_no_nan(c.fp[at], c.fp[at] + c.tn[at]);
      y[j] = recall;
    } else {
      x[j] = recall;
      y[j] = divide_no_nan(c.tp[at], c.tp[at] + c.fp[at]);
    }
  }
  double auc = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const double height = method == "interpolation" ? (y[i] + y[i + 1]) / 2.0
                          : method == "minoring"    ? std::min(y[i], y[i + 1])
                                                    : std::max(y[i], y[i + 1]);
    auc += (x[i] - x[i + 1]) * height;
  }
  return auc;
}

// Each element's weight times its label's (the last axis of y_pred): Keras' label_weights on
// flattened data.
void apply_label_weights(ConfusionInputs& in, const std::vector<double>& label_weights, const Tensor& y_pred,
                         const std::string& who) {
  const std::size_t k = label_weights.size();
  if (k != 1 && (in.rank < 2 || in.width != k))
    throw ShapeError(fmt::format("{}: {} label_weights need y_pred with a last axis of {} labels, got shape {}", who,
                                 k, k, y_pred.shape().to_string()));
  if (in.weight.empty()) in.weight.assign(in.pred.size(), 1.0);
  for (std::size_t i = 0; i < in.weight.size(); ++i) in.weight[i] *= label_weights[k == 1 ? 0 : i % k];
}

}  // namespace

AUC::AUC(AUCOptions o)
    : Metric(std::move(o.name)),
      num_thresholds_(o.thresholds.empty() ? o.num_thresholds : static_cast<int>(o.thresholds.size()) + 2),
      curve_(checked_curve(o.curve)),
      summation_method_(checked_summation(o.summation_method)),
      multi_label_(o.multi_label),
      init_num_labels_(o.num_labels),
      labels_(initial_labels(o)),
      label_weights_(checked_label_weights(o)),
      from_logits_(o.from_logits),
      init_from_thresholds_(!o.thresholds.empty()),
      thresholds_(threshold_grid(o)) {
  evenly_ = grid_is_even(o, thresholds_);
  reset_state();
  set_direction("up");
}

void AUC::reset_state() {
  counts_.reset(static_cast<std::size_t>(num_thresholds_) * static_cast<std::size_t>(labels_));
}

void AUC::check_labels(const Tensor& y_pred) {
  // Keras builds a multi-label AUC from y_pred's shape before any rank alignment.
  if (y_pred.rank() != 2)
    throw ShapeError(fmt::format("{}: multi_label needs y_pred of rank 2 [samples, labels], got shape {}", name(),
                                 y_pred.shape().to_string()));
  const auto labels = static_cast<int>(y_pred.shape()[1]);
  if (labels_ == 0) {
    labels_ = labels;
    reset_state();
  }
  if (labels != labels_)
    throw ShapeError(fmt::format("{}: the AUC keeps {} labels, but y_pred {} has {}", name(), labels_,
                                 y_pred.shape().to_string(), labels));
  if (!label_weights_.empty() && label_weights_.size() != static_cast<std::size_t>(labels_))
    throw ShapeError(fmt::format("{}: {} label_weights for y_pred {} of {} labels", name(), label_weights_.size(),
                                 y_pred.shape().to_string(), labels_));
}

void AUC::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  Tensor pred = util::host(y_pred, name(), "y_pred");
  if (multi_label_) check_labels(pred);
  if (from_logits_) pred = sigmoid(is_floating(pred.dtype()) ? pred : cast(pred, DType::float32));
  ConfusionInputs in = confusion_inputs(y_true, pred, sample_weight, std::nullopt, std::nullopt, name());
  // Multi-label: label weights only average the per-label areas (result()).
  if (!multi_label_ && !label_weights_.empty()) apply_label_weights(in, label_weights_, y_pred, name());
  count(in, thresholds_, evenly_, multi_label_ ? static_cast<std::size_t>(labels_) : 1, counts_);
}

double AUC::label_area(std::size_t label) const {
  const auto labels = static_cast<std::size_t>(labels_);
  if (curve_ == "PR" && summation_method_ == "interpolation") return interpolated_pr_area(counts_, label, labels);
  return riemann_area(counts_, label, labels, curve_, summation_method_);
}

double AUC::result() const {
  if (labels_ == 0) return 0.0;  // a multi-label AUC that has not seen its labels yet
  if (!multi_label_) return label_area(0);
  double sum = 0, weighted = 0, weights = 0;
  for (std::size_t l = 0; l < static_cast<std::size_t>(labels_); ++l) {
    const double area = label_area(l);
    sum += area;
    if (!label_weights_.empty()) {
      weighted += label_weights_[l] * area;
      weights += label_weights_[l];
    }
  }
  return label_weights_.empty() ? sum / labels_ : divide_no_nan(weighted, weights);
}

}  // namespace keel::metrics
