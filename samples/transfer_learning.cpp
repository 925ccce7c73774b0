// Transfer learning on Fashion-MNIST, as Keras' "Transfer learning & fine-tuning" guide does it:
// a feature extractor is trained on five of the ten classes (T-shirt/top, Trouser, Pullover,
// Dress, Coat), frozen, and a new classifier head is trained on top of it for the other five
// (Sandal, Shirt, Sneaker, Bag, Ankle boot) from far fewer images.
//
//   Keras                                               keel
//   base = keras.Sequential([...])                      auto base = std::make_shared<models::Sequential>(...)
//   base.trainable = False                              base->set_trainable(false)
//   model = keras.Sequential([base, layers.Dense(5)])   models::Sequential model{base, layers::Dense(5)}
//   model.fit(x, y, epochs=...)                         model.fit(x, y, {.epochs = ...})
//
//   transfer_learning [--limit N (12000 pretraining images)] [--epochs E (3; fine-tuning runs 4 E)]
//                     [--finetune-images M (1000)] [--data DIR (the package's folder)] [--seed S (1)]
//
// Exits with status 1 when the fine-tuned head learnt nothing (test accuracy on the new classes
// at or below 60%) or when the frozen base changed during fine-tuning.
#include <keel/keel.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

using namespace keel;

namespace {

struct Flags {
  std::int64_t limit = 12000;
  int epochs = 3;
  std::int64_t finetune_images = 1000;
  std::string data_dir;  // empty: the loader's default (Debian's dataset-fashion-mnist package)
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "transfer_learning: %s\n", error);
  std::fprintf(stderr,
               "usage: transfer_learning [--limit N] [--epochs E] [--finetune-images M] [--data DIR] [--seed S]\n");
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
    else if (arg == "--finetune-images") f.finetune_images = integer();
    else if (arg == "--data") f.data_dir = value();
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  return f;
}

// The images (float32 in [0, 1]) and labels (int64, minus `first`) of the classes
// [first, first + 5), at most `max_rows` of them, in file order.
std::pair<Tensor, Tensor> classes(const Tensor& images, const Tensor& labels, int first, std::int64_t max_rows) {
  const auto all = cast(labels, DType::int64).to_vector<std::int64_t>();
  std::vector<std::int64_t> rows, picked;
  for (std::size_t i = 0; i < all.size() && static_cast<std::int64_t>(rows.size()) < max_rows; ++i) {
    if (all[i] < first || all[i] >= first + 5) continue;
    rows.push_back(static_cast<std::int64_t>(i));
    picked.push_back(all[i] - first);
  }
  const Tensor x = cast(gather(images, constant(rows), 0), DType::float32) * (1.0 / 255.0);
  return {x, constant(picked)};
}

// The feature extractor: 784 pixels -> 128 -> 64 features.
std::shared_ptr<models::Sequential> make_base() {
  return std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{28, 28}), std::make_shared<layers::Flatten>(),
      std::make_shared<layers::Dense>(128, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dense>(64, layers::DenseOptions{.activation = "relu", .name = "features"})});
}

double accuracy_of(models::Sequential& model, const Tensor& x, const Tensor& y) {
  return model.evaluate(x, y, {.batch_size = 256, .verbose = 0}).at("accuracy");
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);
  const auto load = [&](bool train) {
    return flags.data_dir.empty() ? data::load_fashion_mnist(train) : data::load_fashion_mnist(train, flags.data_dir);
  };
  const auto [train_images, train_labels] = load(true);
  const auto [test_images, test_labels] = load(false);
  // Classes 0-4 for pretraining, 5-9 (relabelled 0-4) for fine-tuning on fewer images.
  const auto [x_pre, y_pre] = classes(train_images, train_labels, 0, flags.limit);
  const auto [x_new, y_new] = classes(train_images, train_labels, 5, flags.finetune_images);
  const auto [xt_pre, yt_pre] = classes(test_images, test_labels, 0, 5000);
  const auto [xt_new, yt_new] = classes(test_images, test_labels, 5, 5000);
  std::printf("Pretraining on %lld images of classes 0-4, fine-tuning on %lld images of classes 5-9\n",
              static_cast<long long>(x_pre.shape()[0]), static_cast<long long>(x_new.shape()[0]));

  const auto loss = losses::SparseCategoricalCrossentropy({.from_logits = true});
  auto base = make_base();
  models::Sequential pretrain({base, std::make_shared<layers::Dense>(5)}, "pretrain");
  pretrain.compile({.optimizer = optimizers::Adam(1e-3), .loss = loss, .metrics = {"accuracy"}});
  pretrain.fit(x_pre, y_pre, {.batch_size = 64, .epochs = flags.epochs, .verbose = 2});
  std::printf("Pretrained accuracy on classes 0-4: %.4f\n", accuracy_of(pretrain, xt_pre, yt_pre));

  // Freeze the base (Keras: base.trainable = False) and train a new head on the new classes.
  base->set_trainable(false);
  models::Sequential finetune({base, std::make_shared<layers::Dense>(5)}, "finetune");
  const std::vector<Tensor> frozen_before = base->get_weights();
  // Only the head's 325 weights train: a larger learning rate and more (cheap) epochs.
  finetune.compile({.optimizer = optimizers::Adam(1e-2), .loss = loss, .metrics = {"accuracy"}});
  finetune.fit(x_new, y_new, {.batch_size = 32, .epochs = 4 * flags.epochs, .verbose = 2});
  finetune.summary();  // built by its first batch: the base's weights count as non-trainable
  const double accuracy = accuracy_of(finetune, xt_new, yt_new);
  std::printf("Fine-tuned accuracy on classes 5-9: %.4f\n", accuracy);

  const std::vector<Tensor> frozen_after = base->get_weights();
  for (std::size_t i = 0; i < frozen_after.size(); ++i)
    if (frozen_before[i].to_vector<float>() != frozen_after[i].to_vector<float>()) {
      std::fprintf(stderr, "transfer_learning: FAIL: frozen weight %zu of the base changed\n", i);
      return 1;
    }
  std::printf("Frozen base unchanged: yes\n");
  if (!(accuracy > 0.6)) {
    std::fprintf(stderr, "transfer_learning: FAIL: accuracy %.4f on the new classes: the head learnt nothing\n",
                 accuracy);
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
    std::fprintf(stderr, "transfer_learning: %s\n", e.what());
    return 1;
  }
}
