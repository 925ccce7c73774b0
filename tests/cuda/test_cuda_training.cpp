// Keras-style training on cuda:0: a small CNN, an LSTM regressor and a mixed_float16 model fit
// data made on the GPU, the loss falls, and every weight stays on cuda:0.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace keel;

namespace {

void check_on_gpu(models::Model& model) {
  REQUIRE_FALSE(model.weights().empty());
  for (Variable* w : model.weights()) {
    INFO("weight " << w->name());
    CHECK(w->device() == Device::cuda(0));
  }
}

}  // namespace

TEST_CASE("a CNN fits 16x16 images on cuda:0: the loss falls and the weights stay on the GPU",
          "[cuda][training]") {
  DeviceScope gpu(Device::cuda(0));
  random::set_seed(1);
  // Two classes; class 1 has its red channel brightened by 0.5 (easy to learn in two epochs).
  const std::int64_t n = 256;
  const Tensor y = random::uniform_int({n}, 0, 2, DType::int64);
  const Tensor red = constant({0.5f, 0.f, 0.f}, {1, 1, 1, 3});
  const Tensor x = random::uniform({n, 16, 16, 3}) + cast(y, DType::float32).reshape({n, 1, 1, 1}) * red;
  REQUIRE(x.device() == Device::cuda(0));

  models::Sequential model{layers::InputLayer({16, 16, 3}),
                           layers::Conv2D(8, 3, {.padding = "same", .activation = "relu"}),
                           layers::MaxPooling2D(2), layers::Flatten(), layers::Dense(2)};
  model.compile({.optimizer = optimizers::Adam(3e-3),
                 .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                 .metrics = {"accuracy"}});
  const auto history = model.fit(x, y, {.batch_size = 32, .epochs = 2, .verbose = 0});
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 2);
  INFO("epoch losses " << loss[0] << ", " << loss[1]);
  CHECK(loss[1] < loss[0]);
  check_on_gpu(model);
  const Tensor p = model.predict(x);
  CHECK(p.device() == Device::cuda(0));
  CHECK(p.shape() == Shape{n, 2});
}

TEST_CASE("an LSTM regressor fits sequences on cuda:0: the loss falls and the weights stay on the GPU",
          "[cuda][training]") {
  DeviceScope gpu(Device::cuda(0));
  random::set_seed(2);
  const std::int64_t n = 256;
  const Tensor x = random::normal({n, 10, 1});
  const Tensor y = reduce_sum(x, {1}) * 0.3;  // [n, 1]: a scaled running sum of the sequence
  models::Sequential model{layers::InputLayer({10, 1}), layers::LSTM(16), layers::Dense(1)};
  model.compile({.optimizer = optimizers::Adam(1e-2), .loss = "mse"});
  const auto history = model.fit(x, y, {.batch_size = 32, .epochs = 3, .verbose = 0});
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 3);
  INFO("epoch losses " << loss[0] << ", " << loss[1] << ", " << loss[2]);
  CHECK(loss[2] < loss[0]);
  check_on_gpu(model);
  const auto scores = model.evaluate(x, y, {.verbose = 0});
  CHECK(scores.at("loss") < loss[0]);
}

TEST_CASE("a mixed_float16 model fits on cuda:0 with float32 weights and float16 outputs",
          "[cuda][training]") {
  namespace mp = mixed_precision;
  struct PolicyGuard {  // back to float32 even when a check throws
    PolicyGuard() { mp::set_global_policy("mixed_float16"); }
    ~PolicyGuard() { mp::set_global_policy("float32"); }
  };
  DeviceScope gpu(Device::cuda(0));
  random::set_seed(3);
  const Tensor x = random::normal({128, 4});
  const Tensor y = matmul(x, constant(std::vector<float>{0.5f, -1.0f, 0.25f, 2.0f}, Shape{4, 1})) + 0.5;
  PolicyGuard guard;
  models::Sequential model{layers::InputLayer({4}), layers::Dense(16, {.activation = "relu"}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
  const auto history = model.fit(x, y, {.batch_size = 16, .epochs = 8, .verbose = 0});
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 8);
  INFO("first and last epoch loss " << loss.front() << ", " << loss.back());
  CHECK(std::isfinite(loss.back()));
  CHECK(loss.back() < 0.5 * loss.front());
  for (Variable* v : model.trainable_weights()) {
    CHECK(v->dtype() == DType::float32);
    CHECK(v->device() == Device::cuda(0));
  }
  const Tensor p = model.predict(x);
  CHECK(p.dtype() == DType::float16);
  CHECK(p.device() == Device::cuda(0));
}
