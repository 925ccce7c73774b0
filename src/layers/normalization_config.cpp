// The configs of BatchNormalization, LayerNormalization, GroupNormalization, UnitNormalization and
// Normalization: one field list per options struct,
// get_config, and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "keel/layers/normalization.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

// The offset and scale both normalizations learn.
template <class V, class O>
void beta_gamma_fields(V&& v, O& o) {
  v("center", o.center);
  v("scale", o.scale);
  v("beta_initializer", o.beta_initializer);
  v("gamma_initializer", o.gamma_initializer);
  v("beta_regularizer", o.beta_regularizer, Spelling::keras3);
  v("gamma_regularizer", o.gamma_regularizer, Spelling::keras3);
  v("beta_constraint", o.beta_constraint);
  v("gamma_constraint", o.gamma_constraint);
}

template <class V>
void fields(V&& v, BatchNormalizationOptions& o) {
  v("axis", o.axis, Spelling::one_or_list1);
  v("momentum", o.momentum);
  v("epsilon", o.epsilon);
  beta_gamma_fields(v, o);
  v("moving_mean_initializer", o.moving_mean_initializer);
  v("moving_variance_initializer", o.moving_variance_initializer);
}

template <class V>
void fields(V&& v, LayerNormalizationOptions& o) {
  v("axis", o.axis);
  v("epsilon", o.epsilon);
  beta_gamma_fields(v, o);
}

template <class V>
void fields(V&& v, GroupNormalizationOptions& o) {
  v("groups", o.groups);
  v("axis", o.axis);
  v("epsilon", o.epsilon);
  beta_gamma_fields(v, o);
}

template <class V>
void fields(V&& v, UnitNormalizationOptions& o) {
  v("axis", o.axis);
}

}  // namespace detail

namespace {

using detail::write_fields;
using json = nlohmann::json;

}  // namespace

nlohmann::json BatchNormalization::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  c["synchronized"] = false;
  return c;
}

nlohmann::json LayerNormalization::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  c["rms_scaling"] = false;
  return c;
}

nlohmann::json GroupNormalization::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json UnitNormalization::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

// Keras writes axis as an int, a list, or None; mean / variance as a number, a list or None
// (None: adapted, the statistics live in the weights).
nlohmann::json Normalization::get_config() const {
  auto c = Layer::get_config();
  const auto& o = options_;
  c["axis"] = o.axis.empty() ? json(nullptr) : o.axis.size() == 1 ? json(o.axis[0]) : json(o.axis);
  const auto stat = [](const std::vector<double>& v) {
    return v.empty() ? json(nullptr) : v.size() == 1 ? json(v[0]) : json(v);
  };
  c["mean"] = stat(o.mean);
  c["variance"] = stat(o.variance);
  c["invert"] = o.invert;
  return c;
}

namespace {

std::vector<double> read_stat(const detail::Args& a, const json& c, const char* key) {
  const auto it = c.find(key);
  if (it == c.end() || it->is_null()) return {};
  if (it->is_number()) return {a.number(key, 0.0)};
  if (!it->is_array()) throw ValueError(fmt::format("Normalization.from_config: '{}' must be a number or a list", key));
  std::vector<double> out;
  for (const auto& e : *it) {
    if (!e.is_number()) throw ValueError(fmt::format("Normalization.from_config: '{}' must hold numbers", key));
    out.push_back(e.get<double>());
  }
  return out;
}

}  // namespace

namespace detail {
void register_spectral_normalization(Factories& f);  // spectral_normalization.cpp
}  // namespace detail

void detail::register_normalization_layers(Factories& f) {
  detail::register_spectral_normalization(f);
  f["GroupNormalization"] = [](const json& c) {
    return std::make_shared<GroupNormalization>(read_fields<GroupNormalizationOptions>(Args(c, "GroupNormalization")));
  };
  f["UnitNormalization"] = [](const json& c) {
    return std::make_shared<UnitNormalization>(read_fields<UnitNormalizationOptions>(Args(c, "UnitNormalization")));
  };
  f["Normalization"] = [](const json& c) {
    const Args a(c, "Normalization");
    NormalizationOptions o;
    if (c.contains("axis")) o.axis = c["axis"].is_null() ? std::vector<int>{} : a.ints("axis");
    o.mean = read_stat(a, c, "mean");
    o.variance = read_stat(a, c, "variance");
    o.invert = a.flag("invert", false);
    o.name = a.name();
    return std::make_shared<Normalization>(o);
  };
  f["BatchNormalization"] = [](const json& c) {
    return std::make_shared<BatchNormalization>(read_fields<BatchNormalizationOptions>(Args(c, "BatchNormalization")));
  };
  f["LayerNormalization"] = [](const json& c) {
    return std::make_shared<LayerNormalization>(read_fields<LayerNormalizationOptions>(Args(c, "LayerNormalization")));
  };
}

}  // namespace keel::layers
