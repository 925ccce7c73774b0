// LossScaleOptimizer: Keras 3's dynamic loss scaling around another optimizer.
#include "keel/optimizers/loss_scale_optimizer.hpp"

#include "backend/recorder.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "optimizers/optimizer_fields.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel::optimizers {

namespace {

CommonOptions named(const std::string& name) {
  CommonOptions common;
  common.name = name;
  return common;
}

void write(Variable& v, double value) {
  DeviceScope cpu(Device::cpu());
  v.assign(constant(value, v.dtype()).to(v.device()));
}

}  // namespace

LossScaleOptimizer::LossScaleOptimizer(OptimizerRef inner_optimizer, LossScaleOptimizerOptions options)
    : Optimizer(inner_optimizer ? inner_optimizer->learning_rate_spec() : LearningRate(0.0),
                named(options.name), "LossScaleOptimizer"),
      inner_(inner_optimizer.get()),
      options_(std::move(options)) {
  if (!inner_) throw ValueError("LossScaleOptimizer: inner_optimizer is none");
  if (std::dynamic_pointer_cast<LossScaleOptimizer>(inner_))
    throw ValueError("LossScaleOptimizer: the inner optimizer is already a LossScaleOptimizer");
  if (!(options_.initial_scale > 0) || !std::isfinite(options_.initial_scale))
    throw ValueError(fmt::format("LossScaleOptimizer: initial_scale must be a positive finite number, got {}",
                                 options_.initial_scale));
  if (options_.dynamic_growth_steps < 1)
    throw ValueError(fmt::format("LossScaleOptimizer: dynamic_growth_steps must be >= 1, got {}",
                                 options_.dynamic_growth_steps));
  options_.name = name();  // the auto name when none was given
  // Keras 3: "Disable the inner optimizer's loss scaling, otherwise gradients will be scaled
  // twice" (the dynamic scale is divided out here, a loss_scale_factor again by the inner apply).
  inner_->set_loss_scale_factor(std::nullopt);
  step_counter_ = detail::host_scalar(0, DType::int64, "step_counter");
  dynamic_scale_ = detail::host_scalar(options_.initial_scale, DType::float32, "dynamic_scale");
}

LossScaleOptimizer::~LossScaleOptimizer() = default;
LossScaleOptimizer::LossScaleOptimizer(LossScaleOptimizer&&) noexcept = default;
LossScaleOptimizer& LossScaleOptimizer::operator=(LossScaleOptimizer&&) noexcept = default;

double LossScaleOptimizer::dynamic_scale() const { return dynamic_scale_->peek().item<double>(); }

std::int64_t LossScaleOptimizer::step_counter() const { return step_counter_->peek().item<std::int64_t>(); }

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss) const { return loss * dynamic_scale(); }

std::vector<Tensor> LossScaleOptimizer::get_unscaled_gradients(const std::vector<Tensor>& grads) const {
  // The scale is a power of two (from a power-of-two initial scale), so the division is exact.
  const double inverse = 1.0 / dynamic_scale();
  std::vector<Tensor> out;
  out.reserve(grads.size());
  autograd::NoRecordScope no_record;
  for (const auto& g : grads) out.push_back(g.defined() ? g * inverse : g);
  return out;
}

void LossScaleOptimizer::apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables) {
  if (backend::recorder()) return traced_apply(grads, variables);
  if (grads.size() != variables.size())
    throw ValueError(fmt::format("{}.apply: {} gradients for {} variables", name(), grads.size(), variables.size()));
  if (grads.empty()) return;
  bool finite = true;
  {
    // 0 * g is 0 for a finite g and NaN for inf or NaN, so one sum over every gradient (one
    // read back from the device) tells whether all are finite.
    autograd::NoRecordScope no_record;
    Tensor total;
    for (const auto& g : grads) {
      if (!g.defined()) continue;
      const Tensor g32 = g.dtype() == DType::float32 || g.dtype() == DType::float64 ? g : cast(g, DType::float32);
      Tensor zero = reduce_sum(g32 * 0.0);
      if (zero.dtype() != DType::float32) zero = cast(zero, DType::float32);
      total = total.defined() ? total + zero : zero;
    }
    if (total.defined()) finite = std::isfinite(total.item<double>());
  }
  if (!finite) {
    // Skip the step: the gradients overflowed at this scale.
    write(*step_counter_, 0);
    write(*dynamic_scale_, std::max(dynamic_scale() / 2.0, 1.0));
    return;
  }
  inner_->apply(get_unscaled_gradients(grads), variables);
  const std::int64_t good = step_counter() + 1;
  if (good >= options_.dynamic_growth_steps) {
    write(*step_counter_, 0);
    write(*dynamic_scale_, dynamic_scale() * 2.0);
  } else {
    write(*step_counter_, static_cast<double>(good));
  }
}

void LossScaleOptimizer::apply(const std::vector<Tensor>& grads) {
  if (built_variables_.empty())
    throw ValueError(fmt::format("{}.apply(grads): the optimizer was not built; call build(variables) first or pass "
                                 "the variables", name()));
  apply(grads, built_variables_);
}

void LossScaleOptimizer::build(const std::vector<Variable*>& variables) {
  inner_->build(variables);
  built_variables_ = variables;
}

bool LossScaleOptimizer::built() const { return inner_->built(); }

double LossScaleOptimizer::learning_rate() const { return inner_->learning_rate(); }
void LossScaleOptimizer::set_learning_rate(double learning_rate) { inner_->set_learning_rate(learning_rate); }
void LossScaleOptimizer::set_learning_rate(const LearningRate& learning_rate) {
  inner_->set_learning_rate(learning_rate);
}
const LearningRate& LossScaleOptimizer::learning_rate_spec() const { return inner_->learning_rate_spec(); }
std::int64_t LossScaleOptimizer::iterations() const { return inner_->iterations(); }
void LossScaleOptimizer::set_iterations(std::int64_t iterations) { inner_->set_iterations(iterations); }

std::vector<std::pair<std::string, Variable*>> LossScaleOptimizer::variables() {
  std::vector<std::pair<std::string, Variable*>> out{{step_counter_->name(), step_counter_.get()},
                                                     {dynamic_scale_->name(), dynamic_scale_.get()}};
  for (auto& entry : inner_->variables()) out.push_back(entry);
  return out;
}

Variable* LossScaleOptimizer::get_slot(const Variable& variable, const std::string& slot) {
  return inner_->get_slot(variable, slot);
}

void LossScaleOptimizer::exclude_from_weight_decay(const std::vector<const Variable*>& variables,
                                                   const std::vector<std::string>& var_names) {
  inner_->exclude_from_weight_decay(variables, var_names);
}

void LossScaleOptimizer::finalize_variable_values(const std::vector<Variable*>& variables) {
  inner_->finalize_variable_values(variables);
}

void LossScaleOptimizer::update_step(const Tensor&, Variable& variable, Slots&, const StepContext&) {
  // apply() hands every update to the inner optimizer; the base's loop never runs for this one.
  throw ValueError(fmt::format("{}: update_step('{}') called on a wrapper", name(), variable.name()));
}

nlohmann::json LossScaleOptimizer::get_config() const {
  // Keras 3.12+ does not use the base config here: "only name is supported".
  nlohmann::json config;
  config["name"] = name();
  add_config(config);
  return config;
}

void LossScaleOptimizer::add_config(nlohmann::json& config) const {
  config["inner_optimizer"] = serialize(*inner_);
  config["initial_scale"] = options_.initial_scale;
  config["dynamic_growth_steps"] = options_.dynamic_growth_steps;
}

namespace {

// Keras' backwards compatibility: configs written before 3.12 carried the base optimizer's
// options (all without effect here), which are accepted at their defaults only. "learning_rate"
// is the inner optimizer's (keel wrote none; accepted and ignored).
void check_legacy_keys(const nlohmann::json& config) {
  static const char* const null_default[] = {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue",
                                             "ema_overwrite_frequency", "loss_scale_factor",
                                             "gradient_accumulation_steps"};
  static const char* const known[] = {"name", "inner_optimizer", "initial_scale", "dynamic_growth_steps",
                                      "learning_rate", "use_ema", "ema_momentum", "dynamic"};
  for (const auto& [key, value] : config.items()) {
    const bool nullable = std::find(std::begin(null_default), std::end(null_default), key) != std::end(null_default);
    if (nullable) {
      if (!value.is_null())
        throw ValueError(fmt::format("LossScaleOptimizer does not support `{}` (got {}). Instead, set `{}` on the "
                                     "`inner_optimizer`.", key, value.dump(), key));
      continue;
    }
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      throw ValueError(fmt::format("LossScaleOptimizer does not support the argument `{}`", key));
  }
  if (config.contains("use_ema") && config.at("use_ema") != false)
    throw ValueError("LossScaleOptimizer does not support `use_ema`. Instead, set `use_ema` on the `inner_optimizer`.");
  if (config.contains("ema_momentum") && config.at("ema_momentum") != 0.99)
    throw ValueError(fmt::format("LossScaleOptimizer does not support `ema_momentum` (got {}). Instead, set "
                                 "`ema_momentum` on the `inner_optimizer`.", config.at("ema_momentum").dump()));
  if (config.contains("dynamic") && config.at("dynamic") != true)
    throw ValueError("LossScaleOptimizer no longer supports `dynamic=False`. Instead, simply set "
                     "`loss_scale_factor` directly on the `inner_optimizer`.");
}

}  // namespace

std::shared_ptr<LossScaleOptimizer> LossScaleOptimizer::from_config(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("inner_optimizer"))
    throw ValueError(fmt::format("LossScaleOptimizer.from_config: no \"inner_optimizer\" in {}", config.dump()));
  check_legacy_keys(config);
  LossScaleOptimizerOptions o;
  try {
    o.initial_scale = config.value("initial_scale", o.initial_scale);
    o.dynamic_growth_steps = config.value("dynamic_growth_steps", o.dynamic_growth_steps);
    if (config.contains("name") && config["name"].is_string()) o.name = config["name"].get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("LossScaleOptimizer.from_config: bad config: {}", e.what()));
  }
  return std::make_shared<LossScaleOptimizer>(deserialize(config["inner_optimizer"]), o);
}

}  // namespace keel::optimizers
