// Magnitude pruning of a Fashion-MNIST CNN, as TensorFlow Model Optimization's "Pruning in
// Keras" guide does it: train a dense model, wrap it with prune_low_magnitude (PolynomialDecay
// from 50% to 80% sparsity over two epochs of fine-tuning), strip the wrappers, and compare the
// test accuracy and the gzip-compressed size of the saved models.
//
//   tfmot / Keras                                          keel
//   prune_low_magnitude(model, pruning_schedule=           pruning::prune_low_magnitude(model,
//       PolynomialDecay(0.5, 0.8, 0, end_step))                pruning::PolynomialDecay{0.5, 0.8, 0, end_step})
//   callbacks=[UpdatePruningStep(),                        .callbacks = {make_shared<callbacks::UpdatePruningStep>(),
//              PruningSummaries(log_dir)]                               make_shared<callbacks::PruningSummaries>(dir)}
//   strip_pruning(model_for_pruning)                       pruning::strip_pruning(*pruned)
//
//   prune_fashion_mnist [--limit N (12000 training images)] [--epochs E (3)] [--data DIR] [--logdir DIR]
//
// Exits with status 1 when the pruned model loses more than 1.5 accuracy points, or its file does
// not gzip at least 3x smaller than the dense one.
#include <keel/keel.hpp>
#include <zlib.h>  // the size comparison (samples/CMakeLists.txt links zlib for it)

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace keel;
namespace fs = std::filesystem;

namespace {

struct Flags {
  std::int64_t limit = 12000;
  int epochs = 3;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
  std::string logdir;                                           // empty: a temporary folder
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "prune_fashion_mnist: %s\n", error);
  std::fprintf(stderr, "usage: prune_fashion_mnist [--limit N] [--epochs E] [--data DIR] [--logdir DIR]\n");
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
    if (arg == "--limit") f.limit = integer();
    else if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--data") f.data_dir = value();
    else if (arg == "--logdir") f.logdir = value();
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  return f;
}

Tensor prepare(const Tensor& images) {
  return reshape(cast(images, DType::float32) * (1.0 / 255.0), Shape{images.shape()[0], 28, 28, 1});
}

Tensor first_rows(const Tensor& t, std::int64_t n) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(t.rank()), 0), size = t.shape().dims();
  size[0] = n;
  return slice(t, begin, size);
}

// The guide's model, narrower so that a run takes a minute or two on two cores: about 105k
// weights, 95% of them in the Dense(64) on the 7x7x32 features.
models::Sequential build_model() {
  return models::Sequential{
      layers::InputLayer({28, 28, 1}),
      layers::Conv2D(16, 3, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D(2),
      layers::Conv2D(32, 3, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D(2),
      layers::Flatten(),
      layers::Dense(64, {.activation = "relu"}),
      layers::Dense(10),  // logits
  };
}

// The size of `path` after gzip at the default level (what `gzip -c file | wc -c` reports).
std::uintmax_t gzipped_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string gz = path + ".gz";
  gzFile out = gzopen(gz.c_str(), "wb");
  if (!out) throw IOError("prune_fashion_mnist: cannot write " + gz);
  const int written = gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(out);
  if (written != static_cast<int>(bytes.size())) throw IOError("prune_fashion_mnist: gzwrite failed on " + gz);
  return fs::file_size(gz);
}

double accuracy(models::Model& model, const Tensor& x, const Tensor& y) {
  return model.evaluate(x, y, {.batch_size = 256, .verbose = 0}).at("accuracy");
}

void compile(models::Model& model, double learning_rate) {
  model.compile({.optimizer = std::make_shared<optimizers::Adam>(learning_rate),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
}

int run(const Flags& flags) {
  random::set_seed(1);
  if (!fs::exists(flags.data_dir)) {
    std::fprintf(stderr, "prune_fashion_mnist: %s does not exist (Debian's dataset-fashion-mnist package; "
                         "see scripts/setup.sh) or pass --data DIR\n", flags.data_dir.c_str());
    return 1;
  }
  auto [x_train_u8, y_train] = data::load_fashion_mnist(true, flags.data_dir);
  const auto [x_test_u8, y_test] = data::load_fashion_mnist(false, flags.data_dir);
  if (flags.limit < x_train_u8.shape()[0]) {
    x_train_u8 = first_rows(x_train_u8, flags.limit);
    y_train = first_rows(y_train, flags.limit);
  }
  const Tensor x_train = prepare(x_train_u8), x_test = prepare(x_test_u8);
  const std::int64_t batch = 64;
  std::printf("Fashion-MNIST: %lld training images, %lld test images\n", static_cast<long long>(x_train.shape()[0]),
              static_cast<long long>(x_test.shape()[0]));
  const auto start = std::chrono::steady_clock::now();

  // 1. The dense baseline.
  models::Sequential model = build_model();
  compile(model, 1e-3);
  model.fit(x_train, y_train, {.batch_size = batch, .epochs = flags.epochs, .verbose = 2});
  const double dense_acc = accuracy(model, x_test, y_test);

  // 2. Pruning while fine-tuning for two epochs: 50% -> 80% (tfmot's guide). The masks update
  // every 10 steps until three quarters of the run (end_step a multiple of the frequency, so the
  // last mask holds 80%); the last quarter trains the kept weights under the final mask.
  const std::int64_t steps_per_epoch = (x_train.shape()[0] + batch - 1) / batch;
  const std::int64_t frequency = 10;
  const std::int64_t end_step = (2 * steps_per_epoch * 3 / 4) / frequency * frequency;
  auto pruned = pruning::prune_low_magnitude(
      model, pruning::PolynomialDecay{.initial_sparsity = 0.5, .final_sparsity = 0.8, .begin_step = 0,
                                      .end_step = end_step, .frequency = frequency});
  compile(*pruned, 1e-3);  // prune_low_magnitude requires a recompile, as in tfmot
  const std::string logdir = flags.logdir.empty() ? (fs::temp_directory_path() / "keel_prune_fashion_mnist").string()
                                                  : flags.logdir;
  fs::remove_all(logdir);
  pruned->fit(x_train, y_train,
              {.batch_size = batch, .epochs = 2, .verbose = 2,
               .callbacks = {std::make_shared<callbacks::UpdatePruningStep>(),
                             std::make_shared<callbacks::PruningSummaries>(
                                 logdir, callbacks::TensorBoardOptions{.write_graph = false})}});
  const double pruned_acc = accuracy(*pruned, x_test, y_test);

  // 3. Export: strip the wrappers (the zeros stay) and compare the compressed files. Neither file
  // holds optimizer state (tfmot's guide saves with include_optimizer=False).
  auto stripped = pruning::strip_pruning(*pruned);
  compile(*stripped, 1e-4);
  const double stripped_acc = accuracy(*stripped, x_test, y_test);
  auto dense_export = models::clone_model(model);
  dense_export->set_weights(model.get_weights());
  const fs::path dir = fs::path(logdir) / "models";
  fs::create_directories(dir);
  const std::string dense_file = (dir / "dense.keel").string(), pruned_file = (dir / "pruned.keel").string();
  dense_export->save(dense_file);
  auto stripped_export = models::clone_model(*stripped);
  stripped_export->set_weights(stripped->get_weights());
  stripped_export->save(pruned_file);
  const auto dense_gz = gzipped_size(dense_file), pruned_gz = gzipped_size(pruned_file);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("\nsparsity of the prunable kernels: dense %.3f, pruned %.3f\n", pruning::sparsity(model),
              pruning::sparsity(*stripped));
  std::printf("test accuracy: dense %.4f, pruned %.4f (stripped %.4f), difference %.2f points\n", dense_acc,
              pruned_acc, stripped_acc, 100 * (dense_acc - pruned_acc));
  std::printf("model files: dense %ju bytes (gzip %ju), pruned %ju bytes (gzip %ju): %.2fx smaller gzipped\n",
              static_cast<std::uintmax_t>(fs::file_size(dense_file)), dense_gz,
              static_cast<std::uintmax_t>(fs::file_size(pruned_file)), pruned_gz,
              static_cast<double>(dense_gz) / static_cast<double>(pruned_gz));
  std::printf("TensorBoard logs (sparsity, threshold per layer): %s\ntotal time %.1f s\n", logdir.c_str(), seconds);
  const bool ok = dense_acc - pruned_acc <= 0.015 && static_cast<double>(dense_gz) >= 3.0 * static_cast<double>(pruned_gz);
  if (!ok) std::printf("below target: within 1.5 points and >= 3x smaller\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_flags(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prune_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
