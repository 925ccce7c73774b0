// ONNX forms of keel's activations and core layers: Dense, the activation layers, Dropout and the
// other inference-time identities, Flatten / Reshape / Permute, the merging layers, Embedding and
// Rescaling.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include <cmath>

#include "io/onnx_builder.hpp"

namespace keel::io::onnx_detail {
namespace {

// The ONNX axis for softmax-like activations on keel's axis `axis`.
Value softmax_like(GraphBuilder& g, const Value& x, const char* type, std::int64_t axis, const std::string& base) {
  Value out = x;
  out.name = g.op(type, {x.name}, base, {attr("axis", g.physical_axis(x, axis))});
  return out;
}

}  // namespace

Value apply_activation(GraphBuilder& g, const Value& x, const std::string& name, const layers::Layer& layer) {
  const std::string base = layer.name() + "/" + name;
  Value out = x;
  const auto unary = [&](const char* type, std::vector<Attr> attrs = {}) {
    out.name = g.op(type, {x.name}, base, attrs);
    return out;
  };
  if (name == "linear" || name.empty() || name == "none") return x;
  if (name == "relu") return unary("Relu");
  if (name == "sigmoid") return unary("Sigmoid");
  if (name == "tanh") return unary("Tanh");
  if (name == "softplus") return unary("Softplus");
  if (name == "softsign") return unary("Softsign");
  if (name == "exponential") return unary("Exp");
  if (name == "elu") return unary("Elu", {attr("alpha", 1.0)});  // keel's elu(x, alpha = 1)
  if (name == "leaky_relu") return unary("LeakyRelu", {attr("alpha", 0.2)});  // ops::leaky_relu's default
  // Keras' selu constants (keras/src/activations: alpha 1.67326324, scale 1.05070098); ONNX's
  // Selu defaults are the same numbers to float precision.
  if (name == "selu") return unary("Selu", {attr("alpha", 1.6732632423543772), attr("gamma", 1.0507009873554805)});
  // Keras 3 hard_sigmoid: relu6(x + 3) / 6 = max(0, min(1, x / 6 + 0.5)).
  if (name == "hard_sigmoid") return unary("HardSigmoid", {attr("alpha", 1.0 / 6.0), attr("beta", 0.5)});
  if (name == "hard_sigmoid_keras2") return unary("HardSigmoid", {attr("alpha", 0.2), attr("beta", 0.5)});
  if (name == "relu6") {
    out.name = g.op("Clip", {x.name, g.scalar(base + "/min", 0.f), g.scalar(base + "/max", 6.f)}, base);
    return out;
  }
  if (name == "softmax") return softmax_like(g, x, "Softmax", -1, base);
  if (name == "log_softmax") return softmax_like(g, x, "LogSoftmax", -1, base);
  if (name == "silu" || name == "swish") {  // x * sigmoid(x)
    out.name = g.op("Mul", {x.name, g.op("Sigmoid", {x.name}, base)}, base);
    return out;
  }
  if (name == "hard_silu" || name == "hard_swish") {  // x * relu6(x + 3) / 6
    const std::string hs = g.op("HardSigmoid", {x.name}, base, {attr("alpha", 1.0 / 6.0), attr("beta", 0.5)});
    out.name = g.op("Mul", {x.name, hs}, base);
    return out;
  }
  if (name == "gelu") {  // the exact form: 0.5 x (1 + erf(x / sqrt(2))) (Gelu is an op only from opset 20)
    const std::string e = g.op("Erf", {g.op("Div", {x.name, g.scalar(base + "/sqrt2", std::sqrt(2.f))}, base)}, base);
    const std::string one_plus = g.op("Add", {e, g.scalar(base + "/one", 1.f)}, base);
    out.name = g.op("Mul", {g.op("Mul", {x.name, one_plus}, base), g.scalar(base + "/half", 0.5f)}, base);
    return out;
  }
  if (name == "mish") {  // x * tanh(softplus(x))
    out.name = g.op("Mul", {x.name, g.op("Tanh", {g.op("Softplus", {x.name}, base)}, base)}, base);
    return out;
  }
  throw ValueError(fmt::format("export_onnx: {}: the activation '{}' has no ONNX form", who(layer), name));
}

namespace {

double cfg_num(const nlohmann::json& c, const char* key, double dflt) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? dflt : it->get<double>();
}

Value dense(GraphBuilder& g, layers::Layer& layer, const Value& x0, const nlohmann::json& c) {
  const Value x = g.to_last(x0);  // acts on keel's last axis
  const WeightData k = layer_weight(layer, "kernel");
  const WeightData b = layer_weight(layer, "bias", false);
  // y = x @ kernel [in, units] + bias: MatMul broadcasts over every leading axis.
  Value out = x;
  out.shape.back() = k.shape[1];
  out.name = g.op("MatMul", {x.name, g.weight(layer.name() + "/kernel", k.data, k.shape)}, layer.name());
  if (b.present) out.name = g.op("Add", {out.name, g.weight(layer.name() + "/bias", b.data, b.shape)}, layer.name());
  return apply_activation(g, out, activation_name(c, layer), layer);
}

// Keras' ReLU layer: max_value if x >= max_value, x if threshold <= x, negative_slope (x - threshold)
// otherwise (keras/src/activations/activations.py relu).
Value relu_layer(GraphBuilder& g, layers::Layer& layer, const Value& x, const nlohmann::json& c) {
  const double slope = cfg_num(c, "negative_slope", 0), threshold = cfg_num(c, "threshold", 0);
  const auto mv = c.find("max_value");
  const std::string base = layer.name();
  Value out = x;
  if (slope == 0 && threshold == 0) {
    out.name = g.op("Relu", {x.name}, base);
  } else {
    const std::string t = g.scalar(base + "/threshold", static_cast<float>(threshold));
    const std::string below = g.op("Mul", {g.op("Sub", {x.name, t}, base), g.scalar(base + "/slope", static_cast<float>(slope))}, base);
    out.name = g.op("Where", {g.op("Less", {x.name, t}, base), below, x.name}, base);
  }
  if (mv != c.end() && !mv->is_null())
    out.name = g.op("Min", {out.name, g.scalar(base + "/max_value", mv->get<float>())}, base);
  return out;
}

// Add / Subtract / Multiply / Average / Maximum / Minimum / Concatenate on inputs of one shape
// (Keras' merging layers): in the inputs' common layout, or channels-last when they differ.
Value merge(GraphBuilder& g, layers::Layer& layer, std::vector<Value> in, const std::string& cls,
            const nlohmann::json& c) {
  if (in.size() < 2 || (cls == "Subtract" && in.size() != 2))
    throw ValueError(fmt::format("export_onnx: {}: got {} inputs", who(layer), in.size()));
  bool same = true;
  for (const auto& v : in) same = same && v.layout == in[0].layout && v.rank() == in[0].rank();
  if (!same)
    for (auto& v : in) v = g.to_last(v);
  std::vector<std::string> names;
  for (const auto& v : in) names.push_back(v.name);
  Value out = in[0];
  const std::string base = layer.name();
  if (cls == "Concatenate") {
    const std::int64_t axis = cfg(c, "axis", layer).get<std::int64_t>();
    out.name = g.op("Concat", names, base, {attr("axis", g.physical_axis(in[0], axis))});
    const std::int64_t a = axis < 0 ? axis + in[0].rank() : axis;
    std::int64_t total = 0;  // -1 (unknown) when one of the parts is
    for (const auto& v : in) {
      const std::int64_t d = v.shape[static_cast<std::size_t>(a)];
      total = total < 0 || d < 0 ? -1 : total + d;
    }
    out.shape[static_cast<std::size_t>(a)] = total;
    return out;
  }
  const auto fold = [&](const char* type) {
    std::string acc = names[0];
    for (std::size_t i = 1; i < names.size(); ++i) acc = g.op(type, {acc, names[i]}, base);
    return acc;
  };
  if (cls == "Add") out.name = g.op("Sum", names, base);
  else if (cls == "Subtract") out.name = g.op("Sub", names, base);
  else if (cls == "Multiply") out.name = fold("Mul");
  else if (cls == "Maximum") out.name = g.op("Max", names, base);
  else if (cls == "Minimum") out.name = g.op("Min", names, base);
  else if (cls == "Average") out.name = g.op("Mean", names, base);
  // Broadcast shapes (Keras allows them for Add & co.): the larger of each axis.
  for (const auto& v : in)
    for (std::size_t i = 1; i < out.shape.size() && i < v.shape.size(); ++i)
      out.shape[i] = std::max(out.shape[i], v.shape[i]);
  return out;
}

}  // namespace

// Keras' Dot (batch_dot over one axis of each input, optionally L2-normalised along it first):
// a with its axis moved last as [N, M, K], b with its axis moved second as [N, K, L], one MatMul,
// and the result shaped [N, a's other axes..., b's other axes...] ([N, 1] when none are left).
Value dot(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in0, const nlohmann::json& c) {
  if (in0.size() != 2) throw ValueError(fmt::format("export_onnx: {}: expected two inputs, got {}", who(layer), in0.size()));
  const Value a = g.to_last(in0[0]), b = g.to_last(in0[1]);
  const auto axes = cfg_ints(c, "axes", layer, 2);
  std::array<std::int64_t, 2> ax{};
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t rank = i == 0 ? a.rank() : b.rank();
    ax[i] = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax[i] <= 0 || ax[i] >= rank) throw ValueError(fmt::format("export_onnx: {}: axis {} out of range", who(layer), axes[i]));
  }
  const std::int64_t k = a.shape[static_cast<std::size_t>(ax[0])];
  if (k < 0) throw ValueError(fmt::format("export_onnx: {}: the contracted axis must have a known size", who(layer)));
  const std::string base = layer.name();
  const auto unit = [&](const std::string& x, std::int64_t axis) {  // x * min(1 / ||x||, 1e7), as keel
    const std::string sq = g.reduce("ReduceSum", g.op("Mul", {x, x}, base), {axis}, true, base);
    return g.op("Mul", {x, g.op("Min", {g.op("Reciprocal", {g.op("Sqrt", {sq}, base)}, base), g.scalar(base + "/limit", 1e7f)}, base)}, base);
  };
  std::string an = a.name, bn = b.name;
  if (c.value("normalize", false)) {
    an = unit(an, ax[0]);
    bn = unit(bn, ax[1]);
  }
  std::vector<std::int64_t> pa{0}, pb{0, ax[1]}, out_shape{-1};
  for (std::int64_t i = 1; i < a.rank(); ++i)
    if (i != ax[0]) {
      pa.push_back(i);
      out_shape.push_back(a.shape[static_cast<std::size_t>(i)]);
    }
  pa.push_back(ax[0]);
  for (std::int64_t i = 1; i < b.rank(); ++i)
    if (i != ax[1]) {
      pb.push_back(i);
      out_shape.push_back(b.shape[static_cast<std::size_t>(i)]);
    }
  if (out_shape.size() == 1) out_shape.push_back(1);
  an = g.op("Reshape", {g.transpose(an, pa, base), g.ints(base + "/a_shape", {0, -1, k})}, base);
  bn = g.op("Reshape", {g.transpose(bn, pb, base), g.ints(base + "/b_shape", {0, k, -1})}, base);
  std::vector<std::int64_t> target{0};
  target.insert(target.end(), out_shape.begin() + 1, out_shape.end());
  if (std::count(target.begin(), target.end(), -1) > 1)
    throw ValueError(fmt::format("export_onnx: {}: an output with two unknown sizes is not exported", who(layer)));
  Value out = a;
  out.shape = out_shape;
  out.name = g.op("Reshape", {g.op("MatMul", {an, bn}, base), g.ints(base + "/shape", target)}, base);
  return out;
}

bool convert_core(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  if (cls == "Dot") {
    out = dot(g, layer, in, layer.get_config());
    return true;
  }
  static const char* merges[] = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate"};
  for (const char* m : merges)
    if (cls == m) {
      out = merge(g, layer, in, cls, layer.get_config());
      return true;
    }
  // Inference-time identities: the noise and dropout layers, and the random augmentations (Keras
  // applies them in training only).
  static const char* identities[] = {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                                     "GaussianNoise", "GaussianDropout", "AlphaDropout", "Identity",
                                     "ActivityRegularization", "RandomFlip", "RandomRotation", "RandomZoom",
                                     "RandomTranslation", "RandomContrast", "RandomBrightness"};
  bool known = false;
  for (const char* m : identities) known = known || cls == m;
  const bool ours = known || cls == "Dense" || cls == "Activation" || cls == "ReLU" || cls == "LeakyReLU" ||
                    cls == "Softmax" || cls == "ELU" || cls == "Flatten" || cls == "Reshape" || cls == "Permute" ||
                    cls == "Embedding" || cls == "Rescaling" || cls == "PReLU" || cls == "ThresholdedReLU" ||
                    cls == "UnitNormalization";
  if (!ours) return false;
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  const Value& x = in[0];
  const nlohmann::json c = layer.get_config();
  const std::string base = layer.name();
  if (known) {  // inference: the input itself (Dropout's training = false)
    out = x;
    return true;
  }
  if (cls == "Dense") {
    out = dense(g, layer, x, c);
  } else if (cls == "Activation") {
    out = apply_activation(g, x, activation_name(c, layer), layer);
  } else if (cls == "ReLU") {
    out = relu_layer(g, layer, x, c);
  } else if (cls == "LeakyReLU") {
    out = x;
    out.name = g.op("LeakyRelu", {x.name}, base, {attr("alpha", cfg_num(c, "negative_slope", 0.3))});
  } else if (cls == "ELU") {
    out = x;
    out.name = g.op("Elu", {x.name}, base, {attr("alpha", cfg_num(c, "alpha", 1.0))});
  } else if (cls == "Softmax") {
    const auto& a = cfg(c, "axis", layer);
    if (!a.is_number_integer()) throw ValueError(fmt::format("export_onnx: {}: axis {} must be one integer", who(layer), a.dump()));
    out = softmax_like(g, x, "Softmax", a.get<std::int64_t>(), base);
  } else if (cls == "Flatten") {
    if (cfg_str(c, "data_format", layer, "channels_last") != "channels_last")
      throw ValueError(fmt::format("export_onnx: {}: data_format channels_first is not exported", who(layer)));
    const Value v = g.to_last(x);  // keel flattens in its own (channels-last) order
    out = v;
    std::int64_t n = 1;  // -1 (unknown) when one of the sizes is
    for (std::size_t i = 1; i < v.shape.size(); ++i) n = n < 0 || v.shape[i] < 0 ? -1 : n * v.shape[i];
    out.shape = {-1, n};
    out.name = g.op("Flatten", {v.name}, base, {attr("axis", 1)});
  } else if (cls == "Reshape") {
    const Value v = g.to_last(x);
    out = v;
    out.shape = output_shape_of(layer, {v});
    std::vector<std::int64_t> target{0};  // 0: copy the (dynamic) batch axis
    for (std::size_t i = 1; i < out.shape.size(); ++i) target.push_back(out.shape[i]);
    // One unknown size is Reshape's -1 (inferred from the element count); two are ambiguous.
    if (std::count(target.begin(), target.end(), -1) > 1)
      throw ValueError(fmt::format("export_onnx: {}: an output with two unknown sizes ({}) is not exported",
                                   who(layer), fmt::join(out.shape, ", ")));
    out.name = g.op("Reshape", {v.name, g.ints(base + "/shape", target)}, base);
  } else if (cls == "Permute") {
    const Value v = g.to_last(x);
    const auto dims = cfg_ints(c, "dims", layer, static_cast<std::size_t>(v.rank() - 1));
    std::vector<std::int64_t> perm{0};
    out = v;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      perm.push_back(dims[i]);  // Keras' dims count from 1 (the batch axis is left out)
      out.shape[i + 1] = v.shape[static_cast<std::size_t>(dims[i])];
    }
    out.name = g.transpose(v.name, perm, base);
  } else if (cls == "Embedding") {
    if (c.value("mask_zero", false))
      throw ValueError(fmt::format("export_onnx: {}: mask_zero = true is not exported (ONNX has no masks)", who(layer)));
    const WeightData e = layer_weight(layer, "embeddings");
    std::string ids = x.name;
    if (x.dtype != DType::int64 && x.dtype != DType::int32) ids = g.op("Cast", {ids}, base, {attr("to", 7)});  // INT64
    out = x;
    out.layout = Layout::last;
    out.dtype = DType::float32;
    out.shape.push_back(e.shape[1]);
    // out[..., :] = embeddings[ids[...], :]
    out.name = g.op("Gather", {g.weight(base + "/embeddings", e.data, e.shape), ids}, base, {attr("axis", 0)});
  } else if (cls == "PReLU") {
    // max(0, x) + alpha * min(0, x) with alpha [input shape without the batch] (1 on shared
    // axes): ONNX's PRelu, its slope broadcast from the right in keel's layout.
    const Value v = g.to_last(x);
    const WeightData a = layer_weight(layer, "alpha");
    out = v;
    out.name = g.op("PRelu", {v.name, g.weight(base + "/alpha", a.data, a.shape)}, base);
  } else if (cls == "ThresholdedReLU") {  // x where x > theta, else 0
    out = x;
    const std::string above = g.op("Greater", {x.name, g.scalar(base + "/theta", static_cast<float>(cfg_num(c, "theta", 1.0)))}, base);
    out.name = g.op("Where", {above, x.name, g.scalar(base + "/zero", 0.f)}, base);
  } else if (cls == "UnitNormalization") {
    // Keras' ops.normalize(order=2, epsilon=1e-12): x * min(1 / sqrt(sum x^2), 1e12) over `axis`.
    const nlohmann::json& a = cfg(c, "axis", layer);
    std::vector<std::int64_t> axes;
    if (a.is_number_integer()) axes.push_back(a.get<std::int64_t>());
    else
      for (const auto& e : a) axes.push_back(e.get<std::int64_t>());
    for (auto& ax : axes) ax = g.physical_axis(x, ax);
    const std::string sq = g.reduce("ReduceSum", g.op("Mul", {x.name, x.name}, base), axes, true, base);
    const std::string inv = g.op("Min", {g.op("Reciprocal", {g.op("Sqrt", {sq}, base)}, base), g.scalar(base + "/limit", 1e12f)}, base);
    out = x;
    out.name = g.op("Mul", {x.name, inv}, base);
  } else if (cls == "Rescaling") {  // x * scale + offset
    const auto& s = cfg(c, "scale", layer);
    if (!s.is_number()) throw ValueError(fmt::format("export_onnx: {}: a per-channel scale is not exported", who(layer)));
    out = x;
    out.dtype = DType::float32;
    // Integer inputs (uint8 images) are cast first, as Layer::operator() casts them in keel.
    const std::string xf = x.dtype == DType::float32 ? x.name : g.op("Cast", {x.name}, base, {attr("to", 1)});  // FLOAT
    out.name = g.op("Mul", {xf, g.scalar(base + "/scale", s.get<float>())}, base);
    out.name = g.op("Add", {out.name, g.scalar(base + "/offset", static_cast<float>(cfg_num(c, "offset", 0)))}, base);
  }
  return true;
}

}  // namespace keel::io::onnx_detail
