// Normalisation: moments, batch_norm, layer_norm.
//
// batch_norm and layer_norm (over trailing axes) are hot paths, so where the device has fused
// kernels (backend/fused.hpp; src/cpu/normalization.cpp) each forward is one, recorded as ONE
// tape node with the closed-form gradient (the pattern of softmax in nn.cpp). Their backward
// functions come in two forms that compute the same numbers:
//  * no tape is recording the backward itself (the usual first-order case): fused kernels that
//    reuse the statistics saved by the forward;
//  * an outer tape is recording it (second derivatives, gradient penalties): the same formula
//    written with differentiable ops, with the statistics recomputed from x by differentiable ops
//    so the outer tape sees how they depend on x. (The saved statistics were computed by the
//    kernel, so no tape knows where they came from.)
// moments and layer_norm over non-trailing axes are composites of other ops.
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <tuple>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "ops/channel_param.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

void check_epsilon(double epsilon, const char* op) {
  if (!std::isfinite(epsilon) || epsilon < 0)
    throw ValueError(fmt::format("{}: epsilon must be finite and >= 0, got {}", op, epsilon));
}

std::vector<int> leading_axes(std::int64_t count) {
  std::vector<int> axes(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) axes[static_cast<std::size_t>(i)] = static_cast<int>(i);
  return axes;
}

// reduce_sum over `axes`, where an empty list means "no axis" (reduce_sum's empty list means
// every axis).
Tensor sum_over(const Tensor& t, const std::vector<int>& axes, bool keepdims) {
  return axes.empty() ? t : reduce_sum(t, axes, keepdims);
}

// A small parameter (gamma, beta, statistics) as the kernels read it: contiguous, or undefined.
// ---- batch norm ------------------------------------------------------------------------------

// Closed-form training gradient with fused kernels (the first-order case). With
// xhat = (x - mean) * rstd, per channel over the M rows:
//   dbeta = sum(g),  dgamma = sum(g * xhat),
//   dx = gamma * rstd * (g - dbeta / M - xhat * dgamma / M)
// which the kernel evaluates as dx = a*g + b*(x - mean) + e with per-channel a, b, e.
Grads bn_train_backward_fused(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, const Needs& need) {
  const std::int64_t C = x.shape()[x.rank() - 1];
  Grads out(5);
  if (need[0]) out[0] = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  if (need[1]) out[1] = detail::empty_tensor(Shape{C}, x.dtype(), x.device());
  if (need[2]) out[2] = detail::empty_tensor(Shape{C}, x.dtype(), x.device());
  backend::batch_norm_train_backward(x.contiguous(), dy.contiguous(), detail::contiguous_or_none(gamma), mean, rstd,
                                     out[0], out[1], out[2]);
  return out;
}

// The same gradient with differentiable ops and the statistics recomputed from x, for when an
// outer tape records the backward (second derivatives).
Grads bn_train_backward_composite(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                  double epsilon, const Needs& need) {
  const std::int64_t C = x.shape()[x.rank() - 1];
  const std::vector<int> lead = leading_axes(x.rank() - 1);
  const auto n = static_cast<double>(C == 0 ? 0 : x.size() / C);
  const Tensor mean = reduce_mean(x, lead, true);
  const Tensor xc = sub(x, mean);
  const Tensor var = reduce_mean(square(xc), lead, true);
  const Tensor rstd = rsqrt(add(var, scalar_like(var, epsilon)));
  const Tensor xhat = mul(xc, rstd);
  const Tensor gsum = reduce_sum(dy, lead, true);
  const Tensor gx = reduce_sum(mul(dy, xhat), lead, true);
  Grads out(5);
  if (need[0]) {
    const Tensor a = gamma.defined() ? mul(gamma, rstd) : rstd;
    out[0] = mul(a, sub(dy, div(add(gsum, mul(xhat, gx)), scalar_like(gx, n))));
  }
  if (need[1]) out[1] = reshape(gx, Shape{C});
  if (need[2]) out[2] = reshape(gsum, Shape{C});
  return out;
}

// Inference: y = (x - mm) * gamma / sqrt(mv + eps) + beta, an affine map per channel, so its
// gradient is a handful of ops (and differentiable as written).
Grads bn_inference_backward(const Tensor& x, const Tensor& gamma, const Tensor& mm,
                            const Tensor& mv, const Tensor& dy, double epsilon, const Needs& need) {
  const std::vector<int> lead = leading_axes(x.rank() - 1);
  const Tensor rinv = rsqrt(add(mv, scalar_like(mv, epsilon)));
  const Tensor scale = gamma.defined() ? mul(gamma, rinv) : rinv;
  Grads out(5);
  if (need[0]) out[0] = mul(dy, scale);
  Tensor gsum, gxc;
  if (need[2] || need[3]) gsum = reduce_sum(dy, lead);
  if (need[1] || need[4]) gxc = reduce_sum(mul(dy, sub(x, mm)), lead);  // sum(g * (x - mm))
  if (need[1]) out[1] = mul(gxc, rinv);
  if (need[2]) out[2] = gsum;
  if (need[3]) out[3] = neg(mul(gsum, scale));
  // d/dv (v + eps)^(-1/2) = -(v + eps)^(-3/2) / 2
  if (need[4]) out[4] = mul(mul(gxc, scale), mul(square(rinv), scalar_like(rinv, -0.5)));
  return out;
}

}  // namespace

// ---- moments -----------------------------------------------------------------------------------

namespace {

// The composite: reductions and elementwise ops (a GPU, half floats, runs of fewer than 4 elements).
// Biased variance, as tf.nn.moments. No stop_gradient on the mean (TensorFlow has one): the first
// derivative is the same either way, but the second is only right without it.
std::pair<Tensor, Tensor> composite_moments(const Tensor& x, const std::vector<int>& ax) {
  const Tensor mean = reduce_mean(x, ax, true);
  return {mean, reduce_mean(square(sub(x, mean)), ax, true)};
}

// Over the block of consecutive axes [first, last) of a float32/float64 x: one fused kernel for
// both statistics, recorded as one tape node with the closed-form gradient
// dx = (x - mean) * 2 g_var / n + g_mean / n.
std::pair<Tensor, Tensor> fused_moments(const Tensor& x, const std::vector<int>& ax) {
  const int first = ax.front(), last = ax.back() + 1;
  std::vector<std::int64_t> kept = x.shape().dims();
  std::int64_t n = 1;
  for (int a : ax) {
    n *= kept[static_cast<std::size_t>(a)];
    kept[static_cast<std::size_t>(a)] = 1;
  }
  Tensor mean = detail::empty_tensor(Shape(kept), x.dtype(), x.device());
  Tensor var = detail::empty_tensor(Shape(kept), x.dtype(), x.device());
  backend::moments(x.contiguous(), first, last, mean, var);
  if (autograd::recording())
    autograd::record("moments", {x}, {mean, var}, [x, mean, ax, first, last, n](const Grads& g, const Needs& need) {
      if (!need[0]) return Grads{Tensor()};
      if (!autograd::recording()) {
        Tensor dx = detail::empty_tensor(x.shape(), x.dtype(), x.device());
        backend::moments_backward(x.contiguous(), first, last, mean, g[0].contiguous(), g[1].contiguous(), dx);
        return Grads{dx};
      }
      // An outer tape records this backward: the same formula with differentiable ops, the mean
      // recomputed from x so that the outer tape sees how it depends on x.
      const Tensor m = reduce_mean(x, ax, true);
      const auto count = static_cast<double>(n);
      return Grads{add(mul(sub(x, m), mul(g[1], scalar_like(g[1], 2.0 / count))), div(g[0], scalar_like(g[0], count)))};
    }, {x});
  return {mean, var};
}

// The sorted axes as a fused kernel takes them: the run of consecutive axes holding the most
// elements (empty where the kernel does not apply or that run holds fewer than 4 elements).
std::vector<int> fused_run(const Tensor& x, const std::vector<int>& ax) {
  if (ax.empty() || (x.dtype() != DType::float32 && x.dtype() != DType::float64) ||
      !backend::has_fused(backend::Fused::moments, x.device()))
    return {};
  std::vector<int> best, run;
  std::int64_t best_size = 0;
  for (std::size_t i = 0; i < ax.size(); ++i) {
    if (i > 0 && ax[i] != ax[i - 1] + 1) run.clear();
    run.push_back(ax[i]);
    std::int64_t size = 1;
    for (int a : run) size *= x.shape()[a];
    if (size > best_size) {
      best = run;
      best_size = size;
    }
  }
  return best_size >= 4 ? best : std::vector<int>{};
}

}  // namespace

std::pair<Tensor, Tensor> moments(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::check_float(x, "moments", "x");
  const std::vector<int> ax = detail::normalize_axes(axes, x.rank(), "moments");
  const std::vector<int> run = fused_run(x, ax);
  Tensor mean, var;
  if (run.empty()) {
    std::tie(mean, var) = composite_moments(x, ax);
  } else if (run.size() == ax.size()) {
    std::tie(mean, var) = fused_moments(x, ax);
  } else {
    // Axes in several runs (GroupNormalization's spatial axes and the channels of a group): the
    // fused kernel over the largest run, then the law of total variance over the others, on
    // statistics that many times smaller. Each of the run's groups holds as many elements, so
    // mean = mean(m), var = mean(v + (m - mean)^2).
    std::vector<int> rest;
    std::set_difference(ax.begin(), ax.end(), run.begin(), run.end(), std::back_inserter(rest));
    const auto [m, v] = fused_moments(x, run);
    mean = reduce_mean(m, rest, true);
    var = reduce_mean(add(v, square(sub(m, mean))), rest, true);
  }
  if (keepdims) return {mean, var};
  std::vector<std::int64_t> out;
  for (std::int64_t d = 0; d < x.rank(); ++d)
    if (!std::binary_search(ax.begin(), ax.end(), static_cast<int>(d))) out.push_back(x.shape()[d]);
  return {reshape(mean, Shape(out)), reshape(var, Shape(out))};
}

// ---- batch norm ----------------------------------------------------------------------------------

namespace {
// Batch norm written with ops, for the GPU: the moments are two reductions per channel and the
// normalisation one broadcasting kernel per op; the gradients come from the ops. The same
// formulas as the fused CPU kernel below (biased batch variance, Keras' momentum rule).
BatchNormResult batch_norm_composite(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& moving_mean, const Tensor& moving_variance, bool training,
                                     double momentum, double epsilon) {
  std::vector<int> batch_axes;
  for (int d = 0; d + 1 < x.rank(); ++d) batch_axes.push_back(d);
  BatchNormResult result;
  Tensor center, var;
  if (training) {
    std::tie(center, var) = moments(x, batch_axes);
    autograd::NoRecordScope no_record;  // the moving statistics carry no gradient
    const auto update = [&](const Tensor& moving, const Tensor& batch) {
      if (!moving.defined()) return Tensor();
      return add(mul(moving, scalar_like(moving, momentum)), mul(batch, scalar_like(batch, 1 - momentum)));
    };
    result.moving_mean = update(moving_mean, center);
    result.moving_variance = update(moving_variance, var);
  } else {
    center = moving_mean.defined() ? moving_mean : Tensor();
    var = moving_variance;
    result.moving_mean = moving_mean;
    result.moving_variance = moving_variance;
  }
  Tensor scale = rsqrt(add(var, scalar_like(var, epsilon)));
  if (gamma.defined()) scale = mul(scale, gamma);
  Tensor y = mul(center.defined() ? sub(x, center) : x, scale);
  if (beta.defined()) y = add(y, beta);
  result.y = y;
  return result;
}
}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& moving_mean, const Tensor& moving_variance, bool training,
                           double momentum, double epsilon) {
  constexpr const char* op = "batch_norm";
  detail::check_float(x, op, "x");
  if (x.rank() < 2)
    throw ValueError(fmt::format("batch_norm: x must have rank >= 2 (batch..., channels), got shape {}",
                                 x.shape().to_string()));
  const std::int64_t C = x.shape()[x.rank() - 1];
  std::int64_t M = 1;
  for (std::int64_t d = 0; d + 1 < x.rank(); ++d) M *= x.shape()[d];
  detail::check_channel_param(op, gamma, x, C, "gamma", false);
  detail::check_channel_param(op, beta, x, C, "beta", false);
  detail::check_channel_param(op, moving_mean, x, C, "moving_mean", !training);
  detail::check_channel_param(op, moving_variance, x, C, "moving_variance", !training);
  check_epsilon(epsilon, op);
  if (!std::isfinite(momentum) || momentum < 0 || momentum > 1)
    throw ValueError(fmt::format("batch_norm: momentum must be in [0, 1], got {}", momentum));
  if (training && M == 0)
    throw ValueError(fmt::format("batch_norm: no batch statistics for an empty batch: x has shape {}",
                                 x.shape().to_string()));

  if (!backend::has_fused(backend::Fused::batch_norm, x.device()))
    return batch_norm_composite(x, gamma, beta, moving_mean, moving_variance, training, momentum, epsilon);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  BatchNormResult result;
  Tensor mean, rstd;  // [C], the batch statistics the training backward reuses
  const Tensor gc = detail::contiguous_or_none(gamma), bc = detail::contiguous_or_none(beta);
  const Tensor mmc = detail::contiguous_or_none(moving_mean), mvc = detail::contiguous_or_none(moving_variance);
  if (training) {
    const auto channel = [&](bool defined) {
      return defined ? detail::empty_tensor(Shape{C}, x.dtype(), x.device()) : Tensor();
    };
    mean = channel(true);
    rstd = channel(true);
    result.moving_mean = channel(moving_mean.defined());
    result.moving_variance = channel(moving_variance.defined());
    backend::batch_norm_train(xc, gc, bc, mmc, mvc, momentum, epsilon, y, mean, rstd, result.moving_mean,
                              result.moving_variance);
  } else {
    backend::batch_norm_inference(xc, gc, bc, mmc, mvc, epsilon, y);
    result.moving_mean = moving_mean;
    result.moving_variance = moving_variance;
  }
  result.y = y;

  if (autograd::recording()) {
    const std::vector<Tensor> inputs{x, gamma, beta, moving_mean, moving_variance};
    if (training) {
      autograd::record(op, inputs, {y}, [x, gamma, mean, rstd, epsilon](const Grads& g, const Needs& n) {
        if (autograd::recording()) return bn_train_backward_composite(x, gamma, g[0], epsilon, n);
        return bn_train_backward_fused(x, gamma, mean, rstd, g[0], n);
      }, {x, gamma});
    } else {
      autograd::record(op, inputs, {y},
                       [x, gamma, moving_mean, moving_variance, epsilon](const Grads& g, const Needs& n) {
                         return bn_inference_backward(x, gamma, moving_mean, moving_variance, g[0], epsilon, n);
                       },
                       {x, gamma, moving_mean, moving_variance});
    }
  }
  return result;
}

// ---- layer norm ----------------------------------------------------------------------------------

namespace {

// gamma/beta of layer_norm: shaped like the normalised axes (`param`), or already in the
// broadcast form (x's rank, 1 on the other axes).
void check_ln_param(const Tensor& p, const Tensor& x, const Shape& param, const Shape& bcast,
                    const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("layer_norm: {} has dtype {}, x has {}", what, name(p.dtype()), name(x.dtype())));
  detail::check_same_device(p, x, "layer_norm");
  if (p.shape() != param && p.shape() != bcast)
    throw ShapeError(fmt::format("layer_norm: {} has shape {}, expected {} (the normalised axes of x {})", what,
                                 p.shape().to_string(), param.to_string(), x.shape().to_string()));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::vector<int> axes,
                  double epsilon) {
  constexpr const char* op = "layer_norm";
  detail::check_float(x, op, "x");
  const std::vector<int> ax = detail::normalize_axes(axes, x.rank(), op, false);
  if (ax.empty()) throw ValueError("layer_norm: axes must name at least one axis");
  check_epsilon(epsilon, op);
  std::vector<std::int64_t> pdims, bdims = x.shape().dims();
  {
    std::size_t k = 0;
    for (std::int64_t d = 0; d < x.rank(); ++d) {
      if (k < ax.size() && ax[k] == d) {
        pdims.push_back(x.shape()[d]);
        ++k;
      } else {
        bdims[static_cast<std::size_t>(d)] = 1;
      }
    }
  }
  const Shape pshape(pdims), bshape(bdims);
  check_ln_param(gamma, x, pshape, bshape, "gamma");
  check_ln_param(beta, x, pshape, bshape, "beta");

  const auto lead_count = static_cast<std::int64_t>(x.rank()) - static_cast<std::int64_t>(ax.size());
  const bool trailing = ax.front() == lead_count;  // sorted and unique, so a trailing block
  if (!trailing || !backend::has_fused(backend::Fused::layer_norm, x.device())) {
    // Normalised axes in the middle, or on a GPU: a composite of differentiable ops (there, the
    // moments are reductions and the rest one elementwise kernel per op).
    const auto [mean, var] = moments(x, ax, true);
    Tensor y = mul(sub(x, mean), rsqrt(add(var, scalar_like(var, epsilon))));
    if (gamma.defined()) y = mul(y, reshape(gamma, bshape));
    if (beta.defined()) y = add(y, reshape(beta, bshape));
    return y;
  }

  std::vector<std::int64_t> kept = x.shape().dims();
  for (int a : ax) kept[static_cast<std::size_t>(a)] = 1;
  const Shape kept_shape(kept);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  Tensor mean = detail::empty_tensor(kept_shape, x.dtype(), x.device());
  Tensor rstd = detail::empty_tensor(kept_shape, x.dtype(), x.device());
  backend::layer_norm(xc, detail::contiguous_or_none(gamma), detail::contiguous_or_none(beta), epsilon, y, mean, rstd);

  if (autograd::recording())
    autograd::record(op, {x, gamma, beta}, {y},
                     [x, gamma, beta, mean, rstd, ax, bshape, epsilon, lead_count](const Grads& g,
                                                                                  const Needs& n) {
                       if (!autograd::recording()) {
                         // The closed-form gradient from the saved statistics (the first-order case).
                         Grads out(3);
                         if (n[0]) out[0] = detail::empty_tensor(x.shape(), x.dtype(), x.device());
                         if (n[1]) out[1] = detail::empty_tensor(gamma.shape(), x.dtype(), x.device());
                         if (n[2]) out[2] = detail::empty_tensor(beta.shape(), x.dtype(), x.device());
                         backend::layer_norm_backward(x.contiguous(), g[0].contiguous(), detail::contiguous_or_none(gamma),
                                                      mean, rstd, out[0], out[1], out[2]);
                         return out;
                       }
                       // An outer tape records this backward: the same formula with differentiable
                       // ops, the statistics recomputed from x.
                       const auto mv = moments(x, ax, true);
                       const Tensor r = rsqrt(add(mv.second, scalar_like(mv.second, epsilon)));
                       const Tensor& dy = g[0];
                       const Tensor xhat = mul(sub(x, mv.first), r);
                       const std::vector<int> lead = leading_axes(lead_count);
                       Grads out(3);
                       if (n[0]) {
                         const Tensor h = gamma.defined() ? mul(dy, reshape(gamma, bshape)) : dy;
                         const Tensor centred = sub(h, reduce_mean(h, ax, true));
                         out[0] = mul(r, sub(centred, mul(xhat, reduce_mean(mul(h, xhat), ax, true))));
                       }
                       if (n[1]) out[1] = reshape(sum_over(mul(dy, xhat), lead, false), gamma.shape());
                       if (n[2]) out[2] = reshape(sum_over(dy, lead, false), beta.shape());
                       return out;
                     },
                     {x, gamma});
  return y;
}

}  // namespace keel
