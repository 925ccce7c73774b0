// The configs of BatchNormalization and LayerNormalization: one field list per options struct,
// get_config, and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

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

}  // namespace detail

namespace {

using detail::write_fields;
using json = nlohmann::json;

json with_constraints(json c) {
  c["beta_constraint"] = nullptr;  // Keras' keys for what keel has not
  c["gamma_constraint"] = nullptr;
  return c;
}

}  // namespace

nlohmann::json BatchNormalization::get_config() const {
  auto c = with_constraints(Layer::get_config());
  write_fields(c, options_);
  c["synchronized"] = false;
  return c;
}

nlohmann::json LayerNormalization::get_config() const {
  auto c = with_constraints(Layer::get_config());
  write_fields(c, options_);
  c["rms_scaling"] = false;
  return c;
}

void detail::register_normalization_layers(Factories& f) {
  f["BatchNormalization"] = [](const json& c) {
    return std::make_shared<BatchNormalization>(read_fields<BatchNormalizationOptions>(Args(c, "BatchNormalization")));
  };
  f["LayerNormalization"] = [](const json& c) {
    return std::make_shared<LayerNormalization>(read_fields<LayerNormalizationOptions>(Args(c, "LayerNormalization")));
  };
}

}  // namespace keel::layers
