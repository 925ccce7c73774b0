#pragma once
// keras_tuner.HyperParameters: the search space a hypermodel declares while it builds a model
// (hp.Int, hp.Float, hp.Choice, hp.Boolean, hp.Fixed) and the values one trial gives them.
//
// As in keras-tuner, the first call of a name registers it (and returns its value in this set:
// the trial's value, else the default); later calls of the same name return that value. Every
// hyperparameter maps to [0, 1) by a cumulative probability (value_to_prob / prob_to_value):
// random search samples a uniform prob, Bayesian optimisation fits its Gaussian process there.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/core/error.hpp"

namespace keel::tuner {

// One hyperparameter value: Python's bool, int, float or str.
using Value = std::variant<bool, std::int64_t, double, std::string>;
// Values by name, in the order the hyperparameters were declared (keras-tuner prints them so).
using Values = std::vector<std::pair<std::string, Value>>;

// A value as Python prints it: True/False, 42, 0.001, 1.0, adam.
std::string format_value(const Value& v);

struct HyperParameter {
  enum class Kind { Int, Float, Choice, Boolean, Fixed };
  Kind kind = Kind::Fixed;
  std::string name;
  double min_value = 0, max_value = 0;
  // Int: the distance between values (linear) or their ratio (log); 0 = any integer.
  // Float: 0 = continuous. As keras-tuner's step=None.
  double step = 0;
  std::string sampling = "linear";  // "linear", "log" or "reverse_log"
  std::vector<Value> values;        // Choice: the candidates
  Value default_value;

  // keras-tuner's cumulative probability of a value, in [0, 1] (bucket centres for discrete ones).
  double value_to_prob(const Value& value) const;
  // The value at cumulative probability prob in [0, 1).
  Value prob_to_value(double prob) const;
  // hp.random_sample(seed): prob_to_value of a uniform draw of a generator seeded with seed.
  Value random_sample(std::uint64_t seed) const;
  // What GridSearch enumerates, the default first: every value of a discrete hyperparameter,
  // 10 evenly spaced probability buckets of a continuous one (keras-tuner's hp.values).
  std::vector<Value> grid_values() const;
  std::string kind_name() const;  // "Int", "Float", "Choice", "Boolean", "Fixed"
};

namespace detail {
// The Value alternative a C++ argument type is stored as, and back.
template <class T>
using hp_stored_t = std::conditional_t<
    std::is_same_v<std::decay_t<T>, bool>, bool,
    std::conditional_t<std::is_integral_v<std::decay_t<T>>, std::int64_t,
                       std::conditional_t<std::is_floating_point_v<std::decay_t<T>>, double, std::string>>>;
template <class T>
using hp_result_t = std::conditional_t<std::is_arithmetic_v<std::decay_t<T>>, std::decay_t<T>, std::string>;
}  // namespace detail

class HyperParameters {
 public:
  // An integer in [min_value, max_value] (both included). linear: min_value + k * step; log:
  // min_value * step^k, or any integer when step <= 1 (a ratio of 1 steps nowhere: keras-tuner's
  // step=None). ValueError for an empty range, a non-positive step or log with min_value <= 0.
  std::int64_t Int(const std::string& name, std::int64_t min_value, std::int64_t max_value, std::int64_t step = 1,
                   const std::string& sampling = "linear");
  // A real in [min_value, max_value]; step 0: continuous. The default is min_value.
  double Float(const std::string& name, double min_value, double max_value, double step = 0,
               const std::string& sampling = "linear");
  // One of values (ints, doubles or strings); the default is the first.
  std::int64_t Choice(const std::string& name, const std::vector<std::int64_t>& values);
  double Choice(const std::string& name, const std::vector<double>& values);
  std::string Choice(const std::string& name, const std::vector<std::string>& values);
  // hp.Choice("units", {32, 64}) returns an int, hp.Choice("opt", {"adam", "sgd"}) a string.
  template <class T>
  detail::hp_result_t<T> Choice(const std::string& name, std::initializer_list<T> values) {
    std::vector<detail::hp_stored_t<T>> v(values.begin(), values.end());
    return static_cast<detail::hp_result_t<T>>(Choice(name, v));
  }
  bool Boolean(const std::string& name, bool default_value = false);
  // A constant that is recorded with the trial (not searched).
  template <class T>
  detail::hp_result_t<T> Fixed(const std::string& name, const T& value) {
    return static_cast<detail::hp_result_t<T>>(
        std::get<detail::hp_stored_t<T>>(fixed(name, Value(detail::hp_stored_t<T>(value)))));
  }

  // The value of name as T (an integer, floating or bool type, or std::string): ValueError
  // naming the hyperparameter when it is unknown or holds another kind of value.
  template <class T>
  T get(const std::string& name) const {
    const Value& v = value(name);
    if constexpr (std::is_same_v<T, bool>) {
      if (auto* b = std::get_if<bool>(&v)) return *b;
    } else if constexpr (std::is_integral_v<T>) {
      if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<T>(*i);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (auto* d = std::get_if<double>(&v)) return static_cast<T>(*d);
      if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<T>(*i);
    } else {
      if (auto* s = std::get_if<std::string>(&v)) return *s;
    }
    throw_wrong_type(name, v);
  }
  const Value& value(const std::string& name) const;  // ValueError when unknown
  bool contains(const std::string& name) const;

  // The declared hyperparameters, in declaration order, and the current values (possibly with
  // entries no hyperparameter declares, such as Hyperband's "tuner/epochs").
  const std::vector<HyperParameter>& space() const { return space_; }
  const Values& values() const { return values_; }
  const HyperParameter* find(const std::string& name) const;
  // Sets (or adds) a value: what an oracle does for a trial.
  void set(const std::string& name, Value v);
  // Declares hp unless its name is known; its value becomes the default where none is set.
  void declare(const HyperParameter& hp);

  nlohmann::json to_json() const;  // {"space": [...], "values": {...}}
  static HyperParameters from_json(const nlohmann::json& j);

 private:
  Value fixed(const std::string& name, Value v);
  // Registers hp (checking that a second declaration has the same kind) and returns its value.
  const Value& register_hp(HyperParameter hp);
  [[noreturn]] static void throw_wrong_type(const std::string& name, const Value& v);
  std::vector<HyperParameter> space_;
  Values values_;
};

}  // namespace keel::tuner
