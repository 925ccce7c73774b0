// keras-tuner's Tuner (engine/tuner.py, base_tuner.py, multi_execution_tuner.py): the search
// loop, each trial's fits and score, the trial files that let a search resume, the best
// models, and the printed summaries.
#include "keel/tuner/tuner.hpp"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "keel/io/safetensors.hpp"
#include "keel/ops/shape.hpp"

namespace keel::tuner {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw IOError(fmt::format("tuner: cannot read {}", path.string()));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IOError(fmt::format("tuner: {} is not valid JSON: {}", path.string(), e.what()));
  }
}

std::string hms(double seconds) {
  const auto s = static_cast<long long>(seconds);
  return fmt::format("{:02}h {:02}m {:02}s", s / 3600, s / 60 % 60, s % 60);
}

// Saves the model's weights whenever the objective beats the trial's best so far (keras-tuner's
// SaveBestEpoch), across all executions of the trial.
class SaveBestEpoch : public callbacks::Callback {
 public:
  SaveBestEpoch(const Objective& objective, std::string path, std::optional<double>& best)
      : objective_(objective), path_(std::move(path)), best_(best) {}
  void on_epoch_end(int, const callbacks::Logs& logs) override {
    const auto it = logs.find(objective_.name);
    if (it == logs.end() || !std::isfinite(it->second)) return;
    if (best_ && !objective_.better(it->second, *best_)) return;
    best_ = it->second;
    model->save_weights(path_);
  }

 private:
  const Objective& objective_;
  std::string path_;
  std::optional<double>& best_;
};

}  // namespace

Tuner::Tuner(HyperModel hypermodel, std::unique_ptr<Oracle> oracle, Settings settings)
    : hypermodel_(std::move(hypermodel)), oracle_(std::move(oracle)), settings_(std::move(settings)) {
  if (!hypermodel_) throw ValueError("Tuner: the hypermodel is empty");
  if (settings_.executions_per_trial < 1)
    throw ValueError(fmt::format("Tuner: executions_per_trial must be >= 1, got {}", settings_.executions_per_trial));
  if (settings_.project_name.empty()) throw ValueError("Tuner: project_name is empty");
  project_dir_ = (fs::path(settings_.directory.empty() ? "." : settings_.directory) / settings_.project_name).string();
  const fs::path oracle_file = fs::path(project_dir_) / "oracle.json";
  if (settings_.overwrite) {
    std::error_code ec;
    fs::remove_all(project_dir_, ec);
  } else if (fs::exists(oracle_file)) {
    // Resume: the oracle's state, then every trial written so far.
    const nlohmann::json state = read_json(oracle_file);
    const std::string name = state.value(nlohmann::json::json_pointer("/oracle/objective/name"), std::string());
    if (name != oracle_->objective().name)
      throw ValueError(fmt::format("Tuner: {} was searched for objective '{}', not '{}'; pass overwrite = true to "
                                   "start again", project_dir_, name, oracle_->objective().name));
    oracle_->set_state(state.at("oracle"));
    for (const auto& entry : fs::directory_iterator(project_dir_)) {
      const fs::path trial_file = entry.path() / "trial.json";
      if (entry.is_directory() && entry.path().filename().string().rfind("trial_", 0) == 0 && fs::exists(trial_file))
        oracle_->restore_trial(Trial::from_json(read_json(trial_file)));
    }
  }
  fs::create_directories(project_dir_);
  // keras-tuner's _populate_initial_space: one build with the defaults declares the space.
  if (oracle_->hyperparameters().space().empty()) {
    HyperParameters hp;
    build_model(hp);
  }
}

Tuner::~Tuner() = default;

std::string Tuner::trial_dir(const std::string& id) const { return (fs::path(project_dir_) / ("trial_" + id)).string(); }
std::string Tuner::checkpoint_path(const std::string& id) const {
  return (fs::path(trial_dir(id)) / "checkpoint.safetensors").string();
}

void Tuner::save_trial(const Trial& trial) const {
  fs::create_directories(trial_dir(trial.trial_id));
  io::atomic_write((fs::path(trial_dir(trial.trial_id)) / "trial.json").string(), trial.to_json().dump(2));
}

void Tuner::save_oracle() const {
  const nlohmann::json j{{"oracle", oracle_->get_state()}};
  io::atomic_write((fs::path(project_dir_) / "oracle.json").string(), j.dump(2));
}

std::shared_ptr<models::Model> Tuner::build_model(HyperParameters& hp) {
  std::shared_ptr<models::Model> model = hypermodel_(hp);
  if (!model) throw ValueError("Tuner: the hypermodel returned no model");
  if (!model->compiled()) throw ValueError("Tuner: the hypermodel must return a compiled model (call compile())");
  oracle_->update_space(hp);
  return model;
}

void Tuner::ensure_built(models::Model& model, const Tensor& x) {
  if (!model.weights().empty() || !x.defined()) return;
  model.predict(x, {.batch_size = 1, .verbose = 0});
}

std::map<std::string, double> Tuner::run_trial(Trial& trial, const Tensor& x, const Tensor& y,
                                               models::FitOptions options, int& best_step) {
  HyperParameters& hp = trial.hyperparameters;
  const Objective& objective = oracle_->objective();
  const std::string resume = hp.contains("tuner/trial_id") ? hp.get<std::string>("tuner/trial_id") : "";
  std::optional<double> best;
  std::map<std::string, double> sum;
  fs::create_directories(trial_dir(trial.trial_id));
  for (int e = 0; e < settings_.executions_per_trial; ++e) {
    std::shared_ptr<models::Model> model = build_model(hp);
    if (!resume.empty()) {  // Hyperband: continue the weights of the trial this one extends
      ensure_built(*model, first_row_);
      model->load_weights(checkpoint_path(resume));
    }
    models::FitOptions o = options;
    o.callbacks.push_back(std::make_shared<SaveBestEpoch>(objective, checkpoint_path(trial.trial_id), best));
    const models::History history = model->fit(x, y, o);
    const auto it = history.history.find(objective.name);
    if (it == history.history.end() || it->second.empty()) {
      std::string known;
      for (const auto& [k, v] : history.history) known += (known.empty() ? "" : ", ") + k;
      throw ValueError(fmt::format("Tuner.search: the objective '{}' is not among the metrics fit reported ({}); "
                                   "pass validation data for a \"val_\" objective", objective.name,
                                   known.empty() ? "none" : known));
    }
    // This execution's best epoch (the first of equal ones), then every metric there.
    std::size_t at = 0;
    for (std::size_t i = 1; i < it->second.size(); ++i)
      if (objective.better(it->second[i], it->second[at])) at = i;
    for (const auto& [k, v] : history.history)
      if (at < v.size()) sum[k] += v[at];
    if (e == 0 || (best && it->second[at] == *best)) best_step = at < history.epoch.size() ? history.epoch[at] : 0;
  }
  for (auto& [k, v] : sum) v /= settings_.executions_per_trial;
  return sum;
}

void Tuner::search(const Tensor& x, const Tensor& y, models::FitOptions options) {
  if (x.defined() && x.rank() >= 1 && x.shape()[0] > 0) {
    std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), size = x.shape().dims();
    size[0] = 1;
    first_row_ = slice(x, begin, size);
  }
  const bool verbose = options.verbose != 0;
  const auto search_start = std::chrono::steady_clock::now();
  std::optional<double> best_so_far;
  if (auto b = oracle_->get_best_trials(1); !b.empty()) best_so_far = b[0]->score;
  while (Trial* trial = oracle_->create_trial()) {
    const auto start = std::chrono::steady_clock::now();
    if (verbose) {
      std::cout << "\nSearch: Running Trial #" << trial->trial_id << "\n\n";
      for (const auto& [n, v] : trial->hyperparameters.values()) std::cout << n << ": " << format_value(v) << "\n";
      std::cout << "\n";
    }
    save_trial(*trial);
    save_oracle();
    try {
      int best_step = 0;
      const auto metrics = run_trial(*trial, x, y, options, best_step);
      oracle_->update_trial(trial->trial_id, metrics, best_step);
      oracle_->end_trial(trial->trial_id, "COMPLETED");
    } catch (const std::exception& e) {
      trial->message = e.what();
      oracle_->end_trial(trial->trial_id, "FAILED");
      save_trial(*trial);
      save_oracle();
      throw;
    }
    save_trial(*trial);
    save_oracle();
    if (trial->score && (!best_so_far || oracle_->objective().better(*trial->score, *best_so_far)))
      best_so_far = trial->score;
    if (verbose) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cout << "Trial " << trial->trial_id << " Complete [" << hms(secs) << "]\n";
      if (trial->score) std::cout << oracle_->objective().name << ": " << format_value(*trial->score) << "\n";
      if (best_so_far)
        std::cout << "\nBest " << oracle_->objective().name << " So Far: " << format_value(*best_so_far) << "\n";
      std::cout << "Total elapsed time: "
                << hms(std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count())
                << std::endl;
    }
  }
}

std::vector<HyperParameters> Tuner::get_best_hyperparameters(int num_trials) const {
  std::vector<HyperParameters> out;
  for (const Trial* t : oracle_->get_best_trials(num_trials)) out.push_back(t->hyperparameters);
  return out;
}

std::vector<std::shared_ptr<models::Model>> Tuner::get_best_models(int num_models) {
  std::vector<std::shared_ptr<models::Model>> out;
  for (const Trial* t : oracle_->get_best_trials(num_models)) {
    HyperParameters hp = t->hyperparameters;
    std::shared_ptr<models::Model> model = build_model(hp);
    const std::string path = checkpoint_path(t->trial_id);
    if (!fs::exists(path))
      throw IOError(fmt::format("Tuner.get_best_models: trial {} has no saved weights ({} is missing)", t->trial_id,
                                path));
    if (model->weights().empty() && !first_row_.defined())
      throw ValueError("Tuner.get_best_models: the model has no weights until it is called; run search() first "
                       "in this process or give the model an InputLayer");
    ensure_built(*model, first_row_);
    model->load_weights(path);
    out.push_back(std::move(model));
  }
  return out;
}

void Tuner::results_summary(int num_trials, std::ostream& out) const {
  out << "Results summary\n";
  out << "Results in " << project_dir_ << "\n";
  out << "Showing " << num_trials << " best trials\n";
  out << oracle_->objective().repr() << "\n";
  for (const Trial* t : oracle_->get_best_trials(num_trials)) {
    out << "\n";
    t->summary(out);
  }
  out.flush();
}

void Tuner::search_space_summary(std::ostream& out) const {
  const auto& space = oracle_->hyperparameters().space();
  out << "Search space summary\nDefault search space size: " << space.size() << "\n";
  for (const auto& hp : space) {
    out << hp.name << " (" << hp.kind_name() << ")\n{";
    out << "'default': " << format_value(hp.default_value);
    if (hp.kind == HyperParameter::Kind::Choice) {
      out << ", 'values': [";
      for (std::size_t i = 0; i < hp.values.size(); ++i) out << (i ? ", " : "") << format_value(hp.values[i]);
      out << "]";
    } else if (hp.kind == HyperParameter::Kind::Int || hp.kind == HyperParameter::Kind::Float) {
      out << ", 'min_value': " << format_value(hp.kind == HyperParameter::Kind::Int
                                                   ? Value(static_cast<std::int64_t>(hp.min_value))
                                                   : Value(hp.min_value))
          << ", 'max_value': "
          << format_value(hp.kind == HyperParameter::Kind::Int ? Value(static_cast<std::int64_t>(hp.max_value))
                                                               : Value(hp.max_value))
          << ", 'step': "
          << (hp.step <= 0 ? std::string("None")
              : hp.kind == HyperParameter::Kind::Int ? format_value(Value(static_cast<std::int64_t>(hp.step)))
                                                      : format_value(hp.step)) << ", 'sampling': '"
          << hp.sampling << "'";
    }
    out << "}\n";
  }
}

// ---- the tuners ----

RandomSearch::RandomSearch(HyperModel hypermodel, RandomSearchOptions o)
    : Tuner(std::move(hypermodel), std::make_unique<RandomSearchOracle>(o.objective, o.max_trials, o.seed),
            {o.executions_per_trial, o.directory, o.project_name, o.overwrite}) {}

GridSearch::GridSearch(HyperModel hypermodel, GridSearchOptions o)
    : Tuner(std::move(hypermodel), std::make_unique<GridSearchOracle>(o.objective, o.max_trials, o.seed),
            {o.executions_per_trial, o.directory, o.project_name, o.overwrite}) {}

BayesianOptimization::BayesianOptimization(HyperModel hypermodel, BayesianOptimizationOptions o)
    : Tuner(std::move(hypermodel),
            std::make_unique<BayesianOptimizationOracle>(o.objective, o.max_trials, o.num_initial_points, o.alpha,
                                                         o.beta, o.seed),
            {o.executions_per_trial, o.directory, o.project_name, o.overwrite}) {}

Hyperband::Hyperband(HyperModel hypermodel, HyperbandOptions o)
    : Tuner(std::move(hypermodel),
            std::make_unique<HyperbandOracle>(o.objective, o.max_epochs, o.factor, o.hyperband_iterations, o.seed),
            {o.executions_per_trial, o.directory, o.project_name, o.overwrite}) {}

std::map<std::string, double> Hyperband::run_trial(Trial& trial, const Tensor& x, const Tensor& y,
                                                   models::FitOptions options, int& best_step) {
  const HyperParameters& hp = trial.hyperparameters;
  if (hp.contains("tuner/epochs")) {
    options.epochs = hp.get<int>("tuner/epochs");
    options.initial_epoch = hp.get<int>("tuner/initial_epoch");
  }
  return Tuner::run_trial(trial, x, y, options, best_step);
}

}  // namespace keel::tuner
