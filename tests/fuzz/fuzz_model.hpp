#pragma once
// The model of the keel_config target: its weights and optimizer state stay fixed on disk while
// the target fuzzes config.json next to them. The seed corpus corpus/keel_config/ holds this
// model's config.json as Model::save writes it (and variations), and corpus/keel/ its .keel file,
// so layer names here are explicit and the weights deterministic.
#include <memory>

#include <keel/keel.hpp>

namespace keel_fuzz {

inline std::shared_ptr<keel::models::Model> fuzz_model() {
  using namespace keel;
  random::set_seed(7);
  const Tensor in = models::Input(Shape{4, 3}, DType::float32, "in");
  const Tensor c = layers::Conv1D(2, 2, {.padding = "same", .name = "conv"})(in);
  const Tensor f = layers::Flatten({.name = "flat"})(c);
  const Tensor h = layers::Dense(5, {.activation = "relu", .name = "hidden"})(f);
  const Tensor n = layers::BatchNormalization({.name = "bn"})(h);
  const Tensor s = layers::Add({.name = "add"})({n, h});
  const Tensor out = layers::Dense(2, {.name = "out"})(s);
  auto model = std::make_shared<models::Model>(in, out, "fuzz_model");
  model->compile({.optimizer = optimizers::Adam(0.01), .loss = "mse", .metrics = {"mae"}});
  // One step, so that the optimizer has slots to save.
  model->fit(random::normal({4, 4, 3}), random::normal({4, 2}), {.batch_size = 4, .epochs = 1, .verbose = 0});
  return model;
}

}  // namespace keel_fuzz
