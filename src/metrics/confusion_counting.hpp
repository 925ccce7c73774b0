#pragma once
// The confusion-matrix counting that Precision, Recall and AUC (confusion_metrics.cpp) share with
// the threshold-count metrics (threshold_metrics.cpp): Keras' update_confusion_matrix_variables
// on the host, with its optimised bucketed path for evenly spaced thresholds.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "keel/metrics/metric.hpp"

namespace keel::metrics::detail {

// One batch flattened into (prediction, label, weight) triples.
struct ConfusionInputs {
  std::vector<float> pred;     // every element, flattened row-major
  std::vector<char> positive;  // label != 0
  std::vector<double> weight;  // per element; empty: all 1
  std::size_t width = 1;       // the last axis (labels per row) when y_pred has rank >= 2, else 1
  std::size_t rank = 0;        // y_pred's rank after the rank alignment
  double w(std::size_t i) const { return weight.empty() ? 1.0 : weight[i]; }
};

// Ranks aligned, y_true and y_pred of one shape (ShapeError otherwise), per-sample weights
// broadcast over the rest of each sample, then top_k and class_id applied; errors name `who`.
ConfusionInputs confusion_inputs(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight,
                                 std::optional<int> top_k, std::optional<int> class_id, const std::string& who);
// Keras' is_evenly_distributed_thresholds.
bool evenly_distributed(const std::vector<double>& thresholds);
// Adds the batch to `c` ([threshold][label] with `labels` curves): bucketed when `evenly`.
void count(const ConfusionInputs& in, const std::vector<double>& thresholds, bool evenly, std::size_t labels,
           ConfusionCounts& c);
// Keras' parse_init_thresholds: those given (each in [0, 1]), or 0.5, or with top_k NEG_INF.
std::vector<double> applied_thresholds(const Thresholds& t, const std::optional<int>& top_k, const char* who);
// The one value of a single-threshold metric; with several, a ValueError pointing to results().
double single(const std::vector<double>& values, const std::vector<double>& thresholds, const Metric& m,
              const char* what);

}  // namespace keel::metrics::detail
