#pragma once
// Weight constraints as Keras 3 has them (keras.constraints): a projection applied to a weight
// after every optimizer update, `variable.assign(constraint(variable))` (Keras' BaseOptimizer.apply
// runs it over the updated trainable variables). Layers take them as options:
//   layers::Dense(8, {.kernel_constraint = constraints::MaxNorm(2.0)})
//   layers::Dense(8, {.kernel_constraint = "non_neg"})
// A name (Keras' "max_norm", "non_neg", "unit_norm", "min_max_norm", or the class names) gives
// the constraint with Keras' default arguments. A default-constructed Constraint is Keras' None.
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::constraints {

class Constraint {
 public:
  using Fn = std::function<Tensor(const Tensor&)>;
  Constraint() = default;                                       // none
  Constraint(std::nullptr_t) {}                                 // NOLINT: none, as Keras' None
  Constraint(const char* name) : Constraint(std::string(name)) {}  // NOLINT: implicit, by Keras name
  Constraint(std::string name);                                 // NOLINT; "" is none
  // A user's projection; its config is {} under `class_name` (it cannot be rebuilt from a file).
  Constraint(Fn fn, std::string class_name = "Constraint");     // NOLINT

  bool active() const { return static_cast<bool>(fn_); }
  // The projected weight (same shape and dtype). ValueError on a none constraint.
  Tensor operator()(const Tensor& w) const;
  // Keras' class name ("MaxNorm", ...); empty for none.
  const std::string& class_name() const { return class_name_; }
  // Keras' get_config(): {"max_value": 2.0, "axis": 0} for MaxNorm, {} for NonNeg.
  nlohmann::json get_config() const;
  // The callable the optimizer applies (empty for none).
  const Fn& function() const { return fn_; }

 protected:
  std::string class_name_;
  Fn fn_;
  // The numeric arguments in Keras' get_config order, and the axis (written as an int when it
  // has one entry, as Keras writes axis=0).
  std::vector<std::pair<std::string, double>> arguments_;
  std::vector<int> axis_;
  bool has_axis_ = false;
};

// w * clip(norms, 0, max_value) / (epsilon + norms), norms = sqrt(sum(w^2, axis, keepdims)).
class MaxNorm : public Constraint {
 public:
  explicit MaxNorm(double max_value = 2.0, int axis = 0) : MaxNorm(max_value, std::vector<int>{axis}) {}
  MaxNorm(double max_value, std::vector<int> axis);
};

// w * (w >= 0).
class NonNeg : public Constraint {
 public:
  NonNeg();
};

// w / (epsilon + sqrt(sum(w^2, axis, keepdims))).
class UnitNorm : public Constraint {
 public:
  explicit UnitNorm(int axis = 0) : UnitNorm(std::vector<int>{axis}) {}
  explicit UnitNorm(std::vector<int> axis);
};

// w * desired / (epsilon + norms), desired = rate * clip(norms, min_value, max_value)
// + (1 - rate) * norms.
class MinMaxNorm : public Constraint {
 public:
  explicit MinMaxNorm(double min_value = 0.0, double max_value = 1.0, double rate = 1.0, int axis = 0)
      : MinMaxNorm(min_value, max_value, rate, std::vector<int>{axis}) {}
  MinMaxNorm(double min_value, double max_value, double rate, std::vector<int> axis);
};

// Keras' constraints.get: null -> none, a name -> that constraint with its defaults, a
// {"class_name", "config"} object -> that constraint with its arguments. ValueError otherwise.
Constraint get(const nlohmann::json& identifier);
// Keras 3's serialize_keras_object: {"module": "keras.constraints", "class_name", "config",
// "registered_name": null}, or null for none.
nlohmann::json serialize(const Constraint& constraint);

}  // namespace keel::constraints
