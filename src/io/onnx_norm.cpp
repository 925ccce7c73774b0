// ONNX forms of BatchNormalization (inference: the moving statistics), LayerNormalization,
// GroupNormalization and Normalization.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "io/onnx_builder.hpp"
#include "keel/layers/normalization.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel::io::onnx_detail {
namespace {

std::vector<std::int64_t> axes_of(const nlohmann::json& c, const layers::Layer& layer, std::int64_t rank) {
  const nlohmann::json& a = cfg(c, "axis", layer);
  std::vector<std::int64_t> axes;
  if (a.is_number_integer()) axes.push_back(a.get<std::int64_t>());
  else if (a.is_array())
    for (const auto& e : a) axes.push_back(e.get<std::int64_t>());
  for (auto& v : axes) {
    if (v < 0) v += rank;
    if (v <= 0 || v >= rank)
      throw ValueError(fmt::format("export_onnx: {}: axis {} does not fit a rank-{} input", who(layer), a.dump(), rank));
  }
  return axes;
}

std::vector<float> filled(const WeightData& w, std::size_t n, float v) {
  return w.present ? w.data : std::vector<float>(n, v);
}

// y = (x - moving_mean) / sqrt(moving_variance + epsilon) * gamma + beta (Keras' inference form).
Value batch_norm(GraphBuilder& g, layers::Layer& layer, const Value& x) {
  const nlohmann::json c = layer.get_config();
  const auto axes = axes_of(c, layer, x.rank());
  if (axes.size() != 1) throw ValueError(fmt::format("export_onnx: {}: several axes are not exported", who(layer)));
  const std::int64_t axis = axes[0];
  const double eps = cfg(c, "epsilon", layer).get<double>();
  const WeightData mean = layer_weight(layer, "moving_mean"), var = layer_weight(layer, "moving_variance");
  const std::size_t ch = mean.data.size();
  const WeightData gamma = layer_weight(layer, "gamma", false), beta = layer_weight(layer, "beta", false);
  const std::vector<float> gm = filled(gamma, ch, 1.f), bt = filled(beta, ch, 0.f);
  const std::string base = layer.name();
  Value out = x;
  const std::int64_t ch_i = static_cast<std::int64_t>(ch);
  if (axis == x.rank() - 1 && x.layout == Layout::first && x.rank() > 2) {
    // Already channels-first (after a convolution): ONNX's own BatchNormalization.
    out.name = g.op("BatchNormalization",
                    {x.name, g.weight(base + "/gamma", gm, {ch_i}), g.weight(base + "/beta", bt, {ch_i}),
                     g.weight(base + "/moving_mean", mean.data, {ch_i}), g.weight(base + "/moving_variance", var.data, {ch_i})},
                    base, {attr("epsilon", eps)});
    return out;
  }
  // Elsewhere the same maths folded into y = x * a + b, a = gamma / sqrt(var + eps),
  // b = beta - mean * a, broadcast along the channel axis of x's layout.
  std::vector<float> a(ch), b(ch);
  for (std::size_t i = 0; i < ch; ++i) {
    a[i] = static_cast<float>(gm[i] / std::sqrt(static_cast<double>(var.data[i]) + eps));
    b[i] = static_cast<float>(bt[i] - static_cast<double>(mean.data[i]) * a[i]);
  }
  const std::int64_t phys = g.physical_axis(x, axis);
  std::vector<std::int64_t> dims{ch_i};
  for (std::int64_t i = phys + 1; i < x.rank(); ++i) dims.push_back(1);
  out.name = g.op("Mul", {x.name, g.weight(base + "/scale", a, dims)}, base);
  out.name = g.op("Add", {out.name, g.weight(base + "/offset", b, dims)}, base);
  return out;
}

// Keras' LayerNormalization over trailing axes: mean and (biased) variance over them, then
// (x - mean) / sqrt(var + eps) * gamma + beta. Opset 17 has the op; below it is composed.
Value layer_norm(GraphBuilder& g, layers::Layer& layer, const Value& x0) {
  const nlohmann::json c = layer.get_config();
  if (c.value("rms_scaling", false))
    throw ValueError(fmt::format("export_onnx: {}: rms_scaling is not exported", who(layer)));
  const Value x = g.to_last(x0);
  auto axes = axes_of(c, layer, x.rank());
  std::sort(axes.begin(), axes.end());
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != x.rank() - static_cast<std::int64_t>(axes.size()) + static_cast<std::int64_t>(i))
      throw ValueError(fmt::format("export_onnx: {}: only trailing axes are exported, got {}", who(layer),
                                   cfg(c, "axis", layer).dump()));
  const double eps = cfg(c, "epsilon", layer).get<double>();
  std::vector<std::int64_t> pshape;
  std::int64_t count = 1;
  for (auto a : axes) {
    if (x.shape[static_cast<std::size_t>(a)] < 0)
      throw ValueError(fmt::format("export_onnx: {}: normalising over an axis of unknown size is not exported", who(layer)));
    pshape.push_back(x.shape[static_cast<std::size_t>(a)]);
    count *= pshape.back();
  }
  const WeightData gamma = layer_weight(layer, "gamma", false), beta = layer_weight(layer, "beta", false);
  const std::string base = layer.name();
  const std::string gname = g.weight(base + "/gamma", filled(gamma, static_cast<std::size_t>(count), 1.f), pshape);
  const std::string bname = g.weight(base + "/beta", filled(beta, static_cast<std::size_t>(count), 0.f), pshape);
  Value out = x;
  if (g.opset() >= 17) {
    out.name = g.op("LayerNormalization", {x.name, gname, bname}, base,
                    {attr("axis", axes.front()), attr("epsilon", eps)});
    return out;
  }
  const std::string mean = g.reduce("ReduceMean", x.name, axes, true, base);
  const std::string centred = g.op("Sub", {x.name, mean}, base);
  const std::string var = g.reduce("ReduceMean", g.op("Mul", {centred, centred}, base), axes, true, base);
  const std::string denom = g.op("Sqrt", {g.op("Add", {var, g.scalar(base + "/epsilon", static_cast<float>(eps))}, base)}, base);
  out.name = g.op("Add", {g.op("Mul", {g.op("Div", {centred, denom}, base), gname}, base), bname}, base);
  return out;
}

// Keras' GroupNormalization over the last axis: the channels split into `groups`, each group
// normalised over its channels and the spatial axes with its own (biased) moments, then
// gamma and beta per channel. Composed of Reshape / ReduceMean (no GroupNormalization below
// opset 18).
Value group_norm(GraphBuilder& g, layers::Layer& layer, const Value& x0) {
  const nlohmann::json c = layer.get_config();
  const Value x = g.to_last(x0);
  const auto axes = axes_of(c, layer, x.rank());
  if (axes.size() != 1 || axes[0] != x.rank() - 1)
    throw ValueError(fmt::format("export_onnx: {}: only the last axis is exported, got {}", who(layer), cfg(c, "axis", layer).dump()));
  const std::int64_t groups = cfg(c, "groups", layer).get<std::int64_t>(), channels = x.shape.back();
  if (channels < 0 || groups <= 0 || channels % groups != 0)
    throw ValueError(fmt::format("export_onnx: {}: {} channels in {} groups", who(layer), channels, groups));
  const double eps = cfg(c, "epsilon", layer).get<double>();
  const std::string base = layer.name();
  std::vector<std::int64_t> grouped(static_cast<std::size_t>(x.rank()) - 1, 0), reduce_axes;  // 0: keep that axis
  grouped.push_back(groups);
  grouped.push_back(channels / groups);
  for (std::int64_t a = 1; a < x.rank() - 1; ++a) reduce_axes.push_back(a);
  reduce_axes.push_back(x.rank());  // the channels within a group
  const std::string y = g.op("Reshape", {x.name, g.ints(base + "/grouped", grouped)}, base);
  const std::string centred = g.op("Sub", {y, g.reduce("ReduceMean", y, reduce_axes, true, base)}, base);
  const std::string var = g.reduce("ReduceMean", g.op("Mul", {centred, centred}, base), reduce_axes, true, base);
  const std::string denom = g.op("Sqrt", {g.op("Add", {var, g.scalar(base + "/epsilon", static_cast<float>(eps))}, base)}, base);
  std::vector<std::int64_t> back(static_cast<std::size_t>(x.rank()) - 1, 0);
  back.push_back(channels);
  std::string out_name = g.op("Reshape", {g.op("Div", {centred, denom}, base), g.ints(base + "/ungrouped", back)}, base);
  const WeightData gamma = layer_weight(layer, "gamma", false), beta = layer_weight(layer, "beta", false);
  if (gamma.present) out_name = g.op("Mul", {out_name, g.weight(base + "/gamma", gamma.data, {channels})}, base);
  if (beta.present) out_name = g.op("Add", {out_name, g.weight(base + "/beta", beta.data, {channels})}, base);
  Value out = x;
  out.name = out_name;
  return out;
}

// Keras' Normalization (inference with its adapted or given statistics):
// (x - mean) / max(sqrt(variance), 1e-7), or with invert = true mean + x * max(sqrt(variance), 1e-7).
// The statistics are broadcast over the axes not kept, as keel's mean() / variance() give them.
Value normalization(GraphBuilder& g, layers::Normalization& layer, const Value& x0) {
  const Value x = g.to_last(x0);
  const Tensor mean = layer.mean().astype(DType::float32).contiguous();
  const Tensor sd = maximum(sqrt(layer.variance().astype(DType::float32)), 1e-7).contiguous();
  if (mean.rank() != x.rank())
    throw ValueError(fmt::format("export_onnx: {}: built for rank {}, called on rank {}", who(layer), mean.rank(), x.rank()));
  const std::string base = layer.name();
  const std::string m = g.weight(base + "/mean", mean.to_vector<float>(), mean.shape().dims());
  const std::string s = g.weight(base + "/stddev", sd.to_vector<float>(), sd.shape().dims());
  Value out = x;
  out.dtype = DType::float32;
  const bool invert = layer.get_config().value("invert", false);
  out.name = invert ? g.op("Add", {m, g.op("Mul", {x.name, s}, base)}, base)
                    : g.op("Div", {g.op("Sub", {x.name, m}, base), s}, base);
  return out;
}

}  // namespace

bool convert_norm(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  if (cls != "BatchNormalization" && cls != "LayerNormalization" && cls != "GroupNormalization" && cls != "Normalization")
    return false;
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  if (cls == "Normalization") {
    auto* n = dynamic_cast<layers::Normalization*>(&layer);
    if (!n) throw ValueError(fmt::format("export_onnx: {} is not keel's Normalization", who(layer)));
    out = normalization(g, *n, in[0]);
    return true;
  }
  out = cls == "BatchNormalization" ? batch_norm(g, layer, in[0])
        : cls == "LayerNormalization" ? layer_norm(g, layer, in[0])
                                      : group_norm(g, layer, in[0]);
  return true;
}

}  // namespace keel::io::onnx_detail
