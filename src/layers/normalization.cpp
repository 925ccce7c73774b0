// BatchNormalization and LayerNormalization over the fused ops batch_norm and layer_norm.
//
// batch_norm normalises over every axis but the last, so a BatchNormalization with another
// feature axis moves that axis last and back (two transposes, differentiable like the rest).
// Moving statistics are Variables written with assign() only in training calls: the op returns
// the updated values and never writes its inputs, so a tape recording the call stays valid.
#include "keel/layers/normalization.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::in_layer;
using detail::like;
using detail::normalized_axis;
using detail::required;
using detail::who;

namespace {

void check_epsilon(const Layer& layer, double epsilon) {
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    throw ValueError(fmt::format("{}: epsilon must be a positive number, got {}", who(layer), epsilon));
}

}  // namespace

// ---- BatchNormalization ----------------------------------------------------------------------

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  if (!(options_.momentum >= 0 && options_.momentum <= 1))  // also rejects NaN
    throw ValueError(fmt::format("{}: momentum must be in [0, 1], got {}", who(*this), options_.momentum));
  check_epsilon(*this, options_.epsilon);
}

void BatchNormalization::build(const Shape& s) {
  if (s.rank() < 2)
    throw ShapeError(fmt::format("{}: expected an input of rank >= 2 (batch, ..., features), got shape {}",
                                 who(*this), s.to_string()));
  axis_ = normalized_axis(*this, options_.axis, s);
  const Shape param{s[axis_]};
  // Keras' creation order: gamma, beta, then the two moving statistics (non-trainable).
  if (options_.scale)
    gamma_ = &add_weight("gamma", param, options_.gamma_initializer, true, options_.gamma_regularizer, options_.gamma_constraint);
  if (options_.center)
    beta_ = &add_weight("beta", param, options_.beta_initializer, true, options_.beta_regularizer, options_.beta_constraint);
  moving_mean_ = &add_weight("moving_mean", param, options_.moving_mean_initializer, false);
  moving_variance_ = &add_weight("moving_variance", param, options_.moving_variance_initializer, false);
}

void BatchNormalization::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape();
  if (s.rank() != b.rank() || s[axis_] != b[axis_])
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {} and {} features on axis {})",
                                 who(*this), s.to_string(), b.to_string(), b.rank(), b[axis_], axis_));
}

namespace {

// Keras 3's BatchNormalization._moments with a mask: the mean and the (biased) variance over the
// unmasked entries only, each entry weighted by its mask value, over every axis but the last:
//   mean = sum(m x) / (sum(m) + 1e-7),  var = sum(m (m x - mean)^2) / (sum(m) + 1e-7).
// `weights` is the mask as x's dtype with a trailing axis of 1, already in x's layout.
std::pair<Tensor, Tensor> masked_moments(const Tensor& x, const Tensor& weights) {
  std::vector<int> axes;
  for (int d = 0; d + 1 < static_cast<int>(x.rank()); ++d) axes.push_back(d);
  const Tensor w = broadcast_to(weights, Shape([&] {
    std::vector<std::int64_t> dims = x.shape().dims();
    dims.back() = 1;
    return dims;
  }()));
  const Tensor weighted = mul(w, x);
  const Tensor count = reduce_sum(w, axes) + 1e-7;  // [1]
  const Tensor mean = div(reduce_sum(weighted, axes), count);
  const Tensor var = div(reduce_sum(mul(w, square(sub(weighted, mean))), axes), count);
  return {mean, var};
}

}  // namespace

Tensor BatchNormalization::call(const Tensor& inputs, bool training) {
  Tensor x = inputs;  // float32 (or float64) from Layer::operator()
  const int rank = static_cast<int>(x.rank());
  const Tensor mask = get_mask(inputs);
  if (mask.defined() && mask.rank() != rank - 1)
    throw ValueError(fmt::format("{}: the mask must have one dimension less than the inputs; got mask shape {} for "
                                 "inputs of shape {}", who(*this), mask.shape().to_string(), inputs.shape().to_string()));
  // Move the feature axis last for the op (and back afterwards).
  std::vector<int> perm, inverse(static_cast<std::size_t>(rank));
  const bool moved = axis_ != rank - 1;
  if (moved) {
    for (int d = 0; d < rank; ++d)
      if (d != axis_) perm.push_back(d);
    perm.push_back(axis_);
    for (int i = 0; i < rank; ++i) inverse[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] = i;
    x = transpose(x, perm);
  }
  // A frozen BatchNormalization runs in inference mode even inside a training call (Keras 3).
  const bool train = training && trainable();
  const Tensor gamma = gamma_ ? like(gamma_->value(), x) : Tensor();
  const Tensor beta = beta_ ? like(beta_->value(), x) : Tensor();
  const Tensor mean = like(moving_mean_->value(), x);
  const Tensor var = like(moving_variance_->value(), x);
  Tensor y;
  if (train && mask.defined()) {
    // Batch statistics over the unmasked steps only; every entry is normalised with them, and
    // the moving averages move towards them (Keras 3).
    Tensor w = expand_dims(cast(mask, x.dtype()), -1);
    if (moved) w = transpose(w, perm);
    auto [batch_mean, batch_var] = in_layer(*this, [&] { return masked_moments(x, w); });
    y = mul(sub(x, batch_mean), rsqrt(batch_var + options_.epsilon));
    if (gamma.defined()) y = mul(y, gamma);
    if (beta.defined()) y = add(y, beta);
    autograd::NoRecordScope no_record;
    const double m = options_.momentum;
    const Tensor& mm = moving_mean_->peek();
    const Tensor& mv = moving_variance_->peek();
    moving_mean_->assign(mm * m + like(batch_mean, mm) * (1 - m));
    moving_variance_->assign(mv * m + like(batch_var, mv) * (1 - m));
  } else {
    BatchNormResult r = in_layer(*this, [&] {
      return batch_norm(x, gamma, beta, mean, var, train, options_.momentum, options_.epsilon);
    });
    if (train) {
      moving_mean_->assign(like(r.moving_mean, moving_mean_->peek()));
      moving_variance_->assign(like(r.moving_variance, moving_variance_->peek()));
    }
    y = r.y;
  }
  if (moved) y = transpose(y, inverse);
  // Keras' BatchNormalization supports masking: the mask passes on to the next layer.
  return mask.defined() ? detail::attach_mask(y, mask) : y;
}

Variable& BatchNormalization::gamma() const { return required(*this, gamma_, "gamma", "scale"); }
Variable& BatchNormalization::beta() const { return required(*this, beta_, "beta", "center"); }
Variable& BatchNormalization::moving_mean() const { return required(*this, moving_mean_, "moving_mean", ""); }
Variable& BatchNormalization::moving_variance() const {
  return required(*this, moving_variance_, "moving_variance", "");
}

// ---- LayerNormalization ----------------------------------------------------------------------

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  if (options_.axis.axes.empty())
    throw ValueError(fmt::format("{}: axis must name at least one axis", who(*this)));
  check_epsilon(*this, options_.epsilon);
}

void LayerNormalization::build(const Shape& s) {
  axes_.clear();
  for (int a : options_.axis.axes) axes_.push_back(normalized_axis(*this, a, s));
  std::sort(axes_.begin(), axes_.end());
  if (std::adjacent_find(axes_.begin(), axes_.end()) != axes_.end())
    throw ValueError(fmt::format("{}: axis names the same axis twice for an input of shape {}", who(*this),
                                 s.to_string()));
  // gamma and beta have the sizes of the normalised axes (Keras' param_shape).
  std::vector<std::int64_t> dims;
  for (int a : axes_) dims.push_back(s[a]);
  const Shape param(dims);
  if (options_.scale)
    gamma_ = &add_weight("gamma", param, options_.gamma_initializer, true, options_.gamma_regularizer, options_.gamma_constraint);
  if (options_.center)
    beta_ = &add_weight("beta", param, options_.beta_initializer, true, options_.beta_regularizer, options_.beta_constraint);
}

void LayerNormalization::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape();
  bool ok = s.rank() == b.rank();
  for (std::size_t i = 0; ok && i < axes_.size(); ++i) ok = s[axes_[i]] == b[axes_[i]];
  if (!ok)
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(the normalised axes must keep their sizes)",
                                 who(*this), s.to_string(), b.to_string()));
}

Tensor LayerNormalization::call(const Tensor& inputs, bool) {
  const Tensor& x = inputs;  // float32 (or float64) from Layer::operator()
  const Tensor gamma = gamma_ ? like(gamma_->value(), x) : Tensor();
  const Tensor beta = beta_ ? like(beta_->value(), x) : Tensor();
  return in_layer(*this, [&] { return layer_norm(x, gamma, beta, axes_, options_.epsilon); });
}

Variable& LayerNormalization::gamma() const { return required(*this, gamma_, "gamma", "scale"); }
Variable& LayerNormalization::beta() const { return required(*this, beta_, "beta", "center"); }

}  // namespace keel::layers
