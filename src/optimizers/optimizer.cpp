// The optimizer base: Keras 3's BaseOptimizer.apply order (drop missing gradients, unscale,
// clip, decay the weights, the update rule, EMA, iteration + 1), the optimizer state as
// Variables, and configs.
#include "keel/optimizers/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <regex>
#include <unordered_map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/layers/layer.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "optimizers/optimizer_fields.hpp"

namespace keel::optimizers {

std::unique_ptr<Variable> detail::host_scalar(double value, DType dtype, std::string name) {
  DeviceScope cpu(Device::cpu());
  return std::make_unique<Variable>(constant(value, dtype), std::move(name), false);
}

namespace {

// Reads a scalar state variable (a checkpoint restore may have assigned it).
template <class T>
T read_scalar(const Variable& v) { return v.peek().item<T>(); }

// Writes a scalar state variable in place without building a tensor (once per step).
void write_scalar(Variable& v, double value) {
  const Tensor& t = v.peek();
  if (t.device().is_cpu() && t.dtype() == DType::int64) {
    *static_cast<std::int64_t*>(t.raw_data()) = static_cast<std::int64_t>(value);
  } else if (t.device().is_cpu() && t.dtype() == DType::float32) {
    *static_cast<float*>(t.raw_data()) = static_cast<float>(value);
  } else {
    v.assign(constant(value, t.dtype()).to(t.device()));
    return;
  }
  t.impl()->storage->bump_version();
}

// A constant learning rate must be a finite number >= 0 (0 is allowed: the weights stay put).
// Keras does not check; a negative rate would silently ascend the loss and a NaN one destroy
// the weights on the first step.
void check_learning_rate(double lr, const std::string& who) {
  if (!(std::isfinite(lr) && lr >= 0))
    throw ValueError(fmt::format("{}: `learning_rate` must be a finite number >= 0. Received: learning_rate={}", who, lr));
}

// clipnorm, clipvalue and global_clipnorm: 0 turns clipping off, as in Keras (whose `> 0` test
// also ignores negative values silently: here they are errors, as is NaN).
void check_clip(const std::optional<double>& value, const char* option, const std::string& who) {
  if (value && !(*value >= 0))
    throw ValueError(fmt::format("{}: `{}` must be >= 0 (0: no clipping). Received: {}={}", who, option, option, *value));
}

void check_loss_scale_factor(const std::optional<double>& factor, const std::string& who) {
  if (factor && !(*factor > 0))
    throw ValueError(fmt::format("{}: `loss_scale_factor` must be > 0. Received: {}", who, *factor));
}

}  // namespace

struct Optimizer::State {
  struct Entry {
    std::uint64_t id = 0;
    std::string var_name;  // the variable's name when first seen
    std::string name;      // unique among the entries: the prefix of the slot names
    Slots slots;
    std::unique_ptr<Variable> average;  // use_ema
    std::unique_ptr<Variable> accumulator;  // gradient_accumulation_steps: the summed gradients
    bool decay = true;                  // weight decay applies
  };

  std::unique_ptr<Variable> iteration;
  std::unique_ptr<Variable> learning_rate;  // when the learning rate is a constant
  std::vector<std::unique_ptr<Variable>> globals;
  std::vector<Entry> entries;
  std::unordered_map<std::uint64_t, std::size_t> index;  // Variable id -> entry
  std::vector<Variable*> built_variables;
  std::vector<std::uint64_t> excluded_ids;
  std::vector<std::regex> excluded_patterns;
  // Scratch reused by every apply (no allocation per step once warm).
  std::vector<std::size_t> live;
  std::vector<Tensor> grads;
  std::vector<double> norms;
  bool warned_missing = false;

  bool uses_decay(std::uint64_t id, const std::string& var_name) const {
    if (std::find(excluded_ids.begin(), excluded_ids.end(), id) != excluded_ids.end()) return false;
    for (const auto& re : excluded_patterns)
      if (std::regex_search(var_name, re)) return false;
    return true;
  }
};

Optimizer::Optimizer(LearningRate learning_rate, CommonOptions common, const char* class_name)
    : learning_rate_(std::move(learning_rate)), common_(std::move(common)), state_(std::make_unique<State>()) {
  // Keras 3 (since 3.15) names every optimizer auto_name(class name): "adam", "adam_1", ...
  if (common_.name.empty()) common_.name = layers::unique_name(class_name);
  const std::string who = class_name;
  if (!learning_rate_.is_schedule()) check_learning_rate(learning_rate_.value(), who);
  check_clip(common_.clipnorm, "clipnorm", who);
  check_clip(common_.clipvalue, "clipvalue", who);
  check_clip(common_.global_clipnorm, "global_clipnorm", who);
  const int clips = int(common_.clipnorm.has_value()) + int(common_.clipvalue.has_value()) +
                    int(common_.global_clipnorm.has_value());
  if (clips > 1)
    throw ValueError(fmt::format("{}: only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. "
                                 "Received: clipnorm={}, clipvalue={}, global_clipnorm={}",
                                 who, common_.clipnorm.value_or(NAN), common_.clipvalue.value_or(NAN),
                                 common_.global_clipnorm.value_or(NAN)));
  if (common_.use_ema) {
    if (!(common_.ema_momentum >= 0 && common_.ema_momentum <= 1))
      throw ValueError(fmt::format("{}: `ema_momentum` must be in the range [0, 1]. Received: ema_momentum={}",
                                   who, common_.ema_momentum));
    if (common_.ema_overwrite_frequency && *common_.ema_overwrite_frequency < 1)
      throw ValueError(fmt::format("{}: `ema_overwrite_frequency` must be an integer >= 1 or None. Received: "
                                   "ema_overwrite_frequency={}", who, *common_.ema_overwrite_frequency));
  }
  check_loss_scale_factor(common_.loss_scale_factor, who);
  if (common_.gradient_accumulation_steps && *common_.gradient_accumulation_steps < 2)
    throw ValueError(fmt::format("{}: `gradient_accumulation_steps` must be an integer >= 2. Received: "
                                 "gradient_accumulation_steps={}", who, *common_.gradient_accumulation_steps));
  state_->iteration = detail::host_scalar(0, DType::int64, "iteration");
  if (!learning_rate_.is_schedule()) set_learning_rate_variable(learning_rate_.value());
}

Optimizer::~Optimizer() = default;
Optimizer::Optimizer(Optimizer&&) noexcept = default;
Optimizer& Optimizer::operator=(Optimizer&&) noexcept = default;

// ---- learning rate and iterations ---------------------------------------------------------------

Variable* Optimizer::learning_rate_variable() const { return state_->learning_rate.get(); }

void Optimizer::set_learning_rate_variable(double value) {
  // Keras keeps a constant learning rate in a float32 variable, so it is saved with the state.
  if (!state_->learning_rate) state_->learning_rate = detail::host_scalar(value, DType::float32, "learning_rate");
  else write_scalar(*state_->learning_rate, value);
}

double Optimizer::learning_rate() const {
  // Keras evaluates a schedule at the apply() calls, not at the updates (with accumulation).
  if (learning_rate_.is_schedule()) return learning_rate_(apply_calls());
  return read_scalar<double>(*state_->learning_rate);
}

void Optimizer::set_learning_rate(double learning_rate) {
  if (learning_rate_.is_schedule())
    throw ValueError(fmt::format(
        "{}: this optimizer was created with a LearningRateSchedule as its learning rate, hence its learning "
        "rate is not settable. Create the optimizer with a number as learning rate, or pass a new schedule.",
        name()));
  check_learning_rate(learning_rate, fmt::format("{} ({}).set_learning_rate", class_name(), name()));
  set_learning_rate_variable(learning_rate);
  learning_rate_ = LearningRate(learning_rate);
}

void Optimizer::set_learning_rate(const LearningRate& learning_rate) {
  if (learning_rate.is_schedule()) {
    learning_rate_ = learning_rate;
    state_->learning_rate.reset();  // a schedule has no learning-rate state
    return;
  }
  check_learning_rate(learning_rate.value(), fmt::format("{} ({}).set_learning_rate", class_name(), name()));
  learning_rate_ = learning_rate;
  set_learning_rate_variable(learning_rate.value());
}

const LearningRate& Optimizer::learning_rate_spec() const { return learning_rate_; }

std::int64_t Optimizer::apply_calls() const { return read_scalar<std::int64_t>(*state_->iteration); }

std::int64_t Optimizer::iterations() const {
  const std::int64_t calls = apply_calls();
  return common_.gradient_accumulation_steps ? calls / *common_.gradient_accumulation_steps : calls;
}

void Optimizer::set_iterations(std::int64_t iterations) {
  if (iterations < 0) throw ValueError(fmt::format("{}: set_iterations({}): must be >= 0", name(), iterations));
  write_scalar(*state_->iteration, static_cast<double>(iterations));
}

// ---- state --------------------------------------------------------------------------------------

Variable& Optimizer::add_optimizer_variable(const std::string& var_name, const Tensor& initial) {
  DeviceScope cpu(Device::cpu());
  state_->globals.push_back(std::make_unique<Variable>(initial.to(Device::cpu()), var_name, false));
  return *state_->globals.back();
}

void Optimizer::build(const std::vector<Variable*>& variables) {
  for (Variable* v : variables)
    if (!v) throw ValueError(fmt::format("{}.build: null variable", name()));
  for (Variable* v : variables)
    if (!state_->index.count(v->id())) add_entry(*v);
  state_->built_variables = variables;
}

void Optimizer::add_entry(Variable& v) {
  State& s = *state_;
  if (!v.defined()) throw ValueError(fmt::format("{}: uninitialised variable '{}'", name(), v.name()));
  if (!is_floating(v.dtype()))
    throw DTypeError(fmt::format("{}: cannot optimise the variable '{}' of dtype {} (not floating point)", name(),
                                 v.name(), keel::name(v.dtype())));
  State::Entry e;
  e.id = v.id();
  e.var_name = v.name();
  // Slot names must stay distinct for saving even when two variables share a name.
  const std::string base = v.name().empty() ? "variable" : v.name();
  e.name = base;
  for (int k = 1;; ++k) {
    const bool taken =
        std::any_of(s.entries.begin(), s.entries.end(), [&](const State::Entry& o) { return o.name == e.name; });
    if (!taken) break;
    e.name = fmt::format("{}_{}", base, k);
  }
  autograd::NoRecordScope no_record;
  for (const SlotSpec& spec : slot_specs_for(v)) {
    Tensor init = spec.shape ? full(*spec.shape, spec.initial_value, v.dtype()).to(v.device())
                             : full_like(v.peek(), spec.initial_value);
    e.slots.push_back(std::make_unique<Variable>(std::move(init), e.name + "/" + spec.name, false));
  }
  if (common_.gradient_accumulation_steps)
    e.accumulator = std::make_unique<Variable>(zeros_like(v.peek()), e.name + "/gradient_accumulator", false);
  // Keras starts the average at zeros with momentum 0 on the first step, which makes it the
  // weight itself; starting from the weight gives the same and also suits a variable first
  // seen after step 0.
  if (common_.use_ema) e.average = std::make_unique<Variable>(v.peek(), e.name + "/average", false);
  e.decay = s.uses_decay(e.id, e.var_name);
  s.index.emplace(e.id, s.entries.size());
  s.entries.push_back(std::move(e));
}

bool Optimizer::built() const { return !state_->entries.empty(); }

std::vector<std::pair<std::string, Variable*>> Optimizer::variables() {
  std::vector<std::pair<std::string, Variable*>> out;
  out.emplace_back(state_->iteration->name(), state_->iteration.get());
  if (state_->learning_rate) out.emplace_back(state_->learning_rate->name(), state_->learning_rate.get());
  for (auto& g : state_->globals) out.emplace_back(g->name(), g.get());
  for (auto& e : state_->entries) {
    for (auto& slot : e.slots) out.emplace_back(slot->name(), slot.get());
    if (e.average) out.emplace_back(e.average->name(), e.average.get());
    if (e.accumulator) out.emplace_back(e.accumulator->name(), e.accumulator.get());
  }
  return out;
}

Variable* Optimizer::get_slot(const Variable& variable, const std::string& slot) {
  auto it = state_->index.find(variable.id());
  if (it == state_->index.end()) return nullptr;
  auto& e = state_->entries[it->second];
  const std::string full = e.name + "/" + slot;
  for (auto& s : e.slots)
    if (s->name() == full) return s.get();
  if (e.average && slot == "average") return e.average.get();
  if (e.accumulator && slot == "gradient_accumulator") return e.accumulator.get();
  return nullptr;
}

void Optimizer::exclude_from_weight_decay(const std::vector<const Variable*>& variables,
                                          const std::vector<std::string>& var_names) {
  for (const Variable* v : variables)
    if (v) state_->excluded_ids.push_back(v->id());
  for (const auto& p : var_names) {
    try {
      state_->excluded_patterns.emplace_back(p);
    } catch (const std::regex_error& e) {
      throw ValueError(fmt::format("{}.exclude_from_weight_decay: bad regular expression '{}': {}", name(), p, e.what()));
    }
  }
  for (auto& e : state_->entries) e.decay = state_->uses_decay(e.id, e.var_name);
}

void Optimizer::finalize_variable_values(const std::vector<Variable*>& variables) {
  if (!common_.use_ema) return;
  autograd::NoRecordScope no_record;
  for (Variable* v : variables) {
    if (!v) continue;
    auto it = state_->index.find(v->id());
    if (it == state_->index.end() || !state_->entries[it->second].average) continue;
    v->assign(state_->entries[it->second].average->peek());
  }
}

// ---- apply --------------------------------------------------------------------------------------

void Optimizer::apply_gradients(const std::vector<std::pair<Tensor, Variable*>>& grads_and_vars) {
  std::vector<Tensor> grads;
  std::vector<Variable*> vars;
  grads.reserve(grads_and_vars.size());
  vars.reserve(grads_and_vars.size());
  for (const auto& [g, v] : grads_and_vars) {
    grads.push_back(g);
    vars.push_back(v);
  }
  apply(grads, vars);
}

// In a traced function (keel::function) the update is one host step of the graph, run again on
// each replay with that call's gradients: it reads its scalar state (iterations, the learning
// rate of a schedule, loss scales) on the host, as TensorFlow's ResourceApply ops read theirs.
void Optimizer::traced_apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables) {
  std::vector<const Tensor*> inputs;
  inputs.reserve(grads.size());
  for (const Tensor& g : grads) inputs.push_back(&g);
  backend::host_step("ApplyGradients", inputs, [this, variables, n = grads.size()](const Tensor* g) {
    apply(std::vector<Tensor>(g, g + n), variables);
  });
}

void Optimizer::apply(const std::vector<Tensor>& grads) {
  if (state_->built_variables.empty())
    throw ValueError(fmt::format("{}.apply(grads): the optimizer was not built; call build(variables) first "
                                 "or pass the variables", name()));
  apply(grads, state_->built_variables);
}

void Optimizer::set_loss_scale_factor(std::optional<double> factor) {
  check_loss_scale_factor(factor, fmt::format("{} ({})", class_name(), name()));
  common_.loss_scale_factor = factor;
}

Tensor Optimizer::scale_loss(const Tensor& loss) const {
  return common_.loss_scale_factor ? loss * *common_.loss_scale_factor : loss;
}

Tensor Optimizer::prepare_gradient(const Tensor& grad, Variable& variable, const StepContext& ctx) {
  Tensor g = grad;
  if (ctx.grad_scale != 1) g = g * ctx.grad_scale;
  if (ctx.clipvalue > 0) g = clip_by_value(g, -ctx.clipvalue, ctx.clipvalue);
  if (ctx.decay != 0) variable.assign(variable.peek() - variable.peek() * ctx.decay);
  return g;
}

void Optimizer::apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables) {
  if (backend::recorder()) return traced_apply(grads, variables);
  State& s = *state_;
  if (grads.size() != variables.size())
    throw ValueError(fmt::format("{}.apply: {} gradients for {} variables", name(), grads.size(), variables.size()));
  if (grads.empty()) return;  // Keras: an empty list is a no-op
  s.live.clear();
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!variables[i]) throw ValueError(fmt::format("{}.apply: variable {} is null", name(), i));
    if (grads[i].defined()) s.live.push_back(i);
  }
  // Keras drops the variables without a gradient and warns once about them (often a loss that
  // does not use some weights), but a step where none has a gradient is an error.
  if (s.live.empty())
    throw ValueError(fmt::format("{}: no gradients provided for any variable ({} variables, every gradient "
                                 "undefined)", name(), variables.size()));
  if (s.live.size() != grads.size() && !s.warned_missing) {
    s.warned_missing = true;
    std::string names;
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) names += (names.empty() ? "'" : ", '") + variables[i]->name() + "'";
    std::fprintf(stderr, "keel: %s: gradients do not exist for variables [%s] when minimizing the loss.\n",
                 name().c_str(), names.c_str());
  }

  autograd::NoRecordScope no_record;
  const std::size_t n = s.live.size();
  s.grads.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    Variable& v = *variables[s.live[k]];
    Tensor g = grads[s.live[k]];
    if (g.shape() != v.shape())
      throw ShapeError(fmt::format("{}.apply: the gradient of '{}' has shape {}, the variable {}", name(), v.name(),
                                   g.shape().to_string(), v.shape().to_string()));
    if (!s.index.count(v.id())) add_entry(v);  // first sight: create its slots
    if (g.dtype() != v.dtype()) g = cast(g, v.dtype());  // mixed precision: update in the weight's dtype
    // A gradient that is a view of the weight itself would change under the update (weight decay
    // first writes the weight): read it from a copy.
    else if (g.impl()->storage == v.peek().impl()->storage) g = backend::clone(g);
    s.grads[k] = std::move(g);
  }

  const std::int64_t calls = apply_calls();
  const std::int64_t step = iterations();  // the updates so far (calls / N with accumulation)
  StepContext base;
  // A schedule sees the apply() calls (Keras' _iterations), the bias corrections the updates.
  base.learning_rate = learning_rate_.is_schedule() ? learning_rate_(calls) : read_scalar<double>(*s.learning_rate);
  base.local_step = step + 1;

  // Unscaling and clipping become one factor per gradient (and clipvalue a clamp) that the update
  // rules apply while they read the gradient.
  double unscale = common_.loss_scale_factor ? 1.0 / *common_.loss_scale_factor : 1.0;
  if (common_.gradient_accumulation_steps) {
    // Keras' _backend_apply_gradients: the unscaled gradients are summed into the accumulators;
    // every N-th call updates with (g + sum) / N (then clipped, after the weight decay) and
    // clears them. The EMA below still runs on every call, as in Keras.
    const std::int64_t steps = *common_.gradient_accumulation_steps;
    const bool update = (calls + 1) % steps == 0;
    for (std::size_t k = 0; k < n; ++k) {
      Variable& acc = *s.entries[s.index.at(variables[s.live[k]]->id())].accumulator;
      Tensor g = unscale != 1 ? s.grads[k] * unscale : s.grads[k];
      if (update) {
        s.grads[k] = (g + acc.peek()) / static_cast<double>(steps);
        acc.assign(zeros_like(acc.peek()));
      } else {
        acc.assign(acc.peek() + g);
      }
    }
    unscale = 1;
    if (!update) {
      finish_step(variables, step, calls);
      return;
    }
  }
  const bool per_norm = common_.clipnorm && *common_.clipnorm > 0;
  const bool global_norm = !per_norm && common_.global_clipnorm && *common_.global_clipnorm > 0;
  const bool by_value = !per_norm && !global_norm && common_.clipvalue && *common_.clipvalue > 0;
  s.norms.assign(n, 0.0);
  if (per_norm || global_norm)
    for (std::size_t k = 0; k < n; ++k)
      s.norms[k] = std::sqrt(reduce_sum(square(cast(s.grads[k], DType::float64))).item<double>()) * unscale;
  double global_scale = 1;
  if (global_norm) {
    double sq = 0;
    for (double nk : s.norms) sq += nk * nk;
    const double use_norm = std::sqrt(sq), c = *common_.global_clipnorm;
    // Keras: clip_norm * min(1 / norm, 1 / clip_norm), NaN when the norm is not finite.
    global_scale = std::isfinite(use_norm) ? c * std::min(1.0 / use_norm, 1.0 / c)
                                           : std::numeric_limits<double>::quiet_NaN();
  }

  before_update_steps(base.local_step);
  for (std::size_t k = 0; k < n; ++k) {
    Variable& v = *variables[s.live[k]];
    State::Entry& e = s.entries[s.index.at(v.id())];
    StepContext ctx = base;
    ctx.grad_scale = unscale;
    if (per_norm) ctx.grad_scale *= *common_.clipnorm / std::max(s.norms[k], *common_.clipnorm);
    if (global_norm) ctx.grad_scale *= global_scale;
    if (by_value) ctx.clipvalue = *common_.clipvalue;
    if (common_.weight_decay && *common_.weight_decay != 0 && e.decay)
      ctx.decay = *common_.weight_decay * base.learning_rate;
    update_step(s.grads[k], v, e.slots, ctx);
  }

  finish_step(variables, step, calls);
}

void Optimizer::finish_step(const std::vector<Variable*>& variables, std::int64_t step, std::int64_t calls) {
  State& s = *state_;
  const std::size_t n = s.live.size();
  if (common_.use_ema) {
    // Keras: momentum 0 on the very first step (the average becomes the weight), then
    // average = m * average + (1 - m) * weight; every ema_overwrite_frequency steps the weights
    // take the averages. `step` counts the updates (Keras' iterations property).
    const double m = step != 0 ? common_.ema_momentum : 0.0;
    const bool overwrite = common_.ema_overwrite_frequency && (step + 1) % *common_.ema_overwrite_frequency == 0;
    for (std::size_t k = 0; k < n; ++k) {
      Variable& v = *variables[s.live[k]];
      Variable& avg = *s.entries[s.index.at(v.id())].average;
      avg.assign(avg.peek() * m + v.peek() * (1 - m));
      if (overwrite) v.assign(avg.peek());
    }
  }
  // Keras' BaseOptimizer.apply, after the update (and on the accumulating calls too): every
  // updated variable with a constraint is projected, variable.assign(variable.constraint(variable)).
  for (std::size_t k = 0; k < n; ++k) {
    Variable& v = *variables[s.live[k]];
    if (v.constraint()) v.assign(v.constraint()(v.peek()));
  }
  for (auto& g : s.grads) g = Tensor();  // do not keep the gradients alive between steps
  write_scalar(*s.iteration, static_cast<double>(calls + 1));
}

// ---- config -------------------------------------------------------------------------------------

nlohmann::json Optimizer::get_config() const {
  nlohmann::json config;
  config["name"] = common_.name;
  if (learning_rate_.is_schedule()) config["learning_rate"] = schedules::serialize(*learning_rate_.schedule());
  else config["learning_rate"] = learning_rate();
  detail::common_fields(detail::FieldWriter{config}, common_);
  add_config(config);
  return config;
}

}  // namespace keel::optimizers
