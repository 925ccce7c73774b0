// Training: compile / fit / evaluate / predict, History, train_step overrides and callbacks,
// checked number for number against hand-computed steps.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "training_fixtures.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <sstream>

using namespace keel;
using keel_test::kX;
using keel_test::kY;
using keel_test::linear_model;
using keel_test::temp_path;
using Catch::Matchers::Contains;

TEST_CASE("one fit step matches the hand-computed SGD update", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  // y_pred = [1, 2]; mse = ((1-2)^2 + (2-4)^2) / 2 = 2.5
  // dL/dw = mean(2 (y_pred - y) x) = (2*(-1)*1 + 2*(-2)*2) / 2 = -5; dL/db = (-2 - 4) / 2 = -3
  // SGD: w = 1 - 0.1*(-5) = 1.5, b = 0 - 0.1*(-3) = 0.3
  const auto history = model.fit(kX, kY, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  REQUIRE(history.history.at("loss").size() == 1);
  CHECK(history.history.at("loss")[0] == Approx(2.5));
  const auto w = model.trainable_weights();
  CHECK(w[0]->value().item<float>() == Approx(1.5f));
  CHECK(w[1]->value().item<float>() == Approx(0.3f));
}

TEST_CASE("the epoch loss is the batch-size weighted mean of the batch losses", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  // lr 0: weights stay, batches of 1: losses (1-2)^2 = 1 and (2-4)^2 = 4, mean 2.5
  const auto h = model.fit(kX, kY, {.batch_size = 1, .epochs = 2, .verbose = 0, .shuffle = false});
  CHECK(h.history.at("loss") == std::vector<double>{2.5, 2.5});
  CHECK(h.epoch == std::vector<int>{0, 1});
}

TEST_CASE("evaluate and predict run in inference mode and return Keras' values", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = "sgd", .loss = "mse", .metrics = {"mae"}});
  const auto r = model.evaluate(kX, kY, {.batch_size = 1, .verbose = 0});
  CHECK(r.at("loss") == Approx(2.5));
  CHECK(r.at("mae") == Approx(1.5));  // (|1-2| + |2-4|) / 2
  const Tensor p = model.predict(constant({3.f, 4.f, 5.f}, {3, 1}), {.batch_size = 2});
  CHECK(p.shape() == Shape{3, 1});
  CHECK(p.to_vector<float>() == std::vector<float>{3.f, 4.f, 5.f});
}

TEST_CASE("validation data and validation_split add val_ entries to History", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {4, 1});
  const Tensor y = constant({1.f, 2.f, 3.f, 8.f}, {4, 1});
  // the last quarter (x = 4, y = 8) is held out: val_loss = (4 - 8)^2 = 16, train loss 0
  const auto h = model.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0, .validation_split = 0.25});
  CHECK(h.history.at("loss")[0] == Approx(0.0));
  CHECK(h.history.at("val_loss")[0] == Approx(16.0));
  const auto h2 = model.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0,
                                   .validation_data = std::make_pair(kX, kY)});
  CHECK(h2.history.at("val_loss")[0] == Approx(2.5));
}

TEST_CASE("fit learns a classification task and reports accuracy", "[training]") {
  random::set_seed(7);
  // Two well separated blobs: class 0 around (-2, -2), class 1 around (2, 2).
  const Tensor noise = random::normal({200, 2}, 0, 0.5);
  const Tensor centers = concat({full({100, 2}, -2.0), full({100, 2}, 2.0)}, 0);
  const Tensor x = centers + noise;
  const Tensor y = concat({zeros({100}, DType::int64), ones({100}, DType::int64)}, 0);
  models::Sequential model{layers::InputLayer({2}), layers::Dense(8, {.activation = "relu"}), layers::Dense(2)};
  model.compile({.optimizer = optimizers::Adam(0.05),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
  const auto h = model.fit(x, y, {.batch_size = 32, .epochs = 10, .verbose = 0});
  CHECK(h.history.at("accuracy").back() > 0.95);
  CHECK(h.history.at("loss").back() < h.history.at("loss").front());
  CHECK(model.evaluate(x, y, {.verbose = 0}).at("accuracy") > 0.95);
}

TEST_CASE("shuffled training with the same seed gives the same weights", "[training]") {
  auto run = [] {
    random::set_seed(42);
    auto model = linear_model();
    model.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
    const Tensor x = reshape(arange(8), {8, 1});
    model.fit(x, x * 2.0 + 1.0, {.batch_size = 3, .epochs = 3, .verbose = 0, .shuffle = true});
    return model.trainable_weights()[0]->value().item<float>();
  };
  CHECK(run() == run());
}

TEST_CASE("sample_weight and class_weight weight the loss per sample", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  // weights [1, 0]: (1*1 + 0*4) / 2 = 0.5 (sum_over_batch_size divides by the batch size)
  const auto h = model.fit(kX, kY, {.batch_size = 2, .verbose = 0, .shuffle = false,
                                    .sample_weight = constant({1.f, 0.f}, {2})});
  CHECK(h.history.at("loss")[0] == Approx(0.5));
  // class weights by label: labels are the y values 2 and 4 -> weights 3 and 1: (3*1 + 1*4)/2 = 3.5
  const Tensor yi = constant(std::vector<std::int64_t>{2, 4}, {2, 1});
  auto m2 = linear_model();
  m2.compile({.optimizer = optimizers::SGD(0.0),
              .loss = [](const Tensor& t, const Tensor& p) { return reduce_mean(square(cast(t, DType::float32) - p), {-1}); }});
  const auto h2 = m2.fit(kX, yi, {.batch_size = 2, .verbose = 0, .shuffle = false, .class_weight = {{2, 3.0}, {4, 1.0}}});
  CHECK(h2.history.at("loss")[0] == Approx(3.5));
}

TEST_CASE("regularization losses of the layers join the training loss", "[training]") {
  models::Sequential model{layers::InputLayer({1}),
                           layers::Dense(1, {.kernel_initializer = "ones", .kernel_regularizer = regularizers::l2(0.5)})};
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  // mse 2.5 + 0.5 * w^2 = 2.5 + 0.5
  const auto h = model.fit(kX, kY, {.batch_size = 2, .verbose = 0, .shuffle = false});
  CHECK(h.history.at("loss")[0] == Approx(3.0));
}

namespace {
// "Customising what happens in fit": a train_step that counts its calls and doubles the loss.
class CountingModel : public models::Sequential {
 public:
  using Sequential::Sequential;
  int steps = 0;
  std::map<std::string, double> train_step(const Tensor& x, const Tensor& y, const Tensor& sw) override {
    ++steps;
    auto logs = Sequential::train_step(x, y, sw);
    logs["double_loss"] = 2 * logs.at("loss");
    return logs;
  }
};
}  // namespace

TEST_CASE("an overridden train_step is what fit calls", "[training]") {
  CountingModel model{layers::InputLayer({1}), layers::Dense(1, {.kernel_initializer = "ones"})};
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  const auto h = model.fit(kX, kY, {.batch_size = 1, .epochs = 2, .verbose = 0, .shuffle = false});
  CHECK(model.steps == 4);
  CHECK(h.history.at("double_loss")[0] == Approx(2 * 2.5));
}

TEST_CASE("fit before compile and mismatched sample counts are errors", "[training][errors]") {
  auto model = linear_model();
  CHECK_THROWS_AS(model.fit(kX, kY), ValueError);
  model.compile({.optimizer = "sgd", .loss = "mse"});
  CHECK_THROWS_AS(model.fit(kX, constant({1.f, 2.f, 3.f}, {3, 1}), {.verbose = 0}), ShapeError);
  CHECK_THROWS_AS(model.fit(kX, kY, {.batch_size = 0, .verbose = 0}), ValueError);
  CHECK_THROWS_AS(model.fit(kX, kY, {.verbose = 0, .validation_split = 1.5}), ValueError);
}

TEST_CASE("verbose 1 prints Keras' epoch header and progress bar", "[training]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  model.fit(kX, kY, {.batch_size = 1, .epochs = 2, .verbose = 1, .shuffle = false});
  std::cout.rdbuf(old);
  const std::string s = captured.str();
  CHECK_THAT(s, Contains("Epoch 1/2"));
  CHECK_THAT(s, Contains("Epoch 2/2"));
  CHECK_THAT(s, Contains("2/2 [==============================]"));
  CHECK_THAT(s, Contains("/step - loss: 2.5000"));
}

// ---- callbacks ----

TEST_CASE("EarlyStopping stops when the monitored value stops improving", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});  // the loss never improves
  auto stop = std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{.monitor = "loss", .patience = 2});
  const auto h = model.fit(kX, kY, {.batch_size = 2, .epochs = 10, .verbose = 0, .callbacks = {stop}});
  // epoch 0 sets the best; epochs 1 and 2 do not improve: patience 2 is used up at epoch 2
  CHECK(h.history.at("loss").size() == 3);
  CHECK(stop->stopped_epoch() == 2);
}

TEST_CASE("EarlyStopping restores the best weights when asked", "[callbacks]") {
  auto model = linear_model();
  // lr 1.0 overshoots: the loss rises after the first epoch (2.5, then much larger)
  model.compile({.optimizer = optimizers::SGD(1.0), .loss = "mse"});
  auto stop = std::make_shared<callbacks::EarlyStopping>(
      callbacks::EarlyStoppingOptions{.monitor = "loss", .patience = 1, .restore_best_weights = true});
  model.fit(kX, kY, {.batch_size = 2, .epochs = 5, .verbose = 0, .callbacks = {stop}, .shuffle = false});
  // the best epoch is the first; its end-of-epoch weights are w = 1 + 5 = 6, b = 0 + 3 = 3
  CHECK(stop->best_epoch() == 0);
  CHECK(model.trainable_weights()[0]->value().item<float>() == Approx(6.f));
  CHECK(model.trainable_weights()[1]->value().item<float>() == Approx(3.f));
}

TEST_CASE("ModelCheckpoint saves weights that load_weights restores", "[callbacks]") {
  const std::string path = temp_path("ckpt_{epoch:02d}.safetensors");
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  auto ckpt = std::make_shared<callbacks::ModelCheckpoint>(path, callbacks::ModelCheckpointOptions{.monitor = "loss"});
  model.fit(kX, kY, {.batch_size = 2, .epochs = 2, .verbose = 0, .callbacks = {ckpt}, .shuffle = false});
  CHECK_THAT(ckpt->last_saved(), Contains("ckpt_02.safetensors"));
  const float w_after = model.trainable_weights()[0]->value().item<float>();
  auto fresh = linear_model();
  fresh.load_weights(ckpt->last_saved());
  CHECK(fresh.trainable_weights()[0]->value().item<float>() == w_after);
  std::remove(ckpt->last_saved().c_str());
  std::remove(temp_path("ckpt_01.safetensors").c_str());
}

TEST_CASE("LearningRateScheduler sets the learning rate at the start of each epoch", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.5), .loss = "mse"});
  std::vector<double> seen;
  auto sched = std::make_shared<callbacks::LearningRateScheduler>([&](int epoch, double lr) {
    seen.push_back(lr);
    return 0.1 / (epoch + 1);
  });
  model.fit(kX, kY, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {sched}});
  // the schedule sees the rate before it: 0.5, then 0.1, then 0.05; ends at 0.1 / 3
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == Approx(0.5));
  CHECK(seen[1] == Approx(0.1));
  CHECK(seen[2] == Approx(0.05));
  CHECK(model.optimizer()->learning_rate() == Approx(0.1 / 3));
}

TEST_CASE("ReduceLROnPlateau halves the learning rate after a plateau", "[callbacks]") {
  // A model whose loss cannot change: no trainable weights (frozen), so the loss plateaus.
  auto model = linear_model();
  model.set_trainable(false);
  model.compile({.optimizer = optimizers::SGD(0.4), .loss = "mse"});
  auto plateau = std::make_shared<callbacks::ReduceLROnPlateau>(
      callbacks::ReduceLROnPlateauOptions{.monitor = "loss", .factor = 0.5, .patience = 1});
  // epoch 0: best 2.5; epoch 1: no improvement -> wait 1 = patience -> lr 0.2; epoch 2: -> 0.1
  model.fit(kX, kY, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {plateau}});
  CHECK(model.optimizer()->learning_rate() == Approx(0.1));
}

TEST_CASE("CSVLogger writes one row per epoch and LambdaCallback sees every hook", "[callbacks]") {
  const std::string path = temp_path("log.csv");
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  int epochs = 0, batches = 0;
  auto lambda = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_epoch_end = [&](int, const callbacks::Logs&) { ++epochs; },
      .on_train_batch_end = [&](std::int64_t, const callbacks::Logs&) { ++batches; }});
  model.fit(kX, kY, {.batch_size = 1, .epochs = 2, .verbose = 0,
                     .callbacks = {std::make_shared<callbacks::CSVLogger>(path), lambda}});
  CHECK(epochs == 2);
  CHECK(batches == 4);
  std::ifstream in(path);
  std::string header, row0, row1;
  std::getline(in, header);
  std::getline(in, row0);
  std::getline(in, row1);
  // no validation: Keras still writes the val_ columns, with NA
  CHECK(header == "epoch,loss,val_loss");
  CHECK(row0 == "0,2.5,NA");
  CHECK(row1 == "1,2.5,NA");
  std::remove(path.c_str());
}

TEST_CASE("TerminateOnNaN stops training on a non-finite loss", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  const Tensor bad = constant({NAN, 1.f}, {2, 1});
  const auto h = model.fit(bad, kY, {.batch_size = 1, .epochs = 3, .verbose = 0,
                                     .callbacks = {std::make_shared<callbacks::TerminateOnNaN>()}, .shuffle = false});
  CHECK(h.history.at("loss").size() == 1);
}

TEST_CASE("fit and evaluate take a data::Dataset of batches", "[training][data]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  const auto ds = data::Dataset<>::from_tensor_slices(std::make_pair(kX, kY)).batch(2);
  // the same single batch as the hand-computed step above: loss 2.5, then w = 1.5, b = 0.3
  const auto h = model.fit(ds, {.epochs = 1, .verbose = 0});
  CHECK(h.history.at("loss")[0] == Approx(2.5));
  CHECK(model.trainable_weights()[0]->value().item<float>() == Approx(1.5f));
  // after the step: y_pred = [1.8, 3.3]; mse = (0.2^2 + 0.7^2) / 2 = 0.265
  CHECK(model.evaluate(ds, {.verbose = 0}).at("loss") == Approx(0.265));
  CHECK_THROWS_AS(model.fit(ds, {.verbose = 0, .validation_split = 0.5}), ValueError);
}

TEST_CASE("tensors and the same batches as a Dataset train and evaluate alike", "[training][data]") {
  // fit, evaluate and predict run over one epoch iterator: unshuffled tensors in batches of 3
  // are the Dataset from_tensor_slices(...).batch(3), step for step (steps_per_epoch included).
  const Tensor x = reshape(arange(8), {8, 1});
  const Tensor y = x * 2.0 + 1.0;
  auto from_tensors = linear_model(), from_dataset = linear_model();
  from_tensors.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  from_dataset.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  const auto a = from_tensors.fit(x, y, {.batch_size = 3, .epochs = 2, .verbose = 0, .shuffle = false,
                                         .steps_per_epoch = 2});
  const auto ds = data::Dataset<>::from_tensor_slices(std::make_pair(x, y)).batch(3);
  const auto b = from_dataset.fit(ds, {.epochs = 2, .verbose = 0, .steps_per_epoch = 2});
  CHECK(a.history.at("loss") == b.history.at("loss"));
  CHECK(from_tensors.trainable_weights()[0]->peek().item<float>() ==
        from_dataset.trainable_weights()[0]->peek().item<float>());
  CHECK(from_tensors.evaluate(x, y, {.batch_size = 3, .verbose = 0}).at("loss") ==
        from_dataset.evaluate(ds, {.verbose = 0}).at("loss"));
  CHECK(from_tensors.predict(x, {.batch_size = 3}).to_vector<float>() ==
        from_dataset.predict(x, {.batch_size = 8}).to_vector<float>());
}

TEST_CASE("the first batch of a model built by its first call trains too", "[training]") {
  // No InputLayer: the Dense creates its weights inside the first train_step. Keras already
  // updates them on that step. x = [1, 2], y = [2, 4], w = 1, b = 0: the predictions are [1, 2],
  // the errors [-1, -2], dL/dw = mean(2 e x) = (-2 - 8) / 2 = -5, dL/db = mean(2 e) = -3, so one
  // SGD(0.1) step gives w = 1.5, b = 0.3.
  models::Sequential model{layers::Dense(1, {.kernel_initializer = "ones", .bias_initializer = "zeros"})};
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  const auto h = model.fit(kX, kY, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  CHECK(model.optimizer()->iterations() == 1);
  CHECK(h.history.at("loss")[0] == Approx(2.5));
  CHECK(model.trainable_weights()[0]->value().item<float>() == Approx(1.5f));
  CHECK(model.trainable_weights()[1]->value().item<float>() == Approx(0.3f));

  // the same for a subclassed model whose layers build in call()
  struct Net : models::Model {
    std::shared_ptr<layers::Dense> dense =
        track(std::make_shared<layers::Dense>(1, layers::DenseOptions{.kernel_initializer = "ones"}));
    Tensor call(const Tensor& x, bool training) override { return (*dense)(x, training); }
  } net;
  net.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  net.fit(kX, kY, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  CHECK(net.optimizer()->iterations() == 1);
  CHECK(net.trainable_weights()[0]->value().item<float>() == Approx(1.5f));
}

TEST_CASE("fit options Keras rejects are ValueErrors", "[training][errors]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  const auto fit = [&](models::FitOptions o) { model.fit(kX, kY, std::move(o)); };
  CHECK_THROWS_WITH(fit({.verbose = 0, .steps_per_epoch = 0}), Contains("steps_per_epoch"));
  CHECK_THROWS_AS(fit({.verbose = 0, .steps_per_epoch = -5}), ValueError);
  CHECK_THROWS_WITH(fit({.verbose = 0, .validation_freq = 0}), Contains("validation_freq"));
  CHECK_THROWS_AS(fit({.verbose = 0, .validation_split = std::nan("")}), ValueError);
  CHECK_THROWS_AS(fit({.epochs = -1, .verbose = 0}), ValueError);
  // more loss_weights than outputs
  CHECK_THROWS_WITH(model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse", .loss_weights = {1.0, 2.0}}),
                    Contains("loss_weights"));
  // fit on an empty Sequential
  models::Sequential empty;
  empty.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  CHECK_THROWS_AS(empty.fit(kX, kY, {.verbose = 0}), ValueError);
}
