#pragma once
// Typed reading of one layer config, shared by the layer families' factories (the *_config.cpp
// files): Keras' defaults for missing keys and null, and a ValueError naming the class and the key
// for a value of the wrong type.
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/layers/convolutional.hpp"
#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"
#include "keel/layers/registry.hpp"
#include "layers/weight_classes.hpp"

namespace keel::layers::detail {

// A short rendering of a JSON value for error messages.
std::string show(const nlohmann::json& j);

// An initializer as a factory builds it: while a model is being loaded, zeros within the weight
// budget of the LoadingScope (see loading_scope.hpp).
initializers::Initializer make_initializer(const initializers::Initializer& real);
initializers::Initializer make_initializer(const std::string& name);

// One layer config, read key by key with the class named in every error.
class Args {
 public:
  using json = nlohmann::json;

  Args(const json& config, std::string cls) : c_(config), cls_(std::move(cls)) {
    if (!c_.is_object()) throw ValueError(fmt::format("{}.from_config: the config must be a JSON object, got {}", cls_, show(c_)));
  }

  const json* find(const char* key) const {
    auto it = c_.find(key);
    return it == c_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  [[noreturn]] void bad(const char* key, const char* want, const json& got) const {
    throw ValueError(fmt::format("{}.from_config: '{}' must be {}, got {}", cls_, key, want, show(got)));
  }

  std::int64_t int64_of(const char* key, const json& v) const {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        bad(key, "an integer in range", v);
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    if (v.is_number_float()) {  // 8.0: an integer written by a float-minded writer
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
    }
    bad(key, "an integer", v);
  }
  int int_of(const char* key, const json& v) const {
    const std::int64_t i = int64_of(key, v);
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) bad(key, "a 32-bit integer", v);
    return static_cast<int>(i);
  }
  double number_of(const char* key, const json& v) const {
    if (!v.is_number()) bad(key, "a number", v);
    return v.get<double>();
  }

  int required_int(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return int_of(key, *v);
  }
  int integer(const char* key, int def) const {
    const json* v = find(key);
    return v ? int_of(key, *v) : def;
  }
  std::optional<int> opt_int(const char* key) const {
    const json* v = find(key);
    return v ? std::optional<int>(int_of(key, *v)) : std::nullopt;
  }
  double required_number(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return number_of(key, *v);
  }
  double number(const char* key, double def) const {
    const json* v = find(key);
    return v ? number_of(key, *v) : def;
  }
  std::optional<double> opt_number(const char* key) const {
    const json* v = find(key);
    return v ? std::optional<double>(number_of(key, *v)) : std::nullopt;
  }
  bool flag(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) bad(key, "true or false", *v);
    return v->get<bool>();
  }
  std::string text(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_string()) bad(key, "a string", *v);
    return v->get<std::string>();
  }
  std::string name() const { return text("name", ""); }
  std::optional<std::uint64_t> seed(const char* key = "seed") const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) return v->get<std::uint64_t>();
    const std::int64_t s = int64_of(key, *v);
    if (s < 0) bad(key, "a non-negative integer", *v);
    return static_cast<std::uint64_t>(s);
  }
  // Keras' int-or-tuple arguments: [a, b] or a single a (for both).
  std::array<int, 2> pair(const char* key, std::array<int, 2> def) const {
    const json* v = find(key);
    if (!v) return def;
    if (v->is_array()) {
      if (v->size() != 2) bad(key, "an integer or a pair of integers", *v);
      return {int_of(key, (*v)[0]), int_of(key, (*v)[1])};
    }
    const int both = int_of(key, *v);
    return {both, both};
  }
  OptionalPair optional_pair(const char* key) const {
    if (!has(key)) return std::nullopt;
    return OptionalPair(pair(key, {0, 0}));
  }
  // Conv1D's int-or-1-tuple arguments.
  int single(const char* key, int def) const {
    const json* v = find(key);
    if (!v) return def;
    if (v->is_array()) {
      if (v->size() != 1) bad(key, "an integer or a list of one integer", *v);
      return int_of(key, (*v)[0]);
    }
    return int_of(key, *v);
  }
  std::vector<int> ints(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (!v->is_array()) return {int_of(key, *v)};
    std::vector<int> out;
    for (const auto& e : *v) out.push_back(int_of(key, e));
    return out;
  }
  // Shapes with Keras' None (null) as -1.
  std::vector<std::int64_t> dims(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (!v->is_array()) bad(key, "a list of dimensions", *v);
    std::vector<std::int64_t> out;
    for (const auto& e : *v) out.push_back(e.is_null() ? -1 : int64_of(key, e));
    return out;
  }
  initializers::Initializer initializer(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return make_initializer(def);
    std::string name;
    if (v->is_string()) {
      name = v->get<std::string>();
    } else if (v->is_object() && v->contains("class_name") && (*v)["class_name"].is_string()) {
      // Keras' serialized initializers: {"class_name": "GlorotUniform", ...} is "glorot_uniform".
      name = to_snake_case((*v)["class_name"].get<std::string>());
      if (const InitializerClass* c = initializer_class(name)) {  // a class with an argument
        double value = c->default_value;
        const auto cfg = v->find("config");
        if (cfg != v->end() && cfg->is_object() && cfg->contains(c->field)) value = number_of(key, (*cfg)[c->field]);
        return make_initializer(initializers::Constant(value));
      }
    } else {
      bad(key, "an initializer name or {\"class_name\": ...}", *v);
    }
    try {
      return make_initializer(name);
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("{}.from_config: '{}': {}", cls_, key, e.what()));
    }
  }
  regularizers::Regularizer regularizer(const char* key) const {
    const json* v = find(key);
    if (!v) return {};
    if (v->is_string()) {
      try {
        return regularizers::Regularizer(v->get<std::string>());
      } catch (const ValueError& e) {
        throw ValueError(fmt::format("{}.from_config: '{}': {}", cls_, key, e.what()));
      }
    }
    const auto cls_it = v->is_object() ? v->find("class_name") : v->end();
    if (!v->is_object() || cls_it == v->end() || !cls_it->is_string())
      bad(key, "null, a regularizer name or {\"class_name\": \"L1\" | \"L2\" | \"L1L2\", \"config\": ...}", *v);
    const std::string cls = cls_it->get<std::string>();
    const json empty = json::object();
    const auto cfg_it = v->find("config");
    const json& cfg = cfg_it != v->end() && cfg_it->is_object() ? *cfg_it : empty;
    const auto amount = [&](const char* which, double def) {
      auto it = cfg.find(which);
      if (it == cfg.end() || it->is_null()) return def;
      const double x = number_of(key, *it);
      if (!std::isfinite(x) || x < 0) bad(key, "a regularizer with finite, non-negative amounts", *v);
      return x;
    };
    const RegularizerClass* c = regularizer_class(cls);
    if (!c) bad(key, "a regularizer of class L1, L2 or L1L2", *v);
    return regularizers::Regularizer(c->has_l1 ? amount("l1", c->default_l1) : 0.0,
                                     c->has_l2 ? amount("l2", c->default_l2) : 0.0);
  }
  activations::ActivationFn activation(const char* key, const std::string& def) const {
    const json* v = find(key);
    std::string name = def;
    if (v) {
      if (!v->is_string()) bad(key, "an activation name", *v);
      name = v->get<std::string>();
    }
    try {
      return activations::ActivationFn(name);
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("{}.from_config: '{}': {} (an activation given as a function cannot be saved; "
                                   "use a named activation or a registered custom layer)", cls_, key, e.what()));
    }
  }
  std::shared_ptr<Layer> sublayer(const char* key) const {
    const json* v = find(key);
    if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls_, key));
    return deserialize(*v);
  }

 private:
  const json& c_;
  std::string cls_;
};

}  // namespace keel::layers::detail
