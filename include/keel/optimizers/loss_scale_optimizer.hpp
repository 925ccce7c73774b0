#pragma once
// keras.optimizers.LossScaleOptimizer: dynamic loss scaling for float16 training. Small float16
// gradients underflow to zero; multiplying the loss by a large scale before differentiating
// keeps them representable, and dividing the gradients by it again before the update restores
// their value. The scale adapts: a step whose gradients are all finite is applied and counted,
// and after dynamic_growth_steps such steps in a row the scale doubles; a step with an inf or NaN
// gradient is skipped (the wrapped optimizer does not move, its iteration count neither) and the
// scale halves, but never below 1.
//
//   optimizers::LossScaleOptimizer opt(optimizers::Adam(1e-3));
//   GradientTape tape;
//   auto loss = ...;
//   auto grads = tape.gradient(opt.scale_loss(loss), vars);
//   opt.apply(grads, vars);            // unscales, checks, applies or skips
//
// Model::compile wraps the optimizer of a model under the "mixed_float16" policy in one, and fit's
// training step scales the loss, as Keras does. The learning rate, iterations, slots and the
// config of the wrapped optimizer are reached through this one. As in Keras 3, wrapping clears
// the wrapped optimizer's own loss_scale_factor, so that the gradients are unscaled once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "keel/optimizers/optimizer.hpp"

namespace keel::optimizers {

struct LossScaleOptimizerOptions {
  double initial_scale = 32768.0;            // 2^15
  std::int64_t dynamic_growth_steps = 2000;  // finite steps in a row before the scale doubles
  std::string name;  // empty: auto_name, "loss_scale_optimizer", "loss_scale_optimizer_1", ...
};

class LossScaleOptimizer : public Optimizer {
 public:
  // ValueError when inner_optimizer is none or itself a LossScaleOptimizer, initial_scale is not
  // positive and finite, or dynamic_growth_steps < 1.
  explicit LossScaleOptimizer(OptimizerRef inner_optimizer, LossScaleOptimizerOptions options = {});
  ~LossScaleOptimizer() override;
  LossScaleOptimizer(LossScaleOptimizer&&) noexcept;
  LossScaleOptimizer& operator=(LossScaleOptimizer&&) noexcept;

  const std::shared_ptr<Optimizer>& inner_optimizer() const { return inner_; }
  double initial_scale() const { return options_.initial_scale; }
  std::int64_t dynamic_growth_steps() const { return options_.dynamic_growth_steps; }
  // The current loss scale (Keras 3's dynamic_scale, TF2's loss_scale).
  double dynamic_scale() const;
  double loss_scale() const { return dynamic_scale(); }
  // Finite steps since the scale last changed.
  std::int64_t step_counter() const;

  // loss * dynamic_scale() (TF2's get_scaled_loss is the same).
  Tensor scale_loss(const Tensor& loss) const override;
  Tensor get_scaled_loss(const Tensor& loss) const { return scale_loss(loss); }
  // Each gradient divided by dynamic_scale() (undefined ones stay undefined).
  std::vector<Tensor> get_unscaled_gradients(const std::vector<Tensor>& grads) const;

  // Unscales the gradients; when every defined one is finite, the wrapped optimizer applies
  // them and the step counts towards growth; otherwise nothing is updated and the scale halves.
  void apply(const std::vector<Tensor>& grads, const std::vector<Variable*>& variables) override;
  void apply(const std::vector<Tensor>& grads) override;
  void build(const std::vector<Variable*>& variables) override;
  bool built() const override;

  double learning_rate() const override;
  void set_learning_rate(double learning_rate) override;
  void set_learning_rate(const LearningRate& learning_rate) override;
  const LearningRate& learning_rate_spec() const override;
  std::int64_t iterations() const override;
  void set_iterations(std::int64_t iterations) override;
  // "step_counter" and "dynamic_scale", then the wrapped optimizer's variables.
  std::vector<std::pair<std::string, Variable*>> variables() override;
  Variable* get_slot(const Variable& variable, const std::string& slot) override;
  void exclude_from_weight_decay(const std::vector<const Variable*>& variables = {},
                                 const std::vector<std::string>& var_names = {}) override;
  void finalize_variable_values(const std::vector<Variable*>& variables) override;

  std::string class_name() const override { return "LossScaleOptimizer"; }
  // Keras 3's config (since 3.12): exactly name, inner_optimizer (serialized), initial_scale and
  // dynamic_growth_steps; the base options are the inner optimizer's.
  nlohmann::json get_config() const override;
  // Also reads the older configs that carried the base options, when each has its default
  // (null, false, 0.99); ValueError for a base option set to something else or an unknown key.
  static std::shared_ptr<LossScaleOptimizer> from_config(const nlohmann::json& config);

 protected:
  std::vector<SlotSpec> slot_specs() const override { return {}; }
  void update_step(const Tensor& grad, Variable& variable, Slots& slots, const StepContext& ctx) override;
  void add_config(nlohmann::json& config) const override;

 private:
  std::shared_ptr<Optimizer> inner_;
  LossScaleOptimizerOptions options_;
  std::unique_ptr<Variable> step_counter_;   // int64 scalar on the CPU
  std::unique_ptr<Variable> dynamic_scale_;  // float32 scalar on the CPU
  std::vector<Variable*> built_variables_;
};

}  // namespace keel::optimizers
