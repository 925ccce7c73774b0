#pragma once
// Restoring an optimizer's state from a file (train::Checkpoint's "optimizer/..." tensors, a
// saved model's optimizer.safetensors): every variable the optimizer needs must be there with its
// shape and dtype, and nothing else, unless a partial restore is asked for. Internal to keel.
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"

namespace keel::optimizers {
class Optimizer;
}

namespace keel::train::detail {

// The metadata key the writers record optimizer.built() under ("true" / "false"): a state saved
// before the first step has no slots, and restoring it must not ask for them.
inline constexpr const char* kOptimizerBuiltKey = "optimizer_built";
std::string optimizer_built_value(const optimizers::Optimizer& optimizer);

// One tensor of the file's optimizer state.
struct SavedState {
  std::string key;      // as the file names it, for errors ("optimizer/dense_3/kernel/momentum")
  std::string name;     // the optimizer variable it is for ("dense/kernel/momentum")
  const Tensor* value;  // owned by the caller
};

// Matches `saved` against optimizer.variables() (build it first). `metadata` is the file's;
// `prefix` is put before variable names in errors ("optimizer/" in a checkpoint). Missing and
// unexpected entries are reported together in one call of `fail(field, what)`, which must throw;
// with allow_partial they are tolerated (missing variables keep their values). A shape or dtype
// that differs is always an error. Returns what to assign, changing nothing itself.
std::vector<std::pair<Variable*, const Tensor*>> match_optimizer_state(
    optimizers::Optimizer& optimizer, const std::vector<SavedState>& saved,
    const std::map<std::string, std::string>& metadata, const std::string& prefix, bool allow_partial,
    const std::function<void(const std::string& field, const std::string& what)>& fail);

}  // namespace keel::train::detail
