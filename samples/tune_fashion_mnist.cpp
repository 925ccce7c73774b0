// Hyperparameter search on Fashion-MNIST with keras-tuner's API: the width of the hidden layer
// and Adam's learning rate of a small dense classifier, tuned by random search, Bayesian
// optimisation or Hyperband on a subset of the training images (the tutorial "Introduction to
// the Keras Tuner" of TensorFlow, made small enough to run in well under a minute on 2 cores).
//
//   keras-tuner                                        keel
//   def model_builder(hp):                             auto model_builder = [](tuner::HyperParameters& hp) {
//     units = hp.Int("units", 32, 512, step=32)          auto units = hp.Int("units", 32, 512, 32);
//     lr = hp.Choice("learning_rate", [1e-2, 1e-3, 1e-4])  double lr = hp.Choice("learning_rate", {1e-2, 1e-3, 1e-4});
//     ...                                                ...
//   tuner = kt.Hyperband(model_builder,                tuner::Hyperband tuner(model_builder,
//       objective="val_accuracy", max_epochs=10)           {.objective = "val_accuracy", .max_epochs = 10});
//   tuner.search(x, y, validation_split=0.2)           tuner.search(x, y, {.validation_split = 0.2});
//   best_hps = tuner.get_best_hyperparameters(1)[0]    auto best_hps = tuner.get_best_hyperparameters(1)[0];
//
//   tune_fashion_mnist [--tuner random|bayesian|hyperband (random)] [--trials T (8)] [--limit N (6000)]
//                      [--epochs E (3)] [--data DIR (the package's folder)] [--dir DIR (a temporary folder)]
//                      [--seed S (1)]
//
// The search is resumable: run it again with the same --dir and the trials already done are
// skipped. Exits with status 1 when the best model learnt nothing (test accuracy 50% or less).
#include <keel/keel.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <unistd.h>

using namespace keel;

namespace {

constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";  // Debian's package

struct Flags {
  std::string tuner = "random";
  int trials = 8;
  std::int64_t limit = 6000;
  int epochs = 3;
  std::string data_dir = kDefaultDir;
  std::string project_dir;  // empty: a fresh temporary folder
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "tune_fashion_mnist: %s\n", error);
  std::fprintf(stderr,
               "usage: tune_fashion_mnist [--tuner random|bayesian|hyperband] [--trials T] [--limit N] [--epochs E]\n"
               "                          [--data DIR] [--dir DIR] [--seed S]\n");
  std::exit(error ? 2 : 0);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    auto integer = [&]() -> std::int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) usage((arg + " needs a positive integer, got '" + v + "'").c_str());
      return n;
    };
    if (arg == "--tuner") {
      f.tuner = value();
      if (f.tuner != "random" && f.tuner != "bayesian" && f.tuner != "hyperband")
        usage(("--tuner must be random, bayesian or hyperband, got '" + f.tuner + "'").c_str());
    } else if (arg == "--trials") f.trials = static_cast<int>(integer());
    else if (arg == "--limit") f.limit = integer();
    else if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--data") f.data_dir = value();
    else if (arg == "--dir") f.project_dir = value();
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  return f;
}

// uint8 [N, 28, 28] -> float32 [N, 784] in [0, 1].
Tensor prepare(const Tensor& images) {
  return reshape(cast(images, DType::float32) * (1.0 / 255.0), Shape{images.shape()[0], 28 * 28});
}

Tensor first_rows(const Tensor& t, std::int64_t n) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(t.rank()), 0), size = t.shape().dims();
  size[0] = std::min(n, size[0]);
  return slice(t, begin, size);
}

// The tutorial's hypermodel: Flatten -> Dense(units, relu) -> Dense(10) logits, Adam(lr).
std::shared_ptr<models::Model> model_builder(tuner::HyperParameters& hp) {
  const auto units = hp.Int("units", 32, 256, 32);
  const double learning_rate = hp.Choice("learning_rate", {1e-2, 1e-3, 1e-4});
  auto model = std::make_shared<models::Sequential>(models::Sequential{
      layers::InputLayer({28 * 28}),
      layers::Dense(units, {.activation = "relu"}),
      layers::Dense(10),
  });
  model->compile({.optimizer = optimizers::Adam(learning_rate),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .metrics = {"accuracy"}});
  return model;
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);
  if (!std::filesystem::exists(flags.data_dir)) {
    std::fprintf(stderr,
                 "tune_fashion_mnist: %s does not exist. Fashion-MNIST comes with Debian's dataset-fashion-mnist\n"
                 "package: run `bash scripts/setup.sh` (or `sudo apt-get install dataset-fashion-mnist`),\n"
                 "or pass --data DIR with the four *-ubyte[.gz] files.\n",
                 flags.data_dir.c_str());
    return 1;
  }
  auto [x_u8, y_train] = data::load_fashion_mnist(/*train=*/true, flags.data_dir);
  auto [xt_u8, y_test] = data::load_fashion_mnist(/*train=*/false, flags.data_dir);
  const Tensor x_train = prepare(first_rows(x_u8, flags.limit));
  y_train = first_rows(y_train, flags.limit);
  const Tensor x_test = prepare(first_rows(xt_u8, 2000));
  y_test = first_rows(y_test, 2000);

  const bool temporary = flags.project_dir.empty();
  const std::filesystem::path dir =
      temporary ? std::filesystem::temp_directory_path() / ("keel-tune-fashion-mnist-" + std::to_string(::getpid()))
                : std::filesystem::path(flags.project_dir);
  const std::string project = "fashion_mnist_" + flags.tuner;
  std::unique_ptr<tuner::Tuner> t;
  if (flags.tuner == "random")
    t = std::make_unique<tuner::RandomSearch>(
        model_builder, tuner::RandomSearchOptions{.objective = "val_accuracy", .max_trials = flags.trials,
                                                  .seed = flags.seed, .directory = dir.string(),
                                                  .project_name = project});
  else if (flags.tuner == "bayesian")
    t = std::make_unique<tuner::BayesianOptimization>(
        model_builder, tuner::BayesianOptimizationOptions{.objective = "val_accuracy", .max_trials = flags.trials,
                                                          .seed = flags.seed, .directory = dir.string(),
                                                          .project_name = project});
  else
    t = std::make_unique<tuner::Hyperband>(
        model_builder, tuner::HyperbandOptions{.objective = "val_accuracy", .max_epochs = flags.epochs * 2,
                                               .seed = flags.seed, .directory = dir.string(),
                                               .project_name = project});
  t->search_space_summary();

  const auto start = std::chrono::steady_clock::now();
  t->search(x_train, y_train, {.batch_size = 64, .epochs = flags.epochs, .verbose = 2, .validation_split = 0.2});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t->results_summary(3);

  const tuner::HyperParameters best = t->get_best_hyperparameters(1).at(0);
  std::printf("\nBest hyperparameters: units = %lld, learning_rate = %g\n",
              static_cast<long long>(best.get<std::int64_t>("units")), best.get<double>("learning_rate"));
  const auto model = t->get_best_models(1).at(0);
  const auto results = model->evaluate(x_test, y_test, {.batch_size = 256, .verbose = 0});
  std::printf("Search: %zu trials in %.1f s; best model's test accuracy on %lld images: %.4f\n",
              t->oracle().trials().size(), seconds, static_cast<long long>(x_test.shape()[0]),
              results.at("accuracy"));
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  if (!(results.at("accuracy") > 0.5)) {
    std::fprintf(stderr, "tune_fashion_mnist: FAIL: the best model learnt nothing (test accuracy %.4f)\n",
                 results.at("accuracy"));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  try {
    return run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
