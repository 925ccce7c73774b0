// The configs of the built-in losses: one field list per options struct drives get_config and
// from_config, and the loss registry (class name -> factory) is filled from the same lists.
// The name and the reduction are the base Loss's, written by Loss::get_config.
#include <nlohmann/json.hpp>

#include <concepts>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "io/config_fields.hpp"
#include "keel/losses/loss.hpp"
#include "layers/config_args.hpp"

namespace keel::config_fields {

template <class V>
void fields(V&& v, losses::HuberOptions& o) {
  v("delta", o.delta);
}

template <class V, class O>
  requires std::same_as<O, losses::BinaryCrossentropyOptions> || std::same_as<O, losses::CategoricalCrossentropyOptions>
void fields(V&& v, O& o) {
  v("from_logits", o.from_logits);
  v("label_smoothing", o.label_smoothing);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, losses::SparseCategoricalCrossentropyOptions& o) {
  v("from_logits", o.from_logits);
  v("ignore_class", o.ignore_class);
}

template <class V>
void fields(V&& v, losses::CosineSimilarityOptions& o) {
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, losses::BinaryFocalCrossentropyOptions& o) {
  v("apply_class_balancing", o.apply_class_balancing);
  v("alpha", o.alpha);
  v("gamma", o.gamma);
  v("from_logits", o.from_logits);
  v("label_smoothing", o.label_smoothing);
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, losses::CategoricalFocalCrossentropyOptions& o) {
  v("alpha", o.alpha);
  v("gamma", o.gamma);
  v("from_logits", o.from_logits);
  v("label_smoothing", o.label_smoothing);
  v("axis", o.axis);
}

// Dice and Tversky: axis None (an empty list) reduces every axis.
template <class V>
void fields(V&& v, losses::DiceOptions& o) {
  v("axis", o.axis);
}

template <class V>
void fields(V&& v, losses::TverskyOptions& o) {
  v("alpha", o.alpha);
  v("beta", o.beta);
  v("axis", o.axis);
}

// The losses whose options hold only the base fields (reduction, name).
template <class V> void fields(V&&, losses::MeanSquaredErrorOptions&) {}
template <class V> void fields(V&&, losses::MeanAbsoluteErrorOptions&) {}
template <class V> void fields(V&&, losses::KLDivergenceOptions&) {}
template <class V> void fields(V&&, losses::HingeOptions&) {}
template <class V> void fields(V&&, losses::SquaredHingeOptions&) {}
template <class V> void fields(V&&, losses::CategoricalHingeOptions&) {}
template <class V> void fields(V&&, losses::LogCoshOptions&) {}
template <class V> void fields(V&&, losses::PoissonOptions&) {}
template <class V> void fields(V&&, losses::MeanSquaredLogarithmicErrorOptions&) {}
template <class V> void fields(V&&, losses::MeanAbsolutePercentageErrorOptions&) {}

}  // namespace keel::config_fields

namespace keel::losses {

using config_fields::with_fields;

nlohmann::json Huber::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json BinaryCrossentropy::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json CategoricalCrossentropy::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json SparseCategoricalCrossentropy::get_config() const {
  return with_fields(Loss::get_config(), options_);
}
nlohmann::json CosineSimilarity::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json BinaryFocalCrossentropy::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json CategoricalFocalCrossentropy::get_config() const {
  return with_fields(Loss::get_config(), options_);
}
nlohmann::json Dice::get_config() const { return with_fields(Loss::get_config(), options_); }
nlohmann::json Tversky::get_config() const { return with_fields(Loss::get_config(), options_); }

namespace {

using Factory = std::shared_ptr<Loss> (*)(const std::string& cls, const nlohmann::json& config);

// A loss of class L from a config: the base fields and L's own, each kept at its default where
// the config has none.
template <class L, class O>
std::shared_ptr<Loss> make_from_config(const std::string& cls, const nlohmann::json& config) {
  const config_fields::Reader reader{config, [&cls](const char* key, const nlohmann::json& v) {
    throw ValueError(fmt::format("loss {}: '{}' has the wrong type: {}", cls, key, layers::detail::show(v)));
  }};
  O o;
  reader("reduction", o.reduction);
  reader("name", o.name);
  fields(reader, o);
  return std::make_shared<L>(std::move(o));
}

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> table = {
      {"MeanSquaredError", &make_from_config<MeanSquaredError, MeanSquaredErrorOptions>},
      {"MeanAbsoluteError", &make_from_config<MeanAbsoluteError, MeanAbsoluteErrorOptions>},
      {"Huber", &make_from_config<Huber, HuberOptions>},
      {"BinaryCrossentropy", &make_from_config<BinaryCrossentropy, BinaryCrossentropyOptions>},
      {"CategoricalCrossentropy", &make_from_config<CategoricalCrossentropy, CategoricalCrossentropyOptions>},
      {"SparseCategoricalCrossentropy",
       &make_from_config<SparseCategoricalCrossentropy, SparseCategoricalCrossentropyOptions>},
      {"KLDivergence", &make_from_config<KLDivergence, KLDivergenceOptions>},
      {"Hinge", &make_from_config<Hinge, HingeOptions>},
      {"SquaredHinge", &make_from_config<SquaredHinge, SquaredHingeOptions>},
      {"CategoricalHinge", &make_from_config<CategoricalHinge, CategoricalHingeOptions>},
      {"LogCosh", &make_from_config<LogCosh, LogCoshOptions>},
      {"Poisson", &make_from_config<Poisson, PoissonOptions>},
      {"CosineSimilarity", &make_from_config<CosineSimilarity, CosineSimilarityOptions>},
      {"MeanSquaredLogarithmicError",
       &make_from_config<MeanSquaredLogarithmicError, MeanSquaredLogarithmicErrorOptions>},
      {"MeanAbsolutePercentageError",
       &make_from_config<MeanAbsolutePercentageError, MeanAbsolutePercentageErrorOptions>},
      {"BinaryFocalCrossentropy", &make_from_config<BinaryFocalCrossentropy, BinaryFocalCrossentropyOptions>},
      {"CategoricalFocalCrossentropy",
       &make_from_config<CategoricalFocalCrossentropy, CategoricalFocalCrossentropyOptions>},
      {"Dice", &make_from_config<Dice, DiceOptions>},
      {"Tversky", &make_from_config<Tversky, TverskyOptions>},
  };
  return table;
}

}  // namespace

std::vector<std::string> registered_losses() { return config_fields::names_of(registry()); }

std::shared_ptr<Loss> from_config(const std::string& class_name, const nlohmann::json& config) {
  const auto it = registry().find(class_name);
  if (it == registry().end())
    throw ValueError(fmt::format("losses::from_config: the loss class '{}' is not registered (a function or a "
                                 "custom class cannot be rebuilt from a config)", class_name));
  return it->second(class_name, config);
}

}  // namespace keel::losses
