// Tapes are thread-local: two threads training their own models at the same time get bitwise the
// results they get alone.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

using namespace keel;

namespace {

struct Trained {
  std::vector<float> w;
  std::vector<float> b;
  float first_loss = 0;
  float last_loss = 0;
};

// Linear regression y = x w + b on fixed data, fixed initial weights, 50 SGD steps.
// `salt` makes the two models' data different. No Catch macros here: they are not thread-safe.
Trained train_linear_regression(int salt) {
  constexpr std::int64_t n = 32, features = 3;
  std::vector<float> xv(n * features), yv(n);
  const float true_w[features] = {1.5f, -2.0f, 0.5f + 0.25f * float(salt)};
  for (std::int64_t i = 0; i < n; ++i) {
    float y = 0.3f * float(salt) - 0.7f;  // true bias
    for (std::int64_t j = 0; j < features; ++j) {
      const float v = std::sin(0.37f * float(i * features + j) + float(salt));
      xv[static_cast<std::size_t>(i * features + j)] = v;
      y += v * true_w[j];
    }
    yv[static_cast<std::size_t>(i)] = y + 0.01f * std::cos(float(i));  // a little noise
  }
  const Tensor x = constant(xv, {n, features});
  const Tensor y = constant(yv, {n, 1});
  Variable w(constant({0.1f, -0.1f, 0.2f}, {features, 1}), "w");
  Variable b(zeros({1}), "b");
  const double learning_rate = 0.1;

  Trained out;
  for (int step = 0; step < 50; ++step) {
    GradientTape tape;
    const Tensor pred = matmul(x, w) + b;
    const Tensor loss = reduce_mean(square(pred - y));
    const auto grads = tape.gradient(loss, std::vector<Variable*>{&w, &b});
    w.assign_sub(grads[0] * learning_rate);
    b.assign_sub(grads[1] * learning_rate);
    if (step == 0) out.first_loss = loss.item<float>();
    out.last_loss = loss.item<float>();
  }
  out.w = w.value().to_vector<float>();
  out.b = b.value().to_vector<float>();
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

}  // namespace

TEST_CASE("two threads training with their own tapes get bitwise the single-thread results",
          "[concurrency][autograd]") {
  const Trained alone0 = train_linear_regression(0);
  const Trained alone1 = train_linear_regression(1);
  // the training did something
  CHECK(alone0.last_loss < alone0.first_loss * 0.5f);
  CHECK(alone1.last_loss < alone1.first_loss * 0.5f);
  CHECK_FALSE(bitwise_equal(alone0.w, alone1.w));

  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    Trained t0, t1;
    std::exception_ptr e0, e1;
    std::thread th0([&] {
      try {
        t0 = train_linear_regression(0);
      } catch (...) {
        e0 = std::current_exception();
      }
    });
    std::thread th1([&] {
      try {
        t1 = train_linear_regression(1);
      } catch (...) {
        e1 = std::current_exception();
      }
    });
    th0.join();
    th1.join();
    if (e0) std::rethrow_exception(e0);
    if (e1) std::rethrow_exception(e1);
    CHECK(bitwise_equal(t0.w, alone0.w));
    CHECK(bitwise_equal(t0.b, alone0.b));
    CHECK(bitwise_equal(t1.w, alone1.w));
    CHECK(bitwise_equal(t1.b, alone1.b));
    CHECK(t0.last_loss == alone0.last_loss);
    CHECK(t1.last_loss == alone1.last_loss);
  }
}

TEST_CASE("a tape on one thread does not record ops run on another thread",
          "[concurrency][autograd]") {
  const Tensor x = constant(3.0, DType::float64);
  GradientTape tape(true);
  tape.watch(x);
  Tensor from_other_thread;
  std::exception_ptr error;
  std::thread other([&] {
    try {
      from_other_thread = x * x;  // no tape is active on this thread
    } catch (...) {
      error = std::current_exception();
    }
  });
  other.join();
  if (error) std::rethrow_exception(error);
  CHECK(from_other_thread.item<double>() == 9.0);
  CHECK_FALSE(tape.gradient(from_other_thread, x).defined());
  const Tensor here = x * x;
  CHECK(tape.gradient(here, x).item<double>() == 6.0);
}

namespace {

// A model whose training draws random numbers at every step: shuffled batches and dropout.
std::shared_ptr<models::Sequential> dropout_model() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{4}),
      std::make_shared<layers::Dense>(16, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dropout>(0.5), std::make_shared<layers::Dense>(1)});
  m->compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
  return m;
}

std::vector<float> weights_of(models::Model& m) {
  std::vector<float> out;
  for (Variable* v : m.weights()) {
    const auto w = v->value().to_vector<float>();
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

}  // namespace

TEST_CASE("models shuffling and dropping out in two threads get the results they get alone", "[concurrency][random]") {
  random::set_seed(11);
  const Tensor x = random::normal({64, 4}), y = random::normal({64, 1});
  const models::FitOptions o{.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = true};

  // Alone, one after the other: each model draws from its own stream.
  random::set_seed(7);
  auto a1 = dropout_model(), b1 = dropout_model();
  a1->fit(x, y, o);
  b1->fit(x, y, o);

  // The same models (same seed, same creation order) trained at the same time; the global
  // generator is also drawn from meanwhile, which must not matter.
  random::set_seed(7);
  auto a2 = dropout_model(), b2 = dropout_model();
  std::exception_ptr error;
  std::thread ta([&] {
    try {
      a2->fit(x, y, o);
    } catch (...) {
      error = std::current_exception();
    }
  });
  std::thread tb([&] {
    try {
      b2->fit(x, y, o);
    } catch (...) {
      error = std::current_exception();
    }
  });
  for (int i = 0; i < 50; ++i) (void)random::uniform({16});
  ta.join();
  tb.join();
  if (error) std::rethrow_exception(error);
  CHECK(weights_of(*a2) == weights_of(*a1));
  CHECK(weights_of(*b2) == weights_of(*b1));
  CHECK(weights_of(*a1) != weights_of(*b1));  // two streams, two different runs
}

TEST_CASE("fit's seed makes a run repeat whatever the global seed", "[random]") {
  random::set_seed(1);
  const Tensor x = random::normal({32, 4}), y = random::normal({32, 1});
  auto a = dropout_model();
  random::set_seed(2);
  auto b = dropout_model();
  for (std::size_t i = 0; i < a->weights().size(); ++i) b->weights()[i]->assign(a->weights()[i]->value());
  models::FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = true};
  o.seed = 5;
  a->fit(x, y, o);
  b->fit(x, y, o);
  CHECK(weights_of(*a) == weights_of(*b));
  // without it, the two streams (from seeds 1 and 2) shuffle and drop out differently
  auto c = dropout_model();
  for (std::size_t i = 0; i < a->weights().size(); ++i) c->weights()[i]->assign(b->weights()[i]->value());
  auto d = dropout_model();
  for (std::size_t i = 0; i < a->weights().size(); ++i) d->weights()[i]->assign(b->weights()[i]->value());
  o.seed.reset();
  c->fit(x, y, o);
  d->fit(x, y, o);
  CHECK(weights_of(*c) != weights_of(*d));
}
