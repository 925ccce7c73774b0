// GroupNormalization, UnitNormalization and the Normalization preprocessing layer, as Keras 3.
// Each is a composition of differentiable ops (mean, variance, rsqrt...), so its gradients are
// the ops' (the statistics of Normalization are constants: adapt() computes them outside a tape).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "keel/layers/normalization.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::like;
using detail::normalized_axis;
using detail::required;
using detail::who;

// ---- GroupNormalization ----------------------------------------------------------------------

GroupNormalization::GroupNormalization(GroupNormalizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  if (options_.groups == 0 || options_.groups < -1)
    throw ValueError(fmt::format("{}: groups must be a positive integer or -1, got {}", who(*this), options_.groups));
  if (!(options_.epsilon > 0) || !std::isfinite(options_.epsilon))
    throw ValueError(fmt::format("{}: epsilon must be a positive number, got {}", who(*this), options_.epsilon));
}

void GroupNormalization::build(const Shape& s) {
  if (s.rank() < 2)
    throw ShapeError(fmt::format("{}: expects inputs [batch, ..., channels], got shape {}", who(*this), s.to_string()));
  axis_ = normalized_axis(*this, options_.axis, s);
  if (axis_ == 0)
    throw ValueError(fmt::format("{}: axis {} is the batch axis of inputs {}", who(*this), options_.axis, s.to_string()));
  const std::int64_t channels = s[axis_];
  const std::int64_t groups = options_.groups == -1 ? channels : options_.groups;
  // Keras' two checks.
  if (groups > channels)
    throw ValueError(fmt::format("{}: number of groups ({}) cannot be more than the number of channels ({}) of "
                                 "inputs {}", who(*this), groups, channels, s.to_string()));
  if (channels % groups != 0)
    throw ValueError(fmt::format("{}: number of groups ({}) must divide the number of channels ({}) of inputs {}",
                                 who(*this), groups, channels, s.to_string()));
  groups_ = static_cast<int>(groups);
  if (options_.scale)
    gamma_ = &add_weight("gamma", Shape{channels}, options_.gamma_initializer, true, options_.gamma_regularizer, options_.gamma_constraint);
  if (options_.center)
    beta_ = &add_weight("beta", Shape{channels}, options_.beta_initializer, true, options_.beta_regularizer, options_.beta_constraint);
}

void GroupNormalization::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape();
  if (s.rank() != b.rank() || s[axis_] != b[axis_])
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {} and {} channels on axis {})",
                                 who(*this), s.to_string(), b.to_string(), b.rank(), b[axis_], axis_));
}

Tensor GroupNormalization::call(const Tensor& inputs, bool) {
  const Tensor& x = inputs;
  const Shape& s = x.shape();
  if (axis_ == s.rank() - 1)  // channels last: the fused op
    return group_norm(x, groups_, gamma_ ? like(gamma_->value(), x) : Tensor(),
                      beta_ ? like(beta_->value(), x) : Tensor(), options_.epsilon);
  const std::int64_t channels = s[axis_];
  // [..., C, ...] -> [..., groups, C / groups, ...]: the statistics of each group are taken over
  // every non-batch axis except the group axis (Keras' _apply_normalization).
  std::vector<std::int64_t> grouped = s.dims();
  grouped[static_cast<std::size_t>(axis_)] = channels / groups_;
  grouped.insert(grouped.begin() + axis_, groups_);
  const Tensor g = reshape(x, Shape(grouped));
  std::vector<int> axes;
  for (int d = 1; d < static_cast<int>(grouped.size()); ++d)
    if (d != axis_) axes.push_back(d);
  auto [mean, var] = keel::moments(g, axes, true);  // biased variance, kept dims (ops.moments)
  Tensor y = reshape(mul(sub(g, mean), rsqrt(add(var, scalar_like(var, options_.epsilon)))), s);
  // gamma and beta per channel, broadcast over the other axes.
  std::vector<std::int64_t> bshape(static_cast<std::size_t>(s.rank()), 1);
  bshape[static_cast<std::size_t>(axis_)] = channels;
  if (gamma_) y = mul(y, reshape(like(gamma_->value(), x), Shape(bshape)));
  if (beta_) y = add(y, reshape(like(beta_->value(), x), Shape(bshape)));
  return y;
}

Variable& GroupNormalization::gamma() const { return required(*this, gamma_, "gamma", "scale"); }
Variable& GroupNormalization::beta() const { return required(*this, beta_, "beta", "center"); }

// ---- UnitNormalization -----------------------------------------------------------------------

UnitNormalization::UnitNormalization(UnitNormalizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  if (options_.axis.axes.empty())
    throw ValueError(fmt::format("{}: axis must name at least one axis", who(*this)));
}

Tensor UnitNormalization::call(const Tensor& inputs, bool) {
  std::vector<int> axes;
  for (int a : options_.axis.axes) axes.push_back(normalized_axis(*this, a, inputs.shape()));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    throw ValueError(fmt::format("{}: axis names the same axis twice for an input of shape {}", who(*this),
                                 inputs.shape().to_string()));
  // Keras' ops.normalize(order=2, epsilon=1e-12): x * min(rsqrt(sum x^2), 1 / epsilon).
  const Tensor inv = minimum(rsqrt(reduce_sum(square(inputs), axes, true)), 1e12);
  return mul(inputs, inv);
}

// ---- Normalization ---------------------------------------------------------------------------

Normalization::Normalization(NormalizationOptions options) : Layer(options.name), options_(std::move(options)) {
  if (options_.mean.empty() != options_.variance.empty())
    throw ValueError(fmt::format("{}: mean and variance must be given together (or neither, to adapt())", who(*this)));
  for (double v : options_.variance)
    if (!(v >= 0))
      throw ValueError(fmt::format("{}: variance must be non-negative, got {}", who(*this), v));
}

Shape Normalization::stats_shape(const Shape& s) {
  kept_.clear();
  for (int a : options_.axis) kept_.push_back(normalized_axis(*this, a, s));
  std::sort(kept_.begin(), kept_.end());
  if (std::adjacent_find(kept_.begin(), kept_.end()) != kept_.end())
    throw ValueError(fmt::format("{}: axis names the same axis twice for inputs of shape {}", who(*this), s.to_string()));
  if (!kept_.empty() && kept_[0] == 0)
    throw ValueError(fmt::format("{}: axis may not include the batch axis 0 (inputs {})", who(*this), s.to_string()));
  std::vector<std::int64_t> dims;
  for (int a : kept_) dims.push_back(s[a]);
  return Shape(dims);
}

void Normalization::build(const Shape& s) {
  if (mean_) {
    check_input_shape(s);
    return;
  }
  if (s.rank() < 1)
    throw ShapeError(fmt::format("{}: expects inputs with a batch dimension, got a scalar", who(*this)));
  const Shape stats = stats_shape(s);
  const std::int64_t n = stats.num_elements();
  initializers::Initializer mean_init = "zeros", var_init = "ones";
  if (!options_.mean.empty()) {
    const auto fixed = [&](const std::vector<double>& v, const char* what) {
      if (v.size() != 1 && static_cast<std::int64_t>(v.size()) != n)
        throw ValueError(fmt::format("{}: {} has {} values; expected 1 or {} (the kept axes {} of inputs {})",
                                     who(*this), what, v.size(), n, stats.to_string(), s.to_string()));
      return initializers::Initializer(
          [v, n](const Shape& shape, DType dt) {
            std::vector<double> full(static_cast<std::size_t>(n), v[0]);
            if (v.size() > 1) full = v;
            return constant(full, shape, dt);
          },
          "constant");
    };
    mean_init = fixed(options_.mean, "mean");
    var_init = fixed(options_.variance, "variance");
  }
  mean_ = &add_weight("mean", stats, mean_init, false);
  variance_ = &add_weight("variance", stats, var_init, false);
  set_built(s);
}

void Normalization::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape();
  bool ok = s.rank() == b.rank();
  for (std::size_t i = 0; ok && i < kept_.size(); ++i) ok = s[kept_[i]] == b[kept_[i]];
  if (!ok)
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(the kept axes must keep their sizes)", who(*this), s.to_string(), b.to_string()));
}

void Normalization::adapt(const Tensor& data) {
  if (!data.defined() || data.rank() < 1 || data.size() == 0)
    throw ValueError(fmt::format("{}: adapt() needs a non-empty tensor [N, ...]", who(*this)));
  if (!options_.mean.empty())
    throw ValueError(fmt::format("{}: adapt() on a layer with a fixed mean and variance", who(*this)));
  if (!built()) build(data.shape());
  else check_input_shape(data.shape());
  autograd::NoRecordScope no_record;
  const Tensor x = is_floating(data.dtype()) ? data : cast(data, DType::float32);
  // Keras: the mean and the biased variance over every axis but the kept ones.
  std::vector<int> axes;
  for (int d = 0; d < static_cast<int>(x.rank()); ++d)
    if (std::find(kept_.begin(), kept_.end(), d) == kept_.end()) axes.push_back(d);
  const Tensor mean = reduce_mean(x, axes, true);
  const Tensor var = reduce_mean(square(sub(x, mean)), axes);
  mean_->assign(like(reshape(mean, mean_->shape()), mean_->peek()));
  variance_->assign(like(reshape(var, variance_->shape()), variance_->peek()));
  adapted_ = true;
}

namespace {
// A [kept dims] statistic as a tensor broadcastable to inputs of `rank` (1 on the other axes).
Tensor broadcastable(const Tensor& stat, const std::vector<int>& kept, std::int64_t rank) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), 1);
  for (std::size_t i = 0; i < kept.size(); ++i) dims[static_cast<std::size_t>(kept[i])] = stat.shape()[static_cast<std::int64_t>(i)];
  return reshape(stat, Shape(dims));
}
}  // namespace

Tensor Normalization::mean() const {
  if (!mean_) throw ValueError(fmt::format("{}: mean() before the layer is built or adapted", who(*this)));
  return broadcastable(mean_->value(), kept_, built_shape().rank());
}

Tensor Normalization::variance() const {
  if (!variance_) throw ValueError(fmt::format("{}: variance() before the layer is built or adapted", who(*this)));
  return broadcastable(variance_->value(), kept_, built_shape().rank());
}

Tensor Normalization::call(const Tensor& inputs, bool) {
  const Tensor& x = inputs;
  const Tensor m = like(broadcastable(mean_->value(), kept_, x.rank()), x);
  const Tensor v = like(broadcastable(variance_->value(), kept_, x.rank()), x);
  // Keras: (x - mean) / max(sqrt(var), 1e-7); inverted: mean + x * max(sqrt(var), 1e-7).
  const Tensor sd = maximum(sqrt(v), 1e-7);
  return options_.invert ? add(m, mul(x, sd)) : div(sub(x, m), sd);
}

}  // namespace keel::layers
