#pragma once
// SpectralNormalization (Keras 3, keras.layers.SpectralNormalization): a wrapper that divides
// the kernel of the layer it wraps (its "kernel" weight, or an Embedding's "embeddings") by the
// kernel's largest singular value sigma, estimated by power iteration with a persistent vector u:
//   W = reshape(kernel, [-1, kernel_shape[-1]])
//   repeat power_iterations times: v = normalize(u W^T), u = normalize(v W)
//   sigma = v W u^T (u, v without gradient)
// In a training call the stored kernel is overwritten with kernel / sigma and u with its new
// value (Keras assigns both before calling the wrapped layer, so the gradient reaches the kernel
// as the wrapped layer's own gradient); outside training the layer runs with its kernel as is.
//   auto sn = layers::SpectralNormalization(layers::Dense(8), {.power_iterations = 2});
#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <utility>

#include "keel/layers/layer.hpp"

namespace keel::layers {

struct SpectralNormalizationOptions {
  int power_iterations = 1;  // >= 1
  std::string name{};
};

class SpectralNormalization : public Layer {
 public:
  explicit SpectralNormalization(LayerRef layer, SpectralNormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(SpectralNormalization)
  using Layer::build;
  using Layer::call;
  // Builds the wrapped layer, finds its kernel and adds the non-trainable "vector_u"
  // [1, kernel_shape[-1]] (TruncatedNormal(stddev = 0.02), as Keras).
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Shape compute_output_shape(const Shape& input_shape) override;
  nlohmann::json get_config() const override;

  const std::shared_ptr<Layer>& layer() const { return layer_; }
  int power_iterations() const { return options_.power_iterations; }
  Variable& vector_u();  // ValueError before build
  Variable& kernel();    // the wrapped layer's kernel; ValueError before build
  // Keras' normalized_weights(): {new u, kernel / sigma}, nothing assigned.
  std::pair<Tensor, Tensor> normalized_weights();

 protected:
  Autocast autocast() const override { return Autocast::variables; }  // the wrapped layer casts its inputs

 private:
  std::shared_ptr<Layer> layer_;
  SpectralNormalizationOptions options_;
  Variable* kernel_ = nullptr;  // owned by the wrapped layer
  Variable* vector_u_ = nullptr;
};

}  // namespace keel::layers
