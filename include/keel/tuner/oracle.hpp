#pragma once
// keras-tuner's oracles: what the next trial tries, given the finished ones. A Tuner drives one;
// they can be driven directly too (create_trial, update_trial, end_trial) on any objective.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/tuner/hyperparameters.hpp"

namespace keel::tuner {

// What the search optimises: a metric name of fit's History and "min" or "max". From a name
// alone the direction is inferred as keras-tuner does: losses, errors and the error metrics
// (mse, mae, crossentropy, hinge, ...) with or without "val_" are minimised, anything else
// (accuracy, auc, precision, ...) maximised.
struct Objective {
  std::string name;
  std::string direction;
  Objective(std::string name, std::string direction);
  Objective(std::string name);  // NOLINT: a name converts, as keras-tuner accepts a string
  Objective(const char* name) : Objective(std::string(name)) {}  // NOLINT
  bool maximize() const { return direction == "max"; }
  // Whether score a is better than b in this direction.
  bool better(double a, double b) const { return maximize() ? a > b : a < b; }
  std::string repr() const;  // Objective(name="val_loss", direction="min")
};

struct Trial {
  std::string trial_id;
  HyperParameters hyperparameters;
  std::string status = "RUNNING";  // RUNNING, COMPLETED, FAILED (keras-tuner's TrialStatus)
  std::optional<double> score;     // the objective at the best epoch, averaged over executions
  int best_step = 0;               // that epoch
  std::map<std::string, double> metrics;  // every metric at the best epoch
  std::string message;

  nlohmann::json to_json() const;
  static Trial from_json(const nlohmann::json& j);
  void summary(std::ostream& out) const;  // keras-tuner's Trial.summary()
};

class Oracle {
 public:
  Oracle(Objective objective, int max_trials, std::optional<std::uint64_t> seed);
  virtual ~Oracle();

  // The next trial (its hyperparameters filled in), or nullptr when the search is over: max_trials
  // reached, the space exhausted, or the schedule done. A trial left RUNNING by an interrupted
  // search is handed out again first.
  Trial* create_trial();
  // Records a trial's metrics (at its best epoch) and its score, the objective's value.
  void update_trial(const std::string& trial_id, const std::map<std::string, double>& metrics, int step = 0);
  void end_trial(const std::string& trial_id, const std::string& status = "COMPLETED");
  // The best completed trials, best first (ties keep trial order).
  std::vector<const Trial*> get_best_trials(int num_trials = 1) const;
  const Trial& get_trial(const std::string& trial_id) const;
  // Adds the hyperparameters a hypermodel declared that the space does not hold yet.
  void update_space(const HyperParameters& hp);

  HyperParameters& hyperparameters() { return space_; }
  const HyperParameters& hyperparameters() const { return space_; }
  const Objective& objective() const { return objective_; }
  const std::map<std::string, Trial>& trials() const { return trials_; }
  int max_trials() const { return max_trials_; }

  // The oracle's whole state (space, trials, sampler position, subclass state) for resuming.
  virtual nlohmann::json get_state() const;
  virtual void set_state(const nlohmann::json& state);
  // Adds a trial read back from disk (resume).
  void restore_trial(Trial trial);

 protected:
  struct Populated {
    std::string status;  // "RUNNING" or "STOPPED"
    Values values;
  };
  virtual Populated populate_space(const std::string& trial_id) = 0;
  // keras-tuner's _random_values: every hyperparameter sampled with the next seed; a repeat of a
  // tried combination is drawn again, up to 20 times (then nullopt: the space looks exhausted).
  std::optional<Values> random_values();
  // The hyperparameters that are searched (not Fixed), in declaration order.
  std::vector<const HyperParameter*> nonfixed_space() const;
  std::string values_key(const Values& v) const;

  Objective objective_;
  int max_trials_;
  std::uint64_t seed_;
  std::uint64_t seed_state_;
  HyperParameters space_;
  std::map<std::string, Trial> trials_;
  std::vector<std::string> start_order_;
  std::set<std::string> tried_so_far_;
  std::vector<std::string> rerun_;  // trials an interrupted search left running
  static constexpr int kMaxCollisions = 20;
};

// Uniform random samples of the space (keras-tuner's RandomSearchOracle).
class RandomSearchOracle : public Oracle {
 public:
  using Oracle::Oracle;

 protected:
  Populated populate_space(const std::string& trial_id) override;
};

// Every combination of the hyperparameters' grid_values(), the first trial all defaults, then
// counting like an odometer whose last declared hyperparameter turns fastest.
class GridSearchOracle : public Oracle {
 public:
  using Oracle::Oracle;

 protected:
  Populated populate_space(const std::string& trial_id) override;
};

// keras-tuner's BayesianOptimizationOracle: num_initial_points random trials (0: 3 x the number
// of hyperparameters), then a Gaussian process with a Matern 5/2 kernel (length scale 1) on the
// hyperparameters' cumulative probabilities in [0, 1], targets normalised to zero mean and unit
// variance, alpha added to the kernel's diagonal; the next point minimises the lower confidence
// bound mu - beta * sigma of the (sign-flipped when maximising) objective — keras-tuner's
// "upper confidence bound" — over 50 random starts refined by projected gradient descent in the
// unit box (keras-tuner uses scipy's L-BFGS-B there).
class BayesianOptimizationOracle : public Oracle {
 public:
  BayesianOptimizationOracle(Objective objective, int max_trials, int num_initial_points = 2, double alpha = 1e-4,
                             double beta = 2.6, std::optional<std::uint64_t> seed = {});
  nlohmann::json get_state() const override;
  void set_state(const nlohmann::json& state) override;

 protected:
  Populated populate_space(const std::string& trial_id) override;

 private:
  int num_initial_points_;
  double alpha_, beta_;
};

// keras-tuner's HyperbandOracle: brackets of successive halving, the most aggressive first.
// A trial of round r > 0 continues the best trial of round r - 1 ("tuner/trial_id") from epoch
// "tuner/initial_epoch" to "tuner/epochs"; "tuner/bracket" and "tuner/round" say where it is.
class HyperbandOracle : public Oracle {
 public:
  HyperbandOracle(Objective objective, int max_epochs, int factor = 3, int hyperband_iterations = 1,
                  std::optional<std::uint64_t> seed = {});
  nlohmann::json get_state() const override;
  void set_state(const nlohmann::json& state) override;
  // keras-tuner's schedule: brackets, the trials of round r in bracket b, their epochs.
  int num_brackets() const;
  int bracket_size(int bracket, int round) const;
  int bracket_epochs(int bracket, int round) const;

 protected:
  Populated populate_space(const std::string& trial_id) override;

 private:
  struct RoundEntry {
    std::string past_id, id;
  };
  struct Bracket {
    int bracket_num = 0;
    std::vector<std::vector<RoundEntry>> rounds;
  };
  void start_new_bracket();
  void increment_bracket_num();
  Populated random_trial(const std::string& trial_id, Bracket& bracket);
  int max_epochs_, factor_, hyperband_iterations_;
  int current_bracket_ = 0, current_iteration_ = 0;
  std::vector<Bracket> brackets_;
};

}  // namespace keel::tuner
