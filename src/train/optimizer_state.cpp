// Matching a file's optimizer state against an optimizer (see optimizer_state.hpp).
#include "train/optimizer_state.hpp"

#include <set>
#include <stdexcept>

#include <fmt/core.h>

#include "keel/optimizers/optimizer.hpp"

namespace keel::train::detail {

namespace {

// Slot variables are "<weight name>/<slot>"; optimizer-wide state ("iteration", "learning_rate",
// Nadam's "u_product", a LossScaleOptimizer's "dynamic_scale") has no '/'.
bool is_slot(const std::string& name) { return name.find('/') != std::string::npos; }

// Whether the saved optimizer had been built (had slots). Files without the metadata (keel before
// it was written) say so by holding any slot at all.
bool saved_with_slots(const std::map<std::string, std::string>& metadata, const std::vector<SavedState>& saved) {
  if (auto it = metadata.find(kOptimizerBuiltKey); it != metadata.end()) return it->second != "false";
  for (const auto& s : saved)
    if (is_slot(s.name)) return true;
  return false;
}

// "a, b, c and 4 more": long lists stay readable.
std::string listing(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 8;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
  return out;
}

}  // namespace

std::string optimizer_built_value(const optimizers::Optimizer& optimizer) { return optimizer.built() ? "true" : "false"; }

std::vector<std::pair<Variable*, const Tensor*>> match_optimizer_state(
    optimizers::Optimizer& optimizer, const std::vector<SavedState>& saved,
    const std::map<std::string, std::string>& metadata, const std::string& prefix, bool allow_partial,
    const std::function<void(const std::string& field, const std::string& what)>& fail) {
  const auto checked_fail = [&](const std::string& field, const std::string& what) {
    fail(field, what);
    throw std::logic_error("match_optimizer_state: fail() returned");  // it must throw
  };
  std::map<std::string, Variable*> vars;
  for (const auto& [name, v] : optimizer.variables()) vars.emplace(name, v);

  std::vector<std::pair<Variable*, const Tensor*>> out;
  std::vector<std::string> unexpected;
  std::set<std::string> found;
  for (const SavedState& s : saved) {
    auto it = vars.find(s.name);
    if (it == vars.end()) {
      unexpected.push_back(s.key);
      continue;
    }
    Variable* v = it->second;
    if (s.value->shape() != v->shape() || s.value->dtype() != v->dtype())
      checked_fail(fmt::format("tensor '{}'", s.key),
                   fmt::format("is {} {}, but the {} optimizer's variable is {} {}", keel::name(s.value->dtype()),
                               s.value->shape().to_string(), optimizer.class_name(), keel::name(v->dtype()),
                               v->shape().to_string()));
    if (!found.insert(s.name).second)
      checked_fail(fmt::format("tensor '{}'", s.key), fmt::format("a second tensor for the variable '{}'", s.name));
    out.emplace_back(v, s.value);
  }
  // A state saved before the optimizer's first step has no slots to give: those keep their
  // initial values, which is what the saved optimizer had.
  const bool need_slots = saved_with_slots(metadata, saved);
  std::vector<std::string> missing;
  for (const auto& [name, v] : optimizer.variables())
    if (!found.count(name) && (need_slots || !is_slot(name))) missing.push_back(prefix + name);
  if (allow_partial || (missing.empty() && unexpected.empty())) return out;
  std::string what = fmt::format("the saved optimizer state does not match the {} optimizer:", optimizer.class_name());
  if (!missing.empty())
    what += fmt::format(" {} of its variables {} missing ({})", missing.size(), missing.size() == 1 ? "is" : "are",
                        listing(missing));
  if (!missing.empty() && !unexpected.empty()) what += ";";
  if (!unexpected.empty())
    what += fmt::format(" {} saved {} no variable of it ({})", unexpected.size(),
                        unexpected.size() == 1 ? "tensor is for" : "tensors are for", listing(unexpected));
  checked_fail("optimizer state", what);
  return out;  // not reached
}

}  // namespace keel::train::detail
