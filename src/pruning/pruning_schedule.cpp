// The pruning schedules (tfmot's pruning_schedule.py): their validation, their value at a step
// and their JSON form.
#include <fmt/core.h>

#include <cmath>
#include <type_traits>

#include "pruning/pruning_internal.hpp"

namespace keel::pruning {

namespace {

// tfmot's PruningSchedule._validate_step.
void validate_steps(const char* cls, std::int64_t begin, std::int64_t end, std::int64_t frequency,
                    bool allow_negative_1) {
  if (begin < 0) throw ValueError(fmt::format("{}: begin_step should be >= 0, got {}", cls, begin));
  if (!allow_negative_1 && end == -1)
    throw ValueError(fmt::format("{}: end_step cannot be -1 (the sparsity needs an end to decay to)", cls));
  if (end != -1) {
    if (end < 0) throw ValueError(fmt::format("{}: end_step can be -1 or >= 0, got {}", cls, end));
    if (end < begin)
      throw ValueError(fmt::format("{}: begin_step should be <= end_step if end_step != -1, got begin_step {} and "
                                   "end_step {}", cls, begin, end));
  }
  if (frequency <= 0) throw ValueError(fmt::format("{}: frequency should be > 0, got {}", cls, frequency));
}

// tfmot's _validate_sparsity: [0, 1).
void validate_sparsity(const char* cls, const char* what, double s) {
  if (!(s >= 0.0 && s < 1.0)) throw ValueError(fmt::format("{}: {} must be in range [0,1), got {}", cls, what, s));
}

// tfmot's _should_prune_in_step: begin <= step <= end (or end < 0: forever), and
// floormod(step - begin, frequency) == 0.
bool should_prune(std::int64_t step, std::int64_t begin, std::int64_t end, std::int64_t frequency) {
  const bool in_range = step >= begin && (step <= end || end < 0);
  return in_range && (step - begin) % frequency == 0;  // step >= begin: the remainder is the floormod
}

}  // namespace

void validate(const PruningSchedule& schedule) {
  if (const auto* p = std::get_if<PolynomialDecay>(&schedule)) {
    validate_steps("PolynomialDecay", p->begin_step, p->end_step, p->frequency, false);
    validate_sparsity("PolynomialDecay", "initial_sparsity", p->initial_sparsity);
    validate_sparsity("PolynomialDecay", "final_sparsity", p->final_sparsity);
    if (!std::isfinite(p->power)) throw ValueError(fmt::format("PolynomialDecay: power must be finite, got {}", p->power));
  } else {
    const auto& c = std::get<ConstantSparsity>(schedule);
    validate_steps("ConstantSparsity", c.begin_step, c.end_step, c.frequency, true);
    validate_sparsity("ConstantSparsity", "target_sparsity", c.target_sparsity);
  }
}

ScheduleDecision evaluate(const PruningSchedule& schedule, std::int64_t step) {
  validate(schedule);
  if (const auto* p = std::get_if<PolynomialDecay>(&schedule)) {
    // tfmot, in float32: p = min(1, max(0, float(step - begin) / (end - begin)));
    // sparsity = (initial - final) * (1 - p)^power + final. With end == begin tfmot divides by
    // zero; here the schedule is then at its end (p = 1) from begin_step on.
    float frac = 1.0f;
    if (p->end_step != p->begin_step)
      frac = static_cast<float>(step - p->begin_step) / static_cast<float>(p->end_step - p->begin_step);
    else if (step < p->begin_step)
      frac = 0.0f;
    frac = std::fmin(1.0f, std::fmax(0.0f, frac));
    const float diff = static_cast<float>(p->initial_sparsity - p->final_sparsity);
    const float s = diff * std::pow(1.0f - frac, static_cast<float>(p->power)) + static_cast<float>(p->final_sparsity);
    return {should_prune(step, p->begin_step, p->end_step, p->frequency), static_cast<double>(s)};
  }
  const auto& c = std::get<ConstantSparsity>(schedule);
  return {should_prune(step, c.begin_step, c.end_step, c.frequency),
          static_cast<double>(static_cast<float>(c.target_sparsity))};
}

namespace detail {

using nlohmann::json;

json schedule_json(const PruningSchedule& schedule) {
  if (const auto* p = std::get_if<PolynomialDecay>(&schedule))
    return {{"class_name", "PolynomialDecay"},
            {"config",
             {{"initial_sparsity", p->initial_sparsity},
              {"final_sparsity", p->final_sparsity},
              {"power", p->power},
              {"begin_step", p->begin_step},
              {"end_step", p->end_step},
              {"frequency", p->frequency}}}};
  const auto& c = std::get<ConstantSparsity>(schedule);
  return {{"class_name", "ConstantSparsity"},
          {"config",
           {{"target_sparsity", c.target_sparsity},
            {"begin_step", c.begin_step},
            {"end_step", c.end_step},
            {"frequency", c.frequency}}}};
}

namespace {

// A missing key keeps the struct's default (tfmot's cls(**config) with keel's defaults).
void read_number(const json& c, const char* cls, const char* key, double& out) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return;
  if (!it->is_number()) throw ValueError(fmt::format("{}.from_config: '{}' must be a number, got {}", cls, key, it->dump()));
  out = it->get<double>();
}

void read_int(const json& c, const char* cls, const char* key, std::int64_t& out) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      throw ValueError(fmt::format("{}.from_config: '{}' is out of range: {}", cls, key, it->dump()));
    out = it->get<std::int64_t>();
    return;
  }
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out = static_cast<std::int64_t>(d);
      return;
    }
  }
  throw ValueError(fmt::format("{}.from_config: '{}' must be an integer, got {}", cls, key, it->dump()));
}

}  // namespace

PruningSchedule schedule_from_json(const json& j) {
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    throw ValueError(fmt::format("PruneLowMagnitude.from_config: 'pruning_schedule' must be {{\"class_name\", "
                                 "\"config\"}}, got {}", j.dump()));
  const std::string cls = j["class_name"].get<std::string>();
  const json c = j.contains("config") ? j["config"] : json::object();
  if (!c.is_object())
    throw ValueError(fmt::format("{}.from_config: the config must be a JSON object, got {}", cls, c.dump()));
  PruningSchedule out;
  if (cls == "PolynomialDecay") {
    PolynomialDecay p;
    read_number(c, "PolynomialDecay", "initial_sparsity", p.initial_sparsity);
    read_number(c, "PolynomialDecay", "final_sparsity", p.final_sparsity);
    read_number(c, "PolynomialDecay", "power", p.power);
    read_int(c, "PolynomialDecay", "begin_step", p.begin_step);
    read_int(c, "PolynomialDecay", "end_step", p.end_step);
    read_int(c, "PolynomialDecay", "frequency", p.frequency);
    out = p;
  } else if (cls == "ConstantSparsity") {
    ConstantSparsity s;
    read_number(c, "ConstantSparsity", "target_sparsity", s.target_sparsity);
    read_int(c, "ConstantSparsity", "begin_step", s.begin_step);
    read_int(c, "ConstantSparsity", "end_step", s.end_step);
    read_int(c, "ConstantSparsity", "frequency", s.frequency);
    out = s;
  } else {
    throw ValueError(fmt::format("PruneLowMagnitude.from_config: unknown pruning schedule '{}' (PolynomialDecay or "
                                 "ConstantSparsity)", cls));
  }
  validate(out);
  return out;
}

}  // namespace detail

}  // namespace keel::pruning
