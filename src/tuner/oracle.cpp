// keras-tuner's Objective, Trial and Oracle base (trial bookkeeping, random values with collision
// checks, best trials, state), RandomSearchOracle and GridSearchOracle.
#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>

#include "keel/tuner/oracle.hpp"

namespace keel::tuner {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// keras-tuner's infer_objective_direction: "loss" and the Keras metrics that are errors are
// minimised; the rest (accuracies, auc, precision, recall, ...) maximised.
std::string infer_direction(std::string name) {
  if (name.rfind("val_", 0) == 0) name = name.substr(4);
  static const char* const minimised[] = {
      "loss", "mse", "mae", "mape", "msle", "rmse", "mean_squared_error", "mean_absolute_error",
      "mean_absolute_percentage_error", "mean_squared_logarithmic_error", "root_mean_squared_error",
      "binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy", "hinge",
      "squared_hinge", "categorical_hinge", "kl_divergence", "kld", "kullback_leibler_divergence",
      "logcosh", "log_cosh", "poisson", "cosine_proximity", "huber"};
  for (const char* m : minimised)
    if (name == m) return "min";
  if (name.find("loss") != std::string::npos || name.find("error") != std::string::npos ||
      ends_with(name, "crossentropy"))
    return "min";
  return "max";
}

}  // namespace

Objective::Objective(std::string name_, std::string direction_) : name(std::move(name_)), direction(std::move(direction_)) {
  if (direction != "min" && direction != "max")
    throw ValueError(fmt::format("Objective('{}'): direction must be \"min\" or \"max\", got \"{}\"", name, direction));
  if (name.empty()) throw ValueError("Objective: the name is empty");
}
Objective::Objective(std::string name_) : Objective(name_, infer_direction(name_)) {}

std::string Objective::repr() const { return fmt::format("Objective(name=\"{}\", direction=\"{}\")", name, direction); }

// ---- Trial ----

nlohmann::json Trial::to_json() const {
  nlohmann::json j{{"trial_id", trial_id},        {"hyperparameters", hyperparameters.to_json()},
                   {"status", status},            {"best_step", best_step},
                   {"metrics", metrics},          {"message", message}};
  j["score"] = score ? nlohmann::json(*score) : nlohmann::json(nullptr);
  return j;
}

Trial Trial::from_json(const nlohmann::json& j) {
  Trial t;
  try {
    t.trial_id = j.at("trial_id").get<std::string>();
    t.hyperparameters = HyperParameters::from_json(j.at("hyperparameters"));
    t.status = j.at("status").get<std::string>();
    t.best_step = j.at("best_step").get<int>();
    t.metrics = j.at("metrics").get<std::map<std::string, double>>();
    t.message = j.at("message").get<std::string>();
    if (!j.at("score").is_null()) t.score = j.at("score").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("Trial.from_json: malformed trial: ") + e.what());
  }
  return t;
}

void Trial::summary(std::ostream& out) const {
  out << "Trial " << trial_id << " summary\nHyperparameters:\n";
  if (hyperparameters.values().empty()) out << "default configuration\n";
  for (const auto& [name, v] : hyperparameters.values()) out << name << ": " << format_value(v) << "\n";
  if (score) out << "Score: " << format_value(*score) << "\n";
  if (!message.empty()) out << message << "\n";
}

// ---- Oracle ----

Oracle::Oracle(Objective objective, int max_trials, std::optional<std::uint64_t> seed)
    : objective_(std::move(objective)), max_trials_(max_trials), seed_(seed.value_or(std::random_device{}() % 10000 + 1)),
      seed_state_(seed_) {
  if (max_trials < 0) throw ValueError(fmt::format("Oracle: max_trials must be >= 0 (0: no limit), got {}", max_trials));
}
Oracle::~Oracle() = default;

std::vector<const HyperParameter*> Oracle::nonfixed_space() const {
  std::vector<const HyperParameter*> out;
  for (const auto& hp : space_.space())
    if (hp.kind != HyperParameter::Kind::Fixed) out.push_back(&hp);
  return out;
}

std::string Oracle::values_key(const Values& v) const {
  std::string key;
  for (const auto& hp : space_.space())
    for (const auto& [n, x] : v)
      if (n == hp.name) key += n + "=" + std::to_string(x.index()) + ":" + format_value(x) + ";";
  return key;
}

std::optional<Values> Oracle::random_values() {
  for (int collisions = 0; collisions <= kMaxCollisions; ++collisions) {
    Values values;
    for (const auto& hp : space_.space()) values.emplace_back(hp.name, hp.random_sample(seed_state_++));
    if (tried_so_far_.insert(values_key(values)).second) return values;
  }
  return std::nullopt;
}

Trial* Oracle::create_trial() {
  // A trial an interrupted search left running runs again, with its own hyperparameters.
  if (!rerun_.empty()) {
    Trial& t = trials_.at(rerun_.front());
    rerun_.erase(rerun_.begin());
    return &t;
  }
  if (max_trials_ > 0 && static_cast<int>(trials_.size()) >= max_trials_) return nullptr;
  const int width = std::max<int>(2, static_cast<int>(std::to_string(max_trials_ > 0 ? max_trials_ : 99).size()));
  const std::string id = fmt::format("{:0{}}", trials_.size(), width);
  Populated p = populate_space(id);
  if (p.status != "RUNNING") return nullptr;
  Trial t;
  t.trial_id = id;
  t.hyperparameters = space_;  // the space with its defaults, then the oracle's values
  for (auto& [name, v] : p.values) t.hyperparameters.set(name, std::move(v));
  tried_so_far_.insert(values_key(t.hyperparameters.values()));
  start_order_.push_back(id);
  return &(trials_[id] = std::move(t));
}

void Oracle::update_trial(const std::string& trial_id, const std::map<std::string, double>& metrics, int step) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) throw ValueError(fmt::format("Oracle.update_trial: no trial '{}'", trial_id));
  const auto m = metrics.find(objective_.name);
  if (m == metrics.end()) {
    std::string known;
    for (const auto& [k, v] : metrics) known += (known.empty() ? "" : ", ") + k;
    throw ValueError(fmt::format("Oracle.update_trial: the objective '{}' is not among the metrics of trial {} ({})",
                                 objective_.name, trial_id, known.empty() ? "none" : known));
  }
  it->second.metrics = metrics;
  it->second.score = m->second;
  it->second.best_step = step;
}

void Oracle::end_trial(const std::string& trial_id, const std::string& status) {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) throw ValueError(fmt::format("Oracle.end_trial: no trial '{}'", trial_id));
  it->second.status = status;
}

const Trial& Oracle::get_trial(const std::string& trial_id) const {
  auto it = trials_.find(trial_id);
  if (it == trials_.end()) throw ValueError(fmt::format("Oracle.get_trial: no trial '{}'", trial_id));
  return it->second;
}

std::vector<const Trial*> Oracle::get_best_trials(int num_trials) const {
  std::vector<const Trial*> done;
  for (const auto& id : start_order_) {
    const Trial& t = trials_.at(id);
    if (t.status == "COMPLETED" && t.score) done.push_back(&t);
  }
  std::stable_sort(done.begin(), done.end(),
                   [&](const Trial* a, const Trial* b) { return objective_.better(*a->score, *b->score); });
  if (num_trials >= 0 && static_cast<std::size_t>(num_trials) < done.size()) done.resize(static_cast<std::size_t>(num_trials));
  return done;
}

void Oracle::update_space(const HyperParameters& hp) {
  for (const auto& h : hp.space()) space_.declare(h);
}

void Oracle::restore_trial(Trial trial) {
  const std::string id = trial.trial_id;
  if (trial.status == "RUNNING") {
    trial.metrics.clear();
    trial.score.reset();
    if (std::find(rerun_.begin(), rerun_.end(), id) == rerun_.end()) rerun_.push_back(id);  // runs again
  }
  if (std::find(start_order_.begin(), start_order_.end(), id) == start_order_.end()) start_order_.push_back(id);
  std::sort(start_order_.begin(), start_order_.end());
  tried_so_far_.insert(values_key(trial.hyperparameters.values()));
  trials_[id] = std::move(trial);
}

nlohmann::json Oracle::get_state() const {
  return {{"objective", {{"name", objective_.name}, {"direction", objective_.direction}}},
          {"max_trials", max_trials_},
          {"seed", seed_},
          {"seed_state", seed_state_},
          {"space", space_.to_json()},
          {"tried_so_far", tried_so_far_}};
}

void Oracle::set_state(const nlohmann::json& state) {
  try {
    seed_ = state.at("seed").get<std::uint64_t>();
    seed_state_ = state.at("seed_state").get<std::uint64_t>();
    space_ = HyperParameters::from_json(state.at("space"));
    for (const auto& k : state.at("tried_so_far")) tried_so_far_.insert(k.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("Oracle.set_state: malformed oracle state: ") + e.what());
  }
}

// ---- RandomSearchOracle ----

Oracle::Populated RandomSearchOracle::populate_space(const std::string&) {
  auto values = random_values();
  if (!values) return {"STOPPED", {}};
  return {"RUNNING", std::move(*values)};
}

// ---- GridSearchOracle ----

Oracle::Populated GridSearchOracle::populate_space(const std::string&) {
  const auto& space = space_.space();
  if (start_order_.empty()) {  // the first trial: every default
    Values values;
    for (const auto& hp : space) values.emplace_back(hp.name, hp.default_value);
    return {"RUNNING", std::move(values)};
  }
  // The combination after the last trial's: bump the last hyperparameter that is not at its
  // last value, and reset the ones after it to their first (keras-tuner's _get_next_combination).
  const HyperParameters& last = trials_.at(start_order_.back()).hyperparameters;
  Values values;
  std::vector<std::vector<Value>> grids;
  for (const auto& hp : space) {
    values.emplace_back(hp.name, last.contains(hp.name) ? last.value(hp.name) : hp.default_value);
    grids.push_back(hp.grid_values());
  }
  for (std::size_t i = space.size(); i-- > 0;) {
    const auto& grid = grids[i];
    const auto at = std::find(grid.begin(), grid.end(), values[i].second);
    if (at != grid.end() && at + 1 != grid.end()) {
      values[i].second = *(at + 1);
      return {"RUNNING", std::move(values)};
    }
    values[i].second = grid.front();
  }
  return {"STOPPED", {}};  // the last combination has run
}

}  // namespace keel::tuner
