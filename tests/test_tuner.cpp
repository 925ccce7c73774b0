// keel::tuner: keras-tuner's HyperParameters (ranges, steps, log sampling), objective
// directions, the oracles (grid order, random determinism, Bayesian optimisation against random
// search, Hyperband's bracket schedule) and the tuners end to end on a tiny regression
// (search, best models with restored weights, resuming from the trial files, summaries).
#include <catch2/catch.hpp>
#include <keel/keel.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace keel;
namespace fs = std::filesystem;
using tuner::HyperParameters;
using tuner::Value;
using tuner::Values;

namespace {

// A fresh folder per test, removed afterwards.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("keel-test-tuner-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// y = 2x + 1 on 64 points (training) and 16 (validation): a Dense(1) fits it, and how well it
// does after a few epochs depends on the learning rate.
struct Regression {
  Tensor x, y, xv, yv;
  Regression() {
    std::vector<float> a, b, c, d;
    for (int i = 0; i < 64; ++i) {
      const float v = static_cast<float>(i) / 32.0f - 1.0f;
      a.push_back(v);
      b.push_back(2 * v + 1);
    }
    for (int i = 0; i < 16; ++i) {
      const float v = static_cast<float>(i) / 8.0f - 1.0f + 0.03f;
      c.push_back(v);
      d.push_back(2 * v + 1);
    }
    x = constant(a, Shape{64, 1});
    y = constant(b, Shape{64, 1});
    xv = constant(c, Shape{16, 1});
    yv = constant(d, Shape{16, 1});
  }
  models::FitOptions fit(int epochs) const {
    return {.batch_size = 16, .epochs = epochs, .verbose = 0, .validation_data = std::make_pair(xv, yv),
            .seed = 3};
  }
};

// The hypermodel: a learning rate (SGD) and a hidden width; counts its calls.
tuner::HyperModel regression_hypermodel(int* calls) {
  return [calls](HyperParameters& hp) {
    if (calls) ++*calls;
    const double lr = hp.Choice("learning_rate", {0.01, 0.1});
    const auto units = hp.Choice("units", {1, 4});
    auto model = std::make_shared<models::Sequential>(
        models::Sequential{layers::InputLayer({1}), layers::Dense(units), layers::Dense(1)});
    model->compile({.optimizer = optimizers::SGD(lr), .loss = "mse"});
    return std::shared_ptr<models::Model>(model);
  };
}

// Declares hyperparameters on an oracle's space, as a hypermodel's first build does.
void declare(tuner::Oracle& oracle, const std::function<void(HyperParameters&)>& f) {
  HyperParameters hp;
  f(hp);
  oracle.update_space(hp);
}

}  // namespace

TEST_CASE("HyperParameters.Int: range, step, default, log steps and any-integer sampling", "[tuner]") {
  HyperParameters hp;
  // The first call declares and returns the default, min_value (keras-tuner's Int.default).
  CHECK(hp.Int("units", 32, 256, 32) == 32);
  const tuner::HyperParameter& h = *hp.find("units");
  // (256 - 32) / 32 + 1 = 8 values 32, 64, ..., 256; bucket k holds probs [k/8, (k+1)/8).
  const auto grid = h.grid_values();
  REQUIRE(grid.size() == 8);
  for (std::size_t k = 0; k < 8; ++k) CHECK(std::get<std::int64_t>(grid[k]) == 32 + 32 * static_cast<std::int64_t>(k));
  CHECK(std::get<std::int64_t>(h.prob_to_value(0.0)) == 32);
  CHECK(std::get<std::int64_t>(h.prob_to_value(0.13)) == 64);    // floor(0.13 * 8) = 1
  CHECK(std::get<std::int64_t>(h.prob_to_value(0.9999)) == 256);
  CHECK(h.value_to_prob(Value(std::int64_t{64})) == Approx(1.5 / 8));  // the centre of bucket 1
  // Samples by seed: always on the grid, every grid value drawn, and repeatable.
  std::set<std::int64_t> seen;
  for (std::uint64_t s = 0; s < 400; ++s) {
    const auto v = std::get<std::int64_t>(h.random_sample(s));
    CHECK(v == std::get<std::int64_t>(h.random_sample(s)));
    CHECK((v - 32) % 32 == 0);
    CHECK((v >= 32 && v <= 256));
    seen.insert(v);
  }
  CHECK(seen.size() == 8);
  // log sampling with step 2: 2 * 2^k up to 32 (n = int(log2(32 / 2)) + 1 = 5 values).
  hp.Int("batch", 2, 32, 2, "log");
  const auto log_grid = hp.find("batch")->grid_values();
  REQUIRE(log_grid.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) CHECK(std::get<std::int64_t>(log_grid[k]) == (std::int64_t{2} << k));
  // A later call of a declared name returns its value in this set.
  hp.set("units", std::int64_t{128});
  CHECK(hp.Int("units", 32, 256, 32) == 128);
  CHECK(hp.get<int>("units") == 128);
  // Errors: empty range, bad step, log from 0, a second declaration of another kind.
  CHECK_THROWS_AS(hp.Int("bad", 5, 4), ValueError);
  CHECK_THROWS_AS(hp.Int("bad", 1, 4, 0), ValueError);
  CHECK_THROWS_AS(hp.Int("bad", 0, 4, 1, "log"), ValueError);
  CHECK_THROWS_AS(hp.Int("bad", 1, 4, 1, "cubic"), ValueError);
  CHECK_THROWS_AS(hp.Float("units", 0, 1), ValueError);
}

TEST_CASE("HyperParameters.Float: continuous, stepped and log sampling", "[tuner]") {
  HyperParameters hp;
  CHECK(hp.Float("lr", 1e-4, 1e-1, 0, "log") == 1e-4);
  const tuner::HyperParameter& lr = *hp.find("lr");
  // log: min * (max / min)^prob, so prob 0.5 is the geometric mean 1e-4 * sqrt(1000).
  CHECK(std::get<double>(lr.prob_to_value(0.5)) == Approx(1e-4 * std::sqrt(1000.0)));
  CHECK(lr.value_to_prob(Value(1e-2)) == Approx(2.0 / 3.0));  // log(100) / log(1000)
  // Uniform in log space: a third of the draws in each decade.
  int below = 0;
  const int n = 3000;
  for (int s = 0; s < n; ++s) {
    const double v = std::get<double>(lr.random_sample(static_cast<std::uint64_t>(s)));
    REQUIRE((v >= 1e-4 && v <= 1e-1));
    below += v < 1e-3;
  }
  CHECK(static_cast<double>(below) / n == Approx(1.0 / 3.0).margin(0.03));
  // A step of 0.25 on [0, 1]: 0, 0.25, 0.5, 0.75, 1 (5 values).
  hp.Float("dropout", 0, 1, 0.25);
  const auto grid = hp.find("dropout")->grid_values();
  REQUIRE(grid.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) CHECK(std::get<double>(grid[k]) == Approx(0.25 * static_cast<double>(k)));
  // Continuous linear: min + prob * (max - min).
  hp.Float("momentum", 0.5, 0.9);
  CHECK(std::get<double>(hp.find("momentum")->prob_to_value(0.25)) == Approx(0.6));
  // The default (min_value) first, then the centres of 10 evenly spaced buckets (keras-tuner).
  const auto momentum_grid = hp.find("momentum")->grid_values();
  REQUIRE(momentum_grid.size() == 11);
  CHECK(std::get<double>(momentum_grid[0]) == 0.5);
  CHECK(std::get<double>(momentum_grid[1]) == Approx(0.5 + 0.05 * 0.4));
  CHECK_THROWS_AS(hp.Float("bad", 1, 0), ValueError);
  CHECK_THROWS_AS(hp.Float("bad", 0, 1, 0, "log"), ValueError);
}

TEST_CASE("HyperParameters: Choice of ints, doubles and strings, Boolean, Fixed and typed get", "[tuner]") {
  HyperParameters hp;
  const int units = hp.Choice("units", {16, 32, 64});
  CHECK(units == 16);  // the default: the first value
  const std::string opt = hp.Choice("optimizer", {"adam", "sgd"});
  CHECK(opt == "adam");
  CHECK(hp.Choice("rate", {0.5, 0.25}) == 0.5);
  CHECK(hp.Boolean("shuffle", true));
  CHECK(hp.Fixed("layers", 3) == 3);
  CHECK(hp.Fixed("act", std::string("relu")) == "relu");
  // Choice buckets: value k of n at prob (k + 0.5) / n.
  const auto& c = *hp.find("units");
  CHECK(c.value_to_prob(Value(std::int64_t{32})) == Approx(0.5));
  CHECK(std::get<std::int64_t>(c.prob_to_value(0.7)) == 64);
  CHECK(hp.find("shuffle")->value_to_prob(Value(true)) == 0.75);
  hp.set("optimizer", std::string("sgd"));
  CHECK(hp.get<std::string>("optimizer") == "sgd");
  CHECK(hp.get<double>("units") == 16.0);  // an int reads as a float, as in Python
  CHECK(hp.get<bool>("shuffle"));
  CHECK_THROWS_AS(hp.get<int>("optimizer"), ValueError);
  CHECK_THROWS_AS(hp.get<int>("missing"), ValueError);
  CHECK_THROWS_AS(hp.Choice("empty", std::vector<std::string>{}), ValueError);
  CHECK_THROWS_AS(hp.Choice("twice", {1, 1}), ValueError);
  // JSON round trip keeps the space, the values and their order.
  const HyperParameters back = HyperParameters::from_json(hp.to_json());
  REQUIRE(back.values().size() == hp.values().size());
  for (std::size_t i = 0; i < hp.values().size(); ++i) {
    CHECK(back.values()[i].first == hp.values()[i].first);
    CHECK(back.values()[i].second == hp.values()[i].second);
  }
  CHECK(back.space().size() == hp.space().size());
}

TEST_CASE("Objective: the direction is inferred as keras-tuner does, or given", "[tuner]") {
  CHECK(tuner::Objective("val_loss").direction == "min");
  CHECK(tuner::Objective("loss").direction == "min");
  CHECK(tuner::Objective("val_mean_squared_error").direction == "min");
  CHECK(tuner::Objective("mae").direction == "min");
  CHECK(tuner::Objective("val_sparse_categorical_crossentropy").direction == "min");
  CHECK(tuner::Objective("val_accuracy").direction == "max");
  CHECK(tuner::Objective("auc").direction == "max");
  const tuner::Objective o("score", "max");
  CHECK(o.better(2, 1));
  CHECK(o.repr() == "Objective(name=\"score\", direction=\"max\")");
  CHECK_THROWS_AS(tuner::Objective("score", "up"), ValueError);
}

TEST_CASE("GridSearchOracle enumerates exactly the grid, the last hyperparameter fastest", "[tuner]") {
  tuner::GridSearchOracle oracle("score", 0, 1);
  declare(oracle, [](HyperParameters& hp) {
    hp.Choice("opt", {"sgd", "adam"});
    hp.Int("layers", 1, 3);
  });
  // keras-tuner's order: defaults first, then an odometer: [sgd,1] [sgd,2] [sgd,3] [adam,1] ...
  std::vector<std::pair<std::string, int>> got;
  while (tuner::Trial* t = oracle.create_trial()) {
    got.emplace_back(t->hyperparameters.get<std::string>("opt"), t->hyperparameters.get<int>("layers"));
    oracle.update_trial(t->trial_id, {{"score", 1.0}});
    oracle.end_trial(t->trial_id);
  }
  const std::vector<std::pair<std::string, int>> want{{"sgd", 1}, {"sgd", 2}, {"sgd", 3},
                                                      {"adam", 1}, {"adam", 2}, {"adam", 3}};
  CHECK(got == want);
  // max_trials cuts it short.
  tuner::GridSearchOracle two("score", 2, 1);
  declare(two, [](HyperParameters& hp) { hp.Int("layers", 1, 3); });
  int n = 0;
  while (tuner::Trial* t = two.create_trial()) {
    two.end_trial(t->trial_id);
    ++n;
  }
  CHECK(n == 2);
}

TEST_CASE("RandomSearchOracle: the same seed gives the same trials, another seed others", "[tuner]") {
  auto run = [](std::uint64_t seed) {
    tuner::RandomSearchOracle oracle("score", 8, seed);
    declare(oracle, [](HyperParameters& hp) {
      hp.Float("lr", 1e-4, 1e-1, 0, "log");
      hp.Int("units", 8, 512);
    });
    std::vector<std::pair<double, std::int64_t>> out;
    while (tuner::Trial* t = oracle.create_trial()) {
      out.emplace_back(t->hyperparameters.get<double>("lr"), t->hyperparameters.get<std::int64_t>("units"));
      oracle.update_trial(t->trial_id, {{"score", 0.0}});
      oracle.end_trial(t->trial_id);
    }
    return out;
  };
  const auto a = run(7), b = run(7), c = run(8);
  CHECK(a.size() == 8);
  CHECK(a == b);
  CHECK(a != c);
  // A space of 2 combinations is exhausted after 2 trials (collisions stop the search).
  tuner::RandomSearchOracle small("score", 10, 1);
  declare(small, [](HyperParameters& hp) { hp.Boolean("flag"); });
  int n = 0;
  while (tuner::Trial* t = small.create_trial()) {
    small.end_trial(t->trial_id);
    ++n;
  }
  CHECK(n == 2);
}

TEST_CASE("BayesianOptimizationOracle finds a known optimum faster than random search on average", "[tuner]") {
  // f(a, b) = (a - 0.73)^2 + (b - 0.21)^2, minimum 0 at (0.73, 0.21); 15 trials per search.
  auto f = [](double a, double b) { return (a - 0.73) * (a - 0.73) + (b - 0.21) * (b - 0.21); };
  auto best_of = [&](tuner::Oracle& oracle) {
    declare(oracle, [](HyperParameters& hp) {
      hp.Float("a", 0, 1);
      hp.Float("b", 0, 1);
    });
    double best = 1e9;
    while (tuner::Trial* t = oracle.create_trial()) {
      const double v = f(t->hyperparameters.get<double>("a"), t->hyperparameters.get<double>("b"));
      best = std::min(best, v);
      oracle.update_trial(t->trial_id, {{"score", v}});
      oracle.end_trial(t->trial_id);
    }
    return best;
  };
  double bayes = 0, random = 0;
  const int seeds = 8;
  for (int s = 1; s <= seeds; ++s) {
    tuner::BayesianOptimizationOracle bo(tuner::Objective("score", "min"), 15, 3, 1e-4, 2.6, s);
    tuner::RandomSearchOracle rs(tuner::Objective("score", "min"), 15, s);
    bayes += best_of(bo) / seeds;
    random += best_of(rs) / seeds;
  }
  INFO("mean best: bayesian " << bayes << ", random " << random);
  CHECK(bayes < random);
  CHECK(bayes < 0.01);
  // Maximising -f gives the same search (the oracle flips the sign).
  tuner::BayesianOptimizationOracle up(tuner::Objective("score", "max"), 12, 3, 1e-4, 2.6, 1);
  declare(up, [](HyperParameters& hp) {
    hp.Float("a", 0, 1);
    hp.Float("b", 0, 1);
  });
  double best = -1e9;
  while (tuner::Trial* t = up.create_trial()) {
    const double v = -f(t->hyperparameters.get<double>("a"), t->hyperparameters.get<double>("b"));
    best = std::max(best, v);
    up.update_trial(t->trial_id, {{"score", v}});
    up.end_trial(t->trial_id);
  }
  CHECK(best > -0.02);
  CHECK(up.get_best_trials(1)[0]->score == best);
}

TEST_CASE("HyperbandOracle: keras-tuner's bracket schedule for max_epochs = 9, factor = 3", "[tuner]") {
  // Brackets: 9 -> 3 -> 1 -> 1/3 divides 3 times before dropping below 1, so B = 3, run 2, 1, 0.
  // bracket0_end_size = ceil(1 + log3(9)) = 3; size(b, r) = ceil(3 / (b + 1) * 3^(b - r));
  // epochs(b, r) = ceil(9 / 3^(b - r)):
  //   bracket 2: 9 trials x 1 epoch, the best 3 continue to 3 epochs, the best 1 to 9
  //   bracket 1: ceil(1.5 * 3) = 5 trials x 3 epochs, the best ceil(1.5) = 2 continue to 9
  //   bracket 0: 3 trials x 9 epochs
  // 9 + 3 + 1 + 5 + 2 + 3 = 23 trials.
  tuner::HyperbandOracle oracle(tuner::Objective("score", "max"), 9, 3, 1, 5);
  CHECK(oracle.num_brackets() == 3);
  CHECK(oracle.bracket_size(2, 0) == 9);
  CHECK(oracle.bracket_size(2, 1) == 3);
  CHECK(oracle.bracket_size(2, 2) == 1);
  CHECK(oracle.bracket_size(1, 0) == 5);
  CHECK(oracle.bracket_size(1, 1) == 2);
  CHECK(oracle.bracket_size(0, 0) == 3);
  CHECK(oracle.bracket_epochs(2, 0) == 1);
  CHECK(oracle.bracket_epochs(1, 0) == 3);
  CHECK(oracle.bracket_epochs(0, 0) == 9);
  declare(oracle, [](HyperParameters& hp) { hp.Float("x", 0, 1); });
  struct Row {
    int bracket, round, epochs, initial;
  };
  std::vector<Row> rows;
  std::map<std::string, double> score;
  while (tuner::Trial* t = oracle.create_trial()) {
    const auto& hp = t->hyperparameters;
    rows.push_back({hp.get<int>("tuner/bracket"), hp.get<int>("tuner/round"), hp.get<int>("tuner/epochs"),
                    hp.get<int>("tuner/initial_epoch")});
    if (hp.contains("tuner/trial_id")) {
      // A continuation extends a trial of the previous round with the same hyperparameters.
      const tuner::Trial& past = oracle.get_trial(hp.get<std::string>("tuner/trial_id"));
      CHECK(past.hyperparameters.get<double>("x") == hp.get<double>("x"));
      CHECK(past.hyperparameters.get<int>("tuner/round") == rows.back().round - 1);
    }
    score[t->trial_id] = hp.get<double>("x") * hp.get<int>("tuner/epochs");
    oracle.update_trial(t->trial_id, {{"score", score[t->trial_id]}});
    oracle.end_trial(t->trial_id);
    REQUIRE(rows.size() < 100);
  }
  REQUIRE(rows.size() == 23);
  auto count = [&](int b, int r, int epochs, int initial) {
    return std::count_if(rows.begin(), rows.end(), [&](const Row& x) {
      return x.bracket == b && x.round == r && x.epochs == epochs && x.initial == initial;
    });
  };
  CHECK(count(2, 0, 1, 0) == 9);
  CHECK(count(2, 1, 3, 1) == 3);
  CHECK(count(2, 2, 9, 3) == 1);
  CHECK(count(1, 0, 3, 0) == 5);
  CHECK(count(1, 1, 9, 3) == 2);
  CHECK(count(0, 0, 9, 0) == 3);
  // Brackets run in order 2, 1, 0, rounds in order within each.
  for (std::size_t i = 1; i < rows.size(); ++i) CHECK(rows[i].bracket <= rows[i - 1].bracket);
  // Round 1 of bracket 2 continues the 3 best of its 9 first trials, best first.
  std::vector<double> round0;
  for (std::size_t i = 0; i < 9; ++i) round0.push_back(oracle.trials().at(fmt::format("{:02}", i)).hyperparameters.get<double>("x"));
  std::sort(round0.rbegin(), round0.rend());
  for (std::size_t k = 0; k < 3; ++k)
    CHECK(oracle.trials().at(fmt::format("{:02}", 9 + k)).hyperparameters.get<double>("x") == round0[k]);
  CHECK_THROWS_AS(tuner::HyperbandOracle("score", 9, 1), ValueError);
}

TEST_CASE("RandomSearch end to end: search, best hyperparameters, best models with their weights, summary",
          "[tuner]") {
  const Regression data;
  TempDir dir("random");
  int calls = 0;
  tuner::RandomSearch t(regression_hypermodel(&calls),
                        {.objective = "val_loss", .max_trials = 3, .seed = 11, .directory = dir.path.string(),
                         .project_name = "p"});
  CHECK(calls == 1);  // the first build declares the space
  CHECK(t.oracle().hyperparameters().space().size() == 2);
  t.search(data.x, data.y, data.fit(4));
  CHECK(calls == 4);
  const auto best = t.oracle().get_best_trials(3);
  REQUIRE(best.size() == 3);
  for (std::size_t i = 1; i < best.size(); ++i) CHECK(*best[i - 1]->score <= *best[i]->score);
  // The score is the best epoch's val_loss of the trial's fit.
  CHECK(best[0]->metrics.at("val_loss") == *best[0]->score);
  const auto hps = t.get_best_hyperparameters(1);
  REQUIRE(hps.size() == 1);
  CHECK(hps[0].get<double>("learning_rate") == best[0]->hyperparameters.get<double>("learning_rate"));
  // The best model comes back with the weights of its best epoch: it scores that val_loss.
  const auto models = t.get_best_models(1);
  REQUIRE(models.size() == 1);
  const auto eval = models[0]->evaluate(data.xv, data.yv, {.batch_size = 16, .verbose = 0});
  CHECK(eval.at("loss") == Approx(*best[0]->score).epsilon(1e-4));
  // Every trial is on disk with its status and score.
  for (const auto& [id, trial] : t.oracle().trials()) {
    const fs::path file = dir.path / "p" / ("trial_" + id) / "trial.json";
    REQUIRE(fs::exists(file));
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in);
    CHECK(j.at("status") == "COMPLETED");
    CHECK(j.at("score").get<double>() == *trial.score);
    CHECK(fs::exists(dir.path / "p" / ("trial_" + id) / "checkpoint.safetensors"));
  }
  std::ostringstream out;
  t.results_summary(2, out);
  const std::string s = out.str();
  CHECK(s.find("Results summary\nResults in ") == 0);
  CHECK(s.find("Showing 2 best trials\nObjective(name=\"val_loss\", direction=\"min\")\n") != std::string::npos);
  CHECK(s.find("Trial " + best[0]->trial_id + " summary\nHyperparameters:\nlearning_rate: ") != std::string::npos);
  CHECK(s.find("Score: ") != std::string::npos);
  CHECK(s.find("Trial " + best[2]->trial_id + " summary") == std::string::npos);  // only 2 shown
}

TEST_CASE("A tuner made again on its directory resumes: completed trials do not run again", "[tuner]") {
  const Regression data;
  TempDir dir("resume");
  int calls = 0;
  auto options = [&](int max_trials, bool overwrite) {
    return tuner::RandomSearchOptions{.objective = "val_loss", .max_trials = max_trials, .seed = 5,
                                      .directory = dir.path.string(), .project_name = "p", .overwrite = overwrite};
  };
  std::vector<Values> first;
  {
    tuner::RandomSearch t(regression_hypermodel(&calls), options(2, false));
    t.search(data.x, data.y, data.fit(2));
    for (const auto& [id, trial] : t.oracle().trials()) first.push_back(trial.hyperparameters.values());
  }
  CHECK(calls == 3);  // 1 declaring build + 2 trials
  calls = 0;
  {
    tuner::RandomSearch t(regression_hypermodel(&calls), options(4, false));
    CHECK(calls == 0);  // the space comes from oracle.json
    CHECK(t.oracle().trials().size() == 2);
    t.search(data.x, data.y, data.fit(2));
    CHECK(calls == 2);  // only trials 02 and 03 ran
    CHECK(t.oracle().trials().size() == 4);
    CHECK(t.oracle().trials().at("00").hyperparameters.values() == first[0]);
    CHECK(t.get_best_hyperparameters(4).size() == 4);
    // Searching again with every trial done runs nothing.
    t.search(data.x, data.y, data.fit(2));
    CHECK(calls == 2);
  }
  // A trial an interrupted search left RUNNING runs again with its own hyperparameters.
  const fs::path file = dir.path / "p" / "trial_01" / "trial.json";
  nlohmann::json j;
  {
    std::ifstream in(file);
    j = nlohmann::json::parse(in);
  }
  j["status"] = "RUNNING";
  j["score"] = nullptr;
  std::ofstream(file) << j.dump();
  calls = 0;
  {
    tuner::RandomSearch t(regression_hypermodel(&calls), options(4, false));
    t.search(data.x, data.y, data.fit(2));
    CHECK(calls == 1);
    CHECK(t.oracle().trials().at("01").status == "COMPLETED");
    CHECK(t.oracle().trials().at("01").hyperparameters.values() == first[1]);
  }
  // Another objective on the same folder is refused; overwrite = true starts again.
  CHECK_THROWS_AS(tuner::RandomSearch(regression_hypermodel(nullptr),
                                      {.objective = "loss", .directory = dir.path.string(), .project_name = "p"}),
                  ValueError);
  calls = 0;
  {
    tuner::RandomSearch t(regression_hypermodel(&calls), options(1, true));
    CHECK(calls == 1);
    CHECK(t.oracle().trials().empty());
    CHECK(!fs::exists(dir.path / "p" / "trial_00"));
  }
}

TEST_CASE("GridSearch and BayesianOptimization tuners run every grid point / their trials", "[tuner]") {
  const Regression data;
  TempDir dir("grid");
  int calls = 0;
  tuner::GridSearch g(regression_hypermodel(&calls),
                      {.objective = "val_loss", .directory = dir.path.string(), .project_name = "g"});
  g.search(data.x, data.y, data.fit(1));
  std::set<std::pair<double, std::int64_t>> combos;
  for (const auto& [id, trial] : g.oracle().trials())
    combos.emplace(trial.hyperparameters.get<double>("learning_rate"), trial.hyperparameters.get<std::int64_t>("units"));
  CHECK(combos.size() == 4);  // {0.01, 0.1} x {1, 4}
  CHECK(g.oracle().trials().size() == 4);
  tuner::BayesianOptimization b(regression_hypermodel(nullptr),
                                {.objective = "val_loss", .max_trials = 4, .num_initial_points = 2, .seed = 2,
                                 .directory = dir.path.string(), .project_name = "b"});
  b.search(data.x, data.y, data.fit(1));
  CHECK(b.oracle().trials().size() == 4);
  CHECK(b.get_best_models(2).size() == 2);
}

TEST_CASE("Hyperband tuner: continuations train from the previous round's weights and epochs", "[tuner]") {
  const Regression data;
  TempDir dir("hyperband");
  // max_epochs 3, factor 3: brackets 1 (3 trials x 1 epoch, the best continues to 3) and 0
  // (2 trials x 3 epochs): ceil(1 + log3(3)) = 2; size(1, 0) = ceil(2 / 2 * 3) = 3. The space
  // holds 2 x 2 = 4 combinations: bracket 0 gets the last unseen one, then the random draws only
  // collide and the search stops (keras-tuner's STOPPED), so 3 + 1 + 1 = 5 trials.
  tuner::Hyperband t(regression_hypermodel(nullptr), {.objective = "val_loss", .max_epochs = 3, .factor = 3,
                                                      .seed = 4, .directory = dir.path.string(), .project_name = "h"});
  t.search(data.x, data.y, data.fit(100));  // epochs come from the schedule
  REQUIRE(t.oracle().trials().size() == 5);
  CHECK(t.oracle().trials().at("04").hyperparameters.get<int>("tuner/epochs") == 3);
  CHECK(t.oracle().trials().at("04").hyperparameters.get<int>("tuner/bracket") == 0);
  const tuner::Trial& cont = t.oracle().trials().at("03");
  REQUIRE(cont.hyperparameters.contains("tuner/trial_id"));
  CHECK(cont.hyperparameters.get<int>("tuner/initial_epoch") == 1);
  CHECK(cont.best_step >= 1);  // its epochs are numbered from initial_epoch
  CHECK(cont.best_step <= 2);
  CHECK(t.get_best_models(1).size() == 1);
}

TEST_CASE("Tuner errors: a missing objective metric, an uncompiled hypermodel, bad options", "[tuner]") {
  const Regression data;
  TempDir dir("errors");
  tuner::RandomSearch t(regression_hypermodel(nullptr), {.objective = "val_accuracy", .max_trials = 1,
                                                         .directory = dir.path.string(), .project_name = "e"});
  CHECK_THROWS_AS(t.search(data.x, data.y, data.fit(1)), ValueError);  // mse reports no accuracy
  CHECK(t.oracle().trials().at("00").status == "FAILED");
  auto uncompiled = [](HyperParameters& hp) {
    hp.Int("units", 1, 2);
    return std::shared_ptr<models::Model>(
        std::make_shared<models::Sequential>(models::Sequential{layers::InputLayer({1}), layers::Dense(1)}));
  };
  CHECK_THROWS_AS(tuner::RandomSearch(uncompiled, {.directory = dir.path.string(), .project_name = "u"}), ValueError);
  CHECK_THROWS_AS(tuner::RandomSearch(regression_hypermodel(nullptr),
                                      {.executions_per_trial = 0, .directory = dir.path.string(), .project_name = "x"}),
                  ValueError);
}
