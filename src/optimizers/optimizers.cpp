// SGD, Adam, AdamW, RMSprop, Adagrad, Nadam, Adamax, Adadelta and Lion: Keras 3's update rules,
// each written once
// (core/optimizer_rules.hpp) and run by the fused kernel of the variable's device where one
// takes the operands (a SIMD loop over contiguous float32 CPU data, one CUDA launch for float32
// and float64 on a GPU: backend::optimizer_update), else by the same rule on keel Tensors
// (CPU float64, float16, non-contiguous weights, ...). The tests check the CPU paths against
// hand-computed numbers (float32 and float64 variables) and the GPU against the CPU.
#include "keel/optimizers/optimizer.hpp"
#include "keel/optimizers/loss_scale_optimizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "backend/optimizer.hpp"
#include "core/optimizer_rules.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "optimizers/optimizer_fields.hpp"

namespace keel::optimizers {

namespace {

using StepContext = Optimizer::StepContext;

using detail::common_of;

using kernel::OptimizerParams;
using kernel::OptimizerRule;
using Slots3 = std::array<Variable*, 3>;

// The fused update of `variable` and its slots (in the places OptimizerParams gives them,
// nullptr where the rule has none) on its device, StepContext's scaling, clamping and decay
// included. Returns false, doing nothing, where no fused kernel takes these operands.
bool fused_update(OptimizerParams p, const Tensor& grad, Variable& variable, const Slots3& slots,
                  const StepContext& ctx) {
  p.grad_scale = ctx.grad_scale;
  p.clipvalue = ctx.clipvalue;
  p.decay = ctx.decay;
  std::array<Tensor, 3> st;
  for (std::size_t k = 0; k < 3; ++k)
    if (slots[k]) st[k] = slots[k]->peek();
  if (!backend::optimizer_update(p, variable.peek(), grad, st)) return false;
  // In-place writes: tapes that saved these tensors must see that they changed.
  variable.peek().impl()->storage->bump_version();
  for (auto* s : slots)
    if (s) s->peek().impl()->storage->bump_version();
  return true;
}

// The rules' arithmetic on tensors (the constants are doubles, rounded by the ops to the
// tensors' dtype).
struct TensorMath {
  static Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
  static Tensor add(const Tensor& a, double b) { return a + b; }
  static Tensor sub(const Tensor& a, const Tensor& b) { return a - b; }
  static Tensor mul(const Tensor& a, const Tensor& b) { return a * b; }
  static Tensor mul(const Tensor& a, double b) { return a * b; }
  static Tensor mul(double a, const Tensor& b) { return a * b; }
  static Tensor div(const Tensor& a, const Tensor& b) { return a / b; }
  static Tensor div(const Tensor& a, double b) { return a / b; }
  static Tensor root(const Tensor& a) { return sqrt(a); }
  static Tensor max(const Tensor& a, const Tensor& b) { return maximum(a, b); }
  static Tensor abs(const Tensor& a) { return keel::abs(a); }
  static Tensor sign(const Tensor& a) { return keel::sign(a); }
};

// The same rule with ops, on the gradient prepare_gradient made.
void tensor_update(const OptimizerParams& p, const Tensor& g, Variable& variable, const Slots3& slots) {
  Tensor w = variable.peek();
  std::array<Tensor, 3> s;
  for (std::size_t k = 0; k < 3; ++k)
    if (slots[k]) s[k] = slots[k]->peek();
  kernel::apply_rule<TensorMath>(p, kernel::RuleConstants<double>(p), w, g, s[0], s[1], s[2]);
  bool need[3];
  kernel::slots_needed(p, need);
  for (std::size_t k = 0; k < 3; ++k)
    if (need[k]) slots[k]->assign(s[k]);
  variable.assign(w);
}

// The update of one variable: fused where a kernel takes it, else with ops.
void update(const OptimizerParams& p, const Tensor& grad, Variable& variable, const Slots3& slots,
            const StepContext& ctx, Tensor (*prepare)(const Tensor&, Variable&, const StepContext&)) {
  if (fused_update(p, grad, variable, slots, ctx)) return;
  tensor_update(p, prepare(grad, variable, ctx), variable, slots);
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
  OptimizerParams p;
  p.rule = slots.empty() ? OptimizerRule::sgd : OptimizerRule::sgd_momentum;
  p.nesterov = options_.nesterov;
  p.lr = ctx.learning_rate;
  p.momentum = options_.momentum;
  update(p, grad, variable, {slots.empty() ? nullptr : slots[0].get(), nullptr, nullptr}, ctx, prepare_gradient);
}

void SGD::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

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
  const double b1 = options_.beta_1, b2 = options_.beta_2;
  const double t = static_cast<double>(ctx.local_step);
  OptimizerParams p;
  p.rule = OptimizerRule::adam;
  p.amsgrad = options_.amsgrad;
  p.one_minus_b1 = 1 - b1;
  p.one_minus_b2 = 1 - b2;
  // The bias corrections fold into the step size: lr * sqrt(1 - b2^t) / (1 - b1^t).
  p.alpha = ctx.learning_rate * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  p.epsilon = options_.epsilon;
  update(p, grad, variable, {slots[0].get(), slots[1].get(), options_.amsgrad ? slots[2].get() : nullptr}, ctx,
         prepare_gradient);
}

void Adam::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

namespace {
AdamOptions adam_part(const AdamWOptions& o) {
  AdamOptions a;
  a.beta_1 = o.beta_1;
  a.beta_2 = o.beta_2;
  a.epsilon = o.epsilon;
  a.amsgrad = o.amsgrad;
  detail::copy_common(a, o);
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
  const bool has_mom = options_.momentum > 0, centered = options_.centered;
  OptimizerParams p;
  p.rule = OptimizerRule::rmsprop;
  p.has_momentum = has_mom;
  p.centered = centered;
  p.rho = options_.rho;
  p.one_minus_rho = 1 - options_.rho;
  p.momentum = options_.momentum;
  p.epsilon = options_.epsilon;
  p.lr = ctx.learning_rate;
  // slot_specs lists velocity, then momentum and the mean gradient where present; the rule has
  // fixed places for them.
  update(p, grad, variable,
         {slots[0].get(), has_mom ? slots[1].get() : nullptr, centered ? slots[has_mom ? 2 : 1].get() : nullptr},
         ctx, prepare_gradient);
}

void RMSprop::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Adagrad ------------------------------------------------------------------------------------

Adagrad::Adagrad(LearningRate learning_rate, AdagradOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Adagrad"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Adagrad::slot_specs() const {
  return {{"accumulator", options_.initial_accumulator_value}};
}

void Adagrad::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  OptimizerParams p;
  p.rule = OptimizerRule::adagrad;
  p.lr = ctx.learning_rate;
  p.epsilon = options_.epsilon;
  update(p, grad, variable, {slots[0].get(), nullptr, nullptr}, ctx, prepare_gradient);
}

void Adagrad::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

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
  OptimizerParams p;
  p.rule = OptimizerRule::nadam;
  p.one_minus_b1 = 1 - b1;
  p.one_minus_b2 = 1 - b2;
  p.cm = cm;
  p.cg = cg;
  p.cv = cv;
  p.lr = lr;
  p.epsilon = eps;
  update(p, grad, variable, {slots[0].get(), slots[1].get(), nullptr}, ctx, prepare_gradient);
}

void Nadam::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Adamax -------------------------------------------------------------------------------------

Adamax::Adamax(LearningRate learning_rate, AdamaxOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Adamax"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Adamax::slot_specs() const { return {{"momentum", 0.0}, {"norm", 0.0}}; }

void Adamax::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  OptimizerParams p;
  p.rule = OptimizerRule::adamax;
  p.lr = ctx.learning_rate;
  p.one_minus_b1 = 1 - options_.beta_1;
  p.b2 = options_.beta_2;
  p.cv = 1 - std::pow(options_.beta_1, static_cast<double>(ctx.local_step));  // 1 - beta_1^t
  p.epsilon = options_.epsilon;
  update(p, grad, variable, {slots[0].get(), slots[1].get(), nullptr}, ctx, prepare_gradient);
}

void Adamax::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Adadelta -----------------------------------------------------------------------------------

Adadelta::Adadelta(LearningRate learning_rate, AdadeltaOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Adadelta"), options_(std::move(options)) {}

std::vector<Optimizer::SlotSpec> Adadelta::slot_specs() const {
  return {{"accumulated_grad", 0.0}, {"accumulated_delta_var", 0.0}};
}

void Adadelta::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  OptimizerParams p;
  p.rule = OptimizerRule::adadelta;
  p.lr = ctx.learning_rate;
  p.rho = options_.rho;
  p.one_minus_rho = 1 - options_.rho;
  p.epsilon = options_.epsilon;
  update(p, grad, variable, {slots[0].get(), slots[1].get(), nullptr}, ctx, prepare_gradient);
}

void Adadelta::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

// ---- Lion ---------------------------------------------------------------------------------------

Lion::Lion(LearningRate learning_rate, LionOptions options)
    : Optimizer(std::move(learning_rate), common_of(options), "Lion"), options_(std::move(options)) {
  if (!(options_.beta_1 > 0 && options_.beta_1 <= 1))
    throw ValueError(fmt::format("Lion: Argument `beta_1` must be in the [0, 1] range. Otherwise, the optimizer "
                                 "degenerates to SignSGD. Received: beta_1={}.", options_.beta_1));
}

std::vector<Optimizer::SlotSpec> Lion::slot_specs() const { return {{"momentum", 0.0}}; }

void Lion::update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) {
  OptimizerParams p;
  p.rule = OptimizerRule::lion;
  p.lr = ctx.learning_rate;
  p.b1 = options_.beta_1;
  p.one_minus_b1 = 1 - options_.beta_1;
  p.b2 = options_.beta_2;
  p.one_minus_b2 = 1 - options_.beta_2;
  update(p, grad, variable, {slots[0].get(), nullptr, nullptr}, ctx, prepare_gradient);
}

void Lion::add_config(nlohmann::json& config) const { detail::write_fields(config, options_); }

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
  if (n == "adamax") return std::make_shared<Adamax>();
  if (n == "adadelta") return std::make_shared<Adadelta>();
  if (n == "ftrl") return std::make_shared<Ftrl>();
  if (n == "lion") return std::make_shared<Lion>();
  if (n == "lamb") return std::make_shared<Lamb>();
  if (n == "adafactor") return std::make_shared<Adafactor>();
  throw ValueError(fmt::format("Could not interpret optimizer identifier: '{}' (known: sgd, adam, adamw, rmsprop, "
                               "adagrad, nadam, adamax, adadelta, ftrl, lion, lamb, adafactor)", name));
}

nlohmann::json serialize(const Optimizer& optimizer) {
  return {{"module", "keras.optimizers"},
          {"class_name", optimizer.class_name()},
          {"config", optimizer.get_config()},
          {"registered_name", nullptr}};
}

namespace {

// An optimizer of class O from a config: the learning rate (a number or a serialized schedule),
// the common options and O's own, each kept at its default where the config has none.
template <class Opt, class O>
std::shared_ptr<Optimizer> make_from_config(const nlohmann::json& config, LearningRate lr) {
  if (auto it = config.find("learning_rate"); it != config.end() && !it->is_null())
    lr = it->is_object() ? LearningRate(schedules::deserialize(*it)) : LearningRate(it->get<double>());
  O o;
  const detail::FieldReader reader{config};
  detail::common_fields(reader, o);
  fields(reader, o);
  if (auto it = config.find("name"); it != config.end() && it->is_string()) o.name = it->get<std::string>();
  return std::make_shared<Opt>(lr, o);
}

using ConfigFactory = std::shared_ptr<Optimizer> (*)(const nlohmann::json&);

// The built-in optimizers by lower-cased class name, with the constructors' default rates.
const std::map<std::string, ConfigFactory>& config_factories() {
  static const std::map<std::string, ConfigFactory> factories{
      {"sgd", [](const nlohmann::json& c) { return make_from_config<SGD, SGDOptions>(c, 0.01); }},
      {"adam", [](const nlohmann::json& c) { return make_from_config<Adam, AdamOptions>(c, 0.001); }},
      {"adamw", [](const nlohmann::json& c) { return make_from_config<AdamW, AdamWOptions>(c, 0.001); }},
      {"rmsprop", [](const nlohmann::json& c) { return make_from_config<RMSprop, RMSpropOptions>(c, 0.001); }},
      {"adagrad", [](const nlohmann::json& c) { return make_from_config<Adagrad, AdagradOptions>(c, 0.001); }},
      {"nadam", [](const nlohmann::json& c) { return make_from_config<Nadam, NadamOptions>(c, 0.001); }},
      {"adamax", [](const nlohmann::json& c) { return make_from_config<Adamax, AdamaxOptions>(c, 0.001); }},
      {"adadelta", [](const nlohmann::json& c) { return make_from_config<Adadelta, AdadeltaOptions>(c, 0.001); }},
      {"ftrl", [](const nlohmann::json& c) { return make_from_config<Ftrl, FtrlOptions>(c, 0.001); }},
      {"lion", [](const nlohmann::json& c) { return make_from_config<Lion, LionOptions>(c, 0.001); }},
      {"lamb", [](const nlohmann::json& c) { return make_from_config<Lamb, LambOptions>(c, 0.001); }},
      {"adafactor", [](const nlohmann::json& c) { return make_from_config<Adafactor, AdafactorOptions>(c, 0.001); }},
      {"lossscaleoptimizer",
       [](const nlohmann::json& c) -> std::shared_ptr<Optimizer> { return LossScaleOptimizer::from_config(c); }},
  };
  return factories;
}

}  // namespace

std::vector<std::string> registered_optimizers() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : config_factories()) names.push_back(name);
  return names;
}

std::shared_ptr<Optimizer> from_config(const std::string& class_name, const nlohmann::json& config) {
  if (!config.is_object())
    throw ValueError(fmt::format("optimizers::from_config: the {} config is not an object: {}", class_name, config.dump()));
  const auto& factories = config_factories();
  const auto it = factories.find(lower(class_name));
  if (it == factories.end())
    throw ValueError(fmt::format("optimizers::from_config: unknown optimizer class '{}'", class_name));
  try {
    return it->second(config);
  } catch (const nlohmann::json::exception& e) {
    // A malformed config is bad user input: report it as keel reports bad input.
    throw ValueError(fmt::format("optimizers::from_config: bad {} config: {}", class_name, e.what()));
  }
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
