// MultiHeadAttention: Keras' layer on top of the multi_head_attention() op.
//
// The weights keep Keras' EinsumDense shapes ([D, H, d] kernels) so that their names, shapes and
// glorot fans match Keras; each call views them as the 2-D matrices the op takes ([D, H*d]: the
// row-major flattening of (H, d) is exactly the head-major column order the op splits into heads).
#include "keel/layers/attention.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/core/device.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/attention_axes.hpp"
#include "layers/layer_util.hpp"
#include "layers/symbolic.hpp"

namespace keel::layers {

using detail::and_masks;
using detail::as_bool;

namespace {

// Masked scores get this rather than -inf (as Keras' masked softmax and the op do): a row masked
// everywhere stays finite.
constexpr double kMaskedScore = -1e9;

// Resets a flag when a call ends, also by an exception.
struct FlagScope {
  bool& flag;
  explicit FlagScope(bool& f) : flag(f) { flag = true; }
  ~FlagScope() { flag = false; }
};

}  // namespace

MultiHeadAttention::MultiHeadAttention(int num_heads, int key_dim, MultiHeadAttentionOptions options)
    : Layer(options.name), num_heads_(num_heads), key_dim_(key_dim), options_(std::move(options)) {
  if (num_heads <= 0)
    throw ValueError(fmt::format("MultiHeadAttention: num_heads must be a positive integer, got {}", num_heads));
  if (key_dim <= 0)
    throw ValueError(fmt::format("MultiHeadAttention: key_dim must be a positive integer, got {}", key_dim));
  if (options_.value_dim && *options_.value_dim <= 0)
    throw ValueError(fmt::format("MultiHeadAttention: value_dim must be a positive integer, got {}",
                                 *options_.value_dim));
  if (!(options_.dropout >= 0 && options_.dropout < 1))
    throw ValueError(fmt::format("MultiHeadAttention: dropout must be in [0, 1), got {}", options_.dropout));
  for (std::int64_t d : options_.output_shape)
    if (d <= 0)
      throw ValueError(fmt::format("MultiHeadAttention: output_shape dimensions must be positive, got {}",
                                   Shape(options_.output_shape).to_string()));
  // attention_axes are checked against the inputs' rank at the call (Keras resolves them in build).
  for (int a : options_.attention_axes)
    if (a == 0)
      throw ValueError("MultiHeadAttention: attention_axes cannot hold the batch axis 0");
}

std::vector<std::int64_t> MultiHeadAttention::out_dims() const {
  return options_.output_shape.empty() ? std::vector<std::int64_t>{query_dim_} : options_.output_shape;
}

void MultiHeadAttention::build(const std::vector<Shape>&) {}

void MultiHeadAttention::build_weights(std::int64_t query_dim, std::int64_t key_features,
                                       std::int64_t value_features) {
  query_dim_ = query_dim;
  key_features_ = key_features;
  value_features_ = value_features;
  const std::int64_t h = num_heads_, dk = key_dim_, dv = value_dim();
  const auto& o = options_;
  // Keras' creation order (query, key, value, attention_output) is the order of weights().
  wq_ = &add_weight("query/kernel", Shape{query_dim, h, dk}, o.kernel_initializer, true, o.kernel_regularizer, o.kernel_constraint);
  if (o.use_bias) bq_ = &add_weight("query/bias", Shape{h, dk}, o.bias_initializer, true, o.bias_regularizer, o.bias_constraint);
  wk_ = &add_weight("key/kernel", Shape{key_features, h, dk}, o.kernel_initializer, true, o.kernel_regularizer, o.kernel_constraint);
  if (o.use_bias) bk_ = &add_weight("key/bias", Shape{h, dk}, o.bias_initializer, true, o.bias_regularizer, o.bias_constraint);
  wv_ = &add_weight("value/kernel", Shape{value_features, h, dv}, o.kernel_initializer, true,
                    o.kernel_regularizer, o.kernel_constraint);
  if (o.use_bias) bv_ = &add_weight("value/bias", Shape{h, dv}, o.bias_initializer, true, o.bias_regularizer, o.bias_constraint);
  std::vector<std::int64_t> wo_shape{h, dv};
  const std::vector<std::int64_t> out = out_dims();
  wo_shape.insert(wo_shape.end(), out.begin(), out.end());
  wo_ = &add_weight("attention_output/kernel", Shape(wo_shape), o.kernel_initializer, true, o.kernel_regularizer, o.kernel_constraint);
  if (o.use_bias)
    bo_ = &add_weight("attention_output/bias", Shape(out), o.bias_initializer, true, o.bias_regularizer, o.bias_constraint);
  weights_built_ = true;
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value, const MultiHeadAttentionCall& c) {
  if (!query.defined() || !value.defined())
    throw ValueError(fmt::format("{} (MultiHeadAttention): query and value must be defined", name()));
  std::vector<Tensor> inputs{query, value};
  if (c.key.defined()) inputs.push_back(c.key);
  // The explicit masks become one attention mask (the masks riding on the inputs join in call()).
  Tensor mask = as_bool(c.attention_mask);
  if (c.query_mask.defined()) mask = and_masks(mask, expand_dims(as_bool(c.query_mask), -1));
  if (c.value_mask.defined()) mask = and_masks(mask, expand_dims(as_bool(c.value_mask), -2));
  if (c.key_mask.defined()) mask = and_masks(mask, expand_dims(as_bool(c.key_mask), -2));
  if (c.use_causal_mask) {
    if (detail::is_symbolic(query))
      throw ValueError(fmt::format(
          "{} (MultiHeadAttention): use_causal_mask on symbolic inputs: pass the causal mask as a bool "
          "input of the model instead ({{query, value, mask}})", name()));
    if (query.rank() < 2 || value.rank() < 2)
      throw ShapeError(fmt::format("{} (MultiHeadAttention): expected [batch, time, features] inputs, got "
                                   "query {} and value {}", name(), query.shape().to_string(),
                                   value.shape().to_string()));
    // [1, Tq, Tv]: query position i sees value positions j <= i (Keras' lower-triangular mask).
    const std::int64_t tq = query.shape()[1], tv = value.shape()[1];
    DeviceScope scope(query.device());
    const Tensor rows = reshape(arange(0, static_cast<double>(tq), 1, DType::int64), Shape{1, tq, 1});
    const Tensor cols = reshape(arange(0, static_cast<double>(tv), 1, DType::int64), Shape{1, 1, tv});
    mask = and_masks(mask, greater_equal(rows, cols));
  }
  if (mask.defined()) inputs.push_back(mask);
  return Layer::operator()(inputs, c.training);
}

std::pair<Tensor, Tensor> MultiHeadAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                               const MultiHeadAttentionCall& c) {
  scores_ = Tensor();
  Tensor out;
  {
    FlagScope scope(want_scores_);
    out = (*this)(query, value, c);
  }
  return {out, scores_};
}

Tensor MultiHeadAttention::call(const Tensor& inputs, bool) {
  throw ValueError(fmt::format("{} (MultiHeadAttention): needs a query and a value: call it with {{query, value}} "
                               "(or {{query, value, key}}), got one tensor {}",
                               name(), inputs.shape().to_string()));
}

Tensor MultiHeadAttention::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() < 2 || inputs.size() > 4)
    throw ValueError(fmt::format("{} (MultiHeadAttention): expected {{query, value[, key][, attention_mask]}}, "
                                 "got {} tensors", name(), inputs.size()));
  Tensor query = inputs[0], value = inputs[1], key, mask;
  for (std::size_t i = 2; i < inputs.size(); ++i) {
    if (inputs[i].dtype() == DType::bool_) {
      if (mask.defined())
        throw ValueError(fmt::format("{} (MultiHeadAttention): got two attention masks", name()));
      mask = inputs[i];
    } else {
      if (key.defined() || mask.defined())
        throw ValueError(fmt::format("{} (MultiHeadAttention): the inputs are {{query, value, key, mask}}: "
                                     "a float key after {}", name(), mask.defined() ? "the mask" : "the key"));
      key = inputs[i];
    }
  }
  // The masks riding on the inputs (Keras fills query_mask / value_mask / key_mask from them).
  const Tensor query_mask = as_bool(get_mask(query));
  const Tensor value_mask = as_bool(get_mask(value));
  const Tensor key_mask = key.defined() ? as_bool(get_mask(key)) : Tensor();

  const DType dt = query.dtype();  // the compute dtype operator() cast the inputs to
  query = detail::as_dtype(query, dt);
  value = detail::as_dtype(value, dt);
  key = key.defined() ? detail::as_dtype(key, dt) : value;
  const auto shapes = [&] {
    return fmt::format("query {}, value {}, key {}", query.shape().to_string(), value.shape().to_string(),
                       key.shape().to_string());
  };
  // Attention over the time axis of rank-3 inputs runs the fused op; any other attention_axes
  // (or rank) Keras' einsum formulation.
  const auto& axes = options_.attention_axes;
  const bool time_axis_only = axes.empty() || (axes.size() == 1 && (axes[0] == 1 || axes[0] == -2));
  if (query.rank() < 3 || value.rank() < 3 || key.rank() < 3)
    throw ShapeError(fmt::format("{} (MultiHeadAttention): expected inputs of rank >= 3 [batch, ..., features], "
                                 "got {}", name(), shapes()));
  if (query.rank() != 3 || !time_axis_only) return call_einsum(query, value, key, mask, query_mask, value_mask,
                                                               key_mask, training);
  if (query.rank() != 3 || value.rank() != 3 || key.rank() != 3)
    throw ShapeError(fmt::format("{} (MultiHeadAttention): expected inputs of rank 3 [batch, time, features], "
                                 "got {}", name(), shapes()));
  const std::int64_t batch = query.shape()[0], tq = query.shape()[1], tv = value.shape()[1];
  if (value.shape()[0] != batch || key.shape()[0] != batch)
    throw ShapeError(fmt::format("{} (MultiHeadAttention): batch sizes differ: {}", name(), shapes()));
  if (key.shape()[1] != tv)
    throw ShapeError(fmt::format("{} (MultiHeadAttention): key and value must have the same length: {}", name(),
                                 shapes()));
  if (!weights_built_) {
    build_weights(query.shape()[2], key.shape()[2], value.shape()[2]);
  } else if (query.shape()[2] != query_dim_ || key.shape()[2] != key_features_ ||
             value.shape()[2] != value_features_) {
    throw ShapeError(fmt::format("{} (MultiHeadAttention): built for query/key/value features {}/{}/{}, got {}",
                                 name(), query_dim_, key_features_, value_features_, shapes()));
  }

  // Keras' _compute_attention_mask: [B, Tq, 1] & [B, 1, Tv] & [B, 1, Tv] & attention_mask.
  if (query_mask.defined()) mask = and_masks(mask, expand_dims(query_mask, -1));
  if (value_mask.defined()) mask = and_masks(mask, expand_dims(value_mask, -2));
  if (key_mask.defined()) mask = and_masks(mask, expand_dims(key_mask, -2));

  const std::int64_t h = num_heads_, dk = key_dim_, dv = value_dim();
  const std::vector<std::int64_t> out = out_dims();
  std::int64_t out_size = 1;
  for (std::int64_t d : out) out_size *= d;
  const auto w = [&](const Variable* v, Shape shape) {
    return v == nullptr ? Tensor() : reshape(detail::as_dtype(v->value(), dt), std::move(shape));
  };
  MultiHeadAttentionWeights wt;
  wt.wq = w(wq_, Shape{query_dim_, h * dk});
  wt.bq = w(bq_, Shape{h * dk});
  wt.wk = w(wk_, Shape{key_features_, h * dk});
  wt.bk = w(bk_, Shape{h * dk});
  wt.wv = w(wv_, Shape{value_features_, h * dv});
  wt.bv = w(bv_, Shape{h * dv});
  wt.wo = w(wo_, Shape{h * dv, out_size});
  wt.bo = w(bo_, Shape{out_size});

  const bool drop = training && options_.dropout > 0;
  Tensor y;
  if (!drop && !want_scores_) {
    y = multi_head_attention(query, value, key, wt, num_heads_, mask);
  } else {
    // The op's maths, spelled out to reach the probabilities (scores, dropout).
    if (mask.defined() && (mask.rank() < 2 || mask.rank() > 4))
      throw ShapeError(fmt::format("{} (MultiHeadAttention): attention_mask must be [Tq, Tv], [batch, Tq, Tv] or "
                                   "[batch, heads, Tq, Tv] = [{}, {}, {}, {}], got {}",
                                   name(), batch, h, tq, tv, mask.shape().to_string()));
    DeviceScope scope(query.device());
    const auto project = [&](const Tensor& x, const Tensor& kernel, const Tensor& bias, std::int64_t depth) {
      const std::int64_t n = x.shape()[0], t = x.shape()[1];
      Tensor p = matmul(reshape(x, Shape{n * t, x.shape()[2]}), kernel);
      if (bias.defined()) p = add(p, bias);
      return transpose(reshape(p, Shape{n, t, h, depth}), {0, 2, 1, 3});  // [B, H, T, d]
    };
    Tensor qh = project(query, wt.wq, wt.bq, dk);
    qh = mul(qh, scalar_like(qh, 1.0 / std::sqrt(static_cast<double>(dk))));
    const Tensor kh = project(key, wt.wk, wt.bk, dk);
    const Tensor vh = project(value, wt.wv, wt.bv, dv);
    Tensor scores = matmul(qh, kh, false, true);  // [B, H, Tq, Tv]
    if (mask.defined()) {
      const Tensor m = mask.rank() == 3 ? expand_dims(mask, 1) : mask;  // the head axis
      const Shape joint = broadcast_shapes(m.shape(), scores.shape(), "MultiHeadAttention");
      if (joint != scores.shape())
        throw ShapeError(fmt::format("{} (MultiHeadAttention): attention_mask {} does not broadcast to the "
                                     "scores {}", name(), mask.shape().to_string(), scores.shape().to_string()));
      scores = where(m, scores, scalar_like(scores, kMaskedScore));
    }
    Tensor probs = softmax(scores, -1);
    if (want_scores_) scores_ = probs;
    if (drop) {
      std::optional<std::uint64_t> seed;
      if (options_.seed) seed = detail::mix(*options_.seed ^ detail::mix(training_calls_));
      ++training_calls_;
      probs = dropout(probs, options_.dropout, seed);
    }
    const Tensor attended = matmul(probs, vh);  // [B, H, Tq, dv]
    y = matmul(reshape(transpose(attended, {0, 2, 1, 3}), Shape{batch * tq, h * dv}), wt.wo);
    if (wt.bo.defined()) y = add(y, wt.bo);
  }
  std::vector<std::int64_t> y_dims{batch, tq};
  y_dims.insert(y_dims.end(), out.begin(), out.end());
  y = reshape(y, Shape(y_dims));
  if (query_mask.defined()) y = detail::attach_mask(y, query_mask);
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  return y;
}

Tensor MultiHeadAttention::call_einsum(const Tensor& query, const Tensor& value, const Tensor& key, Tensor mask,
                                       const Tensor& query_mask, const Tensor& value_mask, const Tensor& key_mask,
                                       bool training) {
  const Shape& qs = query.shape();
  const std::int64_t qd = qs[qs.rank() - 1], kd = key.shape()[key.rank() - 1], vd = value.shape()[value.rank() - 1];
  if (!weights_built_) {
    build_weights(qd, kd, vd);
  } else if (qd != query_dim_ || kd != key_features_ || vd != value_features_) {
    throw ShapeError(fmt::format("{} (MultiHeadAttention): built for query/key/value features {}/{}/{}, got query "
                                 "{}, value {}, key {}", name(), query_dim_, key_features_, value_features_,
                                 qs.to_string(), value.shape().to_string(), key.shape().to_string()));
  }
  // Keras' _compute_attention_mask, as written for any rank: query_mask[..., None],
  // value_mask and key_mask [..., None, :], and-ed with the attention mask.
  if (query_mask.defined()) mask = and_masks(mask, expand_dims(query_mask, -1));
  if (value_mask.defined()) mask = and_masks(mask, expand_dims(value_mask, -2));
  if (key_mask.defined()) mask = and_masks(mask, expand_dims(key_mask, -2));
  const DType dt = query.dtype();
  const auto w = [&](const Variable* v) { return v == nullptr ? Tensor() : detail::as_dtype(v->value(), dt); };
  detail::EinsumAttentionInputs in;
  in.query = query;
  in.value = value;
  in.key = key;
  in.wq = w(wq_);
  in.bq = w(bq_);
  in.wk = w(wk_);
  in.bk = w(bk_);
  in.wv = w(wv_);
  in.bv = w(bv_);
  in.wo = w(wo_);
  in.bo = w(bo_);
  in.axes = detail::resolve_attention_axes(options_.attention_axes, static_cast<std::int64_t>(qs.rank()), name());
  in.mask = mask;
  in.key_dim = key_dim_;
  in.layer_name = name();
  if (training && options_.dropout > 0) {
    in.dropout = options_.dropout;
    if (options_.seed) in.seed = detail::mix(*options_.seed ^ detail::mix(training_calls_));
    ++training_calls_;
  }
  detail::EinsumAttentionOutputs out = detail::einsum_attention(in);
  if (want_scores_) scores_ = out.scores;
  Tensor y = out.output;
  if (query_mask.defined()) y = detail::attach_mask(y, query_mask);
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  return y;
}

}  // namespace keel::layers
