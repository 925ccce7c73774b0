// Keras 3's order of an optimizer's variables (keras_optimizer_vars.hpp), from
// keras/src/optimizers/*.py (3.10 and later, the order every release since keeps):
//   iteration, learning_rate (absent for a schedule); then BaseOptimizer.build's: every
//   variable's "average" (use_ema), then every variable's "gradient_accumulator"; then the
//   optimizer's own build: its slots per variable, one variable after another ("Interleaves
//   adding variables for backward-compatibility": momentum_0, velocity_0, momentum_1, ...),
//   except RMSprop, which adds all velocities, then all momentums, then all average gradients,
//   and Adam's amsgrad velocity_hat, added for all variables after the rest; Nadam's u_product
//   comes last.
// keel's optimizers keep the same slots under the same names ("<weight>/<slot>"), so the order
// is a permutation of Optimizer::variables().
#include "models/keras_optimizer_vars.hpp"

#include <algorithm>
#include <iostream>
#include <set>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/optimizers/loss_scale_optimizer.hpp"
#include "keel/optimizers/optimizer.hpp"

namespace keel::models::detail {

namespace {

bool keras_order_known(const std::string& cls) {
  static const std::set<std::string> known = {"SGD",  "Adam",    "AdamW",    "RMSprop", "Adagrad", "Nadam",
                                              "Adamax", "Adadelta", "Ftrl", "Lion",    "Lamb",    "Adafactor"};
  return known.count(cls) > 0;
}

}  // namespace

Tensor keras_only_value(const std::string& name) {
  return name == kKerasOnlyIteration ? zeros(Shape{}, DType::int64) : zeros(Shape{}, DType::float32);
}

std::optional<std::vector<std::string>> keras_variable_order(optimizers::Optimizer& optimizer,
                                                             const std::vector<Variable*>& trainable) {
  // Keras 3's LossScaleOptimizer (keras/src/optimizers/loss_scale_optimizer.py): its own
  // iteration and learning_rate (made by the base constructor, never used: it forwards both to
  // the inner optimizer), step_counter and dynamic_scale (made in build), then the inner
  // optimizer's variables.
  if (auto* lso = dynamic_cast<optimizers::LossScaleOptimizer*>(&optimizer)) {
    auto inner = keras_variable_order(*lso->inner_optimizer(), trainable);
    if (!inner) return std::nullopt;
    std::vector<std::string> order{kKerasOnlyIteration, kKerasOnlyLearningRate};
    if (optimizer.built()) order.insert(order.end(), {"step_counter", "dynamic_scale"});
    order.insert(order.end(), inner->begin(), inner->end());
    return order;
  }
  if (!keras_order_known(optimizer.class_name())) return std::nullopt;
  const auto vars = optimizer.variables();
  std::set<std::string> globals;
  std::map<std::string, std::vector<std::string>> slots;  // weight name -> its slots, keel's order
  for (const auto& [name, v] : vars) {
    const auto slash = name.rfind('/');
    if (slash == std::string::npos) globals.insert(name);
    else slots[name.substr(0, slash)].push_back(name.substr(slash + 1));
  }
  for (const std::string& g : globals)
    if (g != "iteration" && g != "learning_rate" && g != "u_product") return std::nullopt;
  std::vector<std::string> order{"iteration"};
  if (globals.count("learning_rate")) order.push_back("learning_rate");
  if (!optimizer.built()) return order;  // what Keras lists before build()

  std::set<std::string> names;
  for (Variable* v : trainable) names.insert(v->name());
  for (const auto& [weight, list] : slots)
    if (!names.count(weight)) return std::nullopt;  // state of a variable the model does not train
  const auto has = [&](const Variable* v, const std::string& slot) {
    const auto it = slots.find(v->name());
    return it != slots.end() && std::find(it->second.begin(), it->second.end(), slot) != it->second.end();
  };
  const auto all_of_slot = [&](const std::string& slot) {
    for (Variable* v : trainable)
      if (has(v, slot)) order.push_back(v->name() + "/" + slot);
  };
  all_of_slot("average");
  all_of_slot("gradient_accumulator");
  const std::set<std::string> grouped = {"average", "gradient_accumulator", "velocity_hat"};
  if (optimizer.class_name() == "RMSprop") {
    for (const char* slot : {"velocity", "momentum", "average_gradient"}) all_of_slot(slot);
  } else {
    for (Variable* v : trainable) {
      const auto it = slots.find(v->name());
      if (it == slots.end()) continue;
      for (const std::string& slot : it->second)
        if (!grouped.count(slot)) order.push_back(v->name() + "/" + slot);
    }
    all_of_slot("velocity_hat");
  }
  if (globals.count("u_product")) order.push_back("u_product");
  if (order.size() != vars.size()) return std::nullopt;  // a slot this order does not place
  return order;
}

std::optional<std::map<std::string, Tensor>> keras_state_by_name(optimizers::Optimizer& optimizer,
                                                                 const std::vector<Variable*>& trainable,
                                                                 const std::vector<Tensor>& saved,
                                                                 const std::string& label, bool& built) {
  const auto order = keras_variable_order(optimizer, trainable);
  if (!order) {
    std::cerr << fmt::format("load_model: {}: keel does not know the order of a {}'s variables in Keras; the "
                             "optimizer starts from a fresh state\n", label, optimizer.class_name());
    return std::nullopt;
  }
  // A saved optimizer that was never built holds what Keras creates in its constructor: the
  // order without the variables build() makes (the slots, Nadam's u_product, a loss scale
  // optimizer's step_counter and dynamic_scale).
  std::vector<std::string> unbuilt;
  for (const std::string& n : *order)
    if (n.find('/') == std::string::npos && n != "u_product" && n != "step_counter" && n != "dynamic_scale")
      unbuilt.push_back(n);
  built = optimizer.built() && saved.size() == order->size();
  if (!built && saved.size() != unbuilt.size()) {
    // Keras' BaseOptimizer.load_own_variables warns and skips in this case.
    std::cerr << fmt::format("load_model: {}: skipping variable loading for optimizer '{}', because it has {} "
                             "variables whereas the saved optimizer has {} variables\n",
                             label, optimizer.name(), order->size(), saved.size());
    return std::nullopt;
  }
  std::map<std::string, Variable*> by_name;
  for (const auto& [name, v] : optimizer.variables()) by_name.emplace(name, v);
  std::map<std::string, Tensor> out;
  for (std::size_t i = 0; i < saved.size(); ++i) {
    const std::string& name = built ? (*order)[i] : unbuilt[i];
    if (is_keras_only(name)) {  // a value keel has no variable for (and Keras never reads)
      if (saved[i].shape() != Shape{})
        throw IOError(fmt::format("load_model: {}: optimizer/vars/{} has shape {}, but Keras' {} lists a scalar there",
                                  label, i, saved[i].shape().to_string(), optimizer.class_name()));
      continue;
    }
    const Variable* v = by_name.at(name);
    if (saved[i].shape() != v->shape())
      throw IOError(fmt::format("load_model: {}: optimizer/vars/{} has shape {}, but Keras' {} lists '{}' of shape {} "
                                "there", label, i, saved[i].shape().to_string(), optimizer.class_name(), name,
                                v->shape().to_string()));
    out.emplace(name, saved[i].dtype() == v->dtype() ? saved[i] : cast(saved[i], v->dtype()));
  }
  return out;
}

namespace {

// Keras 2's slot names (optimizer_v2/*.py _create_slots, and the 2.11 optimizers' build) for
// keel's, which are Keras 3's; a slot keel names the same way needs no entry.
std::string keel_slot(const std::string& cls, const std::string& keras2) {
  static const std::map<std::string, std::map<std::string, std::string>> table = {
      {"Adam", {{"m", "momentum"}, {"v", "velocity"}, {"vhat", "velocity_hat"}}},
      {"AdamW", {{"m", "momentum"}, {"v", "velocity"}, {"vhat", "velocity_hat"}}},
      {"Nadam", {{"m", "momentum"}, {"v", "velocity"}}},
      {"Adamax", {{"m", "momentum"}, {"v", "norm"}, {"u", "norm"}}},
      {"RMSprop", {{"rms", "velocity"}, {"mg", "average_gradient"}}},
      {"SGD", {{"m", "momentum"}}},
      {"Adadelta", {{"accum_grad", "accumulated_grad"}, {"accum_var", "accumulated_delta_var"}}},
  };
  const auto c = table.find(cls);
  if (c == table.end()) return keras2;
  const auto it = c->second.find(keras2);
  return it == c->second.end() ? keras2 : it->second;
}

// keel's name for one tf.keras 2 weight name, or "" when it names nothing keel's optimizer has.
std::string keel_name_of(const std::string& keras_name, const std::string& cls, const std::set<std::string>& weights,
                         const std::map<std::string, Variable*>& state) {
  std::string name = keras_name;
  if (const auto colon = name.rfind(':'); colon != std::string::npos) name.resize(colon);  // ":0"
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto slash = name.find('/', start);
    parts.push_back(name.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  // The model weight named by parts [first, last): the longest keel weight name it ends with
  // (TF prefixes variable names with outer scopes, "sequential/dense/kernel").
  const auto weight_in = [&](std::size_t first, std::size_t last) -> std::string {
    std::string path, found;
    for (std::size_t i = last; i-- > first;) {
      path = parts[i] + (path.empty() ? "" : "/" + path);
      if (weights.count(path)) found = path;
    }
    return found;
  };
  const auto slot_of = [&](const std::string& weight, const std::string& slot) {
    const std::string n = weight.empty() ? "" : weight + "/" + keel_slot(cls, slot);
    return state.count(n) ? n : std::string();
  };
  const std::size_t n = parts.size();
  // "<scope>/<variable>/<slot>" (OptimizerV2.add_slot).
  if (n >= 2)
    if (std::string k = slot_of(weight_in(0, n - 1), parts[n - 1]); !k.empty()) return k;
  // "<scope>/<slot>/<variable>" (the 2.11 optimizers' add_variable_from_reference).
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (std::string k = slot_of(weight_in(i + 1, n), parts[i]); !k.empty()) return k;
  // A scalar of the optimizer's own.
  const std::string& last = parts[n - 1];
  std::string global;
  if (last == "iter" || last == "iteration") global = "iteration";
  if (last == "momentum_cache") global = "u_product";  // Nadam's product of the mu_t
  if (last == "learning_rate") global = "learning_rate";
  return state.count(global) ? global : std::string();
}

}  // namespace

std::optional<std::map<std::string, Tensor>> tf_keras2_state_by_name(optimizers::Optimizer& optimizer,
                                                                     const std::vector<Variable*>& trainable,
                                                                     const std::vector<std::string>& names,
                                                                     const std::vector<Tensor>& saved,
                                                                     const std::string& label, bool& built) {
  std::map<std::string, Variable*> state;
  for (const auto& [name, v] : optimizer.variables()) state.emplace(name, v);
  std::set<std::string> weights;
  for (Variable* v : trainable) weights.insert(v->name());
  const auto skip = [&](const std::string& why) {
    std::cerr << fmt::format("load_model: {}: skipping the saved state of optimizer '{}' ({}); it starts from a "
                             "fresh state\n", label, optimizer.name(), why);
    return std::nullopt;
  };
  std::map<std::string, Tensor> out;
  std::size_t slots = 0;
  for (std::size_t i = 0; i < names.size() && i < saved.size(); ++i) {
    const std::string name = keel_name_of(names[i], optimizer.class_name(), weights, state);
    if (name.empty()) return skip(fmt::format("'{}' is nothing a {} built on this model has", names[i], optimizer.class_name()));
    if (out.count(name)) return skip(fmt::format("'{}' names '{}' a second time", names[i], name));
    const Variable* v = state.at(name);
    if (saved[i].shape() != v->shape())
      throw IOError(fmt::format("load_model: {}: optimizer_weights '{}' has shape {}, but keel's '{}' of the {} has "
                                "shape {}", label, names[i], saved[i].shape().to_string(), name,
                                optimizer.class_name(), v->shape().to_string()));
    out.emplace(name, saved[i].dtype() == v->dtype() ? saved[i] : cast(saved[i], v->dtype()));
    slots += name.find('/') != std::string::npos;
  }
  std::size_t expected = 0;
  for (const auto& [name, v] : state) expected += name.find('/') != std::string::npos;
  // Keras 2 saves either no slots (never trained) or every one.
  built = optimizer.built() && slots > 0;
  if (slots > 0 && slots != expected)
    return skip(fmt::format("it holds {} slot variables where this one has {}", slots, expected));
  return out;
}

}  // namespace keel::models::detail
