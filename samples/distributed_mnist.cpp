// Data-parallel training of a small network on Fashion-MNIST (Debian's dataset-fashion-mnist)
// with MultiWorkerMirroredStrategy: one process per worker, started by mpirun or srun.
//
//   mpirun -np 2 distributed_mnist [--limit N (6000)] [--epochs E (2)] [--batch-size B (128)]
//   srun -n 2 distributed_mnist
//   mpirun -np 3 distributed_mnist --strategy ps [--max-staleness S (4)]
//
// --strategy ps trains asynchronously with ParameterServerStrategy instead: the last process
// holds the weights and applies the updates, the others are workers; each worker's batch is
// B / workers rows (the same rows per worker step as the synchronous run), and every worker
// step is one update.
//
//   TensorFlow                                             keel
//   strategy = tf.distribute.MultiWorkerMirroredStrategy() distribute::MultiWorkerMirroredStrategy strategy;
//   with strategy.scope(): model = ...; model.compile(...) auto scope = strategy.scope(); ...
//   model.fit(x, y, batch_size=GLOBAL_BATCH)               model.fit(x, y, {.batch_size = global_batch})
//
// Every worker reads the same images; fit gives each its shard of every global batch,
// all-reduces the gradients and reports the logs of the whole batch. Only the chief (worker 0)
// prints. Exits with status 1 when the test accuracy stays at chance level (20% or less).
#include <keel/keel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

using namespace keel;

namespace {

struct Flags {
  std::int64_t limit = 6000, batch_size = 128, max_staleness = 4;
  int epochs = 2;
  std::string strategy = "mirrored";
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: distributed_mnist [--limit N] [--epochs E] [--batch-size B] [--strategy "
                           "mirrored|ps] [--max-staleness S]\n");
      std::exit(2);
    }
    if (arg == "--strategy") {
      f.strategy = argv[++i];
      if (f.strategy != "mirrored" && f.strategy != "ps") {
        std::fprintf(stderr, "distributed_mnist: --strategy is mirrored or ps, got %s\n", f.strategy.c_str());
        std::exit(2);
      }
      continue;
    }
    const long long v = std::strtoll(argv[++i], nullptr, 10);
    if (arg == "--max-staleness" && v >= 0) {
      f.max_staleness = v;
      continue;
    }
    if (v < 1) {
      std::fprintf(stderr, "distributed_mnist: %s needs a positive integer\n", arg.c_str());
      std::exit(2);
    }
    if (arg == "--limit") f.limit = v;
    else if (arg == "--epochs") f.epochs = static_cast<int>(v);
    else if (arg == "--batch-size") f.batch_size = v;
    else {
      std::fprintf(stderr, "distributed_mnist: unknown option %s\n", arg.c_str());
      std::exit(2);
    }
  }
  return f;
}

// uint8 [N, 28, 28] -> float32 [N, 784] in [0, 1].
Tensor prepare(const Tensor& images, std::int64_t n) {
  const Tensor x = images.slice({range(0, n)});
  return reshape(x.astype(DType::float32) / 255.0, Shape({n, 28 * 28}));
}

}  // namespace

int main(int argc, char** argv) try {
  const Flags f = parse_flags(argc, argv);
  const bool ps = f.strategy == "ps";
  std::unique_ptr<distribute::Strategy> chosen;
  if (ps)
    chosen = std::make_unique<distribute::ParameterServerStrategy>(
        distribute::ParameterServerOptions{.max_staleness = static_cast<int>(f.max_staleness)});
  else
    chosen = std::make_unique<distribute::MultiWorkerMirroredStrategy>();
  distribute::Strategy& strategy = *chosen;
  auto [x_train, y_train] = data::load_fashion_mnist(true);
  auto [x_test, y_test] = data::load_fashion_mnist(false);
  const std::int64_t n = std::min(f.limit, x_train.shape()[0]), nt = std::min<std::int64_t>(2000, x_test.shape()[0]);
  const Tensor x = prepare(x_train, n), y = y_train.slice({range(0, n)});
  const Tensor xt = prepare(x_test, nt), yt = y_test.slice({range(0, nt)});

  auto scope = strategy.scope();
  random::set_seed(1);
  models::Sequential model{layers::InputLayer({28 * 28}), layers::Dense(128, {.activation = "relu"}),
                           layers::Dense(10)};
  model.compile({.optimizer = optimizers::Adam(1e-3),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
  // Synchronous: batch_size is global. Asynchronous: each worker's own batch.
  const std::int64_t batch = ps ? std::max<std::int64_t>(1, f.batch_size / strategy.num_workers()) : f.batch_size;
  const auto t0 = std::chrono::steady_clock::now();
  model.fit(x, y, {.batch_size = batch, .epochs = f.epochs, .verbose = strategy.is_chief() ? 2 : 0});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto logs = model.evaluate(xt, yt, {.batch_size = 256, .verbose = 0});
  if (strategy.is_chief()) {
    std::printf("%s, workers %d, %lld images x %d epochs in %.2f s (%.0f images/s); test accuracy %.4f (loss %.4f)\n",
                ps ? "parameter server (async)" : "mirrored (sync)", strategy.num_workers(),
                static_cast<long long>(n), f.epochs, seconds, static_cast<double>(n) * f.epochs / seconds,
                logs.at("accuracy"), logs.at("loss"));
    if (ps) {
      const auto st = static_cast<distribute::ParameterServerStrategy&>(strategy).stats();
      std::printf("chief: %lld steps, %.2f s waiting for the server\n", static_cast<long long>(st.steps), st.wait_s);
    }
  }
  if (ps && static_cast<distribute::ParameterServerStrategy&>(strategy).is_parameter_server()) {
    const auto st = static_cast<distribute::ParameterServerStrategy&>(strategy).stats();
    std::printf("server: %lld updates, staleness mean %.2f max %lld, largest lead %lld steps (max_staleness %lld)\n",
                static_cast<long long>(st.updates), st.mean_staleness, static_cast<long long>(st.max_staleness),
                static_cast<long long>(st.max_clock_lead), static_cast<long long>(f.max_staleness));
  }
  return logs.at("accuracy") > 0.2 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "distributed_mnist: %s\n", e.what());
  return 1;
}
