// keras-tuner's HyperbandOracle (tuners/hyperband.py), line for line: brackets b = B-1 .. 0
// (B = the number of times max_epochs can be divided by factor before it drops below 1), each
// with b + 1 rounds of successive halving.
//
//   size(b, r)   = ceil(ceil(1 + log_factor(max_epochs)) / (b + 1) * factor^(b - r))  trials
//   epochs(b, r) = ceil(max_epochs / factor^(b - r))                                 epochs
//
// Round 0 of a bracket samples random hyperparameters; a trial of round r > 0 continues the best
// not yet continued trial of round r - 1 whenever more of those are done than round r discards.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "keel/tuner/oracle.hpp"

namespace keel::tuner {

HyperbandOracle::HyperbandOracle(Objective objective, int max_epochs, int factor, int hyperband_iterations,
                                 std::optional<std::uint64_t> seed)
    : Oracle(std::move(objective), /*max_trials=*/0, seed), max_epochs_(max_epochs), factor_(factor),
      hyperband_iterations_(hyperband_iterations) {
  if (factor < 2) throw ValueError(fmt::format("Hyperband: factor needs to be an int larger than 1, got {}", factor));
  if (max_epochs < 1) throw ValueError(fmt::format("Hyperband: max_epochs must be >= 1, got {}", max_epochs));
  if (hyperband_iterations < 1)
    throw ValueError(fmt::format("Hyperband: hyperband_iterations must be >= 1, got {}", hyperband_iterations));
  current_bracket_ = num_brackets() - 1;  // the most aggressively halving bracket first
  start_new_bracket();
}

int HyperbandOracle::num_brackets() const {
  double epochs = max_epochs_;
  int brackets = 0;
  while (epochs >= 1) {  // keras-tuner's min_epochs = 1
    epochs /= factor_;
    ++brackets;
  }
  return brackets;
}

int HyperbandOracle::bracket_size(int bracket, int round) const {
  // math.log(max_epochs, factor) is log(x) / log(base) in Python: the same rounding here.
  const double bracket0_end_size = std::ceil(1 + std::log(max_epochs_) / std::log(factor_));
  const double bracket_end_size = bracket0_end_size / (bracket + 1);
  return static_cast<int>(std::ceil(bracket_end_size * std::pow(factor_, bracket - round)));
}

int HyperbandOracle::bracket_epochs(int bracket, int round) const {
  return static_cast<int>(std::ceil(max_epochs_ / std::pow(factor_, bracket - round)));
}

void HyperbandOracle::start_new_bracket() {
  Bracket b;
  b.bracket_num = current_bracket_;
  b.rounds.resize(static_cast<std::size_t>(current_bracket_ + 1));
  brackets_.push_back(std::move(b));
}

void HyperbandOracle::increment_bracket_num() {
  --current_bracket_;
  if (current_bracket_ < 0) {
    current_bracket_ = num_brackets() - 1;
    ++current_iteration_;
    if (current_iteration_ > hyperband_iterations_) current_bracket_ = 0;
  }
}

Oracle::Populated HyperbandOracle::random_trial(const std::string& trial_id, Bracket& bracket) {
  auto values = random_values();
  if (!values) return {"STOPPED", {}};
  values->emplace_back("tuner/epochs", std::int64_t{bracket_epochs(bracket.bracket_num, 0)});
  values->emplace_back("tuner/initial_epoch", std::int64_t{0});
  values->emplace_back("tuner/bracket", std::int64_t{current_bracket_});
  values->emplace_back("tuner/round", std::int64_t{0});
  bracket.rounds[0].push_back({"", trial_id});
  return {"RUNNING", std::move(*values)};
}

Oracle::Populated HyperbandOracle::populate_space(const std::string& trial_id) {
  // Drop the brackets whose last round is full.
  std::erase_if(brackets_, [&](const Bracket& b) {
    const int last = static_cast<int>(b.rounds.size()) - 1;
    return static_cast<int>(b.rounds[static_cast<std::size_t>(last)].size()) == bracket_size(b.bracket_num, last);
  });
  for (Bracket& bracket : brackets_) {
    const int b = bracket.bracket_num;
    if (static_cast<int>(bracket.rounds[0].size()) < bracket_size(b, 0)) return random_trial(trial_id, bracket);
    for (int r = 1; r < static_cast<int>(bracket.rounds.size()); ++r) {
      auto& round = bracket.rounds[static_cast<std::size_t>(r)];
      const auto& past = bracket.rounds[static_cast<std::size_t>(r - 1)];
      const int size = bracket_size(b, r), past_size = bracket_size(b, r - 1);
      std::vector<const Trial*> candidates;
      for (const auto& e : past) {
        const bool selected = std::any_of(round.begin(), round.end(), [&](const RoundEntry& x) { return x.past_id == e.id; });
        const auto t = trials_.find(e.id);
        if (!selected && t != trials_.end() && t->second.status == "COMPLETED" && t->second.score)
          candidates.push_back(&t->second);
      }
      if (static_cast<int>(candidates.size()) > past_size - size) {
        const Trial* best = *std::min_element(candidates.begin(), candidates.end(), [&](const Trial* x, const Trial* y) {
          return objective_.better(*x->score, *y->score);
        });
        Values values = best->hyperparameters.values();
        auto set = [&](const std::string& name, Value v) {
          for (auto& [n, old] : values)
            if (n == name) {
              old = std::move(v);
              return;
            }
          values.emplace_back(name, std::move(v));
        };
        set("tuner/trial_id", best->trial_id);
        set("tuner/epochs", std::int64_t{bracket_epochs(b, r)});
        set("tuner/initial_epoch", std::int64_t{bracket_epochs(b, r - 1)});
        set("tuner/bracket", std::int64_t{current_bracket_});
        set("tuner/round", std::int64_t{r});
        round.push_back({best->trial_id, trial_id});
        return {"RUNNING", std::move(values)};
      }
    }
  }
  // No trial of the current brackets can run: open the next bracket, unless the last one of
  // the last iteration is done (trials run one at a time here, so none is still ongoing).
  if (current_bracket_ == 0 && current_iteration_ + 1 >= hyperband_iterations_) {
    increment_bracket_num();
    return {"STOPPED", {}};
  }
  increment_bracket_num();
  start_new_bracket();
  return random_trial(trial_id, brackets_.back());
}

nlohmann::json HyperbandOracle::get_state() const {
  nlohmann::json s = Oracle::get_state();
  nlohmann::json brackets = nlohmann::json::array();
  for (const auto& b : brackets_) {
    nlohmann::json rounds = nlohmann::json::array();
    for (const auto& r : b.rounds) {
      nlohmann::json entries = nlohmann::json::array();
      for (const auto& e : r) entries.push_back({{"past_id", e.past_id}, {"id", e.id}});
      rounds.push_back(entries);
    }
    brackets.push_back({{"bracket_num", b.bracket_num}, {"rounds", rounds}});
  }
  s.update({{"hyperband_iterations", hyperband_iterations_}, {"max_epochs", max_epochs_}, {"factor", factor_},
            {"brackets", brackets}, {"current_bracket", current_bracket_}, {"current_iteration", current_iteration_}});
  return s;
}

void HyperbandOracle::set_state(const nlohmann::json& state) {
  Oracle::set_state(state);
  try {
    hyperband_iterations_ = state.at("hyperband_iterations").get<int>();
    max_epochs_ = state.at("max_epochs").get<int>();
    factor_ = state.at("factor").get<int>();
    current_bracket_ = state.at("current_bracket").get<int>();
    current_iteration_ = state.at("current_iteration").get<int>();
    brackets_.clear();
    for (const auto& b : state.at("brackets")) {
      Bracket br;
      br.bracket_num = b.at("bracket_num").get<int>();
      for (const auto& r : b.at("rounds")) {
        std::vector<RoundEntry> entries;
        for (const auto& e : r) entries.push_back({e.at("past_id").get<std::string>(), e.at("id").get<std::string>()});
        br.rounds.push_back(std::move(entries));
      }
      brackets_.push_back(std::move(br));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(std::string("Hyperband.set_state: malformed oracle state: ") + e.what());
  }
}

}  // namespace keel::tuner
