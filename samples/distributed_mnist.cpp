// Data-parallel training of a small network on Fashion-MNIST (Debian's dataset-fashion-mnist)
// with MultiWorkerMirroredStrategy: one process per worker, started by mpirun or srun.
//
//   mpirun -np 2 distributed_mnist [--limit N (6000)] [--epochs E (2)] [--batch-size B (128)]
//   srun -n 2 distributed_mnist
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

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

using namespace keel;

namespace {

struct Flags {
  std::int64_t limit = 6000, batch_size = 128;
  int epochs = 2;
};

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: distributed_mnist [--limit N] [--epochs E] [--batch-size B]\n");
      std::exit(2);
    }
    const long long v = std::strtoll(argv[++i], nullptr, 10);
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
  distribute::MultiWorkerMirroredStrategy strategy;
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
  const auto t0 = std::chrono::steady_clock::now();
  model.fit(x, y, {.batch_size = f.batch_size, .epochs = f.epochs, .verbose = strategy.is_chief() ? 2 : 0});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto logs = model.evaluate(xt, yt, {.batch_size = 256, .verbose = 0});
  if (strategy.is_chief())
    std::printf("workers %d, %lld images x %d epochs in %.2f s; test accuracy %.4f (loss %.4f)\n",
                strategy.num_workers(), static_cast<long long>(n), f.epochs, seconds, logs.at("accuracy"),
                logs.at("loss"));
  return logs.at("accuracy") > 0.2 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "distributed_mnist: %s\n", e.what());
  return 1;
}
