// quantize(): the model rewritten with QuantizedLayer wrappers (models/config_rewrite.hpp), the
// weights quantized from the original's, and for "static" the input ranges calibrated; and
// QuantizedLayer's registration.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>

#include "backend/int8.hpp"
#include "keel/layers/registry.hpp"
#include "keel/ops/shape.hpp"
#include "keel/quantization/quantization.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/layer_util.hpp"
#include "layers/config_args.hpp"
#include "models/config_rewrite.hpp"

namespace keel::quantization {

namespace {

using nlohmann::json;

void each_layer(models::Model& model, const std::function<void(layers::Layer&)>& fn) {
  for (const auto& l : model.layers()) {
    if (auto* m = dynamic_cast<models::Model*>(l.get())) each_layer(*m, fn);
    else fn(*l);
  }
}

}  // namespace

std::string int8_kernel_level() { return backend::int8::kernel_level(); }

std::shared_ptr<models::Model> quantize(models::Model& model, QuantizeOptions options,
                                        std::optional<Tensor> calibration_x) {
  const char* op = "quantize";
  models::detail::check_model(model, op);
  if (!model.built()) throw ValueError(fmt::format("quantize: build '{}' first (call it once, or give it an Input)", model.name()));
  // The options are checked once here, with the messages QuantizedLayer's constructor gives.
  const bool int8 = options.dtype == "int8";
  if (int8 && options.activations == "static" && !calibration_x)
    throw ValueError("quantize: activations = \"static\" needs calibration_x (representative inputs)");
  if (calibration_x && !(int8 && options.activations == "static"))
    throw ValueError("quantize: calibration_x is used by int8 with activations = \"static\" only");

  std::map<std::string, layers::Layer*> originals;
  each_layer(model, [&](layers::Layer& l) { originals[l.name()] = &l; });
  const json cfg = models::detail::rewrite_model(model.get_config(), [&](const json& entry) -> json {
    auto layer = layers::deserialize(entry);
    if (!is_quantizable(*layer)) return nullptr;
    return layers::serialize(QuantizedLayer(layer, options));
  });
  auto quantized = models::detail::rebuild(model.class_name(), cfg, op);
  models::detail::copy_weights(model, *quantized, {}, op);

  std::vector<QuantizedLayer*> wrappers;
  each_layer(*quantized, [&](layers::Layer& l) {
    if (auto* q = dynamic_cast<QuantizedLayer*>(&l)) wrappers.push_back(q);
  });
  for (QuantizedLayer* q : wrappers) {
    if (!q->built())
      throw ValueError(fmt::format("quantize: '{}' was not built by the rebuilt model; give the model an Input", q->name()));
    layers::Layer* original = originals.at(q->layer()->name());
    std::vector<std::pair<std::string, Tensor>> weights;
    for (Variable* v : original->weights())
      weights.emplace_back(layers::detail::relative_weight_name(v->name(), original->name()), v->peek());
    q->set_float_weights(weights);
  }

  if (calibration_x) {
    const Tensor& x = *calibration_x;
    if (x.rank() < 1 || x.shape()[0] < 1)
      throw ValueError(fmt::format("quantize: calibration_x {} holds no samples", x.shape().to_string()));
    for (QuantizedLayer* q : wrappers) q->begin_calibration();
    const std::int64_t n = x.shape()[0], batch = 32;
    for (std::int64_t b = 0; b < n; b += batch) {
      std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), size = x.shape().dims();
      begin[0] = b;
      size[0] = std::min(batch, n - b);
      (*quantized)(slice(x, begin, size), false);
    }
    for (QuantizedLayer* q : wrappers) q->finish_calibration();
  }
  return quantized;
}

}  // namespace keel::quantization

namespace keel::layers::detail {

void register_quantization_layers(Factories& f) {
  f["QuantizedLayer"] = [](const nlohmann::json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "QuantizedLayer");
    quantization::QuantizeOptions o;
    o.dtype = a.text("dtype_quantized", o.dtype);
    o.per_channel = a.flag("per_channel", o.per_channel);
    o.activations = a.text("activations", o.activations);
    o.calibration = a.text("calibration", o.calibration);
    o.percentile = a.number("percentile", o.percentile);
    return std::make_shared<quantization::QuantizedLayer>(LayerRef(a.sublayer("layer")), o);
  };
}

}  // namespace keel::layers::detail
