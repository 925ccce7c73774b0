#pragma once
// keras.optimizers: the optimizer base (gradient clipping, decoupled weight decay, EMA of the
// weights, gradient accumulation, learning rate schedules, iteration count and slot variables)
// and SGD, Adam, AdamW, RMSprop, Adagrad, Nadam, Adamax, Adadelta, Ftrl, Lion, Lamb and
// Adafactor with Keras 3's update rules.
//
//   optimizers::Adam opt(1e-3);
//   opt.apply_gradients({{g_kernel, &kernel}, {g_bias, &bias}});
//   optimizers::SGD sgd(optimizers::schedules::ExponentialDecay(0.1, 1000, 0.96), {.momentum = 0.9});
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"
#include "keel/optimizers/schedules.hpp"

namespace keel::optimizers {

// A learning rate as Keras takes it: a number or a schedule of the iteration count. Schedules
// are immutable and shared, so copying a LearningRate is cheap.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT: implicit, so that SGD(0.1) works
  template <class S, class = std::enable_if_t<std::is_base_of_v<schedules::LearningRateSchedule, std::decay_t<S>>>>
  LearningRate(S&& schedule)  // NOLINT: implicit, so that Adam(schedules::ExponentialDecay(...)) works
      : schedule_(std::make_shared<std::decay_t<S>>(std::forward<S>(schedule))) {}
  template <class S, class = std::enable_if_t<std::is_base_of_v<schedules::LearningRateSchedule, S>>>
  LearningRate(std::shared_ptr<S> schedule) : schedule_(std::move(schedule)) {  // NOLINT
    if (!schedule_) throw ValueError("LearningRate: null schedule");
  }

  bool is_schedule() const { return schedule_ != nullptr; }
  // The constant value (meaningless for a schedule).
  double value() const { return value_; }
  const std::shared_ptr<const schedules::LearningRateSchedule>& schedule() const { return schedule_; }
  // The rate for the update that follows `step` completed updates.
  double operator()(std::int64_t step) const { return schedule_ ? (*schedule_)(step) : value_; }

 private:
  double value_ = 0;
  std::shared_ptr<const schedules::LearningRateSchedule> schedule_;
};

// The keyword arguments of Keras' BaseOptimizer, in Keras' order. Every XOptions below declares
// these same fields after its own ones (by the list below, because C++ designated initialisers
// cannot name an inherited field): clipnorm rescales each gradient to at most that L2 norm,
// global_clipnorm rescales all gradients together, clipvalue clamps elementwise (at most one of
// the three); weight_decay shrinks each weight by w * weight_decay * lr before the update; use_ema
// keeps an exponential moving average of the weights (see finalize_variable_values) and copies
// it into them every ema_overwrite_frequency steps; gradients are divided by loss_scale_factor.
// A clip option of 0 turns clipping off (as in Keras); negative or NaN ones are ValueErrors.
// gradient_accumulation_steps = N (an integer >= 2) sums the (unscaled) gradients of N apply()
// calls in a "gradient_accumulator" slot and updates only on every N-th call, with their mean,
// which is then clipped and applied after the weight decay, as Keras 3 does; iterations() then
// counts the updates (apply calls / N), which drives the bias corrections and the EMA, while a
// learning rate schedule sees the apply calls (Keras: "schedules look at the real iterations").
// An empty name gives Keras 3's auto_name: the snake-case class name made unique with a counter
// shared with the layers ("adam", "adam_1", "sgd", "adam_w", "rm_sprop", ...).
//
// The common options are declared once, here, as a list each options struct expands: flat, after
// the optimizer's own fields, so that designated initialisers name them directly
// ({.momentum = 0.9, .clipnorm = 1.0}); and the same list drives get_config, from_config and
// the copy into CommonOptions (src/optimizers/optimizer_fields.hpp). X(type, name, default).
#define KEEL_OPTIMIZER_CLIP_AND_EMA_FIELDS(X)          \
  X(std::optional<double>, clipnorm, std::nullopt)        \
  X(std::optional<double>, clipvalue, std::nullopt)       \
  X(std::optional<double>, global_clipnorm, std::nullopt) \
  X(bool, use_ema, false)                                 \
  X(double, ema_momentum, 0.99)                           \
  X(std::optional<std::int64_t>, ema_overwrite_frequency, std::nullopt) \
  X(std::optional<double>, loss_scale_factor, std::nullopt) \
  X(std::optional<std::int64_t>, gradient_accumulation_steps, std::nullopt)
// weight_decay comes first in AdamW (a number, 0.004 by default), last but one elsewhere.
#define KEEL_OPTIMIZER_COMMON_FIELDS(X)                 \
  X(std::optional<double>, weight_decay, std::nullopt) \
  KEEL_OPTIMIZER_CLIP_AND_EMA_FIELDS(X)
#define KEEL_OPTIMIZER_DECLARE_FIELD(type, field, default_value) type field = default_value;

struct CommonOptions {
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};

class Optimizer {
 public:
  // For implementing an optimizer (the virtual hooks below).
  // A slot of every variable: its name ("momentum") and the value it starts at.
  struct SlotSpec {
    SlotSpec(std::string slot_name, double initial = 0.0, std::optional<Shape> slot_shape = std::nullopt)
        : name(std::move(slot_name)), initial_value(initial), shape(std::move(slot_shape)) {}
    std::string name;
    double initial_value = 0.0;
    std::optional<Shape> shape;  // unset: the variable's (Adafactor's factored moments differ)
  };

  // What apply() worked out for one variable's update. Keras' order is: clip the gradients,
  // decay the weight (w -= w * decay), then the optimizer's rule with the gradient scaled by
  // grad_scale and, when clipvalue > 0, clamped to [-clipvalue, clipvalue]. The update rule
  // applies both (prepare_gradient or the fused loops) so that the fast path reads and writes
  // each element once.
  struct StepContext {
    double learning_rate = 0;
    std::int64_t local_step = 1;  // iterations() + 1: the step being taken
    double decay = 0;             // weight_decay * learning_rate for this variable, else 0
    double grad_scale = 1;        // clipnorm / global_clipnorm / loss scale factor
    double clipvalue = 0;         // 0: none
  };
  using Slots = std::vector<std::unique_ptr<Variable>>;

  virtual ~Optimizer();
  Optimizer(Optimizer&&) noexcept;
  Optimizer& operator=(Optimizer&&) noexcept;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of each variable from its gradient, then iterations() + 1. Pairs whose gradient
  // is undefined (an unconnected variable) are skipped with a warning on stderr (once per
  // optimizer), as Keras does; an empty list does nothing; a list where every gradient is
  // undefined is a ValueError (Keras' "No gradients provided for any variable"). Gradients of
  // another dtype are cast to the variable's. Not recorded by gradient tapes.
  // The public methods below are virtual so that a wrapper (LossScaleOptimizer) can forward
  // them to the optimizer it wraps.
  void apply_gradients(const std::vector<std::pair<Tensor, Variable*>>& grads_and_vars);
  virtual void apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables);
  // The variables given to build() (Keras' apply(grads) without trainable_variables).
  virtual void apply(const std::vector<Tensor>& grads);
  // Creates the slot variables of `variables` now (apply does it for variables it has not seen).
  virtual void build(const std::vector<Variable*>& variables);
  virtual bool built() const;

  // Keras' scale_loss: what a training step multiplies the loss by before taking gradients
  // (apply divides the gradients again): loss_scale_factor when set, the dynamic loss scale of
  // a LossScaleOptimizer; the loss itself otherwise.
  virtual Tensor scale_loss(const Tensor& loss) const;

  // The current learning rate: the schedule evaluated at iterations(), or the constant (kept in
  // float32, like Keras' learning_rate variable).
  virtual double learning_rate() const;
  // ValueError when the optimizer was created with a schedule (Keras' TypeError there), or for a
  // negative or non-finite rate (as in the constructors; 0 is allowed).
  virtual void set_learning_rate(double learning_rate);
  // Replaces the learning rate by a schedule or a constant.
  virtual void set_learning_rate(const LearningRate& learning_rate);
  virtual const LearningRate& learning_rate_spec() const;

  // Keras' `iterations`: the updates made, i.e. the apply() calls, divided by
  // gradient_accumulation_steps when that is set (floor).
  virtual std::int64_t iterations() const;
  // Sets the apply() call count (the "iteration" state variable), for restoring a checkpoint.
  virtual void set_iterations(std::int64_t iterations);

  // The optimizer state, as Keras lists it: "iteration" (int64 scalar), "learning_rate" (float32
  // scalar, when it is not a schedule), optimizer-wide state ("u_product" of Nadam), then for
  // each variable in the order first seen its slots, named "<variable name>/<slot>" (for a weight
  // "dense/kernel": "dense/kernel/momentum", "dense/kernel/velocity"; "/average" with use_ema).
  // Assigning to these restores the state.
  virtual std::vector<std::pair<std::string, Variable*>> variables();
  // The slot `slot` of `variable` ("momentum", ...); nullptr when it has none (yet).
  virtual Variable* get_slot(const Variable& variable, const std::string& slot);

  // Keras' exclude_from_weight_decay: these variables, and those whose name matches one of the
  // regular expressions (std::regex_search, as Keras' re.search), get no weight decay.
  virtual void exclude_from_weight_decay(const std::vector<const Variable*>& variables = {},
                                         const std::vector<std::string>& var_names = {});
  // With use_ema, overwrites the variables with their moving averages (what fit() does at the end).
  virtual void finalize_variable_values(const std::vector<Variable*>& variables);

  virtual std::string class_name() const = 0;
  // Keras' optimizer config: name, learning_rate (a number or a serialized schedule), the common
  // options (null when unset), then the optimizer's own.
  virtual nlohmann::json get_config() const;
  const std::string& name() const { return common_.name; }
  const CommonOptions& common_options() const { return common_; }
  // Keras' loss_scale_factor attribute: gradients are divided by it before the update, and
  // scale_loss multiplies by it (nullopt: none). LossScaleOptimizer clears the wrapped
  // optimizer's, as Keras does, so that gradients are not unscaled twice. ValueError unless > 0.
  void set_loss_scale_factor(std::optional<double> factor);

 protected:
  // class_name: the Keras class ("Adam"), for error messages and the default name.
  Optimizer(LearningRate learning_rate, CommonOptions common, const char* class_name);

  // The slots every variable gets, in Keras' order.
  virtual std::vector<SlotSpec> slot_specs() const = 0;
  // The slots of one variable: slot_specs() unless overridden (slots whose shape depends on it).
  virtual std::vector<SlotSpec> slot_specs_for(const Variable& /*variable*/) const { return slot_specs(); }

  // The update of one variable; grad has the variable's shape and dtype.
  virtual void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) = 0;
  // Called once per apply before the variables' updates (Nadam's momentum-cache product).
  virtual void before_update_steps(std::int64_t /*local_step*/) {}
  // The optimizer's own config entries.
  virtual void add_config(nlohmann::json& config) const = 0;

  // Applies the gradient clipping of ctx to grad (with ops) and the weight decay to variable;
  // returns the clipped gradient. For update rules written with ops.
  static Tensor prepare_gradient(const Tensor& grad, Variable& variable, const StepContext& ctx);
  // An optimizer-wide state variable (on the CPU), listed by variables() after "learning_rate".
  Variable& add_optimizer_variable(const std::string& name, const Tensor& initial);
  // apply() while a function is traced: the update as one step of the graph.
  void traced_apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables);

 private:
  struct State;
  void add_entry(Variable& variable);  // slots (and EMA average) of a variable seen first
  std::int64_t apply_calls() const;    // the "iteration" variable: apply() calls so far
  // The EMA of the weights, then the call count + 1: the end of every apply().
  void finish_step(const std::vector<Variable*>& variables, std::int64_t step, std::int64_t calls);
  void set_learning_rate_variable(double value);
  Variable* learning_rate_variable() const;

  LearningRate learning_rate_;
  CommonOptions common_;
  std::unique_ptr<State> state_;
};

// ---- the optimizers -----------------------------------------------------------------------------

// Gradient descent with optional (Nesterov) momentum:
//   m = momentum * m - lr * g;  w += m        (nesterov: w += momentum * m - lr * g)
struct SGDOptions {
  double momentum = 0.0;
  bool nesterov = false;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class SGD : public Optimizer {
 public:
  explicit SGD(LearningRate learning_rate = 0.01, SGDOptions options = {});
  std::string class_name() const override { return "SGD"; }
  const SGDOptions& options() const { return options_; }

 protected:
  std::vector<SlotSpec> slot_specs() const override;
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void add_config(nlohmann::json& config) const override;

 private:
  SGDOptions options_;
};

// Adam: m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
//   w -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)
// (amsgrad: v_hat = max(v_hat, v) replaces v in the denominator).
struct AdamOptions {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Adam : public Optimizer {
 public:
  explicit Adam(LearningRate learning_rate = 0.001, AdamOptions options = {});
  std::string class_name() const override { return "Adam"; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(LearningRate learning_rate, AdamOptions options, CommonOptions common, const char* class_name);
  std::vector<SlotSpec> slot_specs() const override;
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void add_config(nlohmann::json& config) const override;

 private:
  AdamOptions options_;
};

// AdamW: Adam with decoupled weight decay (w -= w * weight_decay * lr before each step).
struct AdamWOptions {
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
  KEEL_OPTIMIZER_CLIP_AND_EMA_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class AdamW : public Adam {
 public:
  explicit AdamW(LearningRate learning_rate = 0.001, AdamWOptions options = {});
  std::string class_name() const override { return "AdamW"; }
};

// RMSprop: v = rho v + (1 - rho) g^2 (centered: a = rho a + (1 - rho) g, v - a^2 below);
//   increment = lr * g / sqrt(v + epsilon);  w -= increment
//   (momentum > 0: mom = momentum * mom + increment; w -= mom)
struct RMSpropOptions {
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  bool centered = false;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(LearningRate learning_rate = 0.001, RMSpropOptions options = {});
  std::string class_name() const override { return "RMSprop"; }
  const RMSpropOptions& options() const { return options_; }

 protected:
  std::vector<SlotSpec> slot_specs() const override;
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void add_config(nlohmann::json& config) const override;

 private:
  RMSpropOptions options_;
};

// Adagrad: acc += g^2; w -= lr * g / sqrt(acc + epsilon).
struct AdagradOptions {
  double initial_accumulator_value = 0.1;
  double epsilon = 1e-7;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(LearningRate learning_rate = 0.001, AdagradOptions options = {});
  std::string class_name() const override { return "Adagrad"; }
  const AdagradOptions& options() const { return options_; }

 protected:
  std::vector<SlotSpec> slot_specs() const override;
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void add_config(nlohmann::json& config) const override;

 private:
  AdagradOptions options_;
};

// Nadam (Adam with Nesterov momentum and Dozat's momentum schedule
// u_t = beta_1 (1 - 0.5 * 0.96^t)): with U_t = u_1 ... u_t (the "u_product" state),
//   m_hat = u_{t+1} m / (1 - U_t u_{t+1}) + (1 - u_t) g / (1 - U_t);  v_hat = v / (1 - beta_2^t)
//   w -= lr * m_hat / (sqrt(v_hat) + epsilon)
struct NadamOptions {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Nadam : public Optimizer {
 public:
  explicit Nadam(LearningRate learning_rate = 0.001, NadamOptions options = {});
  std::string class_name() const override { return "Nadam"; }
  const NadamOptions& options() const { return options_; }

 protected:
  std::vector<SlotSpec> slot_specs() const override;
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void before_update_steps(std::int64_t local_step) override;
  void add_config(nlohmann::json& config) const override;

 private:
  NadamOptions options_;
  Variable* u_product_ = nullptr;  // owned by the base's optimizer-wide state
  double u_product_t_ = 1;         // this step's U_t, read once per apply
};

// The optimizers below declare the same members as Adagrad: the constructor, class_name,
// options(), and the hooks.
#define KEEL_OPTIMIZER_CLASS_BODY(Cls, Opts)                                                       \
 public:                                                                                          \
  explicit Cls(LearningRate learning_rate = 0.001, Opts options = {});                             \
  std::string class_name() const override { return #Cls; }                                        \
  const Opts& options() const { return options_; }                                                \
                                                                                                  \
 protected:                                                                                       \
  std::vector<SlotSpec> slot_specs() const override;                                              \
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override; \
  void add_config(nlohmann::json& config) const override;                                         \
                                                                                                  \
 private:                                                                                         \
  Opts options_;

// Adamax (Adam with the infinity norm): m += (g - m)(1 - beta_1); u = max(beta_2 u, |g|);
//   w -= lr m / ((1 - beta_1^t)(u + epsilon))
struct AdamaxOptions {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Adamax : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Adamax, AdamaxOptions)
};

// Adadelta: a = rho a + (1 - rho) g^2;  d = sqrt(D + epsilon) g / sqrt(a + epsilon);
//   D = rho D + (1 - rho) d^2;  w -= lr d     (a: "accumulated_grad", D: "accumulated_delta_var")
struct AdadeltaOptions {
  double rho = 0.95;
  double epsilon = 1e-7;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Adadelta : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Adadelta, AdadeltaOptions)
};

// FTRL-proximal (McMahan et al. 2013) as Keras 3 writes it, with p = -learning_rate_power:
//   n' = n + g^2;  z += g + 2 l2_shrinkage w - (n'^p - n^p) / lr * w;
//   w = (clip(z, -l1, l1) - z) / (n'^p / lr + 2 (l2 + beta / (2 lr)));  n = n'
// (n: "accumulator", starting at initial_accumulator_value; z: "linear").
struct FtrlOptions {
  double learning_rate_power = -0.5;  // <= 0
  double initial_accumulator_value = 0.1;
  double l1_regularization_strength = 0.0;
  double l2_regularization_strength = 0.0;
  double l2_shrinkage_regularization_strength = 0.0;
  double beta = 0.0;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Ftrl : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Ftrl, FtrlOptions)
};

// Lion (Chen et al. 2023): w -= lr sign(beta_1 m + (1 - beta_1) g);  m = beta_2 m + (1 - beta_2) g.
struct LionOptions {
  double beta_1 = 0.9;  // in (0, 1]
  double beta_2 = 0.99;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Lion : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Lion, LionOptions)
};

// LAMB (You et al. 2019): Adam's moments, u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + eps),
//   w -= r lr u with the trust ratio r = ||w|| / ||u|| (1 where either norm is 0).
struct LambOptions {
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Lamb : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Lamb, LambOptions)
};

// Adafactor (Shazeer & Stern 2018) as Keras 3: with t the step, rho = min(lr, 1 / sqrt(t))
// (relative_step and a constant lr: lr itself is capped so), beta_2_t = 1 - t^beta_2_decay,
// G = g^2 + epsilon_1; a variable of rank >= 2 keeps factored moments r (mean of G over the
// last axis) and c (over the last but one), v = (r / mean(r)) outer c, others v itself
// (v = beta_2_t v + (1 - beta_2_t) G); u = g / sqrt(v), u /= max(1, rms(u) / clip_threshold);
//   w -= max(epsilon_2, rms(w)) rho u.
// Slots "r", "c" (scalars for a rank < 2 variable, unused) and "velocity".
struct AdafactorOptions {
  double beta_2_decay = -0.8;
  double epsilon_1 = 1e-30;
  double epsilon_2 = 1e-3;
  double clip_threshold = 1.0;
  bool relative_step = true;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_OPTIMIZER_DECLARE_FIELD)
  std::string name;  // empty: auto_name
};
class Adafactor : public Optimizer {
  KEEL_OPTIMIZER_CLASS_BODY(Adafactor, AdafactorOptions)
  std::vector<SlotSpec> slot_specs_for(const Variable& variable) const override;
};

#undef KEEL_OPTIMIZER_CLASS_BODY

// ---- by name --------------------------------------------------------------------------------

// "sgd", "adam", "adamw", "rmsprop", "adagrad", "nadam", "adamax", "adadelta", "ftrl", "lion",
// "lamb", "adafactor" (any case) with Keras' defaults;
// ValueError otherwise.
std::shared_ptr<Optimizer> get(const std::string& name);
// Keras' serialized form {"module", "class_name", "config", "registered_name"} and back
// (also {"class_name", "config"}); the built-in optimizers only.
nlohmann::json serialize(const Optimizer& optimizer);
std::shared_ptr<Optimizer> deserialize(const nlohmann::json& serialized);
std::shared_ptr<Optimizer> from_config(const std::string& class_name, const nlohmann::json& config);
// The lower-cased class names from_config knows ("adam", "lossscaleoptimizer", ...).
std::vector<std::string> registered_optimizers();

// An optimizer given to compile() as Keras takes it: a name ("adam"), a temporary optimizer
// (moved to the heap: compile({.optimizer = optimizers::Adam(1e-3)})) or a shared_ptr (for an
// optimizer the caller keeps using). A named lvalue is refused: pass std::move(opt) or a
// shared_ptr, so that it is clear which object the model updates.
class OptimizerRef {
 public:
  OptimizerRef() = default;  // none
  OptimizerRef(const char* name) : OptimizerRef(std::string(name)) {}  // NOLINT: implicit
  OptimizerRef(const std::string& name) : ptr_(optimizers::get(name)) {}  // NOLINT
  template <class O, class = std::enable_if_t<std::is_base_of_v<Optimizer, std::decay_t<O>> &&
                                              !std::is_lvalue_reference_v<O>>>
  OptimizerRef(O&& optimizer)  // NOLINT: implicit
      : ptr_(std::make_shared<std::decay_t<O>>(std::move(optimizer))) {}
  template <class O, class = std::enable_if_t<std::is_base_of_v<Optimizer, O>>>
  OptimizerRef(std::shared_ptr<O> optimizer) : ptr_(std::move(optimizer)) {}  // NOLINT
  template <class O, class = std::enable_if_t<std::is_base_of_v<Optimizer, O>>>
  OptimizerRef(O& optimizer) = delete;  // use std::move(optimizer) or a shared_ptr

  const std::shared_ptr<Optimizer>& get() const { return ptr_; }
  Optimizer* operator->() const { return ptr_.get(); }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  std::shared_ptr<Optimizer> ptr_;
};

}  // namespace keel::optimizers
