// train_on_batch / test_on_batch / predict_on_batch, get_weights / set_weights, clone_model,
// count_params, freezing layers inside fit (BatchNormalization in inference mode when frozen),
// and ModelCheckpoint's integer save_freq and whole-model files.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "scratch.hpp"
#include "training_fixtures.hpp"

#include <filesystem>

using namespace keel;
using keel_test::kX;
using keel_test::kY;
using keel_test::linear_model;

TEST_CASE("train_on_batch returns the step's loss and metrics, as Keras' return_dict", "[models][batch_api]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse", .metrics = {"mae"}});
  // Before the step: y_pred = [1, 2], errors [-1, -2]: mse 2.5, mae 1.5. The step then moves
  // w to 1.5 and b to 0.3 (dL/dw = -5, dL/db = -3, lr 0.1).
  const auto first = model.train_on_batch(kX, kY);
  CHECK(first.at("loss") == Approx(2.5));
  CHECK(first.at("mae") == Approx(1.5));
  const auto w = model.get_weights();
  CHECK(w[0].item<float>() == Approx(1.5f));
  CHECK(w[1].item<float>() == Approx(0.3f));
  // Second batch: y_pred = [1.8, 3.3], errors [-0.2, -0.7]: mse (0.04 + 0.49) / 2 = 0.265.
  // The metrics are not reset between calls (Keras 3): the logged loss is the running mean.
  const auto second = model.train_on_batch(kX, kY);
  CHECK(second.at("loss") == Approx((2.5 + 0.265) / 2));
  model.reset_metrics();
  auto again = linear_model();
  again.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  again.train_on_batch(kX, kY);
  again.reset_metrics();
  CHECK(again.train_on_batch(kX, kY).at("loss") == Approx(0.265));
}

TEST_CASE("test_on_batch evaluates without training; predict_on_batch returns the outputs", "[models][batch_api]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse", .metrics = {"mae"}});
  const auto r = model.test_on_batch(kX, kY);
  CHECK(r.at("loss") == Approx(2.5));
  CHECK(r.at("mae") == Approx(1.5));
  CHECK(model.get_weights()[0].item<float>() == 1.0f);  // untouched
  // Sample weights [1, 0]: only the first error counts, mse = 1.
  model.reset_metrics();
  CHECK(model.test_on_batch(kX, kY, constant(std::vector<float>{1.f, 0.f})).at("loss") == Approx(0.5));  // sum 1 / 2 samples
  const auto p = model.predict_on_batch(constant({3.f, -1.f}, {2, 1}));
  REQUIRE(p.size() == 1);
  CHECK(p[0].to_vector<float>() == std::vector<float>{3.f, -1.f});
  CHECK_THROWS_AS(model.train_on_batch(kX, constant({1.f, 2.f, 3.f}, {3, 1})), ShapeError);
  models::Sequential uncompiled{layers::InputLayer({1}), layers::Dense(1)};
  CHECK_THROWS_AS(uncompiled.train_on_batch(kX, kY), ValueError);
}

TEST_CASE("get_weights / set_weights round trip in Keras 3's order", "[models][batch_api]") {
  models::Sequential model{layers::InputLayer({2}), layers::Dense(3, {.name = "d"}),
                           layers::BatchNormalization({.name = "bn"})};
  auto w = model.get_weights();
  // Layer by layer: kernel, bias, then gamma, beta, moving_mean, moving_variance.
  REQUIRE(w.size() == 6);
  CHECK(w[0].shape() == Shape{2, 3});
  for (std::size_t i = 1; i < 6; ++i) CHECK(w[i].shape() == Shape{3});
  CHECK(w[5].to_vector<float>() == std::vector<float>{1.f, 1.f, 1.f});  // moving variance starts at 1
  // Freezing a layer does not move its weights in the list (weights() puts trainable first).
  model.get_layer("d")->set_trainable(false);
  CHECK(model.get_weights()[0].shape() == Shape{2, 3});
  // get_weights copies: changing the model later leaves them as they were.
  std::vector<Tensor> mine = model.get_weights();
  mine[1] = constant(std::vector<float>{1.f, 2.f, 3.f});
  model.set_weights(mine);
  CHECK(model.get_weights()[1].to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(w[1].to_vector<float>() == std::vector<float>{0.f, 0.f, 0.f});
  // Errors: a wrong count, and a wrong shape naming the weight; nothing is written then.
  CHECK_THROWS_AS(model.set_weights({mine[0]}), ValueError);
  auto bad = mine;
  bad[2] = zeros({4});
  bad[1] = zeros({3});
  CHECK_THROWS_WITH(model.set_weights(bad), Catch::Contains("bn/gamma") && Catch::Contains("[4]"));
  CHECK(model.get_weights()[1].to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f});
}

TEST_CASE("clone_model: the same architecture with fresh weights", "[models][batch_api]") {
  auto in = models::Input({3});
  auto out = layers::Dense(2, {.name = "head"})(layers::Dense(4, {.activation = "relu", .name = "hidden"})(in));
  models::Model model(in, out, "orig");
  auto clone = models::clone_model(model);
  REQUIRE(clone != nullptr);
  CHECK(clone->count_params() == model.count_params());
  CHECK(model.count_params() == (3 * 4 + 4) + (4 * 2 + 2));  // 26
  CHECK_FALSE(clone->compiled());
  const auto wo = model.get_weights(), wc = clone->get_weights();
  REQUIRE(wo.size() == wc.size());
  CHECK(wo[0].to_vector<float>() != wc[0].to_vector<float>());  // freshly drawn kernels
  const Tensor x = constant({1.f, -2.f, 0.5f, 3.f, 0.f, -1.f}, {2, 3});
  clone->set_weights(wo);
  CHECK(clone->predict(x).to_vector<float>() == model.predict(x).to_vector<float>());
  models::Sequential seq{layers::InputLayer({3}), layers::Dense(2)};
  CHECK(models::clone_model(seq)->class_name() == "Sequential");
  CHECK(seq.count_params() == 8);
}

TEST_CASE("frozen layers keep their weights in fit, and a frozen BatchNormalization its moving statistics",
          "[models][batch_api][freezing]") {
  const bool freeze = GENERATE(true, false);
  models::Sequential model{layers::InputLayer({2}), layers::Dense(2, {.name = "body"}),
                           layers::BatchNormalization({.name = "bn"}), layers::Dense(1, {.name = "head"})};
  if (freeze) {
    model.get_layer("body")->set_trainable(false);
    model.get_layer("bn")->set_trainable(false);
  }
  model.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
  const auto before = model.get_weights();
  const Tensor x = constant({1.f, 2.f, -1.f, 0.5f, 3.f, -2.f, 0.f, 1.f}, {4, 2});
  const Tensor y = constant({1.f, 0.f, 2.f, -1.f}, {4, 1});
  model.fit(x, y, {.batch_size = 2, .epochs = 2, .verbose = 0, .shuffle = false});
  const auto after = model.get_weights();
  // Order: body kernel, bias; bn gamma, beta, moving_mean, moving_variance; head kernel, bias.
  REQUIRE(after.size() == 8);
  for (std::size_t i = 0; i < 6; ++i) {
    const bool same = before[i].to_vector<float>() == after[i].to_vector<float>();
    // Bias and beta of an unfrozen run could stay by chance only with zero gradients: check the
    // kernels and the moving statistics, which must move when trained.
    if (freeze) CHECK(same);
    else if (i == 0 || i == 4 || i == 5) CHECK_FALSE(same);
  }
  CHECK(before[6].to_vector<float>() != after[6].to_vector<float>());  // the head trains either way
  if (freeze) {
    CHECK(model.trainable_weights().size() == 2);
    CHECK(model.non_trainable_weights().size() == 6);
  }
}

TEST_CASE("ModelCheckpoint: an integer save_freq saves every N batches across epochs", "[callbacks][checkpoint]") {
  keel_test::Scratch dir("ckpt_freq");
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  auto cb = std::make_shared<callbacks::ModelCheckpoint>(dir / "w_{epoch}_{batch}.safetensors",
                                                         callbacks::ModelCheckpointOptions{.save_freq = std::int64_t{2}});
  const Tensor x = constant({1.f, 2.f, 3.f}, {3, 1}), y = constant({2.f, 4.f, 6.f}, {3, 1});
  // 3 batches an epoch, 2 epochs: batches 2, 4 and 6 overall are epoch 1 batch 2, epoch 2 batch 1
  // and epoch 2 batch 3.
  model.fit(x, y, {.batch_size = 1, .epochs = 2, .verbose = 0, .callbacks = {cb}, .shuffle = false});
  namespace fs = std::filesystem;
  CHECK(fs::exists(dir / "w_1_2.safetensors"));
  CHECK(fs::exists(dir / "w_2_1.safetensors"));
  CHECK(fs::exists(dir / "w_2_3.safetensors"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.dir)) files += e.is_regular_file();
  CHECK(files == 3);
  CHECK_THROWS_AS(callbacks::ModelCheckpoint("p", {.save_freq = std::int64_t{0}}), ValueError);
  CHECK_THROWS_AS(callbacks::ModelCheckpoint("p", {.save_freq = std::string("batch")}), ValueError);
}

TEST_CASE("ModelCheckpoint with save_weights_only = false writes whole models", "[callbacks][checkpoint]") {
  keel_test::Scratch dir("ckpt_model");
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  auto cb = std::make_shared<callbacks::ModelCheckpoint>(dir / "m_{epoch}.keel",
                                                         callbacks::ModelCheckpointOptions{.save_weights_only = false});
  model.fit(kX, kY, {.batch_size = 2, .epochs = 2, .verbose = 0, .callbacks = {cb}, .shuffle = false});
  CHECK(cb->last_saved() == dir / "m_2.keel");
  auto loaded = models::load_model(dir / "m_2.keel");
  CHECK(loaded->compiled());
  const Tensor x = constant({5.f}, {1, 1});
  CHECK(loaded->predict(x).item<float>() == Approx(model.predict(x).item<float>()));
}

TEST_CASE("ProgbarLogger prints the epochs and the logs", "[callbacks]") {
  auto model = linear_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse"});
  std::ostringstream out;
  auto cb = std::make_shared<callbacks::ProgbarLogger>(2, &out);
  model.fit(kX, kY, {.batch_size = 1, .epochs = 2, .verbose = 0, .callbacks = {cb}, .shuffle = false});
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("Epoch 1/2") && Catch::Contains("Epoch 2/2") && Catch::Contains("loss: 2.5"));
}
