#pragma once
// The two models the training-step benchmarks run (and scripts/bench-vs-peer.sh compares with
// libtorch), with their data:
//   CNN: Conv2D(16|32|64, 3, "same", relu) + MaxPooling2D(2) three times, Flatten,
//        Dense(128, relu), Dense(10) logits; sparse categorical cross-entropy; Adam(1e-3).
//   LSTM: LSTM(50) over [32, S, 1], last state, Dense(1); mean squared error; Adam(1e-3).
#include <keel/keel.hpp>

#include <cstdint>
#include <memory>

namespace keel::bench {

constexpr std::int64_t kCnnBatch = 64, kLstmBatch = 32;

inline std::unique_ptr<models::Sequential> cnn() {
  auto model = std::make_unique<models::Sequential>();
  model->add(layers::InputLayer(Shape{32, 32, 3}));
  for (int filters : {16, 32, 64}) {
    model->add(layers::Conv2D(filters, 3, {.padding = "same", .activation = "relu"}));
    model->add(layers::MaxPooling2D(2));
  }
  model->add(layers::Flatten());
  model->add(layers::Dense(128, {.activation = "relu"}));
  model->add(layers::Dense(10));
  model->compile({.optimizer = optimizers::Adam(1e-3),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  return model;
}

inline std::unique_ptr<models::Sequential> lstm(std::int64_t seq) {
  auto model = std::make_unique<models::Sequential>();
  model->add(layers::InputLayer(Shape{seq, 1}));
  model->add(layers::LSTM(50));
  model->add(layers::Dense(1));
  model->compile({.optimizer = optimizers::Adam(1e-3), .loss = "mse"});
  return model;
}

struct Data {
  Tensor x, y;
};

inline Data cnn_data(std::int64_t n) {
  random::set_seed(3);
  return {random::normal({n, 32, 32, 3}), random::uniform_int({n}, 0, 10, DType::int64)};
}

inline Data lstm_data(std::int64_t seq, std::int64_t n) {
  random::set_seed(3);
  return {random::normal({n, seq, 1}), random::normal({n, 1})};
}

}  // namespace keel::bench
