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

}  // namespace keel::models::detail
