// keras.constraints (keras/src/constraints/constraints.py): MaxNorm, NonNeg, UnitNorm and
// MinMaxNorm, their configs and Keras' get / serialize. Each projection is written with ops, in
// the weight's dtype, with Keras' epsilon (backend.epsilon() = 1e-7).
#include "keel/layers/constraints.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel::constraints {

namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

// The axes normalised against the weight's rank; a ShapeError names the constraint and shape.
std::vector<int> resolve_axes(const char* cls, const std::vector<int>& axes, const Tensor& w) {
  const int rank = static_cast<int>(w.shape().rank());
  std::vector<int> out;
  for (int a : axes) {
    const int r = a < 0 ? a + rank : a;
    if (r < 0 || r >= rank)
      throw ShapeError(fmt::format("{}: axis {} is out of range for a weight of shape {}", cls, a,
                                   w.shape().to_string()));
    out.push_back(r);
  }
  return out;
}

// sqrt(sum(w^2, axis, keepdims=True)), Keras' norms.
Tensor norms(const char* cls, const std::vector<int>& axes, const Tensor& w) {
  return sqrt(reduce_sum(square(w), resolve_axes(cls, axes, w), true));
}

void check_floating(const char* cls, const Tensor& w) {
  if (!is_floating(w.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating weight, got {} of shape {}", cls,
                                 name(w.dtype()), w.shape().to_string()));
}

}  // namespace

Constraint::Constraint(std::string name) {
  if (name.empty() || name == "none") return;
  if (name == "max_norm" || name == "MaxNorm") *this = MaxNorm();
  else if (name == "non_neg" || name == "NonNeg") *this = NonNeg();
  else if (name == "unit_norm" || name == "UnitNorm") *this = UnitNorm();
  else if (name == "min_max_norm" || name == "MinMaxNorm") *this = MinMaxNorm();
  else
    throw ValueError(fmt::format("constraints: unknown constraint '{}' (expected max_norm, non_neg, unit_norm "
                                 "or min_max_norm)", name));
}

Constraint::Constraint(Fn fn, std::string class_name) : class_name_(std::move(class_name)), fn_(std::move(fn)) {
  if (!fn_) class_name_.clear();
}

Tensor Constraint::operator()(const Tensor& w) const {
  if (!fn_) throw ValueError("constraints: applying a none constraint");
  Tensor out = fn_(w);
  if (!out.defined() || out.shape() != w.shape() || out.dtype() != w.dtype())
    throw ShapeError(fmt::format("{}: the constraint turned a weight of shape {} into {}", class_name_,
                                 w.shape().to_string(), out.defined() ? out.shape().to_string() : "nothing"));
  return out;
}

nlohmann::json Constraint::get_config() const {
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [k, v] : arguments_) c[k] = v;
  if (has_axis_) c["axis"] = axis_.size() == 1 ? nlohmann::json(axis_[0]) : nlohmann::json(axis_);
  return c;
}

MaxNorm::MaxNorm(double max_value, std::vector<int> axis) {
  class_name_ = "MaxNorm";
  arguments_ = {{"max_value", max_value}};
  axis_ = axis;
  has_axis_ = true;
  // desired = clip(norms, 0, max_value); w * desired / (epsilon + norms)
  fn_ = [max_value, axis](const Tensor& w) {
    check_floating("MaxNorm", w);
    const Tensor n = norms("MaxNorm", axis, w);
    return w * (clip_by_value(n, 0.0, max_value) / (n + kEpsilon));
  };
}

NonNeg::NonNeg() {
  class_name_ = "NonNeg";
  // w * cast(w >= 0, w.dtype)
  fn_ = [](const Tensor& w) {
    check_floating("NonNeg", w);
    return w * cast(greater_equal(w, zeros_like(w)), w.dtype());
  };
}

UnitNorm::UnitNorm(std::vector<int> axis) {
  class_name_ = "UnitNorm";
  axis_ = axis;
  has_axis_ = true;
  // w / (epsilon + sqrt(sum(w^2, axis, keepdims)))
  fn_ = [axis](const Tensor& w) {
    check_floating("UnitNorm", w);
    return w / (norms("UnitNorm", axis, w) + kEpsilon);
  };
}

MinMaxNorm::MinMaxNorm(double min_value, double max_value, double rate, std::vector<int> axis) {
  class_name_ = "MinMaxNorm";
  arguments_ = {{"min_value", min_value}, {"max_value", max_value}, {"rate", rate}};
  axis_ = axis;
  has_axis_ = true;
  if (min_value > max_value)
    throw ValueError(fmt::format("MinMaxNorm: min_value {} is greater than max_value {}", min_value, max_value));
  // desired = rate * clip(norms, min, max) + (1 - rate) * norms; w * desired / (epsilon + norms)
  fn_ = [min_value, max_value, rate, axis](const Tensor& w) {
    check_floating("MinMaxNorm", w);
    const Tensor n = norms("MinMaxNorm", axis, w);
    const Tensor desired = clip_by_value(n, min_value, max_value) * rate + n * (1.0 - rate);
    return w * (desired / (n + kEpsilon));
  };
}

namespace {

double number(const nlohmann::json& cfg, const char* cls, const char* key, double def) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return def;
  if (!it->is_number())
    throw ValueError(fmt::format("constraints.get: {}'s '{}' must be a number, got {}", cls, key, it->dump()));
  return it->get<double>();
}

std::vector<int> axis_of(const nlohmann::json& cfg, const char* cls) {
  auto it = cfg.find("axis");
  if (it == cfg.end() || it->is_null()) return {0};
  auto one = [&](const nlohmann::json& a) {
    if (!a.is_number_integer())
      throw ValueError(fmt::format("constraints.get: {}'s 'axis' must be an integer or a list of integers, got {}",
                                   cls, it->dump()));
    const auto v = a.get<std::int64_t>();
    if (v < -64 || v > 64) throw ValueError(fmt::format("constraints.get: {}'s axis {} is out of range", cls, v));
    return static_cast<int>(v);
  };
  if (!it->is_array()) return {one(*it)};
  std::vector<int> axes;
  for (const auto& a : *it) axes.push_back(one(a));
  if (axes.empty()) throw ValueError(fmt::format("constraints.get: {}'s 'axis' list is empty", cls));
  return axes;
}

}  // namespace

Constraint get(const nlohmann::json& identifier) {
  if (identifier.is_null()) return {};
  if (identifier.is_string()) return Constraint(identifier.get<std::string>());
  if (!identifier.is_object() || !identifier.contains("class_name") || !identifier["class_name"].is_string())
    throw ValueError(fmt::format("constraints.get: expected null, a name or {{\"class_name\", \"config\"}}, got {}",
                                 identifier.dump()));
  const std::string cls = identifier["class_name"].get<std::string>();
  static const nlohmann::json empty = nlohmann::json::object();
  auto it = identifier.find("config");
  const nlohmann::json& cfg = it != identifier.end() && it->is_object() ? *it : empty;
  if (it != identifier.end() && !it->is_object() && !it->is_null())
    throw ValueError(fmt::format("constraints.get: {}'s config must be an object, got {}", cls, it->dump()));
  if (cls == "MaxNorm" || cls == "max_norm") return MaxNorm(number(cfg, "MaxNorm", "max_value", 2.0), axis_of(cfg, "MaxNorm"));
  if (cls == "NonNeg" || cls == "non_neg") return NonNeg();
  if (cls == "UnitNorm" || cls == "unit_norm") return UnitNorm(axis_of(cfg, "UnitNorm"));
  if (cls == "MinMaxNorm" || cls == "min_max_norm")
    return MinMaxNorm(number(cfg, "MinMaxNorm", "min_value", 0.0), number(cfg, "MinMaxNorm", "max_value", 1.0),
                      number(cfg, "MinMaxNorm", "rate", 1.0), axis_of(cfg, "MinMaxNorm"));
  throw ValueError(fmt::format("constraints.get: unknown constraint class '{}' (expected MaxNorm, NonNeg, UnitNorm "
                               "or MinMaxNorm)", cls));
}

nlohmann::json serialize(const Constraint& constraint) {
  if (!constraint.active()) return nullptr;
  return {{"module", "keras.constraints"},
          {"class_name", constraint.class_name()},
          {"config", constraint.get_config()},
          {"registered_name", nullptr}};
}

}  // namespace keel::constraints
