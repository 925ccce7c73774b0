// Keras metrics with plain C++ state: the base classes, the means, the accuracies, the error
// metrics, resolution by name and MetricRef. The confusion-matrix metrics (Precision, Recall,
// AUC) live in confusion_metrics.cpp, the cross-entropies in probabilistic_metrics.cpp, and
// from_config in metric_config.cpp.
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

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

// ---- shared helpers (metric_util.hpp) ----------------------------------------------------------------

namespace util {

Tensor host(const Tensor& t, const std::string& who, const char* what) {
  if (!t.defined()) throw ValueError(fmt::format("{}: {} is undefined", who, what));
  return t.device().is_cpu() ? t : t.to(Device::cpu());
}

Tensor host_as(const Tensor& t, DType dtype, const std::string& who, const char* what) {
  Tensor h = host(t, who, what);
  return h.dtype() == dtype ? h : cast(h, dtype);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace util

namespace {

using util::divide_no_nan;
using util::host;
using util::host_as;

// Axes [from, to) for the reductions ("every axis but the first").
std::vector<int> axes_range(std::int64_t from, std::int64_t to) {
  std::vector<int> axes;
  for (auto a = from; a < to; ++a) axes.push_back(static_cast<int>(a));
  return axes;
}

bool is_accuracy_name(const std::string& identifier) {
  const std::string l = util::lower(identifier);
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

}  // namespace

// ---- Metric ---------------------------------------------------------------------------------------

nlohmann::json Metric::get_config() const { return {{"name", name_}, {"dtype", "float32"}}; }

// ---- Mean -----------------------------------------------------------------------------------------

Mean::Mean(MeanOptions options) : Metric(std::move(options.name)) {}

void Mean::update_state(const Tensor& values, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  const std::string context =
      fmt::format("{} ({}): values {}, sample_weight {}: ", name(), class_name(), util::shape_of(values),
                  util::shape_of(sample_weight));
  util::with_context(context, [&] { accumulate(values, sample_weight); });
}

void Mean::accumulate(const Tensor& values_in, const Tensor& sample_weight) {
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
  // An op's error deep inside the function (mismatched shapes, a bad dtype) names the op only:
  // say which metric it was and what it was given.
  const std::string context =
      fmt::format("{} ({}): y_true {}, y_pred {}, sample_weight {}: ", name(), class_name(), util::shape_of(y_true),
                  util::shape_of(y_pred), util::shape_of(sample_weight));
  util::with_context(context, [&] {
    const Tensor values = fn_(y_true, y_pred);
    if (!values.defined()) throw ValueError("the metric function returned an undefined tensor");
    accumulate(values, sample_weight);
  });
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
  // Keras 3 compares y_pred with a float32 threshold under type promotion: bool, integer and
  // half-precision predictions are compared in float32, float64 ones in float64. Casting the
  // threshold to y_pred's dtype instead would turn 0.5 into `true` for bool predictions, and
  // `true > true` is false: every prediction would read as 0.
  if (p.dtype() != DType::float64 && p.dtype() != DType::float32) p = cast(p, DType::float32);
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
      options_(o) {
  if (!(o.threshold > 0 && o.threshold < 1))
    throw ValueError(fmt::format("BinaryAccuracy: threshold must be in (0, 1), got {}", o.threshold));
}

CategoricalAccuracy::CategoricalAccuracy(CategoricalAccuracyOptions o)
    : MeanMetricWrapper(&metrics::categorical_accuracy, std::move(o.name), "up") {}

SparseCategoricalAccuracy::SparseCategoricalAccuracy(SparseCategoricalAccuracyOptions o)
    : MeanMetricWrapper(&metrics::sparse_categorical_accuracy, std::move(o.name), "up") {}

TopKCategoricalAccuracy::TopKCategoricalAccuracy(TopKCategoricalAccuracyOptions o)
    : MeanMetricWrapper([k = o.k](const Tensor& a, const Tensor& b) { return top_k_categorical_accuracy(a, b, k); },
                        std::move(o.name), "up"),
      options_(o) {
  if (options_.k < 1) throw ValueError(fmt::format("TopKCategoricalAccuracy: k must be >= 1, got {}", options_.k));
}

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(SparseTopKCategoricalAccuracyOptions o)
    : MeanMetricWrapper(
          [k = o.k](const Tensor& a, const Tensor& b) { return sparse_top_k_categorical_accuracy(a, b, k); },
          std::move(o.name), "up"),
      options_(o) {
  if (options_.k < 1) throw ValueError(fmt::format("SparseTopKCategoricalAccuracy: k must be >= 1, got {}", options_.k));
}

MeanSquaredError::MeanSquaredError(MeanSquaredErrorOptions o)
    : MeanMetricWrapper(&losses::mean_squared_error, std::move(o.name), "down") {}

MeanAbsoluteError::MeanAbsoluteError(MeanAbsoluteErrorOptions o)
    : MeanMetricWrapper(&losses::mean_absolute_error, std::move(o.name), "down") {}

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

// A running mean of a loss function (KL divergence, which has no metric class here); "down": lower is
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
      {"binary_crossentropy", &make_metric<BinaryCrossentropy>},
      {"bce", &make_metric<BinaryCrossentropy>},
      {"BCE", &make_metric<BinaryCrossentropy>},
      {"BinaryCrossentropy", &make_metric<BinaryCrossentropy>},
      {"categorical_crossentropy", &make_metric<CategoricalCrossentropy>},
      {"CategoricalCrossentropy", &make_metric<CategoricalCrossentropy>},
      {"sparse_categorical_crossentropy", &make_metric<SparseCategoricalCrossentropy>},
      {"SparseCategoricalCrossentropy", &make_metric<SparseCategoricalCrossentropy>},
      {"kl_divergence", &make_loss_metric<&losses::kl_divergence>},
      {"kld", &make_loss_metric<&losses::kl_divergence>},
      {"KLD", &make_loss_metric<&losses::kl_divergence>},
      // rmse is not a Keras alias; it is accepted as the obvious short name.
      {"rmse", &make_metric<RootMeanSquaredError>},
      {"root_mean_squared_error", &make_metric<RootMeanSquaredError>},
      {"RootMeanSquaredError", &make_metric<RootMeanSquaredError>},
      {"mape", &make_metric<MeanAbsolutePercentageError>},
      {"MAPE", &make_metric<MeanAbsolutePercentageError>},
      {"mean_absolute_percentage_error", &make_metric<MeanAbsolutePercentageError>},
      {"MeanAbsolutePercentageError", &make_metric<MeanAbsolutePercentageError>},
      {"msle", &make_metric<MeanSquaredLogarithmicError>},
      {"MSLE", &make_metric<MeanSquaredLogarithmicError>},
      {"mean_squared_logarithmic_error", &make_metric<MeanSquaredLogarithmicError>},
      {"MeanSquaredLogarithmicError", &make_metric<MeanSquaredLogarithmicError>},
      {"cosine_similarity", &make_metric<CosineSimilarity>},
      {"CosineSimilarity", &make_metric<CosineSimilarity>},
      {"logcosh", &make_metric<LogCoshError>},
      {"log_cosh", &make_metric<LogCoshError>},
      {"log_cosh_error", &make_metric<LogCoshError>},
      {"LogCoshError", &make_metric<LogCoshError>},
      {"r2_score", &make_metric<R2Score>},
      {"R2Score", &make_metric<R2Score>},
      {"hinge", &make_metric<Hinge>},
      {"Hinge", &make_metric<Hinge>},
      {"squared_hinge", &make_metric<SquaredHinge>},
      {"SquaredHinge", &make_metric<SquaredHinge>},
      {"categorical_hinge", &make_metric<CategoricalHinge>},
      {"CategoricalHinge", &make_metric<CategoricalHinge>},
      {"f1_score", &make_metric<F1Score>},
      {"F1Score", &make_metric<F1Score>},
      {"fbeta_score", &make_metric<FBetaScore>},
      {"FBetaScore", &make_metric<FBetaScore>},
      {"true_positives", &make_metric<TruePositives>},
      {"TruePositives", &make_metric<TruePositives>},
      {"false_positives", &make_metric<FalsePositives>},
      {"FalsePositives", &make_metric<FalsePositives>},
      {"true_negatives", &make_metric<TrueNegatives>},
      {"TrueNegatives", &make_metric<TrueNegatives>},
      {"false_negatives", &make_metric<FalseNegatives>},
      {"FalseNegatives", &make_metric<FalseNegatives>},
      {"binary_io_u", &make_metric<BinaryIoU>},
      {"BinaryIoU", &make_metric<BinaryIoU>},
      {"sum", &make_metric<Sum>},
      {"Sum", &make_metric<Sum>},
  };
  const auto it = table.find(identifier);
  if (it == table.end())
    throw ValueError(fmt::format(
        "metrics::get: unknown metric \"{}\"; known names: accuracy (acc), binary_accuracy, "
        "categorical_accuracy, sparse_categorical_accuracy, top_k_categorical_accuracy, "
        "sparse_top_k_categorical_accuracy, precision, recall, auc, mse, mae, binary_crossentropy (bce), "
        "categorical_crossentropy, sparse_categorical_crossentropy, kl_divergence, rmse, mape, msle, "
        "cosine_similarity, logcosh, r2_score, hinge, squared_hinge, categorical_hinge, f1_score, fbeta_score, "
        "true_positives, false_positives, true_negatives, false_negatives, binary_io_u, sum, or a class name such "
        "as AUC (metrics with a required argument, such as MeanIoU, must be passed as objects)",
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
