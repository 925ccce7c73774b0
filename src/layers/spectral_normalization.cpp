// SpectralNormalization, after keras/src/layers/normalization/spectral_normalization.py: the
// power iteration, the training-time assignment of kernel / sigma, its config and its factory.
#include "keel/layers/spectral_normalization.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/autograd/tape.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "autograd/record.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

// Called by register_normalization_layers (normalization_config.cpp).
void register_spectral_normalization(Factories& f);

template <class V>
void fields(V&& v, SpectralNormalizationOptions& o) {
  v("power_iterations", o.power_iterations);
}

}  // namespace detail

namespace {

// keras.utils.normalize(x, axis=None) = ops.nn.normalize: x / maximum(||x||_2, epsilon), the
// norm over every element, epsilon = backend.epsilon() = 1e-7.
Tensor normalize_all(const Tensor& x) { return x / maximum(sqrt(reduce_sum(square(x))), 1e-7); }

}  // namespace

SpectralNormalization::SpectralNormalization(LayerRef layer, SpectralNormalizationOptions options)
    : Layer(options.name), options_(std::move(options)) {
  if (!layer.get()) throw ValueError("SpectralNormalization: the wrapped layer is null");
  if (options_.power_iterations <= 0)
    throw ValueError(fmt::format("SpectralNormalization: power_iterations should be greater than zero, got {}",
                                 options_.power_iterations));
  layer_ = track(layer.get());
}

void SpectralNormalization::build(const Shape& input_shape) {
  if (input_shape.rank() < 1)
    throw ShapeError(fmt::format("{} (SpectralNormalization): expected inputs of rank >= 1, got {}", name(),
                                 input_shape.to_string()));
  if (!layer_->built()) layer_->build(input_shape);
  // Keras: the wrapped layer's `kernel` attribute, else its `embeddings`.
  kernel_ = nullptr;
  for (const char* wname : {"kernel", "embeddings"}) {
    const std::string full = layer_->name() + "/" + wname;
    for (Variable* v : layer_->weights())
      if (v->name() == full) kernel_ = v;
    if (kernel_) break;
  }
  if (!kernel_)
    throw ValueError(fmt::format("{} (SpectralNormalization): {} '{}' has no attribute 'kernel' nor 'embeddings'",
                                 name(), layer_->class_name(), layer_->name()));
  const Shape ks = kernel_->shape();
  if (ks.rank() < 1 || ks.num_elements() == 0)
    throw ShapeError(fmt::format("{} (SpectralNormalization): cannot normalise a kernel of shape {}", name(),
                                 ks.to_string()));
  const initializers::Initializer init(
      [](const Shape& s, DType dt) { return random::truncated_normal(s, 0.0, 0.02, dt); }, "truncated_normal",
      {{"mean", 0.0}, {"stddev", 0.02}});
  vector_u_ = &add_weight("vector_u", Shape{1, ks[ks.rank() - 1]}, init, false);
}

Variable& SpectralNormalization::vector_u() {
  if (!vector_u_) throw ValueError(fmt::format("{} (SpectralNormalization): vector_u before build", name()));
  return *vector_u_;
}

Variable& SpectralNormalization::kernel() {
  if (!kernel_) throw ValueError(fmt::format("{} (SpectralNormalization): kernel before build", name()));
  return *kernel_;
}

std::pair<Tensor, Tensor> SpectralNormalization::normalized_weights() {
  const Tensor k = kernel().peek();
  const Shape ks = k.shape();
  const Tensor w = reshape(k, Shape{-1, ks[ks.rank() - 1]});  // [n, out]
  Tensor u = vector_u().peek();                               // [1, out]
  Tensor v;
  for (int i = 0; i < options_.power_iterations; ++i) {
    v = normalize_all(matmul(u, w, false, true));  // v = normalize(u W^T)  [1, n]
    u = normalize_all(matmul(v, w));               // u = normalize(v W)    [1, out]
  }
  u = stop_gradient(u);
  v = stop_gradient(v);
  const Tensor sigma = matmul(matmul(v, w), u, false, true);  // v W u^T  [1, 1]
  return {cast(u, vector_u_->dtype()), cast(reshape(k / sigma, ks), kernel_->dtype())};
}

Tensor SpectralNormalization::call(const Tensor& inputs, bool training) {
  if (!kernel_) throw ValueError(fmt::format("{} (SpectralNormalization): called before build", name()));
  if (training) {
    autograd::NoRecordScope no_record;
    // Keras' ops.cond(all(kernel == 0), keep, normalized_weights): an all-zero kernel has no
    // singular direction and stays as it is.
    const bool all_zero = reduce_max(abs(kernel_->peek())).item<double>() == 0.0;
    if (!all_zero) {
      auto [u, k] = normalized_weights();
      vector_u_->assign(u);
      kernel_->assign(k);
    }
  }
  const Tensor out = (*layer_)(inputs, training);
  return is_floating(inputs.dtype()) && out.dtype() != inputs.dtype() ? cast(out, inputs.dtype()) : out;
}

Shape SpectralNormalization::compute_output_shape(const Shape& input_shape) {
  return layer_->compute_output_shape(input_shape);
}

nlohmann::json SpectralNormalization::get_config() const {
  nlohmann::json config = Layer::get_config();
  config["layer"] = {{"class_name", layer_->class_name()}, {"config", layer_->get_config()}};
  detail::write_fields(config, options_);
  return config;
}

void detail::register_spectral_normalization(Factories& f) {
  f["SpectralNormalization"] = [](const nlohmann::json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "SpectralNormalization");
    return std::make_shared<SpectralNormalization>(LayerRef(a.sublayer("layer")),
                                                   read_fields<SpectralNormalizationOptions>(a));
  };
}

}  // namespace keel::layers
