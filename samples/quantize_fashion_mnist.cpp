// Post-training quantization of the Fashion-MNIST CNN (samples/fashion_mnist's model), as
// TFLite's "post-training integer quantization" guide does it: train a float32 model, quantize
// it (int8 with dynamic ranges, int8 calibrated on 500 training images, float16 weights), and
// compare test accuracy, file size and one-thread inference time at batch 1 and 64.
//
//   TFLite / PyTorch                                        keel
//   converter.optimizations = [tf.lite.Optimize.DEFAULT]    quantization::quantize(model)
//   converter.representative_dataset = ...                  quantize(model, {.activations = "static"}, x_cal)
//   converter.target_spec.supported_types = [tf.float16]    quantize(model, {.dtype = "float16"})
//
//   quantize_fashion_mnist [--limit N (12000 training images)] [--epochs E (2)] [--data DIR]
//
// Exits with status 1 when int8 (dynamic or static) loses more than 1 accuracy point, or its
// model file is not at least 3.5x smaller than the float32 one. The speed-ups are printed.
#include <keel/keel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

using namespace keel;
namespace fs = std::filesystem;

namespace {

struct Flags {
  std::int64_t limit = 12000;
  int epochs = 2;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "quantize_fashion_mnist: %s\n", error);
  std::fprintf(stderr, "usage: quantize_fashion_mnist [--limit N] [--epochs E] [--data DIR]\n");
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
  size[0] = std::min(n, size[0]);
  return slice(t, begin, size);
}

double accuracy(models::Model& model, const Tensor& x, const Tensor& y) {
  const Tensor logits = model.predict(x, {.batch_size = 256, .verbose = 0});
  const auto pred = argmax(logits, -1).to_vector<std::int64_t>();
  const auto truth = y.to_vector<std::int64_t>();
  std::int64_t right = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) right += pred[i] == truth[i] ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(pred.size());
}

// The median time of one forward pass over `x` (the model called directly, no predict loop).
double median_ms(models::Model& model, const Tensor& x, int runs) {
  (void)model(x, false);
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)model(x, false);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int run(const Flags& flags) {
  random::set_seed(1);
  if (!fs::exists(flags.data_dir)) {
    std::fprintf(stderr, "quantize_fashion_mnist: %s does not exist (Debian's dataset-fashion-mnist package; "
                         "see scripts/setup.sh) or pass --data DIR\n", flags.data_dir.c_str());
    return 1;
  }
  auto [x_train_u8, y_train] = data::load_fashion_mnist(true, flags.data_dir);
  const auto [x_test_u8, y_test] = data::load_fashion_mnist(false, flags.data_dir);
  const Tensor x_train = prepare(first_rows(x_train_u8, flags.limit)), x_test = prepare(x_test_u8);
  y_train = first_rows(y_train, flags.limit);

  models::Sequential model{
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
  model.compile({.optimizer = "adam",
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
  std::printf("training on %lld images, %d epochs\n", static_cast<long long>(x_train.shape()[0]), flags.epochs);
  model.fit(x_train, y_train, {.batch_size = 64, .epochs = flags.epochs, .verbose = 2});

  const Tensor calibration = first_rows(x_train, 500);
  struct Variant {
    const char* name;
    std::shared_ptr<models::Model> model;
  };
  std::vector<Variant> variants = {
      {"int8 dynamic", quantization::quantize(model)},
      {"int8 static", quantization::quantize(model, {.activations = "static"}, calibration)},
      {"float16", quantization::quantize(model, {.dtype = "float16"})},
  };

  const fs::path dir = fs::temp_directory_path() / "keel_quantize_fashion_mnist";
  fs::create_directories(dir);
  const auto file_size = [&](models::Model& m, const std::string& name) {
    const std::string path = (dir / (name + ".keel")).string();
    m.save(path);
    return static_cast<double>(fs::file_size(path));
  };
  // Files without optimizer state, as TFLite's flatbuffers hold none.
  auto float_export = models::clone_model(model);
  float_export->set_weights(model.get_weights());
  const double float_bytes = file_size(*float_export, "float32");
  const double float_acc = accuracy(model, x_test, y_test);

  const int threads = config::num_threads();
  config::set_num_threads(1);
  const Tensor one = first_rows(x_test, 1), batch = first_rows(x_test, 64);
  const double float_ms1 = median_ms(model, one, 200), float_ms64 = median_ms(model, batch, 30);
  std::printf("\n%-13s %9s %12s %10s %12s %10s %12s\n", "model", "accuracy", "file bytes", "smaller", "batch 1 ms",
              "speed-up", "batch 64 ms");
  std::printf("%-13s %9.4f %12.0f %10s %12.3f %10s %12.3f\n", "float32", float_acc, float_bytes, "-", float_ms1, "-",
              float_ms64);
  bool ok = true;
  for (Variant& v : variants) {
    const double acc = accuracy(*v.model, x_test, y_test);
    const double bytes = file_size(*v.model, v.name[0] == 'i' ? std::string("int8_") + v.name[5] : "float16");
    const double ms1 = median_ms(*v.model, one, 200), ms64 = median_ms(*v.model, batch, 30);
    std::printf("%-13s %9.4f %12.0f %9.2fx %12.3f %9.2fx %12.3f (%.2fx)\n", v.name, acc, bytes, float_bytes / bytes,
                ms1, float_ms1 / ms1, ms64, float_ms64 / ms64);
    if (v.name[0] == 'i' && (float_acc - acc > 0.01 || float_bytes / bytes < 3.5)) ok = false;
  }
  config::set_num_threads(threads);
  std::printf("int8 kernels: %s\n", quantization::int8_kernel_level().c_str());
  if (!ok) std::printf("below target: int8 within 1 accuracy point and >= 3.5x smaller\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_flags(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantize_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
