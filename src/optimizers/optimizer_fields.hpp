#pragma once
// The optimizers' field lists: the common options (from KEEL_OPTIMIZER_COMMON_FIELDS, the list
// that declares them) and each optimizer's own options, which drive get_config and from_config.
// Defaults live only in the options structs: a key a config lacks (or holds null for) keeps it.
#include <nlohmann/json.hpp>

#include <concepts>
#include <memory>
#include <optional>
#include <string>

#include "keel/optimizers/optimizer.hpp"

namespace keel::optimizers::detail {

// Optimizer-wide scalars (iteration, learning rate, Nadam's u_product, a loss scale and its step
// counter) live on the CPU whatever the default device: they are read on the host before every
// update. A non-trainable Variable holding `value`.
std::unique_ptr<Variable> host_scalar(double value, DType dtype, std::string name);

// Visits the common options of any options struct (or of CommonOptions).
template <class V, class O>
void common_fields(V&& v, O& o) {
#define KEEL_VISIT_FIELD(type, field, default_value) v(#field, o.field);
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_VISIT_FIELD)
#undef KEEL_VISIT_FIELD
}

// Copies the common options (and the name) between options structs.
template <class To, class From>
void copy_common(To& to, const From& from) {
#define KEEL_COPY_FIELD(type, field, default_value) to.field = from.field;
  KEEL_OPTIMIZER_COMMON_FIELDS(KEEL_COPY_FIELD)
#undef KEEL_COPY_FIELD
  to.name = from.name;
}

// The common options of an XOptions, for the base class.
template <class O>
CommonOptions common_of(const O& o) {
  CommonOptions c;
  copy_common(c, o);
  return c;
}

template <class V> void fields(V&& v, SGDOptions& o) {
  v("momentum", o.momentum);
  v("nesterov", o.nesterov);
}

// Adam and AdamW share their own options (AdamW only moves weight_decay to the front).
template <class V, class O>
  requires std::same_as<O, AdamOptions> || std::same_as<O, AdamWOptions>
void fields(V&& v, O& o) {
  v("beta_1", o.beta_1);
  v("beta_2", o.beta_2);
  v("epsilon", o.epsilon);
  v("amsgrad", o.amsgrad);
}

template <class V> void fields(V&& v, RMSpropOptions& o) {
  v("rho", o.rho);
  v("momentum", o.momentum);
  v("epsilon", o.epsilon);
  v("centered", o.centered);
}

template <class V> void fields(V&& v, AdagradOptions& o) {
  v("initial_accumulator_value", o.initial_accumulator_value);
  v("epsilon", o.epsilon);
}

template <class V> void fields(V&& v, NadamOptions& o) {
  v("beta_1", o.beta_1);
  v("beta_2", o.beta_2);
  v("epsilon", o.epsilon);
}

template <class V> void fields(V&& v, AdamaxOptions& o) {
  v("beta_1", o.beta_1);
  v("beta_2", o.beta_2);
  v("epsilon", o.epsilon);
}

template <class V> void fields(V&& v, AdadeltaOptions& o) {
  v("rho", o.rho);
  v("epsilon", o.epsilon);
}

template <class V> void fields(V&& v, FtrlOptions& o) {
  v("learning_rate_power", o.learning_rate_power);
  v("initial_accumulator_value", o.initial_accumulator_value);
  v("l1_regularization_strength", o.l1_regularization_strength);
  v("l2_regularization_strength", o.l2_regularization_strength);
  v("l2_shrinkage_regularization_strength", o.l2_shrinkage_regularization_strength);
  v("beta", o.beta);
}

template <class V> void fields(V&& v, LionOptions& o) {
  v("beta_1", o.beta_1);
  v("beta_2", o.beta_2);
}

template <class V> void fields(V&& v, LambOptions& o) {
  v("beta_1", o.beta_1);
  v("beta_2", o.beta_2);
  v("epsilon", o.epsilon);
}

template <class V> void fields(V&& v, AdafactorOptions& o) {
  v("beta_2_decay", o.beta_2_decay);
  v("epsilon_1", o.epsilon_1);
  v("epsilon_2", o.epsilon_2);
  v("clip_threshold", o.clip_threshold);
  v("relative_step", o.relative_step);
}

// Writes fields into a config; an unset optional is null.
struct FieldWriter {
  nlohmann::json& config;
  template <class T>
  void operator()(const char* key, const T& value) const {
    config[key] = value;
  }
  template <class T>
  void operator()(const char* key, const std::optional<T>& value) const {
    config[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  }
};

// Reads fields from a config; nlohmann's type errors become from_config's ValueError.
struct FieldReader {
  const nlohmann::json& config;
  template <class T>
  void operator()(const char* key, T& value) const {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return;
    if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>)
      value = it->template get<typename T::value_type>();
    else
      value = it->template get<T>();
  }
};

template <class O>
void write_fields(nlohmann::json& config, O options) {
  fields(FieldWriter{config}, options);
}

}  // namespace keel::optimizers::detail
