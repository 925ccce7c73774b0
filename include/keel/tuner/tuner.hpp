#pragma once
// Hyperparameter tuning with keras-tuner's API.
//
//   keras-tuner                                         keel
//   def build(hp):                                      auto build = [](tuner::HyperParameters& hp) {
//     units = hp.Int("units", 32, 256, step=32)           auto units = hp.Int("units", 32, 256, 32);
//     ...; model.compile(...); return model               ...; model->compile({...}); return model; };
//   t = kt.RandomSearch(build, objective="val_accuracy", tuner::RandomSearch t(build, {.objective = "val_accuracy",
//                       max_trials=5)                                          .max_trials = 5});
//   t.search(x, y, epochs=3, validation_split=0.2)      t.search(x, y, {.epochs = 3, .validation_split = 0.2});
//   t.get_best_hyperparameters(1)[0]                    t.get_best_hyperparameters(1)[0]
//   t.get_best_models(1)[0]                             t.get_best_models(1)[0]
//   t.results_summary()                                 t.results_summary()
//
// Each trial is written to <directory>/<project_name>/trial_<id>/trial.json (hyperparameters,
// metrics, score, status) with the weights of its best epoch (checkpoint.safetensors), and the
// oracle's state to oracle.json: a tuner made again with overwrite = false resumes the search,
// completed trials are not run again.
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/models/model.hpp"
#include "keel/tuner/hyperparameters.hpp"
#include "keel/tuner/oracle.hpp"

namespace keel::tuner {

// Builds and compiles a model from hyperparameters (keras-tuner's hypermodel callable).
using HyperModel = std::function<std::shared_ptr<models::Model>(HyperParameters&)>;

// The keyword arguments of keras-tuner's tuners, in their order (Keras' defaults; directory
// None is the working directory).
struct RandomSearchOptions {
  Objective objective = "val_loss";
  int max_trials = 10;
  std::optional<std::uint64_t> seed{};
  int executions_per_trial = 1;
  std::string directory = ".";
  std::string project_name = "untitled_project";
  bool overwrite = false;
};

struct GridSearchOptions {
  Objective objective = "val_loss";
  int max_trials = 0;  // 0: until the grid is exhausted (keras-tuner's None)
  std::optional<std::uint64_t> seed{};
  int executions_per_trial = 1;
  std::string directory = ".";
  std::string project_name = "untitled_project";
  bool overwrite = false;
};

struct BayesianOptimizationOptions {
  Objective objective = "val_loss";
  int max_trials = 10;
  int num_initial_points = 2;  // 0: 3 x the number of hyperparameters
  double alpha = 1e-4;         // added to the kernel's diagonal: the observations' noise
  double beta = 2.6;           // exploration: the weight of sigma in the confidence bound
  std::optional<std::uint64_t> seed{};
  int executions_per_trial = 1;
  std::string directory = ".";
  std::string project_name = "untitled_project";
  bool overwrite = false;
};

struct HyperbandOptions {
  Objective objective = "val_loss";
  int max_epochs = 100;
  int factor = 3;
  int hyperband_iterations = 1;
  std::optional<std::uint64_t> seed{};
  int executions_per_trial = 1;
  std::string directory = ".";
  std::string project_name = "untitled_project";
  bool overwrite = false;
};

class Tuner {
 public:
  virtual ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Runs trials until the oracle stops: each builds the hypermodel with the trial's
  // hyperparameters and fits it executions_per_trial times with options (which should hold
  // validation data or a validation_split for a "val_" objective). The trial's score is the
  // objective's best epoch value, averaged over the executions. ValueError when fit reports no
  // metric of the objective's name (naming those it reports).
  void search(const Tensor& x, const Tensor& y, models::FitOptions options = {});

  std::vector<HyperParameters> get_best_hyperparameters(int num_trials = 1) const;
  // The best trials' models, rebuilt by the hypermodel, with the weights of their best epoch.
  std::vector<std::shared_ptr<models::Model>> get_best_models(int num_models = 1);
  // keras-tuner's Tuner.results_summary(): the project, the objective, the best trials.
  void results_summary(int num_trials = 10, std::ostream& out = std::cout) const;
  void search_space_summary(std::ostream& out = std::cout) const;

  Oracle& oracle() { return *oracle_; }
  const Oracle& oracle() const { return *oracle_; }
  std::string project_dir() const { return project_dir_; }

 protected:
  struct Settings {
    int executions_per_trial = 1;
    std::string directory, project_name;
    bool overwrite = false;
  };
  Tuner(HyperModel hypermodel, std::unique_ptr<Oracle> oracle, Settings settings);
  // Fits one trial (every execution) and returns the metrics of its best epoch, averaged.
  virtual std::map<std::string, double> run_trial(Trial& trial, const Tensor& x, const Tensor& y,
                                                  models::FitOptions options, int& best_step);
  // hypermodel(hp), checked to be a compiled model; new hyperparameters join the space.
  std::shared_ptr<models::Model> build_model(HyperParameters& hp);
  // Builds the model's weights (one prediction on a row of x) so that weights can be loaded.
  static void ensure_built(models::Model& model, const Tensor& x);
  std::string trial_dir(const std::string& trial_id) const;
  std::string checkpoint_path(const std::string& trial_id) const;
  void save_trial(const Trial& trial) const;
  void save_oracle() const;

  HyperModel hypermodel_;
  std::unique_ptr<Oracle> oracle_;
  Settings settings_;
  std::string project_dir_;
  Tensor first_row_;  // for building models in get_best_models
};

class RandomSearch : public Tuner {
 public:
  RandomSearch(HyperModel hypermodel, RandomSearchOptions options = {});
};

class GridSearch : public Tuner {
 public:
  GridSearch(HyperModel hypermodel, GridSearchOptions options = {});
};

class BayesianOptimization : public Tuner {
 public:
  BayesianOptimization(HyperModel hypermodel, BayesianOptimizationOptions options = {});
};

class Hyperband : public Tuner {
 public:
  Hyperband(HyperModel hypermodel, HyperbandOptions options = {});

 protected:
  // fit from "tuner/initial_epoch" to "tuner/epochs", continuing the weights of "tuner/trial_id".
  std::map<std::string, double> run_trial(Trial& trial, const Tensor& x, const Tensor& y, models::FitOptions options,
                                          int& best_step) override;
};

}  // namespace keel::tuner
