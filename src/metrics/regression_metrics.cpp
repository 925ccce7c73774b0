// RootMeanSquaredError, R2Score and Sum (Keras 3's keras/src/metrics/regression_metrics.py and
// reduction_metrics.py): metrics whose state is more than a Mean's running average of one value
// per example, or whose result is not that average. Host arithmetic, double accumulators.
#include <cmath>
#include <numeric>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/metrics/metric.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

namespace {

std::string context_of(const Metric& m, const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
                       const Tensor& w) {
  return fmt::format("{} ({}): {} {}, {} {}, sample_weight {}: ", m.name(), m.class_name(), a_name,
                     util::shape_of(a), b_name, util::shape_of(b), util::shape_of(w));
}

}  // namespace

// ---- RootMeanSquaredError -----------------------------------------------------------------------------

RootMeanSquaredError::RootMeanSquaredError(RootMeanSquaredErrorOptions o) : Mean({.name = std::move(o.name)}) {
  set_direction("down");
}

void RootMeanSquaredError::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  util::with_context(context_of(*this, y_true, "y_true", y_pred, "y_pred", sample_weight), [&] {
    auto [t, p] = losses::squeeze_or_expand_to_same_rank(util::host_as(y_true, DType::float64, name(), "y_true"),
                                                         util::host_as(y_pred, DType::float64, name(), "y_pred"));
    accumulate(square(sub(p, t)), sample_weight);
  });
}

// The square root of the running mean: sqrt(total / count), 0 before any update.
double RootMeanSquaredError::result() const { return std::sqrt(Mean::result()); }

// ---- R2Score --------------------------------------------------------------------------------------------

R2Score::R2Score(R2ScoreOptions o) : Metric(o.name), options_(std::move(o)) {
  const auto& a = options_.class_aggregation;
  if (a && *a != "uniform_average" && *a != "variance_weighted_average")
    throw ValueError(fmt::format(
        "R2Score: invalid class_aggregation \"{}\"; expected none, \"uniform_average\" or "
        "\"variance_weighted_average\"",
        *a));
  if (options_.num_regressors < 0)
    throw ValueError(fmt::format("R2Score: num_regressors must be >= 0, got {}", options_.num_regressors));
  set_direction("up");
}

void R2Score::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  auto [t, p] = losses::squeeze_or_expand_to_same_rank(util::host_as(y_true, DType::float64, name(), "y_true"),
                                                       util::host_as(y_pred, DType::float64, name(), "y_pred"));
  if (t.rank() != 2 || p.rank() != 2 || t.shape() != p.shape())
    throw ShapeError(fmt::format(
        "{} (R2Score): expects y_true and y_pred of one shape [batch_size, output_dim], got y_true {} and y_pred {}",
        name(), y_true.shape().to_string(), y_pred.shape().to_string()));
  const auto rows = static_cast<std::size_t>(t.shape()[0]);
  const auto outputs = static_cast<std::size_t>(t.shape()[1]);
  if (sum_.empty()) {
    sum_.assign(outputs, 0.0);
    squared_sum_.assign(outputs, 0.0);
    total_mse_.assign(outputs, 0.0);
    count_.assign(outputs, 0.0);
  } else if (outputs != sum_.size()) {
    throw ShapeError(fmt::format("{} (R2Score): the metric was built for {} outputs, but y_pred {} has {}", name(),
                                 sum_.size(), y_pred.shape().to_string(), outputs));
  }
  std::vector<double> w(rows * outputs, 1.0);
  if (sample_weight.defined()) {
    Tensor sw = util::host_as(sample_weight, DType::float64, name(), "sample_weight");
    if (sw.rank() == 1) sw = expand_dims(sw, 1);  // per-sample weights get a features axis
    try {
      w = broadcast_to(sw, t.shape()).to_vector<double>();
    } catch (const ShapeError&) {
      throw ShapeError(fmt::format("{} (R2Score): sample_weight {} does not broadcast to y_true {}", name(),
                                   sample_weight.shape().to_string(), t.shape().to_string()));
    }
  }
  const auto yt = t.to_vector<double>(), yp = p.to_vector<double>();
  for (std::size_t r = 0; r < rows; ++r) {
    bool nonzero = false;
    for (std::size_t o = 0; o < outputs; ++o) {
      const std::size_t i = r * outputs + o;
      sum_[o] += w[i] * yt[i];
      squared_sum_[o] += w[i] * yt[i] * yt[i];
      total_mse_[o] += w[i] * (yt[i] - yp[i]) * (yt[i] - yp[i]);
      count_[o] += w[i];
      nonzero = nonzero || w[i] != 0.0;
    }
    // A sample counts once when it has a weight in some output (Keras' num_samples).
    num_samples_ += nonzero ? 1.0 : 0.0;
  }
}

// Per output: 1 - residual / total with total = sum(w y^2) - sum(w y) * mean; an infinite score
// (total 0, residual not) is 0, as Keras' where(isinf).
std::vector<double> R2Score::raw_scores() const {
  std::vector<double> scores(sum_.size());
  for (std::size_t o = 0; o < sum_.size(); ++o) {
    const double mean = sum_[o] / count_[o];
    const double total = squared_sum_[o] - sum_[o] * mean;
    const double s = 1.0 - total_mse_[o] / total;
    scores[o] = std::isinf(s) ? 0.0 : s;
  }
  return scores;
}

std::vector<double> R2Score::results() const {
  if (sum_.empty()) return {0.0};
  std::vector<double> scores = raw_scores();
  const auto& a = options_.class_aggregation;
  if (a && *a == "uniform_average") {
    scores = {std::accumulate(scores.begin(), scores.end(), 0.0) / static_cast<double>(scores.size())};
  } else if (a) {  // variance_weighted_average: each output weighted by its total sum of squares
    double weighted = 0, weights = 0;
    for (std::size_t o = 0; o < scores.size(); ++o) {
      const double total = squared_sum_[o] - sum_[o] * (sum_[o] / count_[o]);
      weighted += total * scores[o];
      weights += total;
    }
    scores = {weighted / weights};
  }
  // The adjusted R2; Keras falls back to the plain score (with a warning) when p >= n - 1.
  const double n = num_samples_, p = options_.num_regressors;
  if (p != 0 && p < n - 1)
    for (double& s : scores) s = 1.0 - (1.0 - s) * (n - 1.0) / (n - p - 1.0);
  return scores;
}

double R2Score::result() const {
  const std::vector<double> scores = results();
  if (scores.size() == 1) return scores[0];
  throw ValueError(fmt::format(
      "R2Score '{}': result() gives one number, but class_aggregation is none and there are {} outputs; read "
      "results() for one score per output",
      name(), scores.size()));
}

void R2Score::reset_state() {
  // The shapes stay built, as Keras' reset zeroes the variables it has.
  for (auto* v : {&sum_, &squared_sum_, &total_mse_, &count_}) v->assign(v->size(), 0.0);
  num_samples_ = 0;
}

// ---- Sum ------------------------------------------------------------------------------------------------

Sum::Sum(SumOptions o) : Metric(std::move(o.name)) {}

void Sum::update_state(const Tensor& values_in, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  util::with_context(context_of(*this, values_in, "values", Tensor{}, "(none)", sample_weight), [&] {
    Tensor values = util::host_as(values_in, DType::float64, name(), "values");
    if (sample_weight.defined()) {
      // Keras' reduce_to_samplewise_values with reduce_fn = sum: values summed down to the
      // weights' rank, then multiplied by the weights broadcast to them.
      auto [v, w] = losses::squeeze_or_expand_to_same_rank(
          values, util::host_as(sample_weight, DType::float64, name(), "sample_weight"));
      if (v.rank() > w.rank()) {
        std::vector<int> axes;
        for (auto a = w.rank(); a < v.rank(); ++a) axes.push_back(static_cast<int>(a));
        v = reduce_sum(v, axes);
      }
      values = mul(v, broadcast_to(w, v.shape()));
    }
    total_ += reduce_sum(values).item<double>();
  });
}

void Sum::update_state(const Tensor&, const Tensor&, const Tensor&) {
  throw ValueError(fmt::format(
      "{}: Sum::update_state takes (values, sample_weight), not (y_true, y_pred, sample_weight)", name()));
}

}  // namespace keel::metrics
