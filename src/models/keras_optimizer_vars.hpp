#pragma once
// The optimizer's variables in the order Keras 3 lists them (optimizer.variables, which
// save_own_variables writes as "optimizer/vars/0", "1", ... of model.weights.h5), for
// keras_files.cpp.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"

namespace keel::optimizers {
class Optimizer;
}

namespace keel::models::detail {

// Entries of Keras' order that keel keeps no variable for: a LossScaleOptimizer's own iteration
// and learning_rate, which Keras makes and never uses. Written as 0 (int64) and 0.0 (float32).
inline constexpr const char* kKerasOnlyIteration = "#loss_scale_optimizer_iteration";
inline constexpr const char* kKerasOnlyLearningRate = "#loss_scale_optimizer_learning_rate";
inline bool is_keras_only(const std::string& name) { return !name.empty() && name[0] == '#'; }
// Its value, as Keras has it.
Tensor keras_only_value(const std::string& name);

// keel's names of `optimizer`'s variables (optimizer.variables() after it was built on
// `trainable`, or only "iteration" and "learning_rate" when it is not built) in Keras 3's
// order; nullopt for an optimizer whose order keel does not know (a LossScaleOptimizer, a
// custom class).
std::optional<std::vector<std::string>> keras_variable_order(optimizers::Optimizer& optimizer,
                                                             const std::vector<Variable*>& trainable);

// Keras' "optimizer/vars" datasets (in order) as keel's optimizer state by name, for an
// optimizer of the compiled class built on `trainable`: each value cast to its variable's dtype
// and checked against its shape. nullopt, with a warning on stderr as Keras gives, when the
// count does not match the optimizer's (Keras then skips the optimizer's variables too).
// `built` is set to whether the saved optimizer had slots.
std::optional<std::map<std::string, Tensor>> keras_state_by_name(optimizers::Optimizer& optimizer,
                                                                 const std::vector<Variable*>& trainable,
                                                                 const std::vector<Tensor>& saved,
                                                                 const std::string& label, bool& built);

// tf.keras 2's optimizer_weights (a legacy .h5 file's `weight_names` and their values) as keel's
// optimizer state by name, for an optimizer of the compiled class built on `trainable`. The
// names say what each value is: "<scope>/iter:0" (the step count), "<scope>/<variable>/<slot>:0"
// (OptimizerV2.add_slot, TF 2.0-2.10) or "<scope>/<slot>/<variable>:0" (TF 2.11-2.15), with
// Keras 2's slot names (Adam's m, v, vhat; RMSprop's rms, momentum, mg; ...) for keel's Keras 3
// ones, and Nadam's momentum_cache for u_product. nullopt, with a warning as Keras gives, when a
// name matches nothing of the optimizer's or some slot is missing; an IOError naming the value
// when a shape differs. `built` is set to whether the saved optimizer had slots.
std::optional<std::map<std::string, Tensor>> tf_keras2_state_by_name(optimizers::Optimizer& optimizer,
                                                                     const std::vector<Variable*>& trainable,
                                                                     const std::vector<std::string>& names,
                                                                     const std::vector<Tensor>& saved,
                                                                     const std::string& label, bool& built);

}  // namespace keel::models::detail
