#pragma once
// One field list per layer options struct drives both directions of a layer config: get_config
// writes every listed field, the registered factory reads them back into a default-constructed
// options struct. So a default lives only in the struct (a missing key keeps it, as Keras'
// from_config is cls(**config)), and a new field is one line in its list:
//
//   template <class V> void fields(V&& v, DenseOptions& o) {
//     v("activation", o.activation);
//     v("use_bias", o.use_bias);
//     ...
//   }
//
// The value's type says how it is spelled (an initializer by name, a regularizer as
// {"class_name", "config"}, an optional as null...); Spelling covers the few keys whose type does
// not say it. The name, trainable flag and dtype policy are the base Layer's, written by
// Layer::get_config and applied by layers::from_config.
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keel/layers/constraints.hpp"
#include "keel/layers/convolutional.hpp"
#include "keel/layers/normalization.hpp"
#include "layers/config_args.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers::detail {

enum class Spelling {
  plain,
  one_tuple,     // Conv1D's int-or-1-tuple arguments: written [n], read as n or [n]
  one_or_list1,  // n or a list: BatchNormalization's axis (Keras 2 wrote [3]), MHA's output_shape
  keras3,        // a regularizer with Keras 3's "module" and "registered_name" keys
};

// Keras' None for a missing dimension is -1 here.
inline nlohmann::json dims_json(const std::vector<std::int64_t>& dims) {
  nlohmann::json j = nlohmann::json::array();
  for (auto d : dims) j.push_back(d < 0 ? nlohmann::json(nullptr) : nlohmann::json(d));
  return j;
}

inline nlohmann::json pair_json(std::array<int, 2> v) { return nlohmann::json::array({v[0], v[1]}); }

// Writes one field into a config.
struct FieldWriter {
  nlohmann::json& config;

  template <class T>
  void operator()(const char* key, const T& value, Spelling spelling = Spelling::plain) const {
    config[key] = json_of(value, spelling);
  }

  static nlohmann::json json_of(const activations::ActivationFn& a, Spelling) { return a.name(); }
  static nlohmann::json json_of(const initializers::Initializer& i, Spelling) { return initializer_json(i); }
  static nlohmann::json json_of(const regularizers::Regularizer& r, Spelling s) {
    return s == Spelling::keras3 ? regularizer_json(r) : regularizer_config(r);
  }
  static nlohmann::json json_of(const constraints::Constraint& c, Spelling) { return constraints::serialize(c); }
  static nlohmann::json json_of(const std::array<int, 2>& v, Spelling) { return pair_json(v); }
  static nlohmann::json json_of(const OptionalPair& v, Spelling) { return v ? pair_json(*v) : nlohmann::json(nullptr); }
  static nlohmann::json json_of(const NormalizationAxes& a, Spelling) {
    return a.axes.size() == 1 ? nlohmann::json(a.axes[0]) : nlohmann::json(a.axes);
  }
  // Keras' None for an empty list.
  static nlohmann::json json_of(const std::vector<int>& v, Spelling) {
    return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
  }
  static nlohmann::json json_of(const std::vector<std::int64_t>& v, Spelling) {
    return v.empty() ? nlohmann::json(nullptr) : dims_json(v);
  }
  template <class T>
  static nlohmann::json json_of(const std::optional<T>& v, Spelling s) {
    return v ? json_of(*v, s) : nlohmann::json(nullptr);
  }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, std::string>>>
  static nlohmann::json json_of(const T& v, Spelling s) {
    if constexpr (std::is_same_v<T, int>)
      if (s == Spelling::one_tuple) return nlohmann::json::array({v});
    return v;
  }
};

// Reads one field from a config; a missing or null key keeps the value the field has.
struct FieldReader {
  const Args& args;

  template <class T>
  void operator()(const char* key, T& value, Spelling spelling = Spelling::plain) const {
    if (!args.has(key)) {
      // A default initializer too draws nothing while a model is being loaded.
      if constexpr (std::is_same_v<T, initializers::Initializer>) value = make_initializer(value);
      return;
    }
    value = read(key, value, spelling);
  }

 private:
  activations::ActivationFn read(const char* key, const activations::ActivationFn& def, Spelling) const {
    return args.activation(key, def.name());
  }
  initializers::Initializer read(const char* key, const initializers::Initializer& def, Spelling) const {
    return args.initializer(key, def.name());
  }
  regularizers::Regularizer read(const char* key, const regularizers::Regularizer&, Spelling) const {
    return args.regularizer(key);
  }
  constraints::Constraint read(const char* key, const constraints::Constraint&, Spelling) const {
    try {
      return constraints::get(*args.find(key));
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("from_config: '{}': {}", key, e.what()));
    }
  }
  std::array<int, 2> read(const char* key, const std::array<int, 2>& def, Spelling) const { return args.pair(key, def); }
  OptionalPair read(const char* key, const OptionalPair&, Spelling) const { return args.optional_pair(key); }
  NormalizationAxes read(const char* key, const NormalizationAxes&, Spelling) const {
    std::vector<int> axes = args.ints(key);
    if (axes.empty()) axes = {-1};
    return NormalizationAxes(axes);
  }
  std::vector<int> read(const char* key, const std::vector<int>&, Spelling) const { return args.ints(key); }
  std::vector<std::int64_t> read(const char* key, const std::vector<std::int64_t>&, Spelling s) const {
    if (s == Spelling::plain) return args.dims(key);
    const std::vector<int> ints = args.ints(key);
    return {ints.begin(), ints.end()};
  }
  std::optional<int> read(const char* key, const std::optional<int>&, Spelling) const { return args.opt_int(key); }
  std::optional<double> read(const char* key, const std::optional<double>&, Spelling) const {
    return args.opt_number(key);
  }
  std::optional<std::uint64_t> read(const char* key, const std::optional<std::uint64_t>&, Spelling) const {
    return args.seed(key);
  }
  bool read(const char* key, bool def, Spelling) const { return args.flag(key, def); }
  int read(const char* key, int def, Spelling s) const {
    return s == Spelling::plain ? args.integer(key, def) : args.single(key, def);
  }
  double read(const char* key, double def, Spelling) const { return args.number(key, def); }
  std::string read(const char* key, const std::string& def, Spelling) const { return args.text(key, def); }
};

// Every field of `options` into `config` (fields() takes the options by reference for reading, so
// the writer walks a copy).
template <class O>
void write_fields(nlohmann::json& config, O options) {
  fields(FieldWriter{config}, options);
}

// The options a config holds; the base fields (name) from the config too.
template <class O>
O read_fields(const Args& args) {
  O options;
  fields(FieldReader{args}, options);
  if constexpr (requires { options.name; }) options.name = args.name();
  return options;
}

}  // namespace keel::layers::detail
