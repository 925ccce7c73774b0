// The configs of the built-in learning-rate schedules: one field list per options struct drives
// get_config and deserialize, and the schedule registry (class name -> factory) is filled from
// the same lists. The constructor's required arguments (initial_learning_rate, decay_steps, ...)
// are written beside the options and read as required numbers.
#include <nlohmann/json.hpp>

#include <concepts>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "io/config_fields.hpp"
#include "keel/core/error.hpp"
#include "keel/optimizers/schedules.hpp"

namespace keel::config_fields {

namespace schedules = optimizers::schedules;

template <class V, class O>
  requires std::same_as<O, schedules::ExponentialDecayOptions> || std::same_as<O, schedules::InverseTimeDecayOptions>
void fields(V&& v, O& o) {
  v("staircase", o.staircase);
  v("name", o.name);
}

template <class V>
void fields(V&& v, schedules::PiecewiseConstantDecayOptions& o) {
  v("name", o.name);
}

template <class V>
void fields(V&& v, schedules::CosineDecayOptions& o) {
  v("alpha", o.alpha);
  v("name", o.name);
  v("warmup_target", o.warmup_target);
  v("warmup_steps", o.warmup_steps);
}

template <class V>
void fields(V&& v, schedules::CosineDecayRestartsOptions& o) {
  v("t_mul", o.t_mul);
  v("m_mul", o.m_mul);
  v("alpha", o.alpha);
  v("name", o.name);
}

template <class V>
void fields(V&& v, schedules::PolynomialDecayOptions& o) {
  v("end_learning_rate", o.end_learning_rate);
  v("power", o.power);
  v("cycle", o.cycle);
  v("name", o.name);
}

}  // namespace keel::config_fields

namespace keel::optimizers::schedules {

using config_fields::with_fields;
using json = nlohmann::json;

json ExponentialDecay::get_config() const {
  return with_fields(
      {{"initial_learning_rate", initial_learning_rate_}, {"decay_steps", decay_steps_}, {"decay_rate", decay_rate_}},
      options_);
}

json PiecewiseConstantDecay::get_config() const {
  return with_fields({{"boundaries", boundaries_}, {"values", values_}}, options_);
}

json CosineDecay::get_config() const {
  return with_fields({{"initial_learning_rate", initial_learning_rate_}, {"decay_steps", decay_steps_}}, options_);
}

json CosineDecayRestarts::get_config() const {
  return with_fields({{"initial_learning_rate", initial_learning_rate_}, {"first_decay_steps", first_decay_steps_}},
                     options_);
}

json PolynomialDecay::get_config() const {
  return with_fields({{"initial_learning_rate", initial_learning_rate_}, {"decay_steps", decay_steps_}}, options_);
}

json InverseTimeDecay::get_config() const {
  return with_fields(
      {{"initial_learning_rate", initial_learning_rate_}, {"decay_steps", decay_steps_}, {"decay_rate", decay_rate_}},
      options_);
}

json serialize(const LearningRateSchedule& schedule) {
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", schedule.class_name()},
          {"config", schedule.get_config()},
          {"registered_name", nullptr}};
}

namespace {

// One schedule config: its required numbers and its options.
struct ScheduleConfig {
  const std::string& cls;
  const json& config;

  double num(const char* key) const {
    if (!config.contains(key) || !config[key].is_number())
      throw ValueError(fmt::format("schedules::deserialize: {} config lacks the number \"{}\"", cls, key));
    return config[key].get<double>();
  }
  template <class O>
  O options() const {
    const config_fields::Reader reader{config, [this](const char* key, const json& v) {
      throw ValueError(fmt::format("schedules::deserialize: bad {} config: '{}' has the wrong type: {}", cls, key,
                                   v.dump()));
    }};
    O o;
    fields(reader, o);
    return o;
  }
};

using Factory = std::shared_ptr<LearningRateSchedule> (*)(const ScheduleConfig&);

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> table = {
      {"ExponentialDecay",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<ExponentialDecay>(c.num("initial_learning_rate"), c.num("decay_steps"),
                                                   c.num("decay_rate"), c.options<ExponentialDecayOptions>());
       }},
      {"PiecewiseConstantDecay",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<PiecewiseConstantDecay>(c.config.at("boundaries").get<std::vector<double>>(),
                                                         c.config.at("values").get<std::vector<double>>(),
                                                         c.options<PiecewiseConstantDecayOptions>());
       }},
      {"CosineDecay",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<CosineDecay>(c.num("initial_learning_rate"), c.num("decay_steps"),
                                              c.options<CosineDecayOptions>());
       }},
      {"CosineDecayRestarts",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<CosineDecayRestarts>(c.num("initial_learning_rate"), c.num("first_decay_steps"),
                                                      c.options<CosineDecayRestartsOptions>());
       }},
      {"PolynomialDecay",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<PolynomialDecay>(c.num("initial_learning_rate"), c.num("decay_steps"),
                                                  c.options<PolynomialDecayOptions>());
       }},
      {"InverseTimeDecay",
       [](const ScheduleConfig& c) -> std::shared_ptr<LearningRateSchedule> {
         return std::make_shared<InverseTimeDecay>(c.num("initial_learning_rate"), c.num("decay_steps"),
                                                   c.num("decay_rate"), c.options<InverseTimeDecayOptions>());
       }},
  };
  return table;
}

}  // namespace

std::vector<std::string> registered_schedules() { return config_fields::names_of(registry()); }

std::shared_ptr<LearningRateSchedule> deserialize(const json& serialized) {
  if (!serialized.is_object() || !serialized.contains("class_name") || !serialized["class_name"].is_string())
    throw ValueError(fmt::format("schedules::deserialize: expected an object with a \"class_name\", got {}",
                                 serialized.dump()));
  const std::string cls = serialized["class_name"].get<std::string>();
  const json config = serialized.value("config", json::object());
  const auto it = registry().find(cls);
  if (it == registry().end())
    throw ValueError(fmt::format("schedules::deserialize: unknown learning rate schedule '{}'", cls));
  try {
    return it->second(ScheduleConfig{cls, config});
  } catch (const nlohmann::json::exception& e) {
    // A malformed config is bad user input: report it as keel reports bad input.
    throw ValueError(fmt::format("schedules::deserialize: bad {} config: {}", cls, e.what()));
  }
}

}  // namespace keel::optimizers::schedules
