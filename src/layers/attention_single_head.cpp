// Attention (Luong) and AdditiveAttention (Bahdanau), as Keras 3: single-head attention without
// projections, written with differentiable ops (their gradients are the ops').
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/core/device.hpp"
#include "keel/layers/attention.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"
#include "layers/symbolic.hpp"

namespace keel::layers {

using detail::and_masks;
using detail::as_bool;

using detail::who;

namespace {

// Sets the per-call state of a keyword call and clears it when the call ends (also by an exception).
template <class T>
struct Restore {
  T& slot;
  T saved;
  Restore(T& s, T value) : slot(s), saved(s) { slot = std::move(value); }
  ~Restore() { slot = std::move(saved); }
};

}  // namespace

Attention::Attention(AttentionOptions options) : Layer(options.name), options_(std::move(options)) {
  if (options_.score_mode != "dot" && options_.score_mode != "concat")
    throw ValueError(fmt::format("{}: score_mode must be \"dot\" or \"concat\", got \"{}\"", who(*this),
                                 options_.score_mode));
  if (!(options_.dropout >= 0 && options_.dropout < 1))
    throw ValueError(fmt::format("{}: dropout must be in [0, 1), got {}", who(*this), options_.dropout));
}

void Attention::build_weights(std::int64_t) {
  // Keras: scalar weights "scale" (use_scale) and "concat_score_weight" (concat), both ones.
  if (options_.use_scale) scale_ = &add_weight("scale", Shape{}, initializers::Initializer("ones"), true);
  if (options_.score_mode == "concat") concat_score_weight_ = &add_weight("concat_score_weight", Shape{}, initializers::Initializer("ones"), true);
}

void Attention::build(const std::vector<Shape>& shapes) {
  if (shapes.size() < 2 || shapes.size() > 3)
    throw ValueError(fmt::format("{}: expected {{query, value[, key]}}, got {} inputs", who(*this), shapes.size()));
  if (shapes[0].rank() != 3)
    throw ShapeError(fmt::format("{}: expected a query [batch, Tq, dim], got shape {}", who(*this),
                                 shapes[0].to_string()));
  build_weights(shapes[0][2]);
}

Tensor Attention::operator()(const Tensor& query, const Tensor& value, const AttentionCall& c) {
  if (!query.defined() || !value.defined())
    throw ValueError(fmt::format("{}: query and value must be defined", who(*this)));
  if (c.use_causal_mask && detail::is_symbolic(query))
    throw ValueError(fmt::format("{}: use_causal_mask on symbolic inputs is not supported: call the layer on "
                                 "tensors", who(*this)));
  std::vector<Tensor> inputs{query, value};
  if (c.key.defined()) inputs.push_back(c.key);
  Restore<bool> causal(causal_, c.use_causal_mask);
  Restore<Tensor> qm(query_mask_, c.query_mask), vm(value_mask_, c.value_mask);
  return Layer::operator()(inputs, c.training);
}

std::pair<Tensor, Tensor> Attention::call_with_scores(const Tensor& query, const Tensor& value,
                                                      const AttentionCall& c) {
  scores_ = Tensor();
  Tensor out;
  {
    Restore<bool> want(want_scores_, true);
    out = (*this)(query, value, c);
  }
  return {out, scores_};
}

Tensor Attention::call(const Tensor& inputs, bool) {
  throw ValueError(fmt::format("{}: needs a query and a value: call it with {{query, value}} (or {{query, value, "
                               "key}}), got one tensor {}", who(*this), inputs.shape().to_string()));
}

Tensor Attention::scores(const Tensor& q, const Tensor& k) {
  if (options_.score_mode == "dot") {
    Tensor s = matmul(q, k, false, true);  // [B, Tq, Tv]
    if (scale_) s = mul(s, detail::like(scale_->value(), s));
    return s;
  }
  // concat: [B, Tq, 1, D] + [B, 1, Tv, D], tanh, summed over D.
  Tensor sum = add(expand_dims(q, 2), expand_dims(k, 1));
  if (scale_) sum = mul(sum, detail::like(scale_->value(), sum));
  const Tensor s = reduce_sum(tanh(sum), {-1});
  return mul(s, detail::like(concat_score_weight_->value(), s));
}

Tensor Attention::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() < 2 || inputs.size() > 3)
    throw ValueError(fmt::format("{}: expected {{query, value[, key]}}, got {} inputs", who(*this), inputs.size()));
  const Tensor& q = inputs[0];
  const Tensor& v = inputs[1];
  const Tensor k = inputs.size() == 3 ? detail::as_dtype(inputs[2], q.dtype()) : v;
  const auto shapes = [&] {
    return fmt::format("query {}, value {}, key {}", q.shape().to_string(), v.shape().to_string(),
                       k.shape().to_string());
  };
  if (q.rank() != 3 || v.rank() != 3 || k.rank() != 3)
    throw ShapeError(fmt::format("{}: expected inputs of rank 3 [batch, time, dim], got {}", who(*this), shapes()));
  const std::int64_t batch = q.shape()[0], tq = q.shape()[1], tv = v.shape()[1];
  if (v.shape()[0] != batch || k.shape()[0] != batch)
    throw ShapeError(fmt::format("{}: batch sizes differ: {}", who(*this), shapes()));
  if (k.shape()[1] != tv)
    throw ShapeError(fmt::format("{}: key and value must have the same length: {}", who(*this), shapes()));
  if (k.shape()[2] != q.shape()[2])
    throw ShapeError(fmt::format("{}: query and key must have the same last dimension: {}", who(*this), shapes()));
  if (q.shape()[2] != built_shape()[2])
    throw ShapeError(fmt::format("{}: built for a query dimension of {}, got {}", who(*this), built_shape()[2],
                                 shapes()));
  const Tensor q_mask = as_bool(query_mask_.defined() ? query_mask_ : get_mask(q));
  const Tensor v_mask = as_bool(value_mask_.defined() ? value_mask_ : get_mask(v));

  Tensor s = scores(q, detail::as_dtype(k, q.dtype()));
  // Keras' scores mask: the value mask [B, 1, Tv] and the causal mask [1, Tq, Tv] (j <= i).
  Tensor mask = v_mask.defined() ? expand_dims(v_mask, -2) : Tensor();
  if (causal_) {
    DeviceScope scope(q.device());
    const Tensor rows = reshape(arange(0, static_cast<double>(tq), 1, DType::int64), Shape{1, tq, 1});
    const Tensor cols = reshape(arange(0, static_cast<double>(tv), 1, DType::int64), Shape{1, 1, tv});
    mask = and_masks(mask, greater_equal(rows, cols));
  }
  if (mask.defined()) {
    // Keras subtracts a large number where the mask is false (65504 in float16, 1e9 otherwise).
    const double big = s.dtype() == DType::float16 ? 65504.0 : 1e9;
    s = sub(s, mul(cast(logical_not(mask), s.dtype()), scalar_like(s, big)));
  }
  Tensor probs = softmax(s, -1);
  if (want_scores_) scores_ = probs;
  if ((training || in_training_call()) && options_.dropout > 0) {
    std::optional<std::uint64_t> seed;
    if (options_.seed) seed = detail::mix(*options_.seed ^ detail::mix(training_calls_));
    ++training_calls_;
    probs = dropout(probs, options_.dropout, seed);
  }
  Tensor y = matmul(probs, v);  // [B, Tq, dim]
  if (q_mask.defined()) {
    y = mul(y, cast(expand_dims(q_mask, -1), y.dtype()));
    y = detail::attach_mask(y, q_mask);
  }
  return y;
}

// ---- AdditiveAttention -----------------------------------------------------------------------

AdditiveAttention::AdditiveAttention(AdditiveAttentionOptions o)
    : Attention(AttentionOptions{.use_scale = o.use_scale, .score_mode = "dot", .dropout = o.dropout,
                                 .seed = o.seed, .name = o.name}) {}

void AdditiveAttention::build_weights(std::int64_t dim) {
  // Keras: a vector "scale" [dim], glorot_uniform.
  if (options_.use_scale) scale_ = &add_weight("scale", Shape{dim}, initializers::Initializer("glorot_uniform"), true);
}

Tensor AdditiveAttention::scores(const Tensor& q, const Tensor& k) {
  // sum_d scale_d * tanh(q[b, i, d] + k[b, j, d]).
  Tensor t = tanh(add(expand_dims(q, 2), expand_dims(k, 1)));  // [B, Tq, Tv, D]
  if (scale_) t = mul(t, detail::like(scale_->value(), t));
  return reduce_sum(t, {-1});
}

}  // namespace keel::layers
