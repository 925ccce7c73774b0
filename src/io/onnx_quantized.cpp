// export_onnx of quantization::QuantizedLayer, in ONNX's QDQ form: each int8 kernel is an int8
// initializer with its scales through DequantizeLinear (per output channel: the axis where the
// converter put it), and the layer's input goes through the same 7-bit quantization keel applies
// (the calibrated range of "static", or the input's own range with "dynamic", computed by
// ReduceMin/ReduceMax), written with Round and Clip so that ONNX Runtime computes the codes keel
// does. float16 kernels are float16 initializers and a Cast. An int8 LSTM (its state is quantized
// at every step, which ONNX's LSTM cannot express) is a ValueError.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "io/onnx_builder.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/quantization/quantization.hpp"

namespace keel::io::onnx_detail {

namespace {

using i64 = std::int64_t;

// Codes and scales of int8 values that are q * scale[c] along `axis` (axis -1: one scale),
// recovered from their float values; false when they are not.
bool recover_codes(const std::vector<float>& v, const std::vector<i64>& dims, int axis, std::vector<std::int8_t>& q,
                   std::vector<float>& scale) {
  i64 outer = 1, channels = 1, inner = 1;
  if (axis >= 0) {
    channels = dims[static_cast<std::size_t>(axis)];
    for (int d = 0; d < axis; ++d) outer *= dims[static_cast<std::size_t>(d)];
    for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < dims.size(); ++d) inner *= dims[d];
  } else {
    inner = static_cast<i64>(v.size());
  }
  std::vector<float> maxabs(static_cast<std::size_t>(channels), 0.0f);
  for (i64 o = 0; o < outer; ++o)
    for (i64 c = 0; c < channels; ++c)
      for (i64 i = 0; i < inner; ++i)
        maxabs[static_cast<std::size_t>(c)] =
            std::max(maxabs[static_cast<std::size_t>(c)], std::fabs(v[static_cast<std::size_t>((o * channels + c) * inner + i)]));
  scale.resize(maxabs.size());
  for (std::size_t c = 0; c < scale.size(); ++c) scale[c] = maxabs[c] > 0 ? maxabs[c] / 127.0f : 1.0f;
  q.resize(v.size());
  for (i64 o = 0; o < outer; ++o)
    for (i64 c = 0; c < channels; ++c)
      for (i64 i = 0; i < inner; ++i) {
        const std::size_t at = static_cast<std::size_t>((o * channels + c) * inner + i);
        const float s = scale[static_cast<std::size_t>(c)];
        const float r = std::nearbyint(v[at] / s);
        if (std::fabs(r) > 127.0f || std::fabs(r * s - v[at]) > 1e-5f * std::fabs(v[at]) + 1e-30f) return false;
        q[at] = static_cast<std::int8_t>(r);
      }
  return true;
}

// keel's activation quantization of x (cpu/int8_gemm.hpp): codes clamp(round(x / scale) + zp, 0,
// 127), and back: (code - zp) * scale. scale and zp are graph values (scalars).
std::string fake_quantize(GraphBuilder& g, const std::string& x, const std::string& scale, const std::string& zp,
                          const std::string& base) {
  std::string t = g.op("Mul", {x, g.op("Reciprocal", {scale}, base)}, base);
  t = g.op("Clip", {t, g.scalar(base + "/lo", -256.0f), g.scalar(base + "/hi", 256.0f)}, base);
  t = g.op("Add", {g.op("Round", {t}, base), zp}, base);
  t = g.op("Clip", {t, g.scalar(base + "/zero", 0.0f), g.scalar(base + "/top", 127.0f)}, base);
  return g.op("Mul", {g.op("Sub", {t, zp}, base), scale}, base);
}

std::string quantized_input(GraphBuilder& g, const Value& x, quantization::QuantizedLayer& q, const std::string& base) {
  if (auto range = q.input_range()) {
    // The constants params_for_range computes (cpu/int8_gemm.cpp), in the same float arithmetic.
    const float lo = std::min((*range)[0], 0.0f), hi = std::max((*range)[1], 0.0f);
    const float scale = hi > lo ? (hi - lo) / 127.0f : 1.0f;
    const float zp = std::clamp(std::nearbyint(-lo / scale), 0.0f, 127.0f);
    return fake_quantize(g, x.name, g.scalar(base + "/input_scale", scale), g.scalar(base + "/input_zero_point", zp), base);
  }
  std::vector<i64> all;
  for (i64 d = 0; d < x.rank(); ++d) all.push_back(d);
  const std::string zero = g.scalar(base + "/zero", 0.0f);
  const std::string lo = g.op("Min", {g.reduce("ReduceMin", x.name, all, false, base), zero}, base);
  const std::string hi = g.op("Max", {g.reduce("ReduceMax", x.name, all, false, base), zero}, base);
  const std::string width = g.op("Div", {g.op("Sub", {hi, lo}, base), g.scalar(base + "/levels", 127.0f)}, base);
  const std::string scale = g.op("Where", {g.op("Greater", {hi, lo}, base), width, g.scalar(base + "/one", 1.0f)}, base);
  std::string zp = g.op("Round", {g.op("Div", {g.op("Neg", {lo}, base), scale}, base)}, base);
  zp = g.op("Clip", {zp, zero, g.scalar(base + "/top", 127.0f)}, base);
  return fake_quantize(g, x.name, scale, zp, base);
}

}  // namespace

bool convert_quantized(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  auto* q = dynamic_cast<quantization::QuantizedLayer*>(&layer);
  if (!q) return false;
  layers::Layer& inner = q->dequantized_layer();
  const bool int8 = q->options().dtype == "int8";
  const std::string cls = inner.class_name(), base = layer.name();
  if (int8 && cls == "LSTM")
    throw ValueError(fmt::format("export_onnx: {}: an int8 LSTM quantizes its state at every step, which ONNX's LSTM "
                                 "cannot express (export the float32 model, or quantize with dtype float16)",
                                 who(layer)));
  // The kernels: initializers of rank >= 2 with as many values as one of them.
  std::set<i64> sizes;
  for (Variable* v : inner.weights())
    if (v->shape().rank() >= 2) sizes.insert(v->shape().num_elements());
  g.weight_hook = [&](const std::string& wbase, const std::vector<float>& data, const std::vector<i64>& dims) -> std::string {
    if (dims.size() < 2 || !sizes.count(static_cast<i64>(data.size()))) return "";
    if (!int8) {
      const Tensor half = cast(constant(data, Shape(dims)), DType::float16);
      const auto* bits = static_cast<const std::uint16_t*>(half.raw_data());
      return g.op("Cast", {g.float16s(wbase + "_float16", std::vector<std::uint16_t>(bits, bits + data.size()), dims)},
                  wbase, {attr("to", 1)});  // to FLOAT
    }
    std::vector<std::int8_t> codes;
    std::vector<float> scales;
    int axis = -2;
    if (!q->options().per_channel && recover_codes(data, dims, -1, codes, scales)) axis = -1;
    for (int a = 0; axis == -2 && a < static_cast<int>(dims.size()); ++a)
      if (recover_codes(data, dims, a, codes, scales)) axis = a;
    if (axis == -2) return "";  // not an int8 kernel after all: a plain initializer
    const std::string c = g.int8s(wbase + "_quantized", codes, dims);
    if (axis == -1)
      return g.op("DequantizeLinear", {c, g.scalar(wbase + "_scale", scales[0]), g.int8s(wbase + "_zero_point", {0}, {})},
                  wbase);
    const i64 n = static_cast<i64>(scales.size());
    return g.op("DequantizeLinear",
                {c, g.weight(wbase + "_scale", scales, {n}), g.int8s(wbase + "_zero_point", std::vector<std::int8_t>(scales.size(), 0), {n})},
                wbase, {attr("axis", static_cast<i64>(axis))});
  };
  std::vector<Value> xin = in;
  try {
    if (int8 && cls != "Embedding") xin[0].name = quantized_input(g, in[0], *q, base);
    out = convert_layer(g, inner, xin);
  } catch (...) {
    g.weight_hook = nullptr;
    throw;
  }
  g.weight_hook = nullptr;
  return true;
}

}  // namespace keel::io::onnx_detail
