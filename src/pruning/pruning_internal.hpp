#pragma once
// What the pruning sources share: the schedules' JSON form (tfmot's get_config), the prunable
// weights of a layer, and the mask rules (computed on the host, as a mask update is rare).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "keel/pruning/pruning.hpp"

namespace keel::pruning::detail {

// {"class_name": "PolynomialDecay" | "ConstantSparsity", "config": {...}} and back; ValueError
// naming the key for a malformed one.
nlohmann::json schedule_json(const PruningSchedule& schedule);
PruningSchedule schedule_from_json(const nlohmann::json& j);

// ValueError for block options tfmot rejects (and for both options at once).
void validate_options(const PruningOptions& options);

// True for the classes of tfmot's PruneRegistry that keel has (see pruning.hpp).
bool prunable_class(const std::string& class_name);

// The weights of `layer` (its sublayers' included) that its class prunes; empty for a class
// that is not prunable.
std::vector<Variable*> prunable_weights(layers::Layer& layer);

// A new mask for `weights` (row-major, of `shape`) and its threshold.
struct MaskUpdate {
  std::vector<float> mask;
  float threshold = 0;
};
// tfmot's Pruning._update_mask: k = max(round(size * (1 - sparsity)), 1) weights are kept; the
// threshold is the k-th largest magnitude and every weight with |w| >= threshold stays (ties at
// the threshold all stay, so more than k may).
MaskUpdate magnitude_mask(const std::vector<float>& weights, double sparsity);
// tfmot's block pruning of a rank-2 weight: pooled magnitudes of block_size blocks (the pooling
// windows as TensorFlow's SAME padding places them), the rule above on the pooled values, and
// each block's mask spread over the weights of its block.
MaskUpdate block_mask(const std::vector<float>& weights, const Shape& shape, double sparsity,
                      std::array<int, 2> block_size, const std::string& pooling);
// tfmot's m_by_n mask: in every group of n consecutive weights along the second-to-last axis
// (a last partial group as if padded with zeros), the n - m largest magnitudes stay (ties: the
// lower index, as tf.math.top_k), the others are zeroed. The threshold is tfmot's placeholder 999.
MaskUpdate m_by_n_mask(const std::vector<float>& weights, const Shape& shape, std::array<int, 2> m_by_n);

}  // namespace keel::pruning::detail
