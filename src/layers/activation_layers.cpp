// PReLU, ELU and ThresholdedReLU: compositions of differentiable ops (gradients from the ops).
#include "keel/layers/activation_layers.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/elementwise.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::ctor_label;
using detail::pass_mask;

using detail::who;

namespace {

}  // namespace

// ---- PReLU -----------------------------------------------------------------------------------

PReLU::PReLU(PReLUOptions options) : Layer(options.name), options_(std::move(options)) {
  for (int a : options_.shared_axes)
    if (a < 1)
      throw ValueError(fmt::format("{}: shared_axes are 1-based non-batch axes, got {}",
                                   ctor_label("PReLU", options_.name), a));
}

void PReLU::build(const Shape& s) {
  if (alpha_) {
    check_input_shape(s);
    return;
  }
  if (s.rank() < 2)
    throw ShapeError(fmt::format("{}: expects inputs [batch, ...], got shape {}", who(*this), s.to_string()));
  // Keras: param_shape = input_shape[1:], size 1 along every shared axis.
  std::vector<std::int64_t> param(s.dims().begin() + 1, s.dims().end());
  for (int a : options_.shared_axes) {
    if (a >= s.rank())
      throw ValueError(fmt::format("{}: shared axis {} is out of range for inputs of shape {}", who(*this), a,
                                   s.to_string()));
    param[static_cast<std::size_t>(a - 1)] = 1;
  }
  alpha_ = &add_weight("alpha", Shape(param), options_.alpha_initializer, true, options_.alpha_regularizer, options_.alpha_constraint);
  set_built(s);
}

void PReLU::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape();
  bool ok = s.rank() == b.rank();
  for (std::int64_t d = 1; ok && d < s.rank(); ++d) {
    const bool shared = std::find(options_.shared_axes.begin(), options_.shared_axes.end(), d) !=
                        options_.shared_axes.end();
    ok = shared || s[d] == b[d];
  }
  if (!ok)
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for",
                                 who(*this), s.to_string(), b.to_string()));
}

Tensor PReLU::call(const Tensor& inputs, bool) {
  const Tensor alpha = detail::like(alpha_->value(), inputs);
  // Keras: relu(x) + (-alpha * relu(-x)).
  return pass_mask(inputs, sub(relu(inputs), mul(alpha, relu(neg(inputs)))));
}

Variable& PReLU::alpha() {
  if (!alpha_) throw ValueError(fmt::format("{}: alpha() before the layer is built", who(*this)));
  return *alpha_;
}

// ---- ELU, ThresholdedReLU --------------------------------------------------------------------

ELU::ELU(double alpha, ELUOptions options) : Layer(std::move(options.name)), alpha_(alpha) {}

Tensor ELU::call(const Tensor& inputs, bool) { return pass_mask(inputs, elu(inputs, alpha_)); }

ThresholdedReLU::ThresholdedReLU(double theta, ThresholdedReLUOptions options)
    : Layer(options.name), theta_(theta) {
  if (!(theta >= 0))  // also rejects NaN
    throw ValueError(fmt::format("{}: theta cannot be negative, got {}", ctor_label("ThresholdedReLU", options.name),
                                 theta));
}

Tensor ThresholdedReLU::call(const Tensor& inputs, bool) {
  // Keras: x * cast(x > theta); the product keeps a NaN input NaN.
  const Tensor keep = cast(greater(inputs, scalar_like(inputs, theta_)), inputs.dtype());
  return pass_mask(inputs, mul(inputs, keep));
}

}  // namespace keel::layers
