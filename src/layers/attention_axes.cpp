// MultiHeadAttention over arbitrary attention_axes, as Keras computes it with einsum.
//
// With the projected rank r = input rank + 1 ([B, T..., heads, depth]) Keras names the query's
// axes a, b, c, ... (the target notation); the key's axes share the letters of the batch-like
// axes (every axis but the attended ones and the depth; the heads axis is one of them) and take
// fresh letters for the attended ones (the source notation). Then
//   scores   = einsum(source, target -> batch axes + query's attended + key's attended)(key, query)
//   probs    = softmax over the last len(axes) axes of scores (masked)
//   attended = einsum(product, source -> target)(probs, value)
// e.g. [B, H, W, C] attended over (1, 2): "afgde,abcde->adbcfg" and "adbcfg,afgde->abcde".
#include "layers/attention_axes.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/core/device.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/contraction.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"

namespace keel::layers::detail {

namespace {

constexpr double kMaskedScore = -1e9;  // as the fused op and Keras' large negative for float32

char letter(std::size_t i) { return static_cast<char>('a' + i); }

// EinsumDense "...D,DHd->...Hd": x [B, T..., D] against kernel [D, H, d], plus bias [H, d].
Tensor project_in(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  const Shape& xs = x.shape();
  const Shape& ks = kernel.shape();
  const std::int64_t d = xs[xs.rank() - 1];
  Tensor p = matmul(reshape(x, Shape{-1, d}), reshape(kernel, Shape{ks[0], ks[1] * ks[2]}));
  std::vector<std::int64_t> dims(xs.dims().begin(), xs.dims().end() - 1);
  dims.push_back(ks[1]);
  dims.push_back(ks[2]);
  p = reshape(p, Shape(dims));
  return bias.defined() ? add(p, bias) : p;
}

// EinsumDense "...Hd,HdO->...O": x [B, T..., H, dv] against kernel [H, dv, O...], plus bias [O...].
Tensor project_out(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  const Shape& xs = x.shape();
  const Shape& ks = kernel.shape();
  const std::int64_t hd = ks[0] * ks[1];
  const std::int64_t out = ks.num_elements() / std::max<std::int64_t>(hd, 1);
  Tensor y = matmul(reshape(x, Shape{-1, hd}), reshape(kernel, Shape{hd, out}));
  std::vector<std::int64_t> dims(xs.dims().begin(), xs.dims().end() - 2);
  dims.insert(dims.end(), ks.dims().begin() + 2, ks.dims().end());
  y = reshape(y, Shape(dims));
  return bias.defined() ? add(y, bias) : y;
}

}  // namespace

std::vector<int> resolve_attention_axes(const std::vector<int>& axes, std::int64_t rank, const std::string& name) {
  std::vector<int> out;
  if (axes.empty()) {
    for (std::int64_t i = 1; i + 1 < rank; ++i) out.push_back(static_cast<int>(i));
  } else {
    for (int a : axes) {
      const std::int64_t r = a < 0 ? rank + a : a;
      if (r < 1 || r > rank - 2)
        throw ValueError(fmt::format("{} (MultiHeadAttention): attention axis {} is not an axis between the batch "
                                     "and the feature axis of a rank-{} input (1 .. {})",
                                     name, a, rank, rank - 2));
      if (std::find(out.begin(), out.end(), static_cast<int>(r)) != out.end())
        throw ValueError(fmt::format("{} (MultiHeadAttention): attention axis {} given twice", name, a));
      out.push_back(static_cast<int>(r));
    }
  }
  if (out.empty())
    throw ShapeError(fmt::format("{} (MultiHeadAttention): a rank-{} input has no axis to attend over", name, rank));
  return out;
}

EinsumAttentionOutputs einsum_attention(const EinsumAttentionInputs& in) {
  const Shape& qs = in.query.shape();
  const Shape& vs = in.value.shape();
  const Shape& ks = in.key.shape();
  const std::size_t in_rank = qs.rank();
  const auto shapes = [&] {
    return fmt::format("query {}, value {}, key {}", qs.to_string(), vs.to_string(), ks.to_string());
  };
  if (vs.rank() != qs.rank() || ks.rank() != qs.rank())
    throw ShapeError(fmt::format("{} (MultiHeadAttention): query, value and key must have the same rank: {}",
                                 in.layer_name, shapes()));
  // Batch-like axes are shared letters: they must agree; the attended ones of key and value too.
  for (std::size_t i = 0; i + 1 < in_rank; ++i) {
    const bool attended = std::find(in.axes.begin(), in.axes.end(), static_cast<int>(i)) != in.axes.end();
    if (!attended && (vs[i] != qs[i] || ks[i] != qs[i]))
      throw ShapeError(fmt::format("{} (MultiHeadAttention): axis {} is not attended over, so query, value and key "
                                   "must agree on it: {}", in.layer_name, i, shapes()));
    if (attended && ks[i] != vs[i])
      throw ShapeError(fmt::format("{} (MultiHeadAttention): key and value differ on attended axis {}: {}",
                                   in.layer_name, i, shapes()));
  }

  // Keras' _build_attention_equation on the projected rank.
  const std::size_t r = in_rank + 1;
  std::string target, source;
  std::vector<std::size_t> batch_dims;
  for (std::size_t i = 0; i < r; ++i) target += letter(i);
  std::size_t offset = r;
  for (std::size_t i = 0; i < r; ++i) {
    const bool attended = std::find(in.axes.begin(), in.axes.end(), static_cast<int>(i)) != in.axes.end();
    if (!attended && i != r - 1) batch_dims.push_back(i);
    source += attended ? letter(offset++) : target[i];
  }
  std::string product;
  for (std::size_t i : batch_dims) product += target[i];
  for (int a : in.axes) product += target[static_cast<std::size_t>(a)];
  for (int a : in.axes) product += source[static_cast<std::size_t>(a)];
  const std::string dot_equation = source + "," + target + "->" + product;
  const std::string combine_equation = product + "," + source + "->" + target;

  DeviceScope scope(in.query.device());
  Tensor q = project_in(in.query, in.wq, in.bq);  // [B, T..., H, dk]
  const Tensor k = project_in(in.key, in.wk, in.bk);
  const Tensor v = project_in(in.value, in.wv, in.bv);
  q = mul(q, scalar_like(q, 1.0 / std::sqrt(static_cast<double>(in.key_dim))));
  Tensor scores = einsum(dot_equation, {k, q});

  // Softmax over the last n = len(axes) axes, flattened into one.
  const std::size_t n = in.axes.size();
  const Shape score_shape = scores.shape();
  const std::int64_t sr = score_shape.rank();
  const std::int64_t n2 = 2 * static_cast<std::int64_t>(n);
  if (in.mask.defined()) {
    // Keras' _masked_softmax: the mask gains axes at -2n - 1 (the heads axis) until its rank is
    // the scores' rank, then broadcasts.
    Tensor m = in.mask;
    // A mask below rank 2n has no query and key axes to line up with (Keras' expand_dims fails).
    if (m.rank() > sr || m.rank() < n2)
      throw ShapeError(fmt::format("{} (MultiHeadAttention): attention_mask {} does not fit the scores {} (it needs "
                                   "rank {} .. {}: [batch..., query axes, key axes])", in.layer_name,
                                   m.shape().to_string(), score_shape.to_string(), n2, sr));
    while (m.rank() < sr) m = expand_dims(m, -static_cast<int>(n2) - 1);
    const Shape joint = broadcast_shapes(m.shape(), score_shape, "MultiHeadAttention");
    if (joint != score_shape)
      throw ShapeError(fmt::format("{} (MultiHeadAttention): attention_mask {} does not broadcast to the scores {}",
                                   in.layer_name, in.mask.shape().to_string(), score_shape.to_string()));
    scores = where(m, scores, scalar_like(scores, kMaskedScore));
  }
  std::vector<std::int64_t> flat(score_shape.dims().begin(), score_shape.dims().end() - static_cast<std::ptrdiff_t>(n));
  flat.push_back(-1);
  Tensor probs = reshape(softmax(reshape(scores, Shape(flat)), -1), score_shape);
  EinsumAttentionOutputs out;
  out.scores = probs;
  if (in.dropout > 0) probs = dropout(probs, in.dropout, in.seed);
  const Tensor attended = einsum(combine_equation, {probs, v});  // [B, T..., H, dv]
  out.output = project_out(attended, in.wo, in.bo);
  return out;
}

}  // namespace keel::layers::detail
