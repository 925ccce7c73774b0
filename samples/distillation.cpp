// Knowledge distillation, after the Keras guide "Knowledge Distillation": a large teacher is
// trained normally; then a small student learns from the labels AND from the teacher's softened
// predictions, through a Distiller model that overrides train_step and test_step ("customising
// what happens in fit"). A student of the same size trained from scratch is the comparison.
//
//   Keras                                                keel
//   class Distiller(keras.Model):                        class Distiller : public models::Model
//     def train_step(self, data):                          std::map<std::string, double>
//                                                          train_step(x, y, sample_weight) override
//       with tf.GradientTape() as tape:                      GradientTape tape;
//       grads = tape.gradient(loss, trainable_vars)          tape.gradient(loss, student->trainable_weights())
//       self.optimizer.apply_gradients(zip(grads, vars))     optimizer()->apply(grads, vars)
//   distiller.compile(optimizer, metrics,                distiller.compile({.optimizer = ..., .metrics = ...,
//       student_loss_fn, distillation_loss_fn,                              .student_loss_fn = ..., .alpha = 0.1,
//       alpha=0.1, temperature=10)                                          .temperature = 10})
//
//   distillation [--limit N (10000 training images)] [--epochs E (3)] [--synthetic] [--seed S]
//
// Data: the first N Fashion-MNIST training images and the whole test set (Debian's
// dataset-fashion-mnist); without the package, or with --synthetic, a generated 10-class image
// set (class-dependent stripes plus noise) of the same shape. Exits with status 1 when the
// distilled student learnt nothing.
#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <numbers>
#include <memory>
#include <string>
#include <vector>

using namespace keel;

namespace {

struct Flags {
  std::int64_t limit = 10000;
  int epochs = 3;
  bool synthetic = false;
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const char* error) {
  if (error) std::fprintf(stderr, "distillation: %s\n", error);
  std::fprintf(stderr, "usage: distillation [--limit N] [--epochs E] [--synthetic] [--seed S]\n");
  std::exit(error ? 2 : 0);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto integer = [&]() -> std::int64_t {
      if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
      const std::string v = argv[++i];
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) usage((arg + " needs a positive integer, got '" + v + "'").c_str());
      return n;
    };
    if (arg == "--limit") f.limit = integer();
    else if (arg == "--epochs") f.epochs = static_cast<int>(integer());
    else if (arg == "--synthetic") f.synthetic = true;
    else if (arg == "--seed") f.seed = static_cast<std::uint64_t>(integer());
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option " + arg).c_str());
  }
  return f;
}

// ---- the Distiller ----------------------------------------------------------------------------

struct DistillerCompileOptions {
  optimizers::OptimizerRef optimizer = "adam";
  std::vector<metrics::MetricRef> metrics = {};
  std::shared_ptr<losses::Loss> student_loss_fn;       // on the labels (hard targets)
  std::shared_ptr<losses::Loss> distillation_loss_fn;  // between the softened distributions
  double alpha = 0.1;        // the weight of the student loss; 1 - alpha weighs the distillation
  double temperature = 3.0;  // > 1 flattens the distributions, so the small probabilities count
};

class Distiller : public models::Model {
 public:
  // The teacher is only read (never trained here), so it is not tracked: the Distiller's weights
  // are the student's, which is what trainable_weights(), save_weights() and summary() see.
  Distiller(std::shared_ptr<models::Model> student, std::shared_ptr<models::Model> teacher)
      : Model("distiller"), teacher_(std::move(teacher)) {
    student_ = track(std::move(student));
  }
  using Model::call;
  using Model::compile;

  void compile(DistillerCompileOptions o) {
    Model::compile({.optimizer = std::move(o.optimizer), .metrics = std::move(o.metrics)});
    student_loss_fn_ = std::move(o.student_loss_fn);
    distillation_loss_fn_ = std::move(o.distillation_loss_fn);
    alpha_ = o.alpha;
    temperature_ = o.temperature;
  }

  // Inference is the student's.
  Tensor call(const Tensor& x, bool training) override { return (*student_)(x, training); }

  std::map<std::string, double> train_step(const Tensor& x, const Tensor& y, const Tensor&) override {
    // The teacher runs in inference mode and outside the tape: it is a fixed target.
    const Tensor teacher_predictions = (*teacher_)(x, false);
    Tensor student_predictions, student_loss, distillation_loss, loss;
    std::vector<Tensor> grads;
    std::vector<Variable*> vars;
    {
      GradientTape tape;
      student_predictions = (*student_)(x, true);
      // After the forward pass: an unbuilt student creates its weights in its first call.
      vars = student_->trainable_weights();
      student_loss = (*student_loss_fn_)(y, student_predictions);
      // KL(teacher || student) between the temperature-softened distributions. Its gradients
      // shrink as 1/T^2, so it is scaled by T^2 to keep its weight independent of T (Hinton et
      // al., "Distilling the Knowledge in a Neural Network").
      distillation_loss = (*distillation_loss_fn_)(softmax(teacher_predictions / temperature_, 1),
                                                   softmax(student_predictions / temperature_, 1)) *
                          (temperature_ * temperature_);
      loss = student_loss * alpha_ + distillation_loss * (1 - alpha_);
      grads = tape.gradient(loss, vars);
    }
    optimizer()->apply(grads, vars);
    track_loss(loss, x);
    update_metrics(y, student_predictions);
    auto results = metrics_results();
    results["student_loss"] = student_loss.item<double>();
    results["distillation_loss"] = distillation_loss.item<double>();
    return results;
  }

  std::map<std::string, double> test_step(const Tensor& x, const Tensor& y, const Tensor&) override {
    const Tensor y_prediction = (*student_)(x, false);
    const Tensor student_loss = (*student_loss_fn_)(y, y_prediction);
    track_loss(student_loss, x);
    update_metrics(y, y_prediction);
    auto results = metrics_results();
    results["student_loss"] = student_loss.item<double>();
    return results;
  }

 private:
  // The running mean of the loss that fit() and evaluate() report as "loss", weighted by batch
  // size like the built-in steps.
  void track_loss(const Tensor& loss, const Tensor& x) {
    const auto batch = static_cast<double>(x.shape()[0]);
    loss_sum_ += loss.item<double>() * batch;
    loss_count_ += batch;
  }
  void update_metrics(const Tensor& y, const Tensor& y_pred) {
    resolve_metrics(y, y_pred);  // "accuracy" becomes sparse categorical accuracy from the shapes
    for (auto& m : metrics()) m->update_state(y, y_pred);
  }

  std::shared_ptr<models::Model> student_, teacher_;
  std::shared_ptr<losses::Loss> student_loss_fn_, distillation_loss_fn_;
  double alpha_ = 0.1, temperature_ = 3.0;
};

// ---- the networks (the guide's, scaled down for a CPU) -------------------------------------------

// The teacher: wide convolutions with strides (28 -> 14 -> 7), LeakyReLU, 10 logits.
std::shared_ptr<models::Sequential> make_teacher() {
  return std::make_shared<models::Sequential>(std::initializer_list<layers::LayerRef>{
      layers::InputLayer({28, 28, 1}),
      layers::Conv2D(64, 3, {.strides = {2, 2}, .padding = "same"}),
      layers::LeakyReLU({.negative_slope = 0.2}),
      layers::MaxPooling2D(2, {.strides = 1, .padding = "same"}),
      layers::Conv2D(128, 3, {.strides = {2, 2}, .padding = "same"}),
      layers::Flatten(),
      layers::Dense(10),
  }, "teacher");
}

// The student: the same shape with a quarter of the filters (about 16x fewer weights per conv).
std::shared_ptr<models::Sequential> make_student(const std::string& name) {
  return std::make_shared<models::Sequential>(std::initializer_list<layers::LayerRef>{
      layers::InputLayer({28, 28, 1}),
      layers::Conv2D(16, 3, {.strides = {2, 2}, .padding = "same"}),
      layers::LeakyReLU({.negative_slope = 0.2}),
      layers::MaxPooling2D(2, {.strides = 1, .padding = "same"}),
      layers::Conv2D(32, 3, {.strides = {2, 2}, .padding = "same"}),
      layers::Flatten(),
      layers::Dense(10),
  }, name);
}

// ---- data ----------------------------------------------------------------------------------------

// A 10-class stand-in for Fashion-MNIST: class c has stripes at angle c * 18 degrees with a random
// phase on a background of brightness 0.06 c, under Gaussian pixel noise. x float32
// [n, 28, 28, 1] in [0, 1], y int64 [n].
std::pair<Tensor, Tensor> synthetic_images(std::int64_t n) {
  const Tensor labels = cast(random::uniform({n}, 0, 10), DType::int64);
  const Tensor angle = cast(labels, DType::float32) * static_cast<float>(std::numbers::pi / 10);
  const Tensor phase = random::uniform({n, 1, 1}, 0, 2 * std::numbers::pi);
  const Tensor coords = arange(0, 28);
  const Tensor rows = reshape(coords, Shape{1, 28, 1}), cols = reshape(coords, Shape{1, 1, 28});
  const Tensor dx = reshape(cos(angle), Shape{n, 1, 1}), dy = reshape(sin(angle), Shape{n, 1, 1});
  const Tensor wave = sin((cols * dx + rows * dy) * static_cast<float>(2 * std::numbers::pi * 3 / 28) + phase);
  const Tensor level = reshape(cast(labels, DType::float32) * 0.06f, Shape{n, 1, 1});
  const Tensor images = clip_by_value(wave * 0.2 + 0.25 + level + random::normal({n, 28, 28}, 0, 0.1), 0, 1);
  return {reshape(images, Shape{n, 28, 28, 1}), labels};
}

Tensor first_rows(const Tensor& t, std::int64_t n) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(t.rank()), 0), size = t.shape().dims();
  size[0] = std::min(n, size[0]);
  return slice(t, begin, size);
}

Tensor prepare(const Tensor& images) {
  return reshape(cast(images, DType::float32) * (1.0 / 255.0), Shape{images.shape()[0], 28, 28, 1});
}

int run(const Flags& flags) {
  random::set_seed(flags.seed);
  const std::string fashion_dir = "/usr/share/datasets/fashion-mnist";  // Debian's package
  Tensor x_train, y_train, x_test, y_test;
  if (!flags.synthetic && std::filesystem::exists(fashion_dir)) {
    const auto [xtr, ytr] = data::load_fashion_mnist(true, fashion_dir);
    const auto [xte, yte] = data::load_fashion_mnist(false, fashion_dir);
    x_train = prepare(first_rows(xtr, flags.limit));
    y_train = first_rows(ytr, flags.limit);
    x_test = prepare(xte);
    y_test = yte;
    std::printf("Data: Fashion-MNIST, %lld training and %lld test images\n",
                static_cast<long long>(x_train.shape()[0]), static_cast<long long>(x_test.shape()[0]));
  } else {
    std::tie(x_train, y_train) = synthetic_images(flags.limit);
    std::tie(x_test, y_test) = synthetic_images(std::max<std::int64_t>(500, flags.limit / 5));
    std::printf("Data: synthetic stripes, %lld training and %lld test images%s\n",
                static_cast<long long>(x_train.shape()[0]), static_cast<long long>(x_test.shape()[0]),
                flags.synthetic ? "" : " (dataset-fashion-mnist is not installed)");
  }
  const models::FitOptions fit_options{.batch_size = 64, .epochs = flags.epochs, .verbose = 2};
  auto scc = [] { return losses::SparseCategoricalCrossentropy({.from_logits = true}); };

  // 1. The teacher, trained as usual.
  auto teacher = make_teacher();
  teacher->summary();
  teacher->compile({.optimizer = optimizers::Adam(1e-3), .loss = scc(), .metrics = {"accuracy"}});
  std::printf("\nTraining the teacher:\n");
  teacher->fit(x_train, y_train, fit_options);
  const double teacher_accuracy = teacher->evaluate(x_test, y_test, {.verbose = 0}).at("accuracy");

  // 2. The student, distilled from the teacher.
  auto student = make_student("student");
  student->summary();
  Distiller distiller(student, teacher);
  distiller.compile(DistillerCompileOptions{
      .optimizer = optimizers::Adam(1e-3),
      .metrics = {"accuracy"},
      .student_loss_fn = std::make_shared<losses::SparseCategoricalCrossentropy>(
          losses::SparseCategoricalCrossentropyOptions{.from_logits = true}),
      .distillation_loss_fn = std::make_shared<losses::KLDivergence>(),
      .alpha = 0.1,
      .temperature = 10,
  });
  std::printf("\nDistilling the teacher into the student:\n");
  distiller.fit(x_train, y_train, fit_options);
  const double distilled_accuracy = distiller.evaluate(x_test, y_test, {.verbose = 0}).at("accuracy");

  // 3. The same student trained from scratch on the labels alone, for comparison.
  auto scratch = make_student("student_scratch");
  scratch->compile({.optimizer = optimizers::Adam(1e-3), .loss = scc(), .metrics = {"accuracy"}});
  std::printf("\nTraining the student from scratch:\n");
  scratch->fit(x_train, y_train, fit_options);
  const double scratch_accuracy = scratch->evaluate(x_test, y_test, {.verbose = 0}).at("accuracy");

  std::printf("\nTest accuracy: teacher %.4f, distilled student %.4f, student from scratch %.4f\n",
              teacher_accuracy, distilled_accuracy, scratch_accuracy);
  std::printf("Student accuracy: %.4f\n", distilled_accuracy);
  if (!(distilled_accuracy > 0.3)) {
    std::fprintf(stderr, "distillation: FAIL: the distilled student learnt nothing\n");
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
    std::fprintf(stderr, "distillation: %s\n", e.what());
    return 1;
  }
}
