// keras_tuner.HyperParameters: declaration, the [0, 1) embedding of each kind (keras-tuner's
// hp_types/*.py and hp_utils.py), sampling, the grid, and JSON.
#include "keel/tuner/hyperparameters.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

namespace keel::tuner {

namespace {

using Kind = HyperParameter::Kind;

// hp_utils.prob_to_index: the bucket of prob among n equal ones (prob close to 1 -> the last).
std::int64_t prob_to_index(double prob, std::int64_t n) {
  auto index = static_cast<std::int64_t>(std::floor(prob * static_cast<double>(n)));
  return std::clamp<std::int64_t>(index, 0, n - 1);
}
// hp_utils.index_to_prob: the centre of bucket index.
double index_to_prob(double index, std::int64_t n) { return (index + 0.5) / static_cast<double>(n); }

double as_number(const Value& v, const std::string& name) {
  if (auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  throw ValueError(fmt::format("HyperParameters: '{}' holds {}, not a number", name, format_value(v)));
}

// Python's math.log(x, base), computed as it does (log(x) / log(base)): Hyperband's bracket
// sizes depend on its rounding.
double log_base(double x, double base) { return std::log(x) / std::log(base); }

// The number of values a stepped Int/Float takes (Numerical._sample_with_step's n_values).
std::int64_t stepped_count(const HyperParameter& hp) {
  if (hp.sampling == "linear") return static_cast<std::int64_t>(std::floor((hp.max_value - hp.min_value) / hp.step + 1e-9)) + 1;
  return static_cast<std::int64_t>(log_base(hp.max_value / hp.min_value, hp.step) + 1e-9) + 1;
}

bool has_step(const HyperParameter& hp) {
  if (hp.kind == Kind::Int) return hp.sampling == "linear" ? hp.step >= 1 : hp.step > 1;
  return hp.step > 0;
}

// Numerical._sample_numerical_value: prob -> [min, max] by the sampling.
double sample_numerical(const HyperParameter& hp, double prob, double max_value) {
  const double lo = hp.min_value;
  if (hp.sampling == "log") return lo * std::pow(max_value / lo, prob);
  if (hp.sampling == "reverse_log") return max_value + lo - lo * std::pow(max_value / lo, 1 - prob);
  return prob * (max_value - lo) + lo;
}
double numerical_to_prob(const HyperParameter& hp, double value, double max_value) {
  const double lo = hp.min_value;
  if (max_value == lo) return 0.5;
  if (hp.sampling == "log") return std::log(value / lo) / std::log(max_value / lo);
  if (hp.sampling == "reverse_log") return 1.0 - std::log((max_value + lo - value) / lo) / std::log(max_value / lo);
  return (value - lo) / (max_value - lo);
}
double sample_with_step(const HyperParameter& hp, double prob) {
  const std::int64_t index = prob_to_index(prob, stepped_count(hp));
  if (hp.sampling == "log") return hp.min_value * std::pow(hp.step, static_cast<double>(index));
  if (hp.sampling == "reverse_log")
    return hp.max_value + hp.min_value - hp.min_value * std::pow(hp.step, static_cast<double>(index));
  return hp.min_value + static_cast<double>(index) * hp.step;
}
double to_prob_with_step(const HyperParameter& hp, double value) {
  double index;
  if (hp.sampling == "log") index = log_base(value / hp.min_value, hp.step);
  else if (hp.sampling == "reverse_log") index = log_base((hp.max_value - value + hp.min_value) / hp.min_value, hp.step);
  else index = std::floor((value - hp.min_value) / hp.step + 1e-9);
  return index_to_prob(index, stepped_count(hp));
}

HyperParameter make_hp(Kind kind, const std::string& name, Value default_value) {
  HyperParameter hp;
  hp.kind = kind;
  hp.name = name;
  hp.default_value = std::move(default_value);
  return hp;
}

const char* kind_names[] = {"Int", "Float", "Choice", "Boolean", "Fixed"};

nlohmann::json value_json(const Value& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}
Value json_value(const nlohmann::json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  throw ValueError("HyperParameters: a value in JSON is not a bool, number or string: " + j.dump());
}

void check_sampling(const std::string& op, const std::string& name, const std::string& sampling, double min_value) {
  if (sampling != "linear" && sampling != "log" && sampling != "reverse_log")
    throw ValueError(fmt::format("HyperParameters.{}('{}'): sampling must be \"linear\", \"log\" or \"reverse_log\", "
                                 "got \"{}\"", op, name, sampling));
  if (sampling != "linear" && !(min_value > 0))
    throw ValueError(fmt::format("HyperParameters.{}('{}'): {} sampling needs min_value > 0, got {}", op, name,
                                 sampling, min_value));
}

}  // namespace

std::string format_value(const Value& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  // Python's repr of a float: the shortest round trip, with ".0" on whole numbers.
  std::string out = fmt::format("{}", std::get<double>(v));
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

std::string HyperParameter::kind_name() const { return kind_names[static_cast<int>(kind)]; }

double HyperParameter::value_to_prob(const Value& value) const {
  switch (kind) {
    case Kind::Fixed: return 0.5;
    case Kind::Boolean: return std::get<bool>(value) ? 0.75 : 0.25;  // centres of the two buckets
    case Kind::Choice: {
      const auto it = std::find(values.begin(), values.end(), value);
      if (it == values.end())
        throw ValueError(fmt::format("HyperParameters: {} is not one of the values of Choice '{}'",
                                     format_value(value), name));
      return index_to_prob(static_cast<double>(it - values.begin()), static_cast<std::int64_t>(values.size()));
    }
    case Kind::Int: {
      const double v = as_number(value, name);
      if (has_step(*this)) return to_prob_with_step(*this, v);
      return numerical_to_prob(*this, v + 0.5, max_value + 1);  // + 0.5: the bucket centre
    }
    case Kind::Float: {
      const double v = as_number(value, name);
      return has_step(*this) ? to_prob_with_step(*this, v) : numerical_to_prob(*this, v, max_value);
    }
  }
  return 0.5;
}

Value HyperParameter::prob_to_value(double prob) const {
  prob = std::clamp(prob, 0.0, 1.0);
  switch (kind) {
    case Kind::Fixed: return default_value;
    case Kind::Boolean: return prob >= 0.5;
    case Kind::Choice: return values[static_cast<std::size_t>(prob_to_index(prob, static_cast<std::int64_t>(values.size())))];
    case Kind::Int: {
      // Without a step, prob in [0, 1) maps onto [min, max + 1) so that max can be drawn.
      const double v = has_step(*this) ? sample_with_step(*this, prob) : sample_numerical(*this, prob, max_value + 1);
      return std::clamp(static_cast<std::int64_t>(std::floor(v + 1e-9)), static_cast<std::int64_t>(min_value),
                        static_cast<std::int64_t>(max_value));
    }
    case Kind::Float: {
      const double v = has_step(*this) ? sample_with_step(*this, prob) : sample_numerical(*this, prob, max_value);
      return std::clamp(v, min_value, max_value);
    }
  }
  return default_value;
}

Value HyperParameter::random_sample(std::uint64_t seed) const {
  std::mt19937_64 gen(seed);
  const double prob = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return prob_to_value(prob);
}

std::vector<Value> HyperParameter::grid_values() const {
  std::vector<Value> out{default_value};
  auto add = [&](const Value& v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  switch (kind) {
    case Kind::Fixed: break;
    case Kind::Boolean: add(false); add(true); break;
    case Kind::Choice: for (const auto& v : values) add(v); break;
    case Kind::Int:
    case Kind::Float:
      if (has_step(*this)) {
        const std::int64_t n = stepped_count(*this);
        for (std::int64_t i = 0; i < n; ++i) add(prob_to_value(index_to_prob(static_cast<double>(i), n)));
      } else {
        for (int i = 0; i < 10; ++i) add(prob_to_value(index_to_prob(i, 10)));
      }
      break;
  }
  return out;
}

// ---- HyperParameters ----

const HyperParameter* HyperParameters::find(const std::string& name) const {
  for (const auto& hp : space_)
    if (hp.name == name) return &hp;
  return nullptr;
}

bool HyperParameters::contains(const std::string& name) const {
  return std::any_of(values_.begin(), values_.end(), [&](const auto& p) { return p.first == name; });
}

const Value& HyperParameters::value(const std::string& name) const {
  for (const auto& [n, v] : values_)
    if (n == name) return v;
  std::string known;
  for (const auto& [n, v] : values_) known += (known.empty() ? "" : ", ") + n;
  throw ValueError(fmt::format("HyperParameters.get: no hyperparameter '{}' (known: {})", name,
                               known.empty() ? "none" : known));
}

void HyperParameters::set(const std::string& name, Value v) {
  for (auto& [n, old] : values_)
    if (n == name) {
      old = std::move(v);
      return;
    }
  values_.emplace_back(name, std::move(v));
}

void HyperParameters::declare(const HyperParameter& hp) {
  if (!find(hp.name)) space_.push_back(hp);
  if (!contains(hp.name)) values_.emplace_back(hp.name, hp.default_value);
}

const Value& HyperParameters::register_hp(HyperParameter hp) {
  if (const HyperParameter* old = find(hp.name)) {
    if (old->kind != hp.kind)
      throw ValueError(fmt::format("HyperParameters: '{}' is declared as {} and again as {}", hp.name,
                                   old->kind_name(), hp.kind_name()));
  } else {
    space_.push_back(hp);
  }
  if (!contains(hp.name)) values_.emplace_back(hp.name, hp.default_value);
  return value(hp.name);
}

[[noreturn]] void HyperParameters::throw_wrong_type(const std::string& name, const Value& v) {
  static const char* types[] = {"a bool", "an int", "a float", "a string"};
  throw ValueError(fmt::format("HyperParameters.get: '{}' holds {} ({}), not the type asked for", name,
                               types[v.index()], format_value(v)));
}

std::int64_t HyperParameters::Int(const std::string& name, std::int64_t min_value, std::int64_t max_value,
                                  std::int64_t step, const std::string& sampling) {
  if (min_value > max_value)
    throw ValueError(fmt::format("HyperParameters.Int('{}'): min_value {} > max_value {}", name, min_value, max_value));
  if (step < 1) throw ValueError(fmt::format("HyperParameters.Int('{}'): step must be >= 1, got {}", name, step));
  check_sampling("Int", name, sampling, static_cast<double>(min_value));
  HyperParameter hp = make_hp(Kind::Int, name, min_value);
  hp.min_value = static_cast<double>(min_value);
  hp.max_value = static_cast<double>(max_value);
  hp.step = static_cast<double>(step);
  hp.sampling = sampling;
  return std::get<std::int64_t>(register_hp(std::move(hp)));
}

double HyperParameters::Float(const std::string& name, double min_value, double max_value, double step,
                              const std::string& sampling) {
  if (!(min_value <= max_value))
    throw ValueError(fmt::format("HyperParameters.Float('{}'): min_value {} > max_value {}", name, min_value, max_value));
  if (!(step >= 0)) throw ValueError(fmt::format("HyperParameters.Float('{}'): step must be >= 0, got {}", name, step));
  check_sampling("Float", name, sampling, min_value);
  if (sampling != "linear" && step != 0 && !(step > 1))
    throw ValueError(fmt::format("HyperParameters.Float('{}'): with {} sampling the step is a ratio > 1, got {}", name,
                                 sampling, step));
  HyperParameter hp = make_hp(Kind::Float, name, min_value);
  hp.min_value = min_value;
  hp.max_value = max_value;
  hp.step = step;
  hp.sampling = sampling;
  return as_number(register_hp(std::move(hp)), name);
}

namespace {
template <class T>
HyperParameter choice_hp(const std::string& name, const std::vector<T>& values) {
  if (values.empty()) throw ValueError(fmt::format("HyperParameters.Choice('{}'): values is empty", name));
  HyperParameter hp = make_hp(Kind::Choice, name, Value{});
  for (const auto& v : values) {
    if (std::find(hp.values.begin(), hp.values.end(), Value(v)) != hp.values.end())
      throw ValueError(fmt::format("HyperParameters.Choice('{}'): {} is listed twice", name, format_value(Value(v))));
    hp.values.emplace_back(v);
  }
  hp.default_value = hp.values.front();
  return hp;
}
}  // namespace

std::int64_t HyperParameters::Choice(const std::string& name, const std::vector<std::int64_t>& values) {
  return std::get<std::int64_t>(register_hp(choice_hp(name, values)));
}
double HyperParameters::Choice(const std::string& name, const std::vector<double>& values) {
  return as_number(register_hp(choice_hp(name, values)), name);
}
std::string HyperParameters::Choice(const std::string& name, const std::vector<std::string>& values) {
  const Value& v = register_hp(choice_hp(name, values));
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  throw_wrong_type(name, v);
}

bool HyperParameters::Boolean(const std::string& name, bool default_value) {
  const Value& v = register_hp(make_hp(Kind::Boolean, name, default_value));
  if (auto* b = std::get_if<bool>(&v)) return *b;
  throw_wrong_type(name, v);
}

Value HyperParameters::fixed(const std::string& name, Value v) {
  const Value& out = register_hp(make_hp(Kind::Fixed, name, v));
  if (out.index() != v.index()) throw_wrong_type(name, out);
  return out;
}

nlohmann::json HyperParameters::to_json() const {
  nlohmann::json space = nlohmann::json::array();
  for (const auto& hp : space_) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& v : hp.values) values.push_back(value_json(v));
    space.push_back({{"class_name", hp.kind_name()},
                     {"config",
                      {{"name", hp.name}, {"min_value", hp.min_value}, {"max_value", hp.max_value}, {"step", hp.step},
                       {"sampling", hp.sampling}, {"values", values}, {"default", value_json(hp.default_value)}}}});
  }
  nlohmann::json values = nlohmann::json::array();  // [name, value] pairs: the order matters
  for (const auto& [n, v] : values_) values.push_back({n, value_json(v)});
  return {{"space", space}, {"values", values}};
}

HyperParameters HyperParameters::from_json(const nlohmann::json& j) {
  HyperParameters out;
  try {
    for (const auto& e : j.at("space")) {
      const auto& c = e.at("config");
      HyperParameter hp;
      const std::string kind = e.at("class_name").get<std::string>();
      const auto k = std::find(std::begin(kind_names), std::end(kind_names), kind);
      if (k == std::end(kind_names)) throw ValueError("HyperParameters: unknown hyperparameter class '" + kind + "'");
      hp.kind = static_cast<Kind>(k - std::begin(kind_names));
      hp.name = c.at("name").get<std::string>();
      hp.min_value = c.at("min_value").get<double>();
      hp.max_value = c.at("max_value").get<double>();
      hp.step = c.at("step").get<double>();
      hp.sampling = c.at("sampling").get<std::string>();
      for (const auto& v : c.at("values")) hp.values.push_back(json_value(v));
      hp.default_value = json_value(c.at("default"));
      out.space_.push_back(std::move(hp));
    }
    for (const auto& p : j.at("values")) out.values_.emplace_back(p.at(0).get<std::string>(), json_value(p.at(1)));
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("HyperParameters.from_json: malformed: ") + e.what());
  }
  return out;
}

}  // namespace keel::tuner
