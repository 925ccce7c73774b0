// SGD, Adam, AdamW, RMSprop, Adagrad and Nadam: Keras 3's update rules. Each rule is written
// three times: a fused loop over contiguous float32 CPU data (one pass that reads each element of
// the gradient, weight and slots once: the training step of small models is dominated by per-op
// overhead), one fused kernel launch for float32 and float64 variables on a GPU
// (cuda/optimizers.cu, the same arithmetic), and the same rule with keel ops for every other
// case (CPU float64, float16, non-contiguous weights, ...). The tests check the CPU paths against
// hand-computed numbers (float32 and float64 variables) and the GPU against the CPU.
#include "keel/optimizers/optimizer.hpp"
#include "keel/optimizers/loss_scale_optimizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cpu/strided.hpp"
#include "cuda/optimizers.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel::optimizers {

namespace {

using StepContext = Optimizer::StepContext;

template <class T>
CommonOptions common_of(const T& o) {
  return CommonOptions{o.weight_decay, o.clipnorm,  o.clipvalue,           o.global_clipnorm,   o.use_ema,
                       o.ema_momentum, o.ema_overwrite_frequency, o.loss_scale_factor, o.name};
}

bool fusable(const Tensor& t) {
  return t.device().is_cpu() && t.dtype() == DType::float32 && t.is_contiguous();
}

// The fused float32 update, written with xsimd batches (the scalar loop would not vectorise:
// std::sqrt must keep errno). For each element the gradient is scaled and clamped and the weight
// decayed as StepContext says, then body(w, g, s) applies the optimizer's rule to batches of the
// weight and of the slots' elements s[k]; w and s are written back. The tail goes through a
// zero-padded batch so every element takes the same code. Returns false, doing nothing, when the
// data is not contiguous float32 on the CPU.
using FB = xsimd::batch<float>;

template <std::size_t K, class Body>
bool fused_update(const Tensor& grad, Variable& variable, const std::array<Variable*, K>& slots,
                  const StepContext& ctx, Body&& body) {
  const Tensor& w = variable.peek();
  if (!fusable(w) || !grad.device().is_cpu() || grad.dtype() != DType::float32) return false;
  std::array<float*, K> sp{};
  for (std::size_t k = 0; k < K; ++k) {
    if (!fusable(slots[k]->peek())) return false;
    sp[k] = static_cast<float*>(slots[k]->peek().raw_data());
  }
  const Tensor g = grad.contiguous();
  float* wp = static_cast<float*>(w.raw_data());
  const float* gp = g.data<float>();
  const bool do_scale = ctx.grad_scale != 1, do_clip = ctx.clipvalue > 0, do_decay = ctx.decay != 0;
  const FB scale(static_cast<float>(ctx.grad_scale)), hi(static_cast<float>(ctx.clipvalue)),
      lo(-static_cast<float>(ctx.clipvalue)), decay(static_cast<float>(ctx.decay));
  constexpr std::int64_t W = FB::size;
  const auto one = [&](float* wq, const float* gq, const std::array<float*, K>& sq) {
    FB gi = FB::load_unaligned(gq);
    if (do_scale) gi *= scale;
    if (do_clip) gi = xsimd::min(xsimd::max(gi, lo), hi);
    FB wi = FB::load_unaligned(wq);
    if (do_decay) wi -= wi * decay;
    std::array<FB, K> si;
    for (std::size_t k = 0; k < K; ++k) si[k] = FB::load_unaligned(sq[k]);
    body(wi, gi, si);
    wi.store_unaligned(wq);
    for (std::size_t k = 0; k < K; ++k) si[k].store_unaligned(sq[k]);
  };
  cpu::parallel_for(w.size(), cpu::kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    std::int64_t i = b;
    std::array<float*, K> sq;
    for (; i + W <= e; i += W) {
      for (std::size_t k = 0; k < K; ++k) sq[k] = sp[k] + i;
      one(wp + i, gp + i, sq);
    }
    if (i < e) {
      const auto rest = static_cast<std::size_t>(e - i);
      alignas(64) float wb[W] = {}, gb[W] = {};
      alignas(64) std::array<std::array<float, W>, K> sb{};
      std::memcpy(wb, wp + i, rest * sizeof(float));
      std::memcpy(gb, gp + i, rest * sizeof(float));
      for (std::size_t k = 0; k < K; ++k) {
        std::memcpy(sb[k].data(), sp[k] + i, rest * sizeof(float));
        sq[k] = sb[k].data();
      }
      one(wb, gb, sq);
      std::memcpy(wp + i, wb, rest * sizeof(float));
      for (std::size_t k = 0; k < K; ++k) std::memcpy(sp[k] + i, sb[k].data(), rest * sizeof(float));
    }
  });
  // In-place writes: tapes that saved these tensors must see that they changed.
  w.impl()->storage->bump_version();
  for (auto* s : slots) s->peek().impl()->storage->bump_version();
  return true;
}

// The fused update of a variable on a GPU: one kernel launch (cuda::optimizer_update) for the
// rule of `params` when the weight is float32 or float64 and contiguous on a CUDA device, and
// the gradient and the slots are of its dtype on the same device (the slots contiguous too).
// slots[k] is the rule's slot k or nullptr (see cuda/optimizers.hpp). Fills in StepContext's
// scale, clamp and decay, which the kernel applies as fused_update does. Returns false, doing
// nothing, otherwise (the op-based rule runs then).
bool cuda_fused_update(const Tensor& grad, Variable& variable, const std::array<Variable*, 3>& slots,
                       const StepContext& ctx, cuda::OptimizerParams params) {
  const Tensor& w = variable.peek();
  const Device device = w.device();
  if (!device.is_cuda() || (w.dtype() != DType::float32 && w.dtype() != DType::float64) || !w.is_contiguous())
    return false;
  if (grad.device() != device || grad.dtype() != w.dtype() || grad.shape() != w.shape()) return false;
  std::array<void*, 3> sp{};
  for (std::size_t k = 0; k < slots.size(); ++k) {
    if (!slots[k]) continue;
    const Tensor& s = slots[k]->peek();
    if (s.device() != device || s.dtype() != w.dtype() || s.shape() != w.shape() || !s.is_contiguous()) return false;
    sp[k] = s.raw_data();
  }
  const Tensor g = grad.contiguous();  // a copy for a strided gradient; freed in stream order
  params.grad_scale = ctx.grad_scale;
  params.clipvalue = ctx.clipvalue;
  params.decay = ctx.decay;
  cuda::optimizer_update(w.dtype(), params, w.size(), w.raw_data(), g.raw_data(), sp.data(), device.index());
  // In-place writes: tapes that saved these tensors must see that they changed.
  w.impl()->storage->bump_version();
  for (auto* s : slots)
    if (s) s->peek().impl()->storage->bump_version();
  return true;
}

// Keras' optional arguments in a config: absent or null means unset.
std::optional<double> opt_double(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null()) return std::nullopt;
  return c[key].get<double>();
}

}  // namespace

// ---- SGD ----------------------------------------------------------------------------------------

SGD::SGD(LearningRate learning_rate, SGDOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "SGD"), options_(std::move(options)) {
  if (!(options_.momentum >= 0 && options_.momentum <= 1))
    throw ValueError(fmt::format("SGD: `momentum` must be a float between [0, 1]. Received: momentum={}",
                                 options_.momentum));
}

std::vector<Optimizer::SlotSpec> SGD::slot_specs() const {
  if (options_.momentum != 0) return {{"momentum", 0.0}};
  return {};
}

void SGD::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const double lr = ctx.learning_rate, mom = options_.momentum;
  {
    cuda::OptimizerParams p;
    p.rule = slots.empty() ? cuda::OptimizerRule::sgd : cuda::OptimizerRule::sgd_momentum;
    p.nesterov = options_.nesterov;
    p.lr = lr;
    p.momentum = mom;
    if (cuda_fused_update(grad, variable, {slots.empty() ? nullptr : slots[0].get(), nullptr, nullptr}, ctx, p))
      return;
  }
  const FB flr(static_cast<float>(lr)), fmom(static_cast<float>(mom));
  if (slots.empty()) {
    if (fused_update<0>(grad, variable, {}, ctx, [&](FB& w, FB g, std::array<FB, 0>&) { w -= g * flr; })) return;
    variable.assign_sub(prepare_gradient(grad, variable, ctx) * lr);
    return;
  }
  Variable& m = *slots[0];
  const bool nesterov = options_.nesterov;
  if (nesterov ? fused_update<1>(grad, variable, {&m}, ctx,
                                 [&](FB& w, FB g, std::array<FB, 1>& s) {
                                   s[0] = s[0] * fmom - g * flr;
                                   w += s[0] * fmom - g * flr;
                                 })
               : fused_update<1>(grad, variable, {&m}, ctx, [&](FB& w, FB g, std::array<FB, 1>& s) {
                   s[0] = s[0] * fmom - g * flr;
                   w += s[0];
                 }))
    return;
  const Tensor g = prepare_gradient(grad, variable, ctx);
  m.assign(m.peek() * mom - g * lr);
  if (nesterov) variable.assign_add(m.peek() * mom - g * lr);
  else variable.assign_add(m.peek());
}

void SGD::add_config(nlohmann::json& config) const {
  config["momentum"] = options_.momentum;
  config["nesterov"] = options_.nesterov;
}

// ---- Adam / AdamW -------------------------------------------------------------------------------

Adam::Adam(LearningRate learning_rate, AdamOptions options)
    : Adam(std::move(learning_rate), options, common_of(options), "Adam") {}

Adam::Adam(LearningRate learning_rate, AdamOptions options, CommonOptions common, const char* class_name)
    : Optimizer(std::move(learning_rate), std::move(common), class_name), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Adam::slot_specs() const {
  std::vector<SlotSpec> specs{{"momentum", 0.0}, {"velocity", 0.0}};
  if (options_.amsgrad) specs.push_back({"velocity_hat", 0.0});
  return specs;
}

void Adam::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const double b1 = options_.beta_1, b2 = options_.beta_2, eps = options_.epsilon;
  const double t = static_cast<double>(ctx.local_step);
  // The bias corrections fold into the step size: lr * sqrt(1 - b2^t) / (1 - b1^t).
  const double alpha = ctx.learning_rate * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  Variable& m = *slots[0];
  Variable& v = *slots[1];
  {
    cuda::OptimizerParams p;
    p.rule = cuda::OptimizerRule::adam;
    p.amsgrad = options_.amsgrad;
    p.one_minus_b1 = 1 - b1;
    p.one_minus_b2 = 1 - b2;
    p.alpha = alpha;
    p.epsilon = eps;
    if (cuda_fused_update(grad, variable, {&m, &v, options_.amsgrad ? slots[2].get() : nullptr}, ctx, p)) return;
  }
  const FB c1(static_cast<float>(1 - b1)), c2(static_cast<float>(1 - b2)), fa(static_cast<float>(alpha)),
      fe(static_cast<float>(eps));
  if (options_.amsgrad) {
    Variable& vh = *slots[2];
    if (fused_update<3>(grad, variable, {&m, &v, &vh}, ctx, [&](FB& w, FB g, std::array<FB, 3>& s) {
          s[0] += (g - s[0]) * c1;
          s[1] += (g * g - s[1]) * c2;
          s[2] = xsimd::max(s[2], s[1]);
          w -= (s[0] * fa) / (xsimd::sqrt(s[2]) + fe);
        }))
      return;
  } else if (fused_update<2>(grad, variable, {&m, &v}, ctx, [&](FB& w, FB g, std::array<FB, 2>& s) {
               s[0] += (g - s[0]) * c1;
               s[1] += (g * g - s[1]) * c2;
               w -= (s[0] * fa) / (xsimd::sqrt(s[1]) + fe);
             })) {
    return;
  }
  const Tensor g = prepare_gradient(grad, variable, ctx);
  m.assign_add((g - m.peek()) * (1 - b1));
  v.assign_add((square(g) - v.peek()) * (1 - b2));
  Tensor denom_v = v.peek();
  if (options_.amsgrad) {
    Variable& vh = *slots[2];
    vh.assign(maximum(vh.peek(), v.peek()));
    denom_v = vh.peek();
  }
  variable.assign_sub((m.peek() * alpha) / (sqrt(denom_v) + eps));
}

void Adam::add_config(nlohmann::json& config) const {
  config["beta_1"] = options_.beta_1;
  config["beta_2"] = options_.beta_2;
  config["epsilon"] = options_.epsilon;
  config["amsgrad"] = options_.amsgrad;
}

namespace {
AdamOptions adam_part(const AdamWOptions& o) {
  AdamOptions a;
  a.beta_1 = o.beta_1;
  a.beta_2 = o.beta_2;
  a.epsilon = o.epsilon;
  a.amsgrad = o.amsgrad;
  a.weight_decay = o.weight_decay;
  a.clipnorm = o.clipnorm;
  a.clipvalue = o.clipvalue;
  a.global_clipnorm = o.global_clipnorm;
  a.use_ema = o.use_ema;
  a.ema_momentum = o.ema_momentum;
  a.ema_overwrite_frequency = o.ema_overwrite_frequency;
  a.loss_scale_factor = o.loss_scale_factor;
  a.name = o.name;
  return a;
}
}  // namespace

// Keras 3's AdamW is Adam with the base optimizer's decoupled weight decay switched on.
AdamW::AdamW(LearningRate learning_rate, AdamWOptions options)
    : Adam(std::move(learning_rate), adam_part(options), common_of(adam_part(options)), "AdamW") {}

// ---- RMSprop ------------------------------------------------------------------------------------

RMSprop::RMSprop(LearningRate learning_rate, RMSpropOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "RMSprop"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> RMSprop::slot_specs() const {
  std::vector<SlotSpec> specs{{"velocity", 0.0}};
  if (options_.momentum > 0) specs.push_back({"momentum", 0.0});
  if (options_.centered) specs.push_back({"average_gradient", 0.0});
  return specs;
}

void RMSprop::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const double rho = options_.rho, mom = options_.momentum, eps = options_.epsilon, lr = ctx.learning_rate;
  const bool has_mom = mom > 0, centered = options_.centered;
  Variable& vel = *slots[0];
  Variable* mo = has_mom ? slots[1].get() : nullptr;
  Variable* avg = centered ? slots[has_mom ? 2 : 1].get() : nullptr;
  {
    cuda::OptimizerParams p;
    p.rule = cuda::OptimizerRule::rmsprop;
    p.has_momentum = has_mom;
    p.centered = centered;
    p.rho = rho;
    p.one_minus_rho = 1 - rho;
    p.momentum = mom;
    p.epsilon = eps;
    p.lr = lr;
    if (cuda_fused_update(grad, variable, {&vel, mo, avg}, ctx, p)) return;
  }
  const FB frho(static_cast<float>(rho)), crho(static_cast<float>(1 - rho)), fmom(static_cast<float>(mom)),
      fe(static_cast<float>(eps)), flr(static_cast<float>(lr));
  // The rule on batches of the velocity and, when present, the momentum and the mean gradient
  // (the fused loops list them in the order of `slots`).
  const auto rule = [&](FB& w, FB g, FB& vel_b, FB* mom_b, FB* avg_b) {
    vel_b = frho * vel_b + crho * (g * g);
    FB denom;
    if (avg_b) {
      *avg_b = frho * *avg_b + crho * g;
      denom = vel_b - *avg_b * *avg_b + fe;
    } else {
      denom = vel_b + fe;
    }
    const FB increment = (flr * g) / xsimd::sqrt(denom);
    if (mom_b) {
      *mom_b = fmom * *mom_b + increment;
      w -= *mom_b;
    } else {
      w -= increment;
    }
  };
  bool done;
  if (has_mom && centered)
    done = fused_update<3>(grad, variable, {&vel, mo, avg}, ctx,
                           [&](FB& w, FB g, std::array<FB, 3>& s) { rule(w, g, s[0], &s[1], &s[2]); });
  else if (has_mom)
    done = fused_update<2>(grad, variable, {&vel, mo}, ctx,
                           [&](FB& w, FB g, std::array<FB, 2>& s) { rule(w, g, s[0], &s[1], nullptr); });
  else if (centered)
    done = fused_update<2>(grad, variable, {&vel, avg}, ctx,
                           [&](FB& w, FB g, std::array<FB, 2>& s) { rule(w, g, s[0], nullptr, &s[1]); });
  else
    done = fused_update<1>(grad, variable, {&vel}, ctx,
                           [&](FB& w, FB g, std::array<FB, 1>& s) { rule(w, g, s[0], nullptr, nullptr); });
  if (done) return;

  const Tensor g = prepare_gradient(grad, variable, ctx);
  vel.assign(vel.peek() * rho + square(g) * (1 - rho));
  Tensor denom;
  if (centered) {
    avg->assign(avg->peek() * rho + g * (1 - rho));
    denom = vel.peek() - square(avg->peek()) + eps;
  } else {
    denom = vel.peek() + eps;
  }
  const Tensor increment = (g * lr) / sqrt(denom);
  if (has_mom) {
    mo->assign(mo->peek() * mom + increment);
    variable.assign_sub(mo->peek());
  } else {
    variable.assign_sub(increment);
  }
}

void RMSprop::add_config(nlohmann::json& config) const {
  config["rho"] = options_.rho;
  config["momentum"] = options_.momentum;
  config["epsilon"] = options_.epsilon;
  config["centered"] = options_.centered;
}

// ---- Adagrad ------------------------------------------------------------------------------------

Adagrad::Adagrad(LearningRate learning_rate, AdagradOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Adagrad"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Adagrad::slot_specs() const {
  return {{"accumulator", options_.initial_accumulator_value}};
}

void Adagrad::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const double lr = ctx.learning_rate, eps = options_.epsilon;
  Variable& acc = *slots[0];
  {
    cuda::OptimizerParams p;
    p.rule = cuda::OptimizerRule::adagrad;
    p.lr = lr;
    p.epsilon = eps;
    if (cuda_fused_update(grad, variable, {&acc, nullptr, nullptr}, ctx, p)) return;
  }
  const FB flr(static_cast<float>(lr)), fe(static_cast<float>(eps));
  if (fused_update<1>(grad, variable, {&acc}, ctx, [&](FB& w, FB g, std::array<FB, 1>& s) {
        s[0] += g * g;
        w -= (flr * g) / xsimd::sqrt(s[0] + fe);
      }))
    return;
  const Tensor g = prepare_gradient(grad, variable, ctx);
  acc.assign_add(square(g));
  variable.assign_sub((g * lr) / sqrt(acc.peek() + eps));
}

void Adagrad::add_config(nlohmann::json& config) const {
  config["initial_accumulator_value"] = options_.initial_accumulator_value;
  config["epsilon"] = options_.epsilon;
}

// ---- Nadam --------------------------------------------------------------------------------------

Nadam::Nadam(LearningRate learning_rate, NadamOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Nadam"), options_(std::move(options)) {
  // The running product of the momentum schedule, kept in float32 like Keras' u_product.
  u_product_ = &add_optimizer_variable("u_product", constant(1.0, DType::float32));
}

std::vector<Optimizer::SlotSpec> Nadam::slot_specs() const { return {{"momentum", 0.0}, {"velocity", 0.0}}; }

void Nadam::before_update_steps(std::int64_t local_step) {
  // Once per step, before the variables: U_t = U_{t-1} * beta_1 (1 - 0.5 * 0.96^t).
  const double u_t = options_.beta_1 * (1.0 - 0.5 * std::pow(0.96, static_cast<double>(local_step)));
  const double product = u_product_->peek().item<double>() * u_t;
  u_product_->assign(constant(product, u_product_->dtype()).to(u_product_->device()));
  u_product_t_ = u_product_->peek().item<double>();
}

void Nadam::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  const double b1 = options_.beta_1, b2 = options_.beta_2, eps = options_.epsilon, lr = ctx.learning_rate;
  const double t = static_cast<double>(ctx.local_step);
  const double u_t = b1 * (1.0 - 0.5 * std::pow(0.96, t));
  const double u_t_1 = b1 * (1.0 - 0.5 * std::pow(0.96, t + 1));
  const double u_product_t = u_product_t_;
  const double u_product_t_1 = u_product_t * u_t_1;
  const double beta_2_power = std::pow(b2, t);
  // m_hat = u_{t+1} m / (1 - U_{t+1}) + (1 - u_t) g / (1 - U_t); v_hat = v / (1 - b2^t)
  const double cm = u_t_1 / (1 - u_product_t_1), cg = (1 - u_t) / (1 - u_product_t), cv = 1 - beta_2_power;
  Variable& m = *slots[0];
  Variable& v = *slots[1];
  {
    cuda::OptimizerParams p;
    p.rule = cuda::OptimizerRule::nadam;
    p.one_minus_b1 = 1 - b1;
    p.one_minus_b2 = 1 - b2;
    p.cm = cm;
    p.cg = cg;
    p.cv = cv;
    p.lr = lr;
    p.epsilon = eps;
    if (cuda_fused_update(grad, variable, {&m, &v, nullptr}, ctx, p)) return;
  }
  const FB c1(static_cast<float>(1 - b1)), c2(static_cast<float>(1 - b2)), fcm(static_cast<float>(cm)),
      fcg(static_cast<float>(cg)), fcv(static_cast<float>(cv)), flr(static_cast<float>(lr)),
      fe(static_cast<float>(eps));
  if (fused_update<2>(grad, variable, {&m, &v}, ctx, [&](FB& w, FB g, std::array<FB, 2>& s) {
        s[0] += (g - s[0]) * c1;
        s[1] += (g * g - s[1]) * c2;
        const FB m_hat = fcm * s[0] + fcg * g;
        const FB v_hat = s[1] / fcv;
        w -= (m_hat * flr) / (xsimd::sqrt(v_hat) + fe);
      }))
    return;
  const Tensor g = prepare_gradient(grad, variable, ctx);
  m.assign_add((g - m.peek()) * (1 - b1));
  v.assign_add((square(g) - v.peek()) * (1 - b2));
  const Tensor m_hat = m.peek() * cm + g * cg;
  const Tensor v_hat = v.peek() / cv;
  variable.assign_sub((m_hat * lr) / (sqrt(v_hat) + eps));
}

void Nadam::add_config(nlohmann::json& config) const {
  config["beta_1"] = options_.beta_1;
  config["beta_2"] = options_.beta_2;
  config["epsilon"] = options_.epsilon;
}

// ---- by name and config -------------------------------------------------------------------------

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

std::shared_ptr<Optimizer> get(const std::string& name) {
  // Keras resolves names case-insensitively against the lower-cased class names.
  const std::string n = lower(name);
  if (n == "sgd") return std::make_shared<SGD>();
  if (n == "adam") return std::make_shared<Adam>();
  if (n == "adamw") return std::make_shared<AdamW>();
  if (n == "rmsprop") return std::make_shared<RMSprop>();
  if (n == "adagrad") return std::make_shared<Adagrad>();
  if (n == "nadam") return std::make_shared<Nadam>();
  throw ValueError(fmt::format("Could not interpret optimizer identifier: '{}' (known: sgd, adam, adamw, rmsprop, "
                               "adagrad, nadam)", name));
}

nlohmann::json serialize(const Optimizer& optimizer) {
  return {{"module", "keras.optimizers"},
          {"class_name", optimizer.class_name()},
          {"config", optimizer.get_config()},
          {"registered_name", nullptr}};
}

std::shared_ptr<Optimizer> from_config(const std::string& class_name, const nlohmann::json& config) {
  if (!config.is_object())
    throw ValueError(fmt::format("optimizers::from_config: the {} config is not an object: {}", class_name, config.dump()));
  try {
    LearningRate lr = 0.001;
    bool has_lr = false;
    if (config.contains("learning_rate") && !config["learning_rate"].is_null()) {
      has_lr = true;
      const auto& l = config["learning_rate"];
      if (l.is_object()) lr = LearningRate(schedules::deserialize(l));
      else lr = l.get<double>();
    }
    // The common options every config carries (null or absent: unset) but weight_decay, which
    // AdamW keeps as a plain number.
    const auto fill_common = [&](auto& o) {
      o.clipnorm = opt_double(config, "clipnorm");
      o.clipvalue = opt_double(config, "clipvalue");
      o.global_clipnorm = opt_double(config, "global_clipnorm");
      o.use_ema = config.value("use_ema", false);
      o.ema_momentum = config.value("ema_momentum", 0.99);
      if (config.contains("ema_overwrite_frequency") && !config["ema_overwrite_frequency"].is_null())
        o.ema_overwrite_frequency = config["ema_overwrite_frequency"].get<std::int64_t>();
      o.loss_scale_factor = opt_double(config, "loss_scale_factor");
      if (config.contains("name") && config["name"].is_string()) o.name = config["name"].get<std::string>();
    };
    const auto fill = [&](auto& o) {
      o.weight_decay = opt_double(config, "weight_decay");
      fill_common(o);
    };
    // Adam, AdamW and Nadam.
    const auto fill_moments = [&](auto& o) {
      o.beta_1 = config.value("beta_1", 0.9);
      o.beta_2 = config.value("beta_2", 0.999);
      o.epsilon = config.value("epsilon", 1e-7);
    };
    const std::string cls = lower(class_name);
    if (cls == "lossscaleoptimizer") return LossScaleOptimizer::from_config(config);
    if (cls == "sgd") {
      SGDOptions o;
      fill(o);
      o.momentum = config.value("momentum", 0.0);
      o.nesterov = config.value("nesterov", false);
      return std::make_shared<SGD>(has_lr ? lr : LearningRate(0.01), o);
    }
    if (cls == "adam") {
      AdamOptions o;
      fill(o);
      fill_moments(o);
      o.amsgrad = config.value("amsgrad", false);
      return std::make_shared<Adam>(lr, o);
    }
    if (cls == "adamw") {
      AdamWOptions o;
      o.weight_decay = opt_double(config, "weight_decay").value_or(0.004);
      fill_common(o);
      fill_moments(o);
      o.amsgrad = config.value("amsgrad", false);
      return std::make_shared<AdamW>(lr, o);
    }
    if (cls == "rmsprop") {
      RMSpropOptions o;
      fill(o);
      o.rho = config.value("rho", 0.9);
      o.momentum = config.value("momentum", 0.0);
      o.epsilon = config.value("epsilon", 1e-7);
      o.centered = config.value("centered", false);
      return std::make_shared<RMSprop>(lr, o);
    }
    if (cls == "adagrad") {
      AdagradOptions o;
      fill(o);
      o.initial_accumulator_value = config.value("initial_accumulator_value", 0.1);
      o.epsilon = config.value("epsilon", 1e-7);
      return std::make_shared<Adagrad>(lr, o);
    }
    if (cls == "nadam") {
      NadamOptions o;
      fill(o);
      fill_moments(o);
      return std::make_shared<Nadam>(lr, o);
    }
  } catch (const nlohmann::json::exception& e) {
    // A malformed config is bad user input: report it as keel reports bad input.
    throw ValueError(fmt::format("optimizers::from_config: bad {} config: {}", class_name, e.what()));
  }
  throw ValueError(fmt::format("optimizers::from_config: unknown optimizer class '{}'", class_name));
}

std::shared_ptr<Optimizer> deserialize(const nlohmann::json& serialized) {
  if (serialized.is_string()) return get(serialized.get<std::string>());
  if (!serialized.is_object() || !serialized.contains("class_name") || !serialized["class_name"].is_string())
    throw ValueError(fmt::format("optimizers::deserialize: expected an object with a \"class_name\", got {}",
                                 serialized.dump()));
  return from_config(serialized["class_name"].get<std::string>(),
                     serialized.value("config", nlohmann::json::object()));
}

}  // namespace keel::optimizers
