// Keras metrics with plain C++ state.
//
// Metrics are not differentiated, and their inputs are small (one batch of labels and
// predictions), so every update brings its inputs to the host and does its arithmetic there,
// with no tape recording (a metric updated inside train_step must not add nodes to the
// GradientTape of the step). The rules follow Keras 3 (keras/src/metrics): Mean's per-sample
// reduction of values and weights, the accuracy functions, update_confusion_matrix_variables and
// AUC's threshold grid, Riemann sums and PR interpolation. Accumulators are doubles where Keras
// keeps float32 variables; comparisons against thresholds are made in float32 as in Keras, so
// that a prediction lands on the same side of a threshold.
#include "keel/metrics/metric.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel::metrics {

namespace {

constexpr double kEpsilon = 1e-7;   // keras.backend.epsilon()
constexpr float kNegInf = -1e10f;   // Keras' NEG_INF for predictions outside the top k

// `t` on the CPU (metrics compute on the host), defined or a ValueError naming the metric.
Tensor host(const Tensor& t, const std::string& who, const char* what) {
  if (!t.defined()) throw ValueError(fmt::format("{}: {} is undefined", who, what));
  return t.device().is_cpu() ? t : t.to(Device::cpu());
}

Tensor host_as(const Tensor& t, DType dtype, const std::string& who, const char* what) {
  Tensor h = host(t, who, what);
  return h.dtype() == dtype ? h : cast(h, dtype);
}

// Axes [from, to) for the reductions ("every axis but the first").
std::vector<int> axes_range(std::int64_t from, std::int64_t to) {
  std::vector<int> axes;
  for (auto a = from; a < to; ++a) axes.push_back(static_cast<int>(a));
  return axes;
}

double divide_no_nan(double a, double b) { return b == 0 ? 0.0 : a / b; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_accuracy_name(const std::string& identifier) {
  const std::string l = lower(identifier);
  return l == "accuracy" || l == "acc";
}

// tf.math.in_top_k: target t of row i is in the top k when fewer than k predictions of the row
// are strictly greater than predictions[i][t] (so ties at the boundary count as in); a
// non-finite prediction for the target, or a target outside the classes, is never in.
Tensor in_top_k(const Tensor& targets, const Tensor& predictions, int k, const char* who) {
  if (predictions.rank() != 2)
    throw ShapeError(fmt::format("{}: predictions must be [samples, classes], got {}", who,
                                 predictions.shape().to_string()));
  const std::int64_t rows = predictions.shape()[0], classes = predictions.shape()[1];
  if (targets.size() != rows)
    throw ShapeError(fmt::format("{}: {} targets for {} rows of predictions {}", who, targets.size(), rows,
                                 predictions.shape().to_string()));
  const auto t = targets.to_vector<std::int64_t>();
  const auto p = predictions.to_vector<double>();
  std::vector<float> out(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t target = t[static_cast<std::size_t>(i)];
    if (target < 0 || target >= classes) continue;
    const double* row = p.data() + i * classes;
    const double v = row[target];
    if (!std::isfinite(v)) continue;
    std::int64_t greater = 0;
    for (std::int64_t j = 0; j < classes; ++j) greater += row[j] > v ? 1 : 0;
    out[static_cast<std::size_t>(i)] = greater < k ? 1.0f : 0.0f;
  }
  return constant(out, Shape{rows}).to(Device::cpu());
}

// ---- confusion-matrix inputs (Keras' update_confusion_matrix_variables, non-multi-label) ----------

struct ConfusionInputs {
  std::vector<float> pred;     // every element, flattened
  std::vector<char> positive;  // label != 0
  std::vector<double> weight;  // empty: all 1
  double w(std::size_t i) const { return weight.empty() ? 1.0 : weight[i]; }
};

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
  const auto labels = label.to_vector<float>();
  std::vector<std::int64_t> dims = pred.shape().dims();
  const std::int64_t last = dims.empty() ? 1 : dims.back();

  if (top_k) {
    // Only the k largest of each row stay; the others become NEG_INF, below every threshold.
    // Ties go to the lower index, as top_k orders them.
    const auto k = static_cast<std::size_t>(*top_k);
    const auto width = static_cast<std::size_t>(last);
    std::vector<std::size_t> order(width);
    for (std::size_t r = 0; width > 0 && r < in.pred.size() / width; ++r) {
      float* row = in.pred.data() + r * width;
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(), [row](std::size_t a, std::size_t b) { return row[a] > row[b]; });
      for (std::size_t j = k; j < width; ++j) row[order[j]] = kNegInf;
    }
  }

  std::vector<float> lab = labels;
  if (class_id) {
    if (dims.size() < 2)
      throw ValueError(fmt::format("{}: class_id needs y_pred of shape [samples, classes], got {}", who,
                                   y_pred_in.shape().to_string()));
    if (*class_id < 0 || *class_id >= last)
      throw ValueError(fmt::format("{}: class_id {} is outside the {} classes of y_pred {}", who, *class_id, last,
                                   y_pred_in.shape().to_string()));
    const auto width = static_cast<std::size_t>(last);
    const std::size_t rows = in.pred.size() / width;
    std::vector<float> p(rows), l(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      p[r] = in.pred[r * width + static_cast<std::size_t>(*class_id)];
      l[r] = lab[r * width + static_cast<std::size_t>(*class_id)];
    }
    in.pred = std::move(p);
    lab = std::move(l);
    dims.back() = 1;  // y[..., class_id, None]
  }

  in.positive.resize(lab.size());
  for (std::size_t i = 0; i < lab.size(); ++i) in.positive[i] = lab[i] != 0.0f ? 1 : 0;
  if (weight.defined()) in.weight = broadcast_to(weight, Shape(dims)).to_vector<double>();
  return in;
}

// Keras' is_evenly_distributed_thresholds: [0, t..., 1] equal to arange(n) / (n - 1) (float32)
// within numpy.allclose's tolerances.
bool evenly_distributed(const std::vector<double>& with_ends) {
  const std::size_t n = with_ends.size();
  if (n < 3) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const double even = static_cast<double>(static_cast<float>(i) / static_cast<float>(n - 1));
    if (std::abs(with_ends[i] - even) > kEpsilon + 1e-5 * std::abs(even)) return false;
  }
  return true;
}

std::optional<double> checked_threshold(const std::optional<double>& t, const char* who) {
  if (t && !(*t >= 0 && *t <= 1))
    throw ValueError(fmt::format("{}: threshold values must be in [0, 1], got {}", who, *t));
  return t;
}

void check_top_k_class_id(const std::optional<int>& top_k, const std::optional<int>& class_id, const char* who) {
  if (top_k && *top_k < 1) throw ValueError(fmt::format("{}: top_k must be >= 1, got {}", who, *top_k));
  if (class_id && *class_id < 0) throw ValueError(fmt::format("{}: class_id must be >= 0, got {}", who, *class_id));
}

nlohmann::json optional_json(const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The threshold of Precision and Recall. With top_k and no threshold, every top-k prediction is
// positive (Keras' NEG_INF default).
double applied_threshold(const std::optional<double>& thresholds, const std::optional<int>& top_k) {
  return thresholds ? *thresholds : (top_k ? static_cast<double>(kNegInf) : 0.5);
}

nlohmann::json confusion_config(nlohmann::json c, const std::optional<double>& thresholds,
                                const std::optional<int>& top_k, const std::optional<int>& class_id) {
  c["thresholds"] = optional_json(thresholds);
  c["top_k"] = optional_json(top_k);
  c["class_id"] = optional_json(class_id);
  return c;
}

}  // namespace

// ---- Metric ---------------------------------------------------------------------------------------

nlohmann::json Metric::get_config() const { return {{"name", name_}, {"dtype", "float32"}}; }

// ---- Mean -----------------------------------------------------------------------------------------

Mean::Mean(MeanOptions options) : Metric(std::move(options.name)) {}

void Mean::update_state(const Tensor& values_in, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  Tensor values = host_as(values_in, DType::float64, name(), "values");
  Tensor weights;
  if (sample_weight.defined()) {
    // Keras' reduce_to_samplewise_values: values are averaged down to the weights' rank, the
    // weights broadcast to the values, and weights of rank > 1 averaged per sample.
    auto [v, w] = losses::squeeze_or_expand_to_same_rank(values, host_as(sample_weight, DType::float64, name(),
                                                                           "sample_weight"));
    const std::int64_t weight_rank = w.rank();
    if (v.rank() > weight_rank) v = reduce_mean(v, axes_range(weight_rank, v.rank()));
    w = broadcast_to(w, v.shape());
    v = mul(v, w);
    if (weight_rank > 1) w = reduce_mean(w, axes_range(1, weight_rank));
    values = v;
    weights = w;
  }
  if (values.rank() > 1) values = reduce_mean(values, axes_range(1, values.rank()));
  total_ += reduce_sum(values).item<double>();
  if (weights.defined())
    count_ += reduce_sum(weights).item<double>();
  else
    count_ += values.rank() >= 1 ? static_cast<double>(values.shape()[0]) : 1.0;
}

void Mean::update_state(const Tensor&, const Tensor&, const Tensor&) {
  throw ValueError(fmt::format(
      "{}: Mean::update_state takes (values, sample_weight), not (y_true, y_pred, sample_weight); to "
      "average a function of y_true and y_pred, use metrics::MeanMetricWrapper",
      name()));
}

double Mean::result() const { return divide_no_nan(total_, count_); }

void Mean::reset_state() {
  total_ = 0;
  count_ = 0;
}

// ---- MeanMetricWrapper ----------------------------------------------------------------------------

MeanMetricWrapper::MeanMetricWrapper(Fn fn, MeanMetricWrapperOptions options)
    : Mean({.name = std::move(options.name)}), fn_(std::move(fn)) {
  if (!fn_) throw ValueError("MeanMetricWrapper: the metric function is empty");
}

MeanMetricWrapper::MeanMetricWrapper(Fn fn, std::string name, std::string direction)
    : MeanMetricWrapper(std::move(fn), MeanMetricWrapperOptions{.name = std::move(name)}) {
  set_direction(std::move(direction));
}

void MeanMetricWrapper::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  if (!y_true.defined() || !y_pred.defined())
    throw ValueError(fmt::format("{}: y_true and y_pred must both be defined", name()));
  const Tensor values = fn_(y_true, y_pred);
  if (!values.defined()) throw ValueError(fmt::format("{}: the metric function returned an undefined tensor", name()));
  Mean::update_state(values, sample_weight);
}

// ---- per-example functions ------------------------------------------------------------------------

Tensor accuracy(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  const Tensor p = host(y_pred, "accuracy", "y_pred");
  const Tensor t = host_as(y_true, p.dtype(), "accuracy", "y_true");
  auto [tt, pp] = losses::squeeze_or_expand_to_same_rank(t, p);
  return cast(equal(tt, pp), DType::float32);
}

Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  autograd::NoRecordScope no_record;
  auto [t, p] = losses::squeeze_or_expand_to_same_rank(host(y_true, "binary_accuracy", "y_true"),
                                                       host(y_pred, "binary_accuracy", "y_pred"));
  // The threshold in y_pred's dtype, the prediction as 0/1 in y_true's, as Keras compares.
  const Tensor predicted = cast(greater(p, scalar_like(p, threshold)), t.dtype());
  return cast(equal(t, predicted), DType::float32);
}

Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  Tensor t = argmax(host(y_true, "categorical_accuracy", "y_true"), -1);
  const Tensor p = host(y_pred, "categorical_accuracy", "y_pred");
  const Shape true_shape = t.shape();
  bool reshape_matches = false;
  // Labels one rank above the predictions ([N, 1, K] against [N, K]) leave a trailing axis of 1.
  if (t.rank() == p.rank() && t.rank() > 0 && t.shape()[t.rank() - 1] == 1) {
    t = squeeze(t, {-1});
    reshape_matches = true;
  }
  Tensor matches = cast(equal(t, argmax(p, -1)), DType::float32);
  if (reshape_matches) matches = reshape(matches, true_shape);
  return matches;
}

Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  Tensor t = host(y_true, "sparse_categorical_accuracy", "y_true");
  const Tensor p = host(y_pred, "sparse_categorical_accuracy", "y_pred");
  const Shape true_shape = t.shape();
  bool reshape_matches = false;
  if (t.rank() == p.rank() && t.rank() > 0 && t.shape()[t.rank() - 1] == 1) {  // [N, 1] labels
    t = squeeze(t, {-1});
    reshape_matches = true;
  }
  Tensor predicted = argmax(p, -1);
  if (predicted.dtype() != t.dtype()) predicted = cast(predicted, t.dtype());  // float labels: 2.0 is class 2
  Tensor matches = cast(equal(t, predicted), DType::float32);
  if (reshape_matches) matches = reshape(matches, true_shape);
  if (matches.rank() > 1 && matches.shape()[matches.rank() - 1] == 1) matches = squeeze(matches, {-1});
  return matches;
}

namespace {

// The shared tail of the two top-k accuracies: targets (class ids) against predictions, both
// flattened to rows, the matches shaped like the targets.
Tensor top_k_matches(Tensor targets, Tensor p, int k, const char* who) {
  if (k < 1) throw ValueError(fmt::format("{}: k must be >= 1, got {}", who, k));
  if (p.rank() < 2)
    throw ShapeError(fmt::format("{}: y_pred must have a class axis, got shape {}", who, p.shape().to_string()));
  const Shape target_shape = targets.shape();
  if (p.rank() > 2) p = reshape(p, Shape{-1, p.shape()[p.rank() - 1]});
  const bool reshape_matches = targets.rank() > 1;
  if (reshape_matches) targets = reshape(targets, Shape{-1});
  // Float class ids (2.0) are truncated to integers, as Keras' cast to int32.
  Tensor matches = in_top_k(cast(targets, DType::int64), p, k, who);
  if (reshape_matches) matches = reshape(matches, target_shape);
  return matches;
}

}  // namespace

Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k) {
  autograd::NoRecordScope no_record;
  constexpr const char* who = "top_k_categorical_accuracy";
  return top_k_matches(argmax(host(y_true, who, "y_true"), -1), host(y_pred, who, "y_pred"), k, who);
}

Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k) {
  autograd::NoRecordScope no_record;
  constexpr const char* who = "sparse_top_k_categorical_accuracy";
  return top_k_matches(host(y_true, who, "y_true"), host(y_pred, who, "y_pred"), k, who);
}

// ---- accuracy and regression metric classes --------------------------------------------------------

Accuracy::Accuracy(AccuracyOptions o) : MeanMetricWrapper(&metrics::accuracy, std::move(o.name), "up") {}

BinaryAccuracy::BinaryAccuracy(BinaryAccuracyOptions o)
    : MeanMetricWrapper([t = o.threshold](const Tensor& a, const Tensor& b) { return binary_accuracy(a, b, t); },
                        std::move(o.name), "up"),
      threshold_(o.threshold) {
  if (!(threshold_ > 0 && threshold_ < 1))
    throw ValueError(fmt::format("BinaryAccuracy: threshold must be in (0, 1), got {}", threshold_));
}
nlohmann::json BinaryAccuracy::get_config() const {
  auto c = Metric::get_config();
  c["threshold"] = threshold_;
  return c;
}

CategoricalAccuracy::CategoricalAccuracy(CategoricalAccuracyOptions o)
    : MeanMetricWrapper(&metrics::categorical_accuracy, std::move(o.name), "up") {}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(SparseCategoricalAccuracyOptions o)
    : MeanMetricWrapper(&metrics::sparse_categorical_accuracy, std::move(o.name), "up") {}

TopKCategoricalAccuracy::TopKCategoricalAccuracy(TopKCategoricalAccuracyOptions o)
    : MeanMetricWrapper([k = o.k](const Tensor& a, const Tensor& b) { return top_k_categorical_accuracy(a, b, k); },
                        std::move(o.name), "up"),
      k_(o.k) {
  if (k_ < 1) throw ValueError(fmt::format("TopKCategoricalAccuracy: k must be >= 1, got {}", k_));
}
nlohmann::json TopKCategoricalAccuracy::get_config() const {
  auto c = Metric::get_config();
  c["k"] = k_;
  return c;
}

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(SparseTopKCategoricalAccuracyOptions o)
    : MeanMetricWrapper(
          [k = o.k](const Tensor& a, const Tensor& b) { return sparse_top_k_categorical_accuracy(a, b, k); },
          std::move(o.name), "up"),
      k_(o.k) {
  if (k_ < 1) throw ValueError(fmt::format("SparseTopKCategoricalAccuracy: k must be >= 1, got {}", k_));
}
nlohmann::json SparseTopKCategoricalAccuracy::get_config() const {
  auto c = Metric::get_config();
  c["k"] = k_;
  return c;
}

MeanSquaredError::MeanSquaredError(MeanSquaredErrorOptions o)
    : MeanMetricWrapper(&losses::mean_squared_error, std::move(o.name), "down") {}

MeanAbsoluteError::MeanAbsoluteError(MeanAbsoluteErrorOptions o)
    : MeanMetricWrapper(&losses::mean_absolute_error, std::move(o.name), "down") {}

// ---- Precision / Recall ---------------------------------------------------------------------------

Precision::Precision(PrecisionOptions o)
    : Metric(std::move(o.name)),
      init_thresholds_(checked_threshold(o.thresholds, "Precision")),
      threshold_(applied_threshold(o.thresholds, o.top_k)),
      top_k_(o.top_k),
      class_id_(o.class_id) {
  check_top_k_class_id(top_k_, class_id_, "Precision");
  set_direction("up");
}

void Precision::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const ConfusionInputs in = confusion_inputs(y_true, y_pred, sample_weight, top_k_, class_id_, name());
  const auto threshold = static_cast<float>(threshold_);
  for (std::size_t i = 0; i < in.pred.size(); ++i) {
    if (!(in.pred[i] > threshold)) continue;
    (in.positive[i] ? tp_ : fp_) += in.w(i);
  }
}

double Precision::result() const { return divide_no_nan(tp_, tp_ + fp_); }

void Precision::reset_state() { tp_ = fp_ = 0; }

nlohmann::json Precision::get_config() const {
  return confusion_config(Metric::get_config(), init_thresholds_, top_k_, class_id_);
}

Recall::Recall(RecallOptions o)
    : Metric(std::move(o.name)),
      init_thresholds_(checked_threshold(o.thresholds, "Recall")),
      threshold_(applied_threshold(o.thresholds, o.top_k)),
      top_k_(o.top_k),
      class_id_(o.class_id) {
  check_top_k_class_id(top_k_, class_id_, "Recall");
  set_direction("up");
}

void Recall::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const ConfusionInputs in = confusion_inputs(y_true, y_pred, sample_weight, top_k_, class_id_, name());
  const auto threshold = static_cast<float>(threshold_);
  for (std::size_t i = 0; i < in.pred.size(); ++i) {
    if (!in.positive[i]) continue;
    (in.pred[i] > threshold ? tp_ : fn_) += in.w(i);
  }
}

double Recall::result() const { return divide_no_nan(tp_, tp_ + fn_); }

void Recall::reset_state() { tp_ = fn_ = 0; }

nlohmann::json Recall::get_config() const {
  return confusion_config(Metric::get_config(), init_thresholds_, top_k_, class_id_);
}

// ---- AUC ------------------------------------------------------------------------------------------

AUC::AUC(AUCOptions o)
    : Metric(std::move(o.name)), from_logits_(o.from_logits), init_from_thresholds_(!o.thresholds.empty()) {
  if (o.curve == "ROC" || o.curve == "roc")
    curve_ = "ROC";
  else if (o.curve == "PR" || o.curve == "pr")
    curve_ = "PR";
  else
    throw ValueError(fmt::format("AUC: invalid curve \"{}\"; expected \"ROC\" or \"PR\"", o.curve));
  const std::string method = lower(o.summation_method);
  if (method != "interpolation" && method != "minoring" && method != "majoring")
    throw ValueError(fmt::format(
        "AUC: invalid summation_method \"{}\"; expected \"interpolation\", \"majoring\" or \"minoring\"",
        o.summation_method));
  summation_method_ = method;

  std::vector<double> interior;
  if (init_from_thresholds_) {
    interior = o.thresholds;
    std::sort(interior.begin(), interior.end());
    num_thresholds_ = static_cast<int>(interior.size()) + 2;
    std::vector<double> with_ends{0.0};
    with_ends.insert(with_ends.end(), interior.begin(), interior.end());
    with_ends.push_back(1.0);
    evenly_ = evenly_distributed(with_ends);
  } else {
    if (o.num_thresholds <= 1)
      throw ValueError(fmt::format("AUC: num_thresholds must be an integer > 1, got {}", o.num_thresholds));
    num_thresholds_ = o.num_thresholds;
    for (int i = 0; i < num_thresholds_ - 2; ++i)
      interior.push_back(static_cast<double>(i + 1) / static_cast<double>(num_thresholds_ - 1));
    evenly_ = true;
  }
  // The end points sit just outside [0, 1] so that predictions of exactly 0 and 1 fall inside
  // the grid (everything is above the first threshold, nothing above the last).
  thresholds_.push_back(0.0 - kEpsilon);
  thresholds_.insert(thresholds_.end(), interior.begin(), interior.end());
  thresholds_.push_back(1.0 + kEpsilon);
  reset_state();
  set_direction("up");
}

void AUC::reset_state() {
  const auto n = static_cast<std::size_t>(num_thresholds_);
  tp_.assign(n, 0.0);
  fp_.assign(n, 0.0);
  tn_.assign(n, 0.0);
  fn_.assign(n, 0.0);
}

void AUC::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  Tensor pred = host(y_pred, name(), "y_pred");
  if (from_logits_) pred = sigmoid(is_floating(pred.dtype()) ? pred : cast(pred, DType::float32));
  const ConfusionInputs in = confusion_inputs(y_true, pred, sample_weight, std::nullopt, std::nullopt, name());
  const std::size_t n = tp_.size();

  if (evenly_) {
    // Keras' optimised update: each prediction falls in one bucket between neighbouring
    // thresholds, and the count above threshold i is the sum of the buckets from i up. The bucket
    // is ceil(p (n - 1)) - 1 in float32 (strictly above its lower threshold), clipped at 0
    // because the first threshold is below 0; predictions are clipped to [0, 1] first.
    std::vector<double> tp_bucket(n, 0.0), fp_bucket(n, 0.0);
    double total_true = 0, total_false = 0;
    const auto steps = static_cast<float>(num_thresholds_ - 1);
    const bool with_epsilon = thresholds_.front() < 0.0 || thresholds_.back() > 1.0;
    for (std::size_t i = 0; i < in.pred.size(); ++i) {
      const float p = std::clamp(in.pred[i], 0.0f, 1.0f);
      float bucket = std::ceil(p * steps) - 1.0f;
      if (with_epsilon) bucket = std::max(bucket, 0.0f);
      const double w = in.w(i);
      (in.positive[i] ? total_true : total_false) += w;
      if (bucket < 0) continue;  // above no threshold
      (in.positive[i] ? tp_bucket : fp_bucket)[static_cast<std::size_t>(bucket)] += w;
    }
    double tp_above = 0, fp_above = 0;
    for (std::size_t j = n; j-- > 0;) {
      tp_above += tp_bucket[j];
      fp_above += fp_bucket[j];
      tp_[j] += tp_above;
      fp_[j] += fp_above;
      fn_[j] += total_true - tp_above;
      tn_[j] += total_false - fp_above;
    }
    return;
  }

  std::vector<float> thresholds(n);
  for (std::size_t j = 0; j < n; ++j) thresholds[j] = static_cast<float>(thresholds_[j]);
  for (std::size_t i = 0; i < in.pred.size(); ++i) {
    const double w = in.w(i);
    for (std::size_t j = 0; j < n; ++j) {
      const bool predicted = in.pred[i] > thresholds[j];
      if (in.positive[i])
        (predicted ? tp_ : fn_)[j] += w;
      else
        (predicted ? fp_ : tn_)[j] += w;
    }
  }
}

double AUC::interpolate_pr_auc() const {
  // Davis & Goadrich's interpolation, in Keras' closed form: between neighbouring thresholds TP
  // and P = TP + FP vary linearly, precision = TP / P does not, and its integral over recall is
  // (slope (dTP + intercept log(P_i / P_i+1))) / total positives.
  double auc = 0;
  for (std::size_t i = 0; i + 1 < tp_.size(); ++i) {
    const double dtp = tp_[i] - tp_[i + 1];
    const double p0 = tp_[i] + fp_[i], p1 = tp_[i + 1] + fp_[i + 1];
    const double dp = p0 - p1;
    const double slope = divide_no_nan(dtp, std::max(dp, 0.0));
    const double intercept = tp_[i + 1] - slope * p1;
    const double ratio = (p0 > 0 && p1 > 0) ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
    auc += divide_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max(tp_[i + 1] + fn_[i + 1], 0.0));
  }
  return auc;
}

double AUC::result() const {
  if (curve_ == "PR" && summation_method_ == "interpolation") return interpolate_pr_auc();
  const std::size_t n = tp_.size();
  std::vector<double> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double recall = divide_no_nan(tp_[i], tp_[i] + fn_[i]);
    if (curve_ == "ROC") {
      x[i] = divide_no_nan(fp_[i], fp_[i] + tn_[i]);  // false-positive rate
      y[i] = recall;
    } else {
      x[i] = recall;
      y[i] = divide_no_nan(tp_[i], tp_[i] + fp_[i]);  // precision
    }
  }
  // Thresholds rise with i, so x falls: each term is a width x_i - x_i+1 >= 0 times a height.
  double auc = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    double height;
    if (summation_method_ == "interpolation")
      height = (y[i] + y[i + 1]) / 2.0;
    else if (summation_method_ == "minoring")
      height = std::min(y[i], y[i + 1]);
    else
      height = std::max(y[i], y[i + 1]);
    auc += (x[i] - x[i + 1]) * height;
  }
  return auc;
}

nlohmann::json AUC::get_config() const {
  auto c = Metric::get_config();
  c["num_thresholds"] = num_thresholds_;
  c["curve"] = curve_;
  c["summation_method"] = summation_method_;
  c["multi_label"] = false;
  c["num_labels"] = nullptr;
  c["label_weights"] = nullptr;
  c["from_logits"] = from_logits_;
  if (init_from_thresholds_)  // without the end points, so that a config round-trips
    c["thresholds"] = std::vector<double>(thresholds_.begin() + 1, thresholds_.end() - 1);
  return c;
}

// ---- by name ------------------------------------------------------------------------------------

std::shared_ptr<Metric> resolve_accuracy(const std::string& loss_name, const std::string& metric_name) {
  std::shared_ptr<Metric> m;
  if (loss_name == "sparse_categorical_crossentropy" || loss_name == "SparseCategoricalCrossentropy")
    m = std::make_shared<SparseCategoricalAccuracy>();
  else if (loss_name == "categorical_crossentropy" || loss_name == "CategoricalCrossentropy")
    m = std::make_shared<CategoricalAccuracy>();
  else if (loss_name == "binary_crossentropy" || loss_name == "BinaryCrossentropy")
    m = std::make_shared<BinaryAccuracy>();
  else
    m = std::make_shared<Accuracy>();
  m->set_name(metric_name);
  return m;
}

std::shared_ptr<Metric> resolve_accuracy(const losses::Loss& loss, const std::string& metric_name) {
  if (dynamic_cast<const losses::SparseCategoricalCrossentropy*>(&loss) != nullptr)
    return resolve_accuracy("sparse_categorical_crossentropy", metric_name);
  if (dynamic_cast<const losses::CategoricalCrossentropy*>(&loss) != nullptr)
    return resolve_accuracy("categorical_crossentropy", metric_name);
  if (dynamic_cast<const losses::BinaryCrossentropy*>(&loss) != nullptr)
    return resolve_accuracy("binary_crossentropy", metric_name);
  return resolve_accuracy(loss.name(), metric_name);
}

std::shared_ptr<Metric> resolve_accuracy(const Shape& y_true_shape, const Shape& y_pred_shape,
                                         const std::string& metric_name) {
  const auto last = [](const Shape& s) { return s.rank() > 0 ? s[s.rank() - 1] : 1; };
  const bool is_binary = last(y_pred_shape) == 1;
  const bool is_sparse = y_true_shape.rank() < y_pred_shape.rank() ||
                         (last(y_true_shape) == 1 && last(y_pred_shape) > 1);
  std::shared_ptr<Metric> m;
  if (is_binary)
    m = std::make_shared<BinaryAccuracy>();
  else if (is_sparse)
    m = std::make_shared<SparseCategoricalAccuracy>();
  else
    m = std::make_shared<CategoricalAccuracy>();
  m->set_name(metric_name);
  return m;
}

namespace {

template <class M>
std::shared_ptr<Metric> make_metric() {
  return std::make_shared<M>();
}

Tensor binary_crossentropy_fn(const Tensor& t, const Tensor& p) { return losses::binary_crossentropy(t, p); }
Tensor categorical_crossentropy_fn(const Tensor& t, const Tensor& p) {
  return losses::categorical_crossentropy(t, p);
}
Tensor sparse_categorical_crossentropy_fn(const Tensor& t, const Tensor& p) {
  return losses::sparse_categorical_crossentropy(t, p);
}

// A running mean of a loss function, as Keras' metric versions of its losses; "down": lower is
// better (MeanMetricWrapper's direction is protected, so it is set through this subclass).
class LossMean : public MeanMetricWrapper {
 public:
  explicit LossMean(Fn fn) : MeanMetricWrapper(std::move(fn), "mean_metric_wrapper", "down") {}
};

template <Tensor (*Fn)(const Tensor&, const Tensor&)>
std::shared_ptr<Metric> make_loss_metric() {
  return std::make_shared<LossMean>(Fn);
}

}  // namespace

std::shared_ptr<Metric> get(const std::string& identifier, const std::string& loss_name) {
  if (is_accuracy_name(identifier)) return resolve_accuracy(loss_name, identifier);
  using Make = std::shared_ptr<Metric> (*)();
  // Keras' metric names (keras.metrics.get), their aliases, and the class names.
  static const std::map<std::string, Make> table = {
      {"binary_accuracy", &make_metric<BinaryAccuracy>},
      {"BinaryAccuracy", &make_metric<BinaryAccuracy>},
      {"categorical_accuracy", &make_metric<CategoricalAccuracy>},
      {"CategoricalAccuracy", &make_metric<CategoricalAccuracy>},
      {"sparse_categorical_accuracy", &make_metric<SparseCategoricalAccuracy>},
      {"SparseCategoricalAccuracy", &make_metric<SparseCategoricalAccuracy>},
      {"top_k_categorical_accuracy", &make_metric<TopKCategoricalAccuracy>},
      {"TopKCategoricalAccuracy", &make_metric<TopKCategoricalAccuracy>},
      {"sparse_top_k_categorical_accuracy", &make_metric<SparseTopKCategoricalAccuracy>},
      {"SparseTopKCategoricalAccuracy", &make_metric<SparseTopKCategoricalAccuracy>},
      {"precision", &make_metric<Precision>},
      {"Precision", &make_metric<Precision>},
      {"recall", &make_metric<Recall>},
      {"Recall", &make_metric<Recall>},
      {"auc", &make_metric<AUC>},
      {"AUC", &make_metric<AUC>},
      {"mse", &make_metric<MeanSquaredError>},
      {"MSE", &make_metric<MeanSquaredError>},
      {"mean_squared_error", &make_metric<MeanSquaredError>},
      {"MeanSquaredError", &make_metric<MeanSquaredError>},
      {"mae", &make_metric<MeanAbsoluteError>},
      {"MAE", &make_metric<MeanAbsoluteError>},
      {"mean_absolute_error", &make_metric<MeanAbsoluteError>},
      {"MeanAbsoluteError", &make_metric<MeanAbsoluteError>},
      {"binary_crossentropy", &make_loss_metric<&binary_crossentropy_fn>},
      {"categorical_crossentropy", &make_loss_metric<&categorical_crossentropy_fn>},
      {"sparse_categorical_crossentropy", &make_loss_metric<&sparse_categorical_crossentropy_fn>},
      {"kl_divergence", &make_loss_metric<&losses::kl_divergence>},
      {"kld", &make_loss_metric<&losses::kl_divergence>},
      {"KLD", &make_loss_metric<&losses::kl_divergence>},
  };
  const auto it = table.find(identifier);
  if (it == table.end())
    throw ValueError(fmt::format(
        "metrics::get: unknown metric \"{}\"; known names: accuracy (acc), binary_accuracy, "
        "categorical_accuracy, sparse_categorical_accuracy, top_k_categorical_accuracy, "
        "sparse_top_k_categorical_accuracy, precision, recall, auc, mse, mae, binary_crossentropy, "
        "categorical_crossentropy, sparse_categorical_crossentropy, kl_divergence, or a class name such as AUC",
        identifier));
  auto m = it->second();
  m->set_name(identifier);  // Keras' History reports a metric by the name it was asked for
  return m;
}

// ---- MetricRef ------------------------------------------------------------------------------------

std::shared_ptr<Metric> MetricRef::wrap(MeanMetricWrapper::Fn fn, std::string name) {
  return std::make_shared<MeanMetricWrapper>(std::move(fn), MeanMetricWrapperOptions{.name = std::move(name)});
}

std::shared_ptr<Metric> MetricRef::get(const std::string& loss_name) const {
  if (ptr_) return ptr_;
  return metrics::get(identifier_, loss_name);
}

std::shared_ptr<Metric> MetricRef::get(const losses::Loss& loss) const {
  if (ptr_) return ptr_;
  if (is_accuracy_name(identifier_)) return resolve_accuracy(loss, identifier_);
  return metrics::get(identifier_);
}

}  // namespace keel::metrics
