// Callbacks against Keras 3's rules: EarlyStopping's best/baseline/restore logic (the cases of
// Keras' own early_stopping_test.py), monitors that cannot be resolved, the logs that
// LearningRateScheduler and ReduceLROnPlateau add, CSVLogger's val_ columns, TerminateOnNaN's
// raise_error and LambdaCallback's test and predict hooks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "training_fixtures.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace keel;
using keel_test::kX;
using keel_test::kY;
using keel_test::linear_model;
using keel_test::temp_path;
using Catch::Matchers::Contains;

namespace {

// Drives an EarlyStopping by hand over the given epoch losses, as Keras' test does with a dummy
// model: before each epoch end the kernel is set to the epoch's index, so the kernel after
// on_train_end tells which epoch's weights were restored. `stop_at` is an epoch at which another
// callback asks training to stop. Returns the epochs trained.
int drive(callbacks::EarlyStopping& stop, models::Model& model, const std::vector<double>& losses, int stop_at = -1) {
  stop.set_model(&model);
  model.stop_training = false;
  stop.on_train_begin({});
  int trained = 0;
  for (int epoch = 0; epoch < static_cast<int>(losses.size()); ++epoch) {
    ++trained;
    model.trainable_weights()[0]->assign(full({1, 1}, epoch));
    stop.on_epoch_end(epoch, {{"val_loss", losses[static_cast<std::size_t>(epoch)]}});
    if (epoch == stop_at) model.stop_training = true;
    if (model.stop_training) break;
  }
  stop.on_train_end({});
  return trained;
}

double kernel(models::Model& model) { return model.trainable_weights()[0]->value().item<double>(); }

}  // namespace

TEST_CASE("EarlyStopping restores the best epoch when patience runs out", "[callbacks]") {
  auto model = linear_model();
  callbacks::EarlyStopping stop({.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  // best at epoch 2 (0.1); epochs 3 and 4 do not improve: the wait reaches 2 at epoch 4
  CHECK(drive(stop, model, {0.2, 0.15, 0.1, 0.11, 0.12}) == 5);
  CHECK(stop.stopped_epoch() == 4);
  CHECK(kernel(model) == 2);
}

TEST_CASE("EarlyStopping with an unbeaten baseline stops after patience and restores the best epoch", "[callbacks]") {
  auto model = linear_model();
  callbacks::EarlyStopping stop({.monitor = "val_loss", .patience = 5, .baseline = 0.5, .restore_best_weights = true});
  // `best` starts unset, so epochs 0-2 improve on it (0.9, 0.8, 0.7), but none beats the
  // baseline 0.5, so the wait never restarts: 1, 2, 3, 4, 5 -> stop at epoch 4 (5 epochs). The
  // best epoch is 2, and Keras restores it (its test_early_stopping_final_weights_... case).
  CHECK(drive(stop, model, {0.9, 0.8, 0.7, 0.71, 0.72, 0.73}) == 5);
  CHECK(stop.best_epoch() == 2);
  CHECK(stop.best().value() == Approx(0.7));
  CHECK(kernel(model) == 2);
}

TEST_CASE("EarlyStopping restores the best weights when another callback stops training", "[callbacks]") {
  auto model = linear_model();
  callbacks::EarlyStopping stop({.monitor = "val_loss", .patience = 5, .baseline = 0.5, .restore_best_weights = true});
  // stopped from outside at epoch 3: EarlyStopping itself never stopped, yet epoch 2 comes back
  CHECK(drive(stop, model, {0.9, 0.8, 0.7, 0.71, 0.72, 0.73}, 3) == 4);
  CHECK(stop.stopped_epoch() == 0);
  CHECK(kernel(model) == 2);
}

TEST_CASE("EarlyStopping restores the best weights when fit reaches its last epoch", "[callbacks]") {
  auto model = linear_model();
  // SGD(1.0) overshoots: epoch 0's loss is 2.5, later ones are far larger. After epoch 0's step
  // (gradients dL/dw = mean(2 (w x + b - y) x) = -5, dL/db = -3) the weights are w = 6, b = 3.
  model.compile({.optimizer = optimizers::SGD(1.0), .loss = "mse"});
  auto stop = std::make_shared<callbacks::EarlyStopping>(
      callbacks::EarlyStoppingOptions{.monitor = "loss", .patience = 10, .restore_best_weights = true});
  const auto h = model.fit(kX, kY, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {stop}, .shuffle = false});
  CHECK(h.history.at("loss").size() == 3);  // patience 10 never runs out
  CHECK(stop->stopped_epoch() == 0);
  CHECK(stop->best_epoch() == 0);
  CHECK(model.trainable_weights()[0]->value().item<float>() == Approx(6.f));
  CHECK(model.trainable_weights()[1]->value().item<float>() == Approx(3.f));
}

TEST_CASE("EarlyStopping counts patience as Keras' test_early_stopping_patience", "[callbacks]") {
  // losses 10, 9, 8, 9, 8.9, ...: the best is 8 at epoch 2; Keras stops at max(patience, 1) + 2
  const std::vector<double> losses{10.0, 9.0, 8.0, 9.0, 8.9, 8.8, 8.7, 8.6, 8.5};
  for (int patience : {0, 1, 2, 3}) {
    auto model = linear_model();
    callbacks::EarlyStopping stop({.monitor = "val_loss", .patience = patience});
    drive(stop, model, losses);
    CHECK(stop.stopped_epoch() == std::max(patience, 1) + 2);
  }
}

TEST_CASE("monitoring a quantity that is not in the logs with mode auto is a ValueError", "[callbacks][errors]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  const auto fit_with = [&](std::shared_ptr<callbacks::Callback> cb) {
    model.fit(kX, kY, {.batch_size = 2, .epochs = 2, .verbose = 0, .callbacks = {std::move(cb)}});
  };
  // the message names the keys the logs hold ("loss")
  CHECK_THROWS_WITH(fit_with(std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{.monitor = "val_auc"})),
                    Contains("val_auc") && Contains("loss"));
  CHECK_THROWS_AS(fit_with(std::make_shared<callbacks::ReduceLROnPlateau>(callbacks::ReduceLROnPlateauOptions{.monitor = "val_auc"})),
                  ValueError);
  CHECK_THROWS_AS(fit_with(std::make_shared<callbacks::ModelCheckpoint>(
                      temp_path("never.safetensors"), callbacks::ModelCheckpointOptions{.monitor = "val_auc", .save_best_only = true})),
                  ValueError);
  // With the direction given, a missing quantity is only a warning (Keras warns too), and
  // "val_loss" is known to be minimised even when there is no validation data.
  CHECK_NOTHROW(fit_with(std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{.monitor = "val_auc", .mode = "max"})));
  CHECK_NOTHROW(fit_with(std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{})));
}

TEST_CASE("mode auto follows the direction of the model's metric", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse", .metrics = {metrics::MeanAbsoluteError()}});
  // lr 0: every epoch's mae is the same 1.5 (|1 - 2| and |2 - 4|, averaged); mae is minimised,
  // so epoch 0 is the best and patience 1 stops training at epoch 1
  auto stop = std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{.monitor = "mean_absolute_error", .patience = 1});
  const auto h = model.fit(kX, kY, {.batch_size = 2, .epochs = 5, .verbose = 0, .callbacks = {stop}});
  CHECK(h.history.at("mean_absolute_error")[0] == Approx(1.5));
  CHECK(stop->stopped_epoch() == 1);
}

TEST_CASE("LearningRateScheduler and ReduceLROnPlateau add learning_rate to the epoch logs", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.5), .loss = "mse"});
  auto sched = std::make_shared<callbacks::LearningRateScheduler>([](int epoch, double) { return 0.1 / (epoch + 1); });
  const std::string path = temp_path("lr.csv");
  const auto h = model.fit(kX, kY, {.batch_size = 2, .epochs = 3, .verbose = 0,
                                    .callbacks = {sched, std::make_shared<callbacks::CSVLogger>(path)}});
  // the rate set at each epoch's start: 0.1 / 1, 0.1 / 2, 0.1 / 3; History and CSVLogger see it
  REQUIRE(h.history.count("learning_rate"));
  const auto& lr = h.history.at("learning_rate");
  REQUIRE(lr.size() == 3);
  CHECK(lr[0] == Approx(0.1));
  CHECK(lr[1] == Approx(0.05));
  CHECK(lr[2] == Approx(0.1 / 3));
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  CHECK(header == "epoch,learning_rate,loss,val_learning_rate,val_loss");
  std::remove(path.c_str());

  auto frozen = linear_model();
  frozen.set_trainable(false);
  frozen.compile({.optimizer = optimizers::SGD(0.4), .loss = "mse"});
  auto plateau = std::make_shared<callbacks::ReduceLROnPlateau>(
      callbacks::ReduceLROnPlateauOptions{.monitor = "loss", .factor = 0.5, .patience = 1});
  // the logged rate is the one the epoch trained with (Keras logs it before reducing): 0.4, 0.4, 0.2
  const auto h2 = frozen.fit(kX, kY, {.batch_size = 2, .epochs = 3, .verbose = 0, .callbacks = {plateau}});
  const auto& lr2 = h2.history.at("learning_rate");
  REQUIRE(lr2.size() == 3);
  CHECK(lr2[0] == Approx(0.4));
  CHECK(lr2[1] == Approx(0.4));
  CHECK(lr2[2] == Approx(0.2));
}

TEST_CASE("CSVLogger writes val_ columns from the start and NA on epochs without validation", "[callbacks]") {
  const std::string path = temp_path("val.csv");
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  // lr 0: every loss is mse([1, 2], [2, 4]) = (1 + 4) / 2 = 2.5; validation every second epoch
  model.fit(kX, kY, {.batch_size = 2, .epochs = 2, .verbose = 0,
                     .callbacks = {std::make_shared<callbacks::CSVLogger>(path)},
                     .validation_data = std::make_pair(kX, kY), .validation_freq = 2});
  std::ifstream in(path);
  std::string header, row0, row1;
  std::getline(in, header);
  std::getline(in, row0);
  std::getline(in, row1);
  CHECK(header == "epoch,loss,val_loss");
  CHECK(row0 == "0,2.5,NA");
  CHECK(row1 == "1,2.5,2.5");
  std::remove(path.c_str());
}

TEST_CASE("TerminateOnNaN with raise_error throws RuntimeError at once", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  const Tensor bad = constant({NAN, 1.f}, {2, 1});
  bool train_end = false;
  auto watcher = std::make_shared<callbacks::LambdaCallback>(
      callbacks::LambdaCallbackOptions{.on_train_end = [&](const callbacks::Logs&) { train_end = true; }});
  const auto run = [&] {
    model.fit(bad, kY, {.batch_size = 1, .epochs = 3, .verbose = 0,
                        .callbacks = {std::make_shared<callbacks::TerminateOnNaN>(true), watcher}, .shuffle = false});
  };
  CHECK_THROWS_AS(run(), RuntimeError);
  CHECK_THROWS_WITH(run(), Contains("NaN or Inf loss encountered at batch 0"));
  CHECK_FALSE(train_end);  // no cleanup hooks: the error leaves fit at once
}

TEST_CASE("LambdaCallback has the test and predict hooks", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  int test_begin = 0, test_end = 0, test_batches_begun = 0, test_batches = 0;
  int predict_begin = 0, predict_end = 0, predict_batches_begun = 0, predict_batches = 0;
  double test_end_loss = 0;
  auto cb = std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_test_begin = [&](const callbacks::Logs&) { ++test_begin; },
      .on_test_end = [&](const callbacks::Logs& l) { ++test_end; test_end_loss = l.at("loss"); },
      .on_test_batch_begin = [&](std::int64_t, const callbacks::Logs&) { ++test_batches_begun; },
      .on_test_batch_end = [&](std::int64_t, const callbacks::Logs&) { ++test_batches; },
      .on_predict_begin = [&](const callbacks::Logs&) { ++predict_begin; },
      .on_predict_end = [&](const callbacks::Logs&) { ++predict_end; },
      .on_predict_batch_begin = [&](std::int64_t, const callbacks::Logs&) { ++predict_batches_begun; },
      .on_predict_batch_end = [&](std::int64_t, const callbacks::Logs&) { ++predict_batches; }});
  model.evaluate(kX, kY, {.batch_size = 1, .verbose = 0, .callbacks = {cb}});
  model.predict(kX, {.batch_size = 1, .verbose = 0, .callbacks = {cb}});
  CHECK(test_begin == 1);
  CHECK(test_end == 1);
  CHECK(test_batches_begun == 2);  // two samples, batches of one
  CHECK(test_batches == 2);
  CHECK(test_end_loss == Approx(2.5));
  CHECK(predict_begin == 1);
  CHECK(predict_end == 1);
  CHECK(predict_batches_begun == 2);
  CHECK(predict_batches == 2);
}
