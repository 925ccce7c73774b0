// group_norm: Keras' GroupNormalization over the last axis as one op. Where the device has the
// fused kernels (src/cpu/normalization.cpp) the forward is one and the tape node's gradient is the
// closed form from its saved statistics, as layer_norm's; under a tape recording that backward (a
// second derivative) the same formula is written with differentiable ops. Elsewhere the op is a
// composite of moments and elementwise ops.
#include <fmt/core.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/record.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "ops/channel_param.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

namespace {

constexpr const char* kOp = "group_norm";

// x as [batch, pixels, groups, channels / groups]: the group statistics reduce axes {1, 3}.
Shape grouped(const Tensor& x, std::int64_t groups) {
  const std::int64_t n = x.shape()[0], c = x.shape()[x.rank() - 1];
  return Shape{n, n * c == 0 ? 0 : x.size() / (n * c), groups, c / groups};
}

// gamma or beta [C] as [1, 1, groups, C / groups].
Tensor per_channel(const Tensor& p, std::int64_t groups) {
  return reshape(p, Shape{1, 1, groups, p.size() / groups});
}

// The composite: the forward on a device without the kernels, and the statistics' dependence on x
// for an outer tape.
Tensor composite_group_norm(const Tensor& x, std::int64_t groups, const Tensor& gamma, const Tensor& beta,
                            double epsilon) {
  const Tensor g = reshape(x, grouped(x, groups));
  const auto [mean, var] = moments(g, {1, 3}, true);
  Tensor y = mul(sub(g, mean), rsqrt(add(var, scalar_like(var, epsilon))));
  if (gamma.defined()) y = mul(y, per_channel(gamma, groups));
  if (beta.defined()) y = add(y, per_channel(beta, groups));
  return reshape(y, x.shape());
}

// The first-order gradient with differentiable ops (an outer tape records it): with h = dy * gamma
// and xhat = (x - mean) * rstd over each group's m elements,
// dx = rstd * (h - mean(h) - xhat * mean(h * xhat)), dgamma = sum(dy * xhat), dbeta = sum(dy).
autograd::Grads differentiable_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, std::int64_t groups,
                                        double epsilon, const autograd::Needs& n) {
  const Shape gs = grouped(x, groups);
  const Tensor g = reshape(x, gs), d = reshape(dy, gs);
  const auto [mean, var] = moments(g, {1, 3}, true);
  const Tensor r = rsqrt(add(var, scalar_like(var, epsilon)));
  const Tensor xhat = mul(sub(g, mean), r);
  autograd::Grads out(3);
  if (n[0]) {
    const Tensor h = gamma.defined() ? mul(d, per_channel(gamma, groups)) : d;
    const Tensor centred = sub(h, reduce_mean(h, {1, 3}, true));
    const Tensor dx = mul(r, sub(centred, mul(xhat, reduce_mean(mul(h, xhat), {1, 3}, true))));
    out[0] = reshape(dx, x.shape());
  }
  if (n[1] && gamma.defined()) out[1] = reshape(reduce_sum(mul(d, xhat), {0, 1}), gamma.shape());
  if (n[2]) out[2] = reshape(reduce_sum(d, {0, 1}), Shape{x.shape()[x.rank() - 1]});
  return out;
}

}  // namespace

Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, double epsilon) {
  detail::check_float(x, kOp, "x");
  if (x.rank() < 2)
    throw ShapeError(fmt::format("{}: expected x of shape [batch, ..., channels], got {}", kOp, x.shape().to_string()));
  const std::int64_t channels = x.shape()[x.rank() - 1];
  if (groups <= 0 || channels % groups != 0)
    throw ValueError(fmt::format("{}: {} groups must be positive and divide the {} channels of x {}", kOp, groups,
                                 channels, x.shape().to_string()));
  if (!std::isfinite(epsilon) || epsilon < 0)
    throw ValueError(fmt::format("{}: epsilon must be finite and >= 0, got {}", kOp, epsilon));
  detail::check_channel_param(kOp, gamma, x, channels, "gamma", false);
  detail::check_channel_param(kOp, beta, x, channels, "beta", false);
  if ((x.dtype() != DType::float32 && x.dtype() != DType::float64) ||
      !backend::has_fused(backend::Fused::group_norm, x.device()))
    return composite_group_norm(x, groups, gamma, beta, epsilon);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  Tensor mean = detail::empty_tensor(Shape{x.shape()[0], groups}, x.dtype(), x.device());
  Tensor rstd = detail::empty_tensor(Shape{x.shape()[0], groups}, x.dtype(), x.device());
  backend::group_norm(xc, groups, detail::contiguous_or_none(gamma), detail::contiguous_or_none(beta), epsilon, y,
                      mean, rstd);
  if (autograd::recording()) {
    auto backward = [x, gamma, beta, mean, rstd, groups, epsilon](const autograd::Grads& g, const autograd::Needs& n) {
      if (autograd::recording()) return differentiable_backward(x, g[0], gamma, groups, epsilon, n);
      autograd::Grads out(3);
      if (n[0]) out[0] = detail::empty_tensor(x.shape(), x.dtype(), x.device());
      if (n[1] && gamma.defined()) out[1] = detail::empty_tensor(gamma.shape(), x.dtype(), x.device());
      if (n[2] && beta.defined()) out[2] = detail::empty_tensor(beta.shape(), x.dtype(), x.device());
      backend::group_norm_backward(x.contiguous(), g[0].contiguous(), detail::contiguous_or_none(gamma), mean, rstd,
                                   groups, out[0], out[1], out[2]);
      return out;
    };
    autograd::record(kOp, {x, gamma, beta}, {y}, backward,
                     gamma.defined() ? std::vector<Tensor>{x, gamma} : std::vector<Tensor>{x});
  }
  return y;
}

}  // namespace keel
