// The CIFAR-10 convolutional network of TensorFlow's CNN tutorial, written with keel's Keras API:
// three Conv2D + MaxPooling2D blocks, Flatten, Dense(128), Dense(10) logits, trained with Adam on
// an augmented, prefetched data::Dataset pipeline, with EarlyStopping and ModelCheckpoint.
//
//   Keras                                            keel
//   tf.data.Dataset.from_tensor_slices((x, y))       data::Dataset<>::from_tensor_slices({x, y})
//     .shuffle(n).map(augment, AUTOTUNE)               .shuffle(n).map(augment, data::AUTOTUNE)
//     .batch(64).prefetch(AUTOTUNE)                    .batch(64).prefetch(data::AUTOTUNE)
//   layers.Conv2D(16, 3, padding="same",             layers::Conv2D(16, 3, {.padding = "same",
//                 activation="relu")                                    .activation = "relu"})
//   model.fit(ds, epochs=10, validation_data=...,    model.fit(ds, {.epochs = 10, .callbacks = ...,
//             callbacks=[...])                                  .validation_data = ...})
//
//   cifar10_cnn --data DIR        the real CIFAR-10 binary version (data_batch_*.bin, test_batch.bin)
//   cifar10_cnn --synthetic N     N generated records in the same binary format (the default, 5000)
//   options: --epochs E (10)  --limit N (first N training images)  --bn (BatchNormalization + Dropout)
//            --batch-size B (64)  --patience P (3)  --checkpoint FILE (cifar10_cnn.weights.safetensors)
//            --seed S (1)  --profile FILE (profile one more epoch: prints the profiler's table of
//            where the time went and writes its Chrome trace to FILE, for Perfetto)
//
// CIFAR-10 cannot be downloaded on every machine, so --synthetic writes files in exactly the
// format of the real ones (1 label byte + 3072 channel-planar pixel bytes per record) and reads
// them back through the same loader: every line below the loader runs as it would on real data.
// Prints the summary, Keras' progress lines, the test loss and accuracy, and the images/s of the
// input pipeline next to fit's. Exits with status 1 when the model learnt nothing (test accuracy
// not above chance).
#include <keel/keel.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace keel;
namespace fs = std::filesystem;

namespace {

struct Flags {
  std::string data_dir;           // the real data set
  std::int64_t synthetic = 5000;  // records to generate when no --data is given
  int epochs = 10;
  std::int64_t limit = -1;        // -1: every training image
  bool batch_norm = false;
  std::int64_t batch_size = 64;
  int patience = 3;
  std::string checkpoint = "cifar10_cnn.weights.safetensors";
  std::uint64_t seed = 1;
  std::string profile;  // --profile FILE: profile one more epoch, print the table, write the trace
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "cifar10_cnn: %s\n", error);
  std::fprintf(stderr,
               "usage: cifar10_cnn [--data DIR | --synthetic N] [--epochs E] [--limit N] [--bn]\n"
               "                   [--batch-size B] [--patience P] [--checkpoint FILE] [--seed S]\n"
               "                   [--profile TRACE.json]\n");
  std::exit(error ? 2 : 0);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // Every option but --bn and --help takes a value.
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      return argv[++i];
    };
    auto integer = [&]() -> std::int64_t {
      const std::string v = value();
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0) usage((arg + " needs a non-negative integer, got '" + v + "'").c_str());
      return n;
    };
    if (arg == "--data") f.data_dir = value();
    else if (arg == "--synthetic") f.synthetic = integer();
    else if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--limit") f.limit = integer();
    else if (arg == "--bn") f.batch_norm = true;
    else if (arg == "--profile") f.profile = value();
    else if (arg == "--batch-size") f.batch_size = integer();
    else if (arg == "--patience") f.patience = static_cast<int>(integer());
    else if (arg == "--checkpoint") f.checkpoint = value();
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  if (f.data_dir.empty() && f.synthetic < 10) usage("--synthetic needs at least 10 records");
  if (f.epochs < 1 || f.batch_size < 1) usage("--epochs and --batch-size must be at least 1");
  return f;
}

// ---- synthetic CIFAR-10 files -------------------------------------------------------------

// A folder under the system's temporary directory, removed with everything in it on scope exit.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& prefix) {
    path = fs::temp_directory_path() / (prefix + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw; a leftover temp folder is harmless
    fs::remove_all(path, ignored);
  }
};

// One record of the CIFAR-10 binary format: the label byte, then the 1024 red, 1024 green and
// 1024 blue bytes of the 32x32 image, row by row. Each class gets its own colour and stripe
// direction/frequency, blurred by a random phase, strong colour jitter and pixel noise, so that
// the classes overlap: like on the real data, the network learns quickly at first and then
// improves more slowly (test accuracy about 64% after 5 epochs of 2000 images, 90% after 5
// epochs of 4000), which gives EarlyStopping and the checkpoint something to do.
void write_record(std::ofstream& out, int label, std::mt19937& rng) {
  static constexpr float kColour[10][3] = {
      {0.9f, 0.2f, 0.2f}, {0.2f, 0.9f, 0.2f}, {0.2f, 0.2f, 0.9f}, {0.9f, 0.9f, 0.2f}, {0.9f, 0.2f, 0.9f},
      {0.2f, 0.9f, 0.9f}, {0.6f, 0.4f, 0.2f}, {0.3f, 0.3f, 0.6f}, {0.7f, 0.7f, 0.7f}, {0.4f, 0.6f, 0.4f}};
  constexpr float kPi = 3.14159265f;
  std::uniform_real_distribution<float> phase_dist(0.0f, 2 * kPi), jitter(-0.3f, 0.3f);
  std::normal_distribution<float> noise(0.0f, 0.25f);
  const float angle = kPi * static_cast<float>(label) / 10.0f;         // stripe direction
  const float frequency = 2.0f + static_cast<float>(label % 3);        // stripes per image
  const float phase = phase_dist(rng);
  const float dx = std::cos(angle), dy = std::sin(angle);
  float colour[3];
  for (int c = 0; c < 3; ++c) colour[c] = kColour[label][c] + jitter(rng);

  std::vector<unsigned char> record(1 + 3 * 1024);
  record[0] = static_cast<unsigned char>(label);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) {
      const float stripe = 0.5f + 0.5f * std::sin(2 * kPi * frequency * (dx * x + dy * y) / 32.0f + phase);
      for (int c = 0; c < 3; ++c) {
        const float v = std::clamp(0.55f * colour[c] + 0.45f * stripe + noise(rng), 0.0f, 1.0f);
        record[1 + c * 1024 + y * 32 + x] = static_cast<unsigned char>(std::lround(v * 255.0f));
      }
    }
  }
  out.write(reinterpret_cast<const char*>(record.data()), static_cast<std::streamsize>(record.size()));
}

// Writes data_batch_1.bin ... data_batch_5.bin (n records between them, labels cycling through
// the classes) and test_batch.bin (n / 5 records, at least 100) into dir.
void write_synthetic_cifar10(const fs::path& dir, std::int64_t n, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  auto write_file = [&](const std::string& name, std::int64_t count, std::int64_t first) {
    std::ofstream out(dir / name, std::ios::binary);
    for (std::int64_t i = 0; i < count; ++i) write_record(out, static_cast<int>((first + i) % 10), rng);
    if (!out) throw IOError("cifar10_cnn: could not write " + (dir / name).string());
  };
  std::int64_t written = 0;
  for (int b = 1; b <= 5; ++b) {
    const std::int64_t count = n * b / 5 - n * (b - 1) / 5;  // five nearly equal parts
    write_file("data_batch_" + std::to_string(b) + ".bin", count, written);
    written += count;
  }
  write_file("test_batch.bin", std::max<std::int64_t>(100, n / 5), 0);
}

// ---- the model ------------------------------------------------------------------------------

// The tutorial's network. The --bn variant normalises every convolution's output before its
// ReLU (so the convolution needs no bias) and drops half of the dense features during training:
// the usual first steps when the plain network starts to overfit. Its moving statistics use
// momentum 0.9 instead of Keras' 0.99 so that they settle within the few hundred steps of a
// short run (with 0.99, inference after 50 steps still normalises with the initial mean 0 and
// variance 1, and the validation accuracy stays near chance).
models::Sequential build_model(bool batch_norm) {
  models::Sequential model(std::vector<std::shared_ptr<layers::Layer>>{}, batch_norm ? "cifar10_cnn_bn" : "cifar10_cnn");
  model.add(layers::InputLayer({32, 32, 3}));
  for (int filters : {16, 32, 64}) {
    if (batch_norm) {
      model.add(layers::Conv2D(filters, 3, {.padding = "same", .use_bias = false}));
      model.add(layers::BatchNormalization({.momentum = 0.9}));
      model.add(layers::ReLU());
    } else {
      model.add(layers::Conv2D(filters, 3, {.padding = "same", .activation = "relu"}));
    }
    model.add(layers::MaxPooling2D(2));
  }
  model.add(layers::Flatten());
  model.add(layers::Dense(128, {.activation = "relu"}));
  if (batch_norm) model.add(layers::Dropout(0.5));
  model.add(layers::Dense(10));  // logits: the loss applies the softmax (from_logits = true)
  return model;
}

// uint8 [.., 32, 32, 3] -> float32 in [0, 1].
Tensor to_float(const Tensor& images) { return cast(images, DType::float32) * (1.0 / 255.0); }

// The augmentation of the classic CIFAR-10 recipes: pad 4 pixels on each side, cut a random
// 32x32 window back out (a shift of up to 4 pixels), then mirror half of the images.
std::pair<Tensor, Tensor> augment(const Tensor& image, const Tensor& label) {
  Tensor x = to_float(image);
  x = pad(x, {{4, 4}, {4, 4}, {0, 0}});
  x = data::image::random_crop(x, Shape{32, 32, 3});
  x = data::image::random_flip_left_right(x);
  return {x, label};
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> start(static_cast<std::size_t>(t.rank()), 0), size = t.shape().dims();
  start[0] = begin;
  size[0] = end - begin;
  return slice(t, start, size);
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);

  // ---- data ----
  std::unique_ptr<TempDir> synthetic_dir;
  std::string dir = flags.data_dir;
  if (dir.empty()) {
    synthetic_dir = std::make_unique<TempDir>("keel-cifar10-synthetic-");
    write_synthetic_cifar10(synthetic_dir->path, flags.synthetic, flags.seed);
    dir = synthetic_dir->path.string();
    std::printf("Wrote %lld synthetic records in the CIFAR-10 binary format to %s\n",
                static_cast<long long>(flags.synthetic), dir.c_str());
  }
  auto [x_all, y_all] = data::load_cifar10(dir, /*train=*/true);
  const auto [x_test_u8, y_test] = data::load_cifar10(dir, /*train=*/false);
  if (flags.limit > 0 && flags.limit < x_all.shape()[0]) {
    x_all = rows(x_all, 0, flags.limit);
    y_all = rows(y_all, 0, flags.limit);
  }
  // The last 10% of the training images are held out for EarlyStopping and the checkpoint, as
  // fit's validation_split would do (the test set stays untouched until the end).
  const std::int64_t n_all = x_all.shape()[0];
  const std::int64_t n_train = n_all - std::max<std::int64_t>(1, n_all / 10);
  if (n_train < 1) throw ValueError("cifar10_cnn: too few training images");
  const Tensor x_train = rows(x_all, 0, n_train), y_train = rows(y_all, 0, n_train);
  const Tensor x_val = to_float(rows(x_all, n_train, n_all)), y_val = rows(y_all, n_train, n_all);
  std::printf("train: %lld images, validation: %lld, test: %lld\n", static_cast<long long>(n_train),
              static_cast<long long>(n_all - n_train), static_cast<long long>(x_test_u8.shape()[0]));

  // Shuffle the raw uint8 images (a full-size buffer: a true permutation every epoch), augment
  // them on worker threads, batch, and let a background thread prepare the next batches while
  // the model trains on the current one.
  const auto train_ds = data::Dataset<>::from_tensor_slices(std::make_pair(x_train, y_train))
                            .shuffle(n_train)
                            .map(augment, data::AUTOTUNE)
                            .batch(flags.batch_size)
                            .prefetch(data::AUTOTUNE);

  // ---- model ----
  models::Sequential model = build_model(flags.batch_norm);
  model.summary();
  model.compile({.optimizer = optimizers::Adam(1e-3),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});

  // Stop when the validation loss has not improved for `patience` epochs and go back to the
  // best weights; keep the best weights on disk as well (a crash loses at most an epoch).
  callbacks::CallbackList cbs = {
      std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{
          .monitor = "val_loss", .patience = flags.patience, .verbose = 1, .restore_best_weights = true}),
      std::make_shared<callbacks::ModelCheckpoint>(
          flags.checkpoint, callbacks::ModelCheckpointOptions{.monitor = "val_loss", .verbose = 1,
                                                              .save_best_only = true, .save_weights_only = true}),
  };

  const auto start = std::chrono::steady_clock::now();
  const models::History history = model.fit(
      train_ds, {.epochs = flags.epochs, .callbacks = cbs, .validation_data = std::make_pair(x_val, y_val)});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // ---- test ----
  const auto results = model.evaluate(to_float(x_test_u8), y_test, {.batch_size = 256, .verbose = 0});
  const double test_accuracy = results.at("accuracy");
  std::printf("Trained %zu epochs in %.1f s; best weights saved to %s\n", history.epoch.size(), seconds,
              flags.checkpoint.c_str());
  std::printf("Test loss: %.4f\n", results.at("loss"));
  std::printf("Test accuracy: %.4f\n", test_accuracy);

  if (!flags.profile.empty()) {
    // One more epoch under the profiler: where a training step's time goes, by op and layer.
    profiler::start();
    model.fit(train_ds, {.epochs = 1, .verbose = 0});
    profiler::stop();
    std::printf("%s", profiler::key_averages_table(15).c_str());
    profiler::export_chrome_trace(flags.profile);
    std::printf("Profile of one epoch written to %s (open it in Perfetto or chrome://tracing)\n",
                flags.profile.c_str());
  }

  // The input pipeline alone (shuffle + augment + batch + prefetch), next to what fit() consumed:
  // the pipeline has to be the faster of the two, or training waits for data.
  const auto pipeline_start = std::chrono::steady_clock::now();
  std::int64_t images = 0;
  for (const auto& [xb, yb] : train_ds) images += xb.shape()[0];
  const double pipeline_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - pipeline_start).count();
  std::printf("Throughput: input pipeline %.0f images/s, fit %.0f images/s (%d threads)\n",
              static_cast<double>(images) / pipeline_seconds,
              static_cast<double>(n_train) * static_cast<double>(history.epoch.size()) / seconds,
              config::num_threads());
  if (!(test_accuracy > 0.1)) {
    std::fprintf(stderr, "cifar10_cnn: FAIL: the test accuracy is not above chance (0.1)\n");
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
    std::fprintf(stderr, "cifar10_cnn: %s\n", e.what());
    return 1;
  }
}
