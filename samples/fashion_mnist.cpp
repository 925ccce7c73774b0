// A small convolutional network on Fashion-MNIST (70,000 28x28 grey images of clothes in 10
// classes), the data set of TensorFlow's "Basic classification" tutorial, read from the IDX files
// that Debian's dataset-fashion-mnist package installs (scripts/setup.sh installs it).
//
//   Keras                                              keel
//   (x, y), (xt, yt) = fashion_mnist.load_data()       data::load_fashion_mnist(true / false)
//   keras.Sequential([layers.Input((28, 28, 1)),       models::Sequential{layers::InputLayer({28, 28, 1}),
//                     layers.Conv2D(32, 3, ...), ...])                    layers::Conv2D(32, 3, {...}), ...}
//   model.compile(optimizer="adam", loss=..., ...)     model.compile({.optimizer = "adam", .loss = ..., ...})
//   model.fit(x, y, batch_size=64, epochs=5,           model.fit(x, y, {.batch_size = 64, .epochs = 5,
//             validation_split=0.1)                                 .validation_split = 0.1})
//   model.evaluate(xt, yt)                             model.evaluate(xt, yt)
//
//   fashion_mnist [--epochs E (5)] [--limit N (first N training images)] [--batch-size B (64)]
//                 [--data DIR (the package's folder)] [--seed S (1)]
//
// The full run (5 epochs of 60,000 images) reaches about 91% test accuracy. Exits with status 1
// when a full run stays below 90%, or when a shorter run learnt nothing (50% or less).
#include <keel/keel.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

using namespace keel;

namespace {

constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";  // Debian's package
constexpr double kTarget = 0.90;

const char* const kClassNames[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct Flags {
  int epochs = 5;
  std::int64_t limit = -1;  // -1: all 60,000 training images
  std::int64_t batch_size = 64;
  std::string data_dir = kDefaultDir;
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "fashion_mnist: %s\n", error);
  std::fprintf(stderr, "usage: fashion_mnist [--epochs E] [--limit N] [--batch-size B] [--data DIR] [--seed S]\n");
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
    if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--limit") f.limit = integer();
    else if (arg == "--batch-size") f.batch_size = integer();
    else if (arg == "--data") f.data_dir = value();
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  return f;
}

// uint8 [N, 28, 28] -> float32 [N, 28, 28, 1] in [0, 1]: Conv2D wants a channel axis.
Tensor prepare(const Tensor& images) {
  return reshape(cast(images, DType::float32) * (1.0 / 255.0), Shape{images.shape()[0], 28, 28, 1});
}

// Two convolution blocks (32 and 64 filters, 3x3 "same", ReLU, 2x2 max pooling: 28 -> 14 -> 7),
// then a 128-unit hidden layer with dropout and 10 logits. About 420k weights, most of them in the
// Dense(128) on the 7x7x64 features; the dropout keeps it from memorising the training set.
models::Sequential build_model() {
  return models::Sequential{
      layers::InputLayer({28, 28, 1}),
      layers::Conv2D(32, 3, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D(2),
      layers::Conv2D(64, 3, {.padding = "same", .activation = "relu"}),
      layers::MaxPooling2D(2),
      layers::Flatten(),
      layers::Dropout(0.3),
      layers::Dense(128, {.activation = "relu"}),
      layers::Dense(10),  // logits
  };
}

Tensor first_rows(const Tensor& t, std::int64_t n) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(t.rank()), 0), size = t.shape().dims();
  size[0] = n;
  return slice(t, begin, size);
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);

  if (!std::filesystem::exists(flags.data_dir)) {
    std::fprintf(stderr,
                 "fashion_mnist: %s does not exist. Fashion-MNIST comes with Debian's dataset-fashion-mnist\n"
                 "package: run `bash scripts/setup.sh` (or `sudo apt-get install dataset-fashion-mnist`),\n"
                 "or pass --data DIR with the four *-ubyte[.gz] files.\n",
                 flags.data_dir.c_str());
    return 1;
  }
  auto [x_train_u8, y_train] = data::load_fashion_mnist(/*train=*/true, flags.data_dir);
  const auto [x_test_u8, y_test] = data::load_fashion_mnist(/*train=*/false, flags.data_dir);
  if (flags.limit > 0 && flags.limit < x_train_u8.shape()[0]) {
    x_train_u8 = first_rows(x_train_u8, flags.limit);
    y_train = first_rows(y_train, flags.limit);
  }
  const Tensor x_train = prepare(x_train_u8), x_test = prepare(x_test_u8);
  std::printf("Fashion-MNIST: %lld training images, %lld test images, classes: ",
              static_cast<long long>(x_train.shape()[0]), static_cast<long long>(x_test.shape()[0]));
  for (int c = 0; c < 10; ++c) std::printf("%s%s", kClassNames[c], c < 9 ? ", " : "\n");

  models::Sequential model = build_model();
  model.summary();
  model.compile({.optimizer = optimizers::Adam(1e-3),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});

  const auto start = std::chrono::steady_clock::now();
  const models::History history =
      model.fit(x_train, y_train, {.batch_size = flags.batch_size, .epochs = flags.epochs, .validation_split = 0.1});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const auto results = model.evaluate(x_test, y_test, {.batch_size = 256, .verbose = 0});
  const double accuracy = results.at("accuracy");
  std::printf("Epochs: %zu, wall time: %.1f s (%.1f s per epoch, %d threads)\n", history.epoch.size(), seconds,
              seconds / static_cast<double>(history.epoch.size()), config::num_threads());
  std::printf("Test loss: %.4f\n", results.at("loss"));
  std::printf("Test accuracy: %.4f\n", accuracy);

  // The 90% promise is for the default run: every image, at least the default 5 epochs.
  const bool full_run = (flags.limit < 0 || flags.limit >= 60000) && flags.epochs >= Flags{}.epochs;
  if (full_run && accuracy < kTarget) {
    std::fprintf(stderr, "fashion_mnist: FAIL: test accuracy %.4f is below the %.2f target\n", accuracy, kTarget);
    return 1;
  }
  if (!full_run && !(accuracy > 0.5)) {
    std::fprintf(stderr, "fashion_mnist: FAIL: test accuracy %.4f: the model learnt nothing\n", accuracy);
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
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
