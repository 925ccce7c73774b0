// The per-example error functions of Keras 3 (keras/src/losses/losses.py: MAPE, MSLE,
// cosine_similarity, log_cosh, the hinges) and the metrics that keep their running means
// (keras/src/metrics/regression_metrics.py, hinge_metrics.py). Computed on the host with keel's
// ops, in y_pred's float dtype.
#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/metrics/metric.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

namespace {

// y_pred on the host in a float dtype (float32 unless it is float64), y_true cast to it, the ranks
// aligned across a trailing axis of 1. Keras' hinge functions skip the alignment (so labels [N]
// against predictions [N, 1] would broadcast to [N, N]); keel aligns them for every function.
std::pair<Tensor, Tensor> prepared(const Tensor& y_true, const Tensor& y_pred, const char* who) {
  Tensor p = util::host(y_pred, who, "y_pred");
  if (p.dtype() != DType::float32 && p.dtype() != DType::float64) p = cast(p, DType::float32);
  const Tensor t = util::host_as(y_true, p.dtype(), who, "y_true");
  return losses::squeeze_or_expand_to_same_rank(t, p);
}

// Keras' convert_binary_labels_to_hinge: labels that are all 0 or 1 become -1 / 1; any other
// labels (already -1 / 1) are kept.
Tensor hinge_labels(const Tensor& t) {
  const Tensor binary = logical_or(equal(t, zeros_like(t)), equal(t, ones_like(t)));
  if (!reduce_all(binary).item<bool>()) return t;
  return sub(mul(t, scalar_like(t, 2.0)), scalar_like(t, 1.0));
}

}  // namespace

Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "mean_absolute_percentage_error");
  const Tensor diff = abs(div(sub(t, p), maximum(abs(t), util::kEpsilon)));
  return mul(reduce_mean(diff, {-1}), scalar_like(diff, 100.0));
}

Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "mean_squared_logarithmic_error");
  const Tensor first = log1p(maximum(p, util::kEpsilon));
  const Tensor second = log1p(maximum(t, util::kEpsilon));
  return reduce_mean(square(sub(first, second)), {-1});
}

Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "cosine_similarity");
  // Keras' ops.normalize (order 2): x * rsqrt(max(sum(x^2), epsilon^2)), so a zero vector stays 0.
  const auto normalize = [axis](const Tensor& x) {
    return mul(x, rsqrt(maximum(reduce_sum(square(x), {axis}, true), util::kEpsilon * util::kEpsilon)));
  };
  return reduce_sum(mul(normalize(t), normalize(p)), {axis});
}

Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "log_cosh");
  // log(cosh(x)) = x + log(1 + exp(-2x)) - log(2) = x + softplus(-2x) - log(2): no exp overflow.
  const Tensor x = sub(p, t);
  const Tensor value = sub(add(x, softplus(mul(x, scalar_like(x, -2.0)))), scalar_like(x, std::log(2.0)));
  return reduce_mean(value, {-1});
}

Tensor hinge(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "hinge");
  const Tensor margin = maximum(sub(ones_like(p), mul(hinge_labels(t), p)), 0.0);
  return reduce_mean(margin, {-1});
}

Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "squared_hinge");
  const Tensor margin = maximum(sub(ones_like(p), mul(hinge_labels(t), p)), 0.0);
  return reduce_mean(square(margin), {-1});
}

Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred) {
  autograd::NoRecordScope no_record;
  auto [t, p] = prepared(y_true, y_pred, "categorical_hinge");
  const Tensor pos = reduce_sum(mul(t, p), {-1});
  const Tensor neg = reduce_max(mul(sub(ones_like(t), t), p), {-1});
  return maximum(add(sub(neg, pos), ones_like(pos)), 0.0);
}

// ---- the metric classes ------------------------------------------------------------------------------

MeanAbsolutePercentageError::MeanAbsolutePercentageError(MeanAbsolutePercentageErrorOptions o)
    : MeanMetricWrapper(&metrics::mean_absolute_percentage_error, std::move(o.name), "down") {}

MeanSquaredLogarithmicError::MeanSquaredLogarithmicError(MeanSquaredLogarithmicErrorOptions o)
    : MeanMetricWrapper(&metrics::mean_squared_logarithmic_error, std::move(o.name), "down") {}

CosineSimilarity::CosineSimilarity(CosineSimilarityOptions o)
    : MeanMetricWrapper([axis = o.axis](const Tensor& t, const Tensor& p) { return cosine_similarity(t, p, axis); },
                        o.name, "up"),
      options_(o) {}

LogCoshError::LogCoshError(LogCoshErrorOptions o) : MeanMetricWrapper(&metrics::log_cosh, std::move(o.name), "down") {}

Hinge::Hinge(HingeOptions o) : MeanMetricWrapper(&metrics::hinge, std::move(o.name), "down") {}

SquaredHinge::SquaredHinge(SquaredHingeOptions o)
    : MeanMetricWrapper(&metrics::squared_hinge, std::move(o.name), "down") {}

CategoricalHinge::CategoricalHinge(CategoricalHingeOptions o)
    : MeanMetricWrapper(&metrics::categorical_hinge, std::move(o.name), "down") {}

}  // namespace keel::metrics
