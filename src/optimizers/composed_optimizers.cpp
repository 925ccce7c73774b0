// Ftrl, Lamb and Adafactor: Keras 3's update rules written with tensor ops, on every device and
// dtype. They do not fit the fused elementwise kernels of core/optimizer_rules.hpp: Lamb scales
// the whole update by a trust ratio of two norms (reductions over the variable), Adafactor
// keeps factored moments of other shapes than the variable's (means over its last two axes),
// and Ftrl raises the accumulators to an arbitrary power. Each expression keeps Keras' order of
// operations (keras/src/optimizers/{ftrl,lamb,adafactor}.py), quoted beside it.
#include "keel/optimizers/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "optimizers/optimizer_fields.hpp"

namespace keel::optimizers {

namespace {

using detail::common_of;

void check_non_negative(double v, const char* what) {
  if (!(v >= 0.0))
    throw ValueError(fmt::format("Ftrl: `{}` needs to be positive or zero. Received: {}={}.", what, what, v));
}

// sqrt(mean(x^2)) as a scalar tensor (Adafactor's _rms).
Tensor rms(const Tensor& x) { return sqrt(reduce_mean(square(x))); }

}  // namespace

// ---- Ftrl ---------------------------------------------------------------------------------------

Ftrl::Ftrl(LearningRate learning_rate, FtrlOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Ftrl"), options_(std::move(options)) {
  check_non_negative(options_.initial_accumulator_value, "initial_accumulator_value");
  if (!(options_.learning_rate_power <= 0.0))
    throw ValueError(fmt::format("Ftrl: `learning_rate_power` needs to be negative or zero. Received: "
                                 "learning_rate_power={}.", options_.learning_rate_power));
  check_non_negative(options_.l1_regularization_strength, "l1_regularization_strength");
  check_non_negative(options_.l2_regularization_strength, "l2_regularization_strength");
  check_non_negative(options_.l2_shrinkage_regularization_strength, "l2_shrinkage_regularization_strength");
}

std::vector<Optimizer::SlotSpec> Ftrl::slot_specs() const {
  return {{"accumulator", options_.initial_accumulator_value}, {"linear", 0.0}};
}

void Ftrl::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const Tensor g = prepare_gradient(grad, variable, ctx);
  const Tensor w = variable.peek();
  const Tensor accum = slots[0]->peek(), linear = slots[1]->peek();
  const double lr = ctx.learning_rate, power = -options_.learning_rate_power;
  const double l1 = options_.l1_regularization_strength;
  // l2_reg = l2 + beta / (2 lr)
  const double l2_reg = options_.l2_regularization_strength + options_.beta / (2.0 * lr);
  // grad_to_use = g + 2 l2_shrinkage w
  const Tensor grad_to_use = g + w * (2 * options_.l2_shrinkage_regularization_strength);
  const Tensor new_accum = accum + square(g);
  const Tensor new_accum_pow = pow(new_accum, power);
  // linear += grad_to_use - (new_accum^p - accum^p) / lr * w
  const Tensor new_linear = linear + (grad_to_use - (new_accum_pow - pow(accum, power)) / lr * w);
  // quadratic = new_accum^p / lr + 2 l2_reg;  w = (clip(linear, -l1, l1) - linear) / quadratic
  const Tensor quadratic = new_accum_pow / lr + 2 * l2_reg;
  variable.assign((clip_by_value(new_linear, -l1, l1) - new_linear) / quadratic);
  slots[0]->assign(new_accum);
  slots[1]->assign(new_linear);
}

void Ftrl::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Lamb ---------------------------------------------------------------------------------------

Lamb::Lamb(LearningRate learning_rate, LambOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Lamb"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Lamb::slot_specs() const { return {{"momentum", 0.0}, {"velocity", 0.0}}; }

void Lamb::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const Tensor g = prepare_gradient(grad, variable, ctx);
  const double b1 = options_.beta_1, b2 = options_.beta_2, t = static_cast<double>(ctx.local_step);
  const double b1_power = std::pow(b1, t), b2_power = std::pow(b2, t);
  // m += (g - m)(1 - b1);  v += (g^2 - v)(1 - b2)
  const Tensor m = slots[0]->peek() + (g - slots[0]->peek()) * (1 - b1);
  const Tensor v = slots[1]->peek() + (square(g) - slots[1]->peek()) * (1 - b2);
  slots[0]->assign(m);
  slots[1]->assign(v);
  // update = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  const Tensor update = (m / (1.0 - b1_power)) / (sqrt(v / (1.0 - b2_power)) + options_.epsilon);
  const Tensor w = variable.peek();
  // The trust ratio ||w|| / ||update||, 1 where either norm is 0 (both scalars, on w's device).
  const Tensor w_norm = sqrt(reduce_sum(square(w)));
  const Tensor g_norm = sqrt(reduce_sum(square(update)));
  const Tensor one = scalar_like(w_norm, 1.0), zero = scalar_like(w_norm, 0.0);
  const Tensor ratio = where(greater(w_norm, zero), where(greater(g_norm, zero), w_norm / g_norm, one), one);
  // w -= ratio * lr * update
  variable.assign(w - ratio * ctx.learning_rate * update);
}

void Lamb::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Adafactor ----------------------------------------------------------------------------------

Adafactor::Adafactor(LearningRate learning_rate, AdafactorOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Adafactor"), options_(std::move(options)) {
  if (!(options_.clip_threshold > 0))
    throw ValueError(fmt::format("Adafactor: `clip_threshold` must be > 0. Received: clip_threshold={}",
                                 options_.clip_threshold));
}

std::vector<Optimizer::SlotSpec> Adafactor::slot_specs() const { return {}; }  // see slot_specs_for

std::vector<Optimizer::SlotSpec> Adafactor::slot_specs_for(const Variable& variable) const {
  const Shape& s = variable.shape();
  const auto rank = s.rank();
  if (rank < 2) {
    // Keras gives such variables scalar r and c that the update never reads.
    return {{"r", 0.0, Shape{}}, {"c", 0.0, Shape{}}, {"velocity", 0.0, std::nullopt}};
  }
  // r: the shape without the last axis; c: without the last but one.
  std::vector<std::int64_t> r_dims, c_dims;
  for (std::int64_t k = 0; k < rank - 1; ++k) r_dims.push_back(s[k]);
  for (std::int64_t k = 0; k < rank; ++k)
    if (k != rank - 2) c_dims.push_back(s[k]);
  return {{"r", 0.0, Shape(r_dims)}, {"c", 0.0, Shape(c_dims)}, {"velocity", 0.0, std::nullopt}};
}

void Adafactor::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const Tensor g = prepare_gradient(grad, variable, ctx);
  const double t = static_cast<double>(ctx.local_step);
  const double inv_sqrt_t = 1.0 / std::sqrt(t);
  double lr = ctx.learning_rate;
  // relative_step caps a constant learning rate at 1 / sqrt(t) (not a schedule's).
  if (!learning_rate_spec().is_schedule() && options_.relative_step) lr = std::min(lr, inv_sqrt_t);
  const double rho_t = std::min(lr, inv_sqrt_t);
  const Tensor w = variable.peek();
  // alpha_t = max(epsilon_2, rms(w)) * rho_t
  const Tensor alpha_t = maximum(rms(w), options_.epsilon_2) * rho_t;
  // G = g^2 + epsilon_1;  beta_2_t = 1 - t^beta_2_decay
  const Tensor regulated = square(g) + options_.epsilon_1;
  const double beta_2_t = 1.0 - std::pow(t, options_.beta_2_decay);
  Variable& r = *slots[0];
  Variable& c = *slots[1];
  Variable& v = *slots[2];
  if (w.rank() >= 2) {
    // r = b r + (1 - b) mean(G, -1);  c = b c + (1 - b) mean(G, -2);
    // v = (r / mean(r, -1)) [..., None] * c[..., None, :]
    r.assign(r.peek() * beta_2_t + reduce_mean(regulated, {-1}) * (1.0 - beta_2_t));
    c.assign(c.peek() * beta_2_t + reduce_mean(regulated, {-2}) * (1.0 - beta_2_t));
    v.assign(expand_dims(r.peek() / reduce_mean(r.peek(), {-1}, true), -1) * expand_dims(c.peek(), -2));
  } else {
    v.assign(v.peek() * beta_2_t + regulated * (1.0 - beta_2_t));
  }
  // u = g / sqrt(v);  u_hat = u / max(1, rms(u) / clip_threshold);  w -= alpha_t u_hat
  const Tensor u = g / sqrt(v.peek());
  const Tensor u_hat = u / maximum(rms(u) / options_.clip_threshold, 1.0);
  variable.assign(w - alpha_t * u_hat);
}

void Adafactor::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

}  // namespace keel::optimizers
