// The mask rules of tfmot's pruning_impl.py and pruning_utils.py (magnitude threshold, block
// pooling, m_by_n), the block options' validation and the table of prunable weights.
#include <fmt/core.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "pruning/pruning_internal.hpp"

namespace keel::pruning::detail {

void validate_options(const PruningOptions& o) {
  const auto& b = o.block_size;
  if (b[0] < 1 || b[1] < 1)
    throw ValueError(fmt::format("PruneLowMagnitude: block_size must be two positive integers, got [{}, {}]", b[0], b[1]));
  if (o.block_pooling_type != "AVG" && o.block_pooling_type != "MAX")
    throw ValueError(fmt::format("PruneLowMagnitude: unsupported pooling type '{}'. Should be 'AVG' or 'MAX'.",
                                 o.block_pooling_type));
  if (o.sparsity_m_by_n) {
    const auto [m, n] = *o.sparsity_m_by_n;
    if (m < 1 || n < 2 || m >= n)
      throw ValueError(fmt::format("PruneLowMagnitude: sparsity_m_by_n {{m, n}} needs 0 < m < n (m zeros in every n "
                                   "consecutive weights), got [{}, {}]", m, n));
    if (b[0] != 1 || b[1] != 1)
      throw ValueError(fmt::format("PruneLowMagnitude: sparsity_m_by_n [{}, {}] and block_size [{}, {}] exclude each "
                                   "other", m, n, b[0], b[1]));
  }
}

namespace {

// tfmot's PruneRegistry: class -> the weights it prunes (by their last name component).
const std::map<std::string, std::set<std::string>>& prunable_table() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"Dense", {"kernel"}},
      {"Conv1D", {"kernel"}},
      {"Conv2D", {"kernel"}},
      {"Conv3D", {"kernel"}},
      {"Conv1DTranspose", {"kernel"}},
      {"Conv2DTranspose", {"kernel"}},
      {"Conv3DTranspose", {"kernel"}},
      {"DepthwiseConv1D", {"depthwise_kernel"}},
      {"DepthwiseConv2D", {"depthwise_kernel"}},
      {"SeparableConv1D", {"pointwise_kernel"}},
      {"SeparableConv2D", {"pointwise_kernel"}},
      {"Embedding", {"embeddings"}},
      {"SimpleRNN", {"kernel", "recurrent_kernel"}},
      {"LSTM", {"kernel", "recurrent_kernel"}},
      {"GRU", {"kernel", "recurrent_kernel"}},
      {"ConvLSTM1D", {"kernel", "recurrent_kernel"}},
      {"ConvLSTM2D", {"kernel", "recurrent_kernel"}},
      {"ConvLSTM3D", {"kernel", "recurrent_kernel"}},
      {"Bidirectional", {"kernel", "recurrent_kernel"}},
      {"MultiHeadAttention", {"kernel"}},
  };
  return table;
}

}  // namespace

bool prunable_class(const std::string& class_name) { return prunable_table().count(class_name) == 1; }

std::vector<Variable*> prunable_weights(layers::Layer& layer) {
  const auto& table = prunable_table();
  auto it = table.find(layer.class_name());
  if (it == table.end()) return {};
  std::vector<Variable*> out;
  for (Variable* v : layer.weights()) {
    const std::string& n = v->name();
    const auto slash = n.rfind('/');
    if (it->second.count(slash == std::string::npos ? n : n.substr(slash + 1))) out.push_back(v);
  }
  return out;
}

namespace {

// k = max(round(float32(size) * (1 - sparsity)), 1), rounding half to even like tf.math.round.
std::size_t kept_count(std::size_t size, double sparsity) {
  const float kf = static_cast<float>(size) * (1.0f - static_cast<float>(sparsity));
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const float r = std::nearbyint(kf);
  std::fesetround(saved);
  const double k = std::max<double>(r, 1.0);
  return static_cast<std::size_t>(std::min<double>(k, static_cast<double>(size)));
}

}  // namespace

MaskUpdate magnitude_mask(const std::vector<float>& weights, double sparsity) {
  MaskUpdate out;
  out.mask.assign(weights.size(), 1.0f);
  if (weights.empty()) return out;
  std::vector<float> mags(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) mags[i] = std::fabs(weights[i]);
  std::vector<float> sorted = mags;
  const std::size_t k = kept_count(weights.size(), sparsity);
  // values = top_k(|w|, size) sorted descending; threshold = values[k - 1].
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k - 1), sorted.end(), std::greater<float>());
  out.threshold = sorted[k - 1];
  for (std::size_t i = 0; i < mags.size(); ++i) out.mask[i] = mags[i] >= out.threshold ? 1.0f : 0.0f;
  return out;
}

MaskUpdate block_mask(const std::vector<float>& weights, const Shape& shape, double sparsity,
                      std::array<int, 2> block_size, const std::string& pooling) {
  const std::int64_t h = shape[0], w = shape[1];
  const std::int64_t bh = block_size[0], bw = block_size[1];
  const std::int64_t oh = (h + bh - 1) / bh, ow = (w + bw - 1) / bw;
  // TensorFlow's SAME padding with stride = window puts floor(pad / 2) before each axis; the
  // expansion back (pruning_utils.expand_tensor, then a slice from 0) does not shift, as tfmot.
  const std::int64_t ph = (oh * bh - h) / 2, pw = (ow * bw - w) / 2;
  const bool avg = pooling == "AVG";
  std::vector<float> pooled(static_cast<std::size_t>(oh * ow));
  for (std::int64_t i = 0; i < oh; ++i)
    for (std::int64_t j = 0; j < ow; ++j) {
      const std::int64_t r0 = std::max<std::int64_t>(i * bh - ph, 0), r1 = std::min<std::int64_t>(i * bh - ph + bh, h);
      const std::int64_t c0 = std::max<std::int64_t>(j * bw - pw, 0), c1 = std::min<std::int64_t>(j * bw - pw + bw, w);
      double acc = avg ? 0.0 : -1.0;
      std::int64_t count = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const double m = std::fabs(weights[static_cast<std::size_t>(r * w + c)]);
          acc = avg ? acc + m : std::max(acc, m);
          ++count;
        }
      // Padding does not count towards an average (TensorFlow's avg_pool).
      pooled[static_cast<std::size_t>(i * ow + j)] = count == 0 ? 0.0f : static_cast<float>(avg ? acc / count : acc);
    }
  const MaskUpdate blocks = magnitude_mask(pooled, sparsity);
  MaskUpdate out;
  out.threshold = blocks.threshold;
  out.mask.resize(weights.size());
  for (std::int64_t r = 0; r < h; ++r)
    for (std::int64_t c = 0; c < w; ++c)
      out.mask[static_cast<std::size_t>(r * w + c)] = blocks.mask[static_cast<std::size_t>((r / bh) * ow + c / bw)];
  return out;
}

MaskUpdate m_by_n_mask(const std::vector<float>& weights, const Shape& shape, std::array<int, 2> m_by_n) {
  const int rank = shape.rank();
  const std::int64_t in = shape[rank - 2], outs = shape[rank - 1];
  std::int64_t pre = 1;
  for (int d = 0; d < rank - 2; ++d) pre *= shape[d];
  const std::int64_t n = m_by_n[1], keep = m_by_n[1] - m_by_n[0];
  MaskUpdate result;
  result.threshold = 999.0f;  // tfmot: "we need to return some numbers for threshold"
  result.mask.assign(weights.size(), 0.0f);
  std::vector<std::int64_t> idx;
  for (std::int64_t p = 0; p < pre; ++p)
    for (std::int64_t o = 0; o < outs; ++o)
      for (std::int64_t g = 0; g < in; g += n) {
        const std::int64_t end = std::min(g + n, in);
        idx.resize(static_cast<std::size_t>(end - g));
        std::iota(idx.begin(), idx.end(), g);
        const auto at = [&](std::int64_t i) { return static_cast<std::size_t>((p * in + i) * outs + o); };
        // Largest magnitudes first; equal ones in index order (tf.math.top_k keeps the lower index).
        std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
          return std::fabs(weights[at(a)]) > std::fabs(weights[at(b)]);
        });
        const std::size_t kept = static_cast<std::size_t>(std::min<std::int64_t>(keep, end - g));
        for (std::size_t t = 0; t < kept; ++t) result.mask[at(idx[t])] = 1.0f;
      }
  return result;
}

}  // namespace keel::pruning::detail
