// Model::fit, evaluate and predict trace their steps by default (run_eagerly = false), as
// Keras traces train_step: the same History as eager execution, C++ code in layers running
// only while tracing (once per batch shape), and run_eagerly = true giving the op-by-op loop.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

using namespace keel;

namespace {

// Counts its call()s: traced, C++ code runs only while a step traces.
class CountingScale : public layers::Layer {
 public:
  KEEL_LAYER_BOILERPLATE(CountingScale)
  int calls = 0;
  void build(const Shape& s) override { w_ = &add_weight("w", Shape{s[s.rank() - 1]}, "ones"); }
  Tensor call(const Tensor& x, bool) override {
    ++calls;
    return x * w_->value();
  }

 private:
  Variable* w_ = nullptr;
};

struct Run {
  models::History history;
  std::map<std::string, double> evaluated;
  std::vector<float> predicted;
  int calls = 0;
};

// A small classifier (dense, dropout, batch norm: every kind of state a step touches) trained
// from one seed, eagerly or traced.
Run train_classifier(bool run_eagerly) {
  random::set_seed(7);
  const Tensor x = random::normal({100, 6});
  const Tensor y = random::uniform_int({100}, 0, 3, DType::int64);
  auto counting = std::make_shared<CountingScale>();
  models::Sequential model;
  model.add(layers::InputLayer(Shape{6}));
  model.add(layers::Dense(16, {.activation = "relu"}));
  model.add(layers::Dropout(0.2));
  model.add(layers::BatchNormalization());
  model.add(counting);
  model.add(layers::Dense(3));
  model.compile({.optimizer = optimizers::Adam(0.01),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"},
                 .run_eagerly = run_eagerly});
  Run r;
  r.history = model.fit(x, y, {.batch_size = 32, .epochs = 3, .verbose = 0, .seed = 11});
  r.evaluated = model.evaluate(x, y, {.batch_size = 32, .verbose = 0});
  r.predicted = model.predict(x, {.batch_size = 32, .verbose = 0}).to_vector<float>();
  r.calls = counting->calls;
  return r;
}

}  // namespace

TEST_CASE("fit traced gives eager's History, evaluation and predictions", "[function][training]") {
  const Run eager = train_classifier(true);
  const Run traced = train_classifier(false);
  REQUIRE(eager.history.history.size() == traced.history.history.size());
  for (const auto& [key, values] : eager.history.history) {
    const auto& got = traced.history.history.at(key);
    REQUIRE(got.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) CHECK(got[i] == Approx(values[i]).epsilon(1e-5));
  }
  for (const auto& [key, value] : eager.evaluated) CHECK(traced.evaluated.at(key) == Approx(value).epsilon(1e-5));
  REQUIRE(eager.predicted.size() == traced.predicted.size());
  for (std::size_t i = 0; i < eager.predicted.size(); ++i)
    CHECK(traced.predicted[i] == Approx(eager.predicted[i]).epsilon(1e-5).margin(1e-6));
  // Eagerly the layer runs for each of the 4 batches of 3 epochs, of evaluate and of predict.
  // Traced (with reduce_retracing, as Keras 3 traces its steps), per step kind (train, test,
  // predict): once for batch 32, and for the last batch of 4 the trace that relaxes the batch to
  // -1 with its dry traces at batch 2, 3 and 5 that fit the sizes. Both also run it while the
  // model builds (the same number of times).
  const int building = eager.calls - (3 * 4 + 4 + 4);
  CHECK(building >= 0);
  CHECK(traced.calls == building + 3 * (1 + 4));
}

TEST_CASE("after the batch is relaxed to -1, other batch sizes replay without tracing", "[function][training]") {
  random::set_seed(5);
  const Tensor x = random::normal({50, 4});
  const Tensor y = random::normal({50, 1});
  auto counting = std::make_shared<CountingScale>();
  models::Sequential model;
  model.add(layers::InputLayer(Shape{4}));
  model.add(counting);
  model.add(layers::Dense(1));
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  model.fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0});  // batches of 16 and a last of 2
  const auto first = model.evaluate(x, y, {.batch_size = 16, .verbose = 0});
  const int calls = counting->calls;
  // Batches of 7 and a last of 1: the relaxed graphs, no trace (the layer's C++ code stays put).
  const auto again = model.evaluate(x, y, {.batch_size = 7, .verbose = 0});
  CHECK(counting->calls == calls);
  CHECK(again.at("loss") == Approx(first.at("loss")).epsilon(1e-5));
  // predict's steps: a trace at 9, the relaxing one at the last 5 (and its 3 dry traces); then
  // batches of 4 and a last of 2 replay.
  const Tensor p9 = model.predict(x, {.batch_size = 9, .verbose = 0});
  CHECK(counting->calls == calls + 5);
  const Tensor p4 = model.predict(x, {.batch_size = 4, .verbose = 0});
  CHECK(counting->calls == calls + 5);
  const auto a = p4.to_vector<float>(), b = p9.to_vector<float>();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("a step that cannot be traced runs eagerly with the same results", "[function][training]") {
  // A layer reading a value on the host cannot be traced: fit warns and runs it eagerly.
  class HostRead : public layers::Layer {
   public:
    KEEL_LAYER_BOILERPLATE(HostRead)
    Tensor call(const Tensor& x, bool) override { return x * (reduce_max(x).item<float>() > 1e9f ? 0.0 : 1.0); }
  };
  auto fit_once = [](bool run_eagerly) {
    random::set_seed(3);
    const Tensor x = random::normal({40, 4});
    const Tensor y = random::normal({40, 1});
    models::Sequential model;
    model.add(layers::InputLayer(Shape{4}));
    model.add(std::make_shared<HostRead>());
    model.add(layers::Dense(1));
    model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse", .run_eagerly = run_eagerly});
    return model.fit(x, y, {.batch_size = 10, .epochs = 2, .verbose = 0, .seed = 1}).history.at("loss");
  };
  const auto eager = fit_once(true);
  const auto fallback = fit_once(false);
  REQUIRE(eager.size() == fallback.size());
  for (std::size_t i = 0; i < eager.size(); ++i) CHECK(fallback[i] == Approx(eager[i]).epsilon(1e-6));
}
