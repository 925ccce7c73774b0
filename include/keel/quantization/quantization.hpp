#pragma once
// Post-training quantization (TFLite's converter optimizations and PyTorch's quantize_dynamic, on
// keel models):
//
//   auto q = quantization::quantize(model);                      // int8 weights, dynamic activations
//   auto s = quantization::quantize(model, {.activations = "static"}, x_calibration);
//   auto h = quantization::quantize(model, {.dtype = "float16"});
//   q->save("model_int8.keras");  q->predict(x);  io::export_onnx(*q, "q.onnx");
//
// int8: each Dense, Conv1D, Conv2D, DepthwiseConv2D, LSTM and Embedding layer becomes a
// QuantizedLayer holding its weights as symmetric int8 (one scale per output channel when
// per_channel: scale = max|w| / 127), stored as uint8 codes (q + 128). Dense, the convolutions
// and LSTM quantize their input to unsigned 7-bit codes (scale and zero point from each batch's
// range with "dynamic", from the range seen on calibration_x with "static") and multiply in
// int8 with int32 accumulation; bias and ReLU are applied in the kernel's epilogue, and the
// output is float32. Embedding looks rows up and dequantizes them.
// float16: the same layers store their weights as float16 and compute in float32.
// Layers of other classes, and configurations the int8 kernels do not cover (channels_first,
// grouped convolutions, stateful or return_state LSTMs), are left as they are, in float32;
// is_quantizable() says which. The int8 kernels run on the CPU (a tensor elsewhere, and an LSTM
// given a mask, is computed in float32 from the dequantized weights).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/models/model.hpp"

namespace keel::quantization {

struct QuantizeOptions {
  std::string dtype = "int8";           // "int8" | "float16"
  bool per_channel = true;              // weights: symmetric per output channel, else per tensor
  std::string activations = "dynamic";  // "dynamic" | "static" (needs calibration_x)
  // Static calibration: "minmax" (the range of every value seen) or "percentile" (the
  // [100 - percentile, percentile] percentiles of the values seen, which ignores outliers).
  std::string calibration = "minmax";
  double percentile = 99.99;
};

// The instruction set the int8 kernels use here: "avx512vnni", "avx2" or "scalar" (the best the
// processor has; KEEL_SIMD=avx2 or sse2 caps it).
std::string int8_kernel_level();

// True when `layer` is of a class and configuration quantize() converts.
bool is_quantizable(const layers::Layer& layer);

// A new model (the original unchanged, not compiled) with every quantizable layer replaced by a
// QuantizedLayer named "quant_<layer name>". Sequential and functional models, nested ones
// included. ValueError for bad options, a subclassed model, or "static" without calibration_x
// (which is fed through the model in batches of 32 to record each layer's input range).
std::shared_ptr<models::Model> quantize(models::Model& model, QuantizeOptions options = {},
                                        std::optional<Tensor> calibration_x = {});

// The wrapper quantize() puts in place of a layer. Its weights (all non-trainable):
//   int8:    <w>_quantized (uint8 codes, the shape of w) and <w>_scale (float32) for each of the
//            layer's kernels (kernel, depthwise_kernel, recurrent_kernel, embeddings), its other
//            weights (bias) as they were, and for "static" input_range ([lo, hi], float32);
//   float16: <w>_float16 for each kernel, the other weights as they were.
class QuantizedLayer : public layers::Layer {
 public:
  explicit QuantizedLayer(layers::LayerRef layer, QuantizeOptions options = {});
  KEEL_LAYER_BOILERPLATE(QuantizedLayer)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  Shape compute_output_shape(const Shape& input_shape) override;
  nlohmann::json get_config() const override;

  const std::shared_ptr<layers::Layer>& layer() const { return layer_; }
  const QuantizeOptions& options() const { return options_; }

  // Fills the quantized weights from float ones of the wrapped layer's class (by relative name:
  // "kernel", "bias", ...), as quantize() does with the original layer's weights.
  void set_float_weights(const std::vector<std::pair<std::string, Tensor>>& weights);
  // The wrapped layer holding the values this layer computes with (the dequantized int8 or the
  // float16 weights, as float32): what export_onnx writes, with the int8 ones as DequantizeLinear.
  layers::Layer& dequantized_layer();
  // The calibrated [lo, hi] of "static" (empty for "dynamic" or float16).
  std::optional<std::array<float, 2>> input_range() const;
  // Static calibration: while on, calls record the input range (and a sample for percentiles)
  // and compute with the batch's own range; finish_calibration() stores input_range.
  void begin_calibration();
  void finish_calibration();

 protected:
  Autocast autocast() const override { return Autocast::none; }

 private:
  struct State;
  Tensor call_int8(const Tensor& x);
  void sync_inner();  // float16 (and fallbacks): the wrapped layer's weights from the stored ones
  std::shared_ptr<layers::Layer> layer_;
  QuantizeOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace keel::quantization
