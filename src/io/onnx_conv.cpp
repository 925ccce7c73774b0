// ONNX forms of keel's convolutions and poolings (1-D, 2-D and 3-D; depthwise, separable and
// transposed convolutions). ONNX's Conv, ConvTranspose, MaxPool and
// AveragePool are channels-first: the input is moved to Layout::first (a Transpose only when it
// is not there yet) and the output stays there, so consecutive convolutions need no Transposes.
#include <fmt/core.h>

#include <algorithm>

#include "io/onnx_builder.hpp"

namespace keel::io::onnx_detail {
namespace {

// Keras' padding as ONNX attributes for spatial sizes `in` (-1: unknown): explicit pads
// [begin_1..begin_k, end_1..end_k] for
//   valid: none;  causal (Conv1D): (k - 1) d at the start;
//   same: total = max((ceil(in / s) - 1) s + (k - 1) d + 1 - in, 0), begin = total / 2 (TensorFlow's
//   rule: the odd extra element goes at the end); with s = 1 that is (k - 1) d for any size.
// "same" with a stride over an unknown size depends on the size at run time: auto_pad SAME_UPPER,
// ONNX's form of the same rule.
std::vector<Attr> padding_attrs(const std::string& padding, const std::vector<std::int64_t>& in,
                                const std::vector<std::int64_t>& k, const std::vector<std::int64_t>& s,
                                const std::vector<std::int64_t>& d, const layers::Layer& layer) {
  const std::size_t n = in.size();
  std::vector<std::int64_t> pads(2 * n, 0);
  if (padding == "same")
    for (std::size_t i = 0; i < n; ++i)
      if (in[i] < 0 && s[i] != 1) return {attr("auto_pad", "SAME_UPPER")};
  if (padding == "valid") return {attr("pads", pads)};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t eff = (k[i] - 1) * d[i] + 1;
    if (padding == "causal") {
      pads[i] = eff - 1;
    } else if (padding == "same") {
      const std::int64_t size = in[i] < 0 ? 1 : in[i];  // s = 1 here: the pads do not depend on it
      const std::int64_t out = (size + s[i] - 1) / s[i];
      const std::int64_t total = std::max<std::int64_t>((out - 1) * s[i] + eff - size, 0);
      pads[i] = total / 2;
      pads[n + i] = total - total / 2;
    } else {
      throw ValueError(fmt::format("export_onnx: {}: unknown padding '{}'", who(layer), padding));
    }
  }
  return {attr("pads", pads)};
}

std::vector<std::int64_t> spatial(const Value& v) { return {v.shape.begin() + 1, v.shape.end() - 1}; }

// The number of spatial axes of a convolution or pooling class ("Conv3D" -> 3).
std::size_t spatial_rank(const std::string& cls) {
  return cls.find("1D") != std::string::npos ? 1 : cls.find("3D") != std::string::npos ? 3 : 2;
}

// [n, n + 1, 0, ..., n - 1]: a kernel [k..., a, b] as [a, b, k...].
std::vector<std::int64_t> channels_first_perm(std::size_t n) {
  std::vector<std::int64_t> perm{static_cast<std::int64_t>(n), static_cast<std::int64_t>(n) + 1};
  for (std::size_t i = 0; i < n; ++i) perm.push_back(static_cast<std::int64_t>(i));
  return perm;
}

// A kernel [k..., a, b] as ONNX's weight [b, a, k...] (Conv's [C_out, C_in / group, k...] from
// Keras' [k..., C_in / group, C_out]; ConvTranspose's [C_in, C_out, k...] from [k..., C_out, C_in]).
std::string swapped_kernel(GraphBuilder& g, const WeightData& w, const std::string& name, std::size_t n) {
  std::vector<std::int64_t> perm{static_cast<std::int64_t>(n) + 1, static_cast<std::int64_t>(n)};
  std::vector<std::int64_t> dims{w.shape[n + 1], w.shape[n]};
  for (std::size_t i = 0; i < n; ++i) {
    perm.push_back(static_cast<std::int64_t>(i));
    dims.push_back(w.shape[i]);
  }
  return g.weight(name, permute(w.data, w.shape, perm), dims);
}

// A depthwise kernel [k..., in, m] as ONNX's grouped-convolution weight [in * m, 1, k...]: output
// channel c * m + j, as Keras orders them, with one group per input channel.
std::string depthwise_weight(GraphBuilder& g, layers::Layer& layer, std::size_t n, const std::string& name) {
  const WeightData w = layer_weight(layer, "depthwise_kernel");
  std::vector<std::int64_t> dims{w.shape[n] * w.shape[n + 1], 1};
  for (std::size_t i = 0; i < n; ++i) dims.push_back(w.shape[i]);
  return g.weight(name, permute(w.data, w.shape, channels_first_perm(n)), dims);
}

// Conv1D/2D/3D, DepthwiseConv1D/2D, SeparableConv1D/2D and Conv1D/2D/3DTranspose.
Value conv(GraphBuilder& g, layers::Layer& layer, const Value& x0, const std::string& cls) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  const std::size_t n = spatial_rank(cls);
  if (x0.rank() != static_cast<std::int64_t>(n) + 2)
    throw ValueError(fmt::format("export_onnx: {}: expected a rank-{} input, got rank {}", who(layer), n + 2, x0.rank()));
  const auto k = cfg_ints(c, "kernel_size", layer, n), s = cfg_ints(c, "strides", layer, n),
             d = cfg_ints(c, "dilation_rate", layer, n);
  const std::string padding = cfg_str(c, "padding", layer, "valid");
  const std::string base = layer.name();
  const std::vector<std::int64_t> out_shape = output_shape_of(layer, {x0});
  const Value x = g.to_first(x0);
  const std::int64_t cin = x0.shape.back();
  std::vector<Attr> attrs{attr("kernel_shape", k), attr("strides", s), attr("dilations", d)};
  std::string type = "Conv", wname;
  const bool transposed = cls.find("Transpose") != std::string::npos;
  if (cls.rfind("Depthwise", 0) == 0 || cls.rfind("Separable", 0) == 0) {
    wname = depthwise_weight(g, layer, n, base + "/depthwise_kernel");
    attrs.push_back(attr("group", cin));
  } else if (transposed) {
    // kernel [k..., filters, in] -> W [in, filters, k...] (ConvTranspose's [C_in, C_out / group, ...]).
    wname = swapped_kernel(g, layer_weight(layer, "kernel"), base + "/kernel", n);
    type = "ConvTranspose";
  } else {
    // kernel [k..., in / groups, out] -> W [out, in / groups, k...].
    wname = swapped_kernel(g, layer_weight(layer, "kernel"), base + "/kernel", n);
    const auto gi = c.find("groups");
    attrs.push_back(attr("group", gi == c.end() || gi->is_null() ? std::int64_t{1} : gi->get<std::int64_t>()));
  }
  if (transposed) {
    // keel's output length L (Keras' deconv_output_length) from ONNX's
    //   L = s (in - 1) + output_padding + (k - 1) d + 1 - pad_begin - pad_end,
    // with the pads of the forward "same" convolution from L to in, and output_padding the rest.
    // The output length is s * in + a constant (keel's deconv lengths), so the pads and
    // output_padding below do not depend on `in`: an unknown size is worked out at one size.
    constexpr std::int64_t kSomeSize = 32;
    std::vector<std::int64_t> pads(2 * n, 0), opad(n, 0);
    auto in = spatial(x0);
    const std::vector<std::int64_t> out_at = output_shape_at(layer, {x0}, kSomeSize);
    for (std::size_t i = 0; i < n; ++i) {
      if (in[i] < 0) in[i] = kSomeSize;
      const std::int64_t eff = (k[i] - 1) * d[i] + 1, len = out_at[i + 1];
      if (padding == "same") {
        const std::int64_t total = std::max<std::int64_t>((in[i] - 1) * s[i] + eff - len, 0);
        pads[i] = total / 2;
        pads[n + i] = total - total / 2;
      }
      opad[i] = len - (s[i] * (in[i] - 1) + eff - pads[i] - pads[n + i]);
      if (opad[i] < 0 || (opad[i] >= s[i] && opad[i] >= d[i]))
        throw ValueError(fmt::format("export_onnx: {}: output length {} cannot be expressed by ConvTranspose", who(layer), len));
    }
    attrs.push_back(attr("pads", pads));
    attrs.push_back(attr("output_padding", opad));
  } else {
    for (Attr& a : padding_attrs(padding, spatial(x0), k, s, d, layer)) attrs.push_back(std::move(a));
  }
  std::vector<std::string> inputs{x.name, wname};
  const WeightData b = layer_weight(layer, "bias", false);
  const bool separable = cls.rfind("Separable", 0) == 0;
  if (b.present && !separable) inputs.push_back(g.weight(base + "/bias", b.data, b.shape));
  Value out = x;
  out.shape = out_shape;
  out.name = g.op(type, inputs, separable ? base + "/depthwise" : base, attrs);
  if (separable) {
    // Keras' SeparableConv: the depthwise convolution above, then a 1x1 convolution
    // pointwise_kernel [1..., in * m, filters] -> W [filters, in * m, 1...], with the bias.
    std::vector<std::string> pw_inputs{out.name, swapped_kernel(g, layer_weight(layer, "pointwise_kernel"),
                                                                base + "/pointwise_kernel", n)};
    if (b.present) pw_inputs.push_back(g.weight(base + "/bias", b.data, b.shape));
    out.name = g.op("Conv", pw_inputs, base, {attr("kernel_shape", std::vector<std::int64_t>(n, 1))});
  }
  return apply_activation(g, out, activation_name(c, layer), layer);
}

Value pool(GraphBuilder& g, layers::Layer& layer, const Value& x0, const std::string& cls) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  const std::size_t n = spatial_rank(cls);
  if (x0.rank() != static_cast<std::int64_t>(n) + 2)
    throw ValueError(fmt::format("export_onnx: {}: expected a rank-{} input, got rank {}", who(layer), n + 2, x0.rank()));
  const auto k = cfg_ints(c, "pool_size", layer, n);
  const auto& sj = cfg(c, "strides", layer);
  const auto s = sj.is_null() ? k : cfg_ints(c, "strides", layer, n);
  const std::vector<std::int64_t> ones(n, 1);
  const Value x = g.to_first(x0);
  Value out = x;
  out.shape = output_shape_of(layer, {x0});
  // Keras' "same" average excludes the padding (ONNX count_include_pad = 0, the default); the
  // max ignores it.
  std::vector<Attr> attrs{attr("kernel_shape", k), attr("strides", s)};
  for (Attr& a : padding_attrs(cfg_str(c, "padding", layer, "valid"), spatial(x0), k, s, ones, layer))
    attrs.push_back(std::move(a));
  out.name = g.op(cls.rfind("Max", 0) == 0 ? "MaxPool" : "AveragePool", {x.name}, layer.name(), attrs);
  return out;
}

// GlobalAveragePooling / GlobalMaxPooling 1D/2D/3D: a reduction over the spatial axes of whichever
// layout the input is in (no Transpose needed).
Value global_pool(GraphBuilder& g, layers::Layer& layer, const Value& x, const std::string& cls) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  const std::size_t n = spatial_rank(cls);
  if (x.rank() != static_cast<std::int64_t>(n) + 2)
    throw ValueError(fmt::format("export_onnx: {}: expected a rank-{} input, got rank {}", who(layer), n + 2, x.rank()));
  const bool keepdims = c.value("keepdims", false);
  std::vector<std::int64_t> axes;
  for (std::size_t i = 1; i <= n; ++i) axes.push_back(g.physical_axis(x, static_cast<std::int64_t>(i)));
  Value out = x;
  out.name = g.reduce(cls.find("Max") != std::string::npos ? "ReduceMax" : "ReduceMean", x.name, axes, keepdims,
                      layer.name());
  if (keepdims) {
    for (std::size_t i = 1; i <= n; ++i) out.shape[i] = 1;
  } else {
    out.shape = {-1, x.shape.back()};
    out.layout = Layout::last;
  }
  return out;
}

}  // namespace

bool convert_conv(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  const auto one_of = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (cls == n) return true;
    return false;
  };
  const bool is_conv = one_of({"Conv1D", "Conv2D", "Conv3D", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D",
                               "SeparableConv2D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"});
  const bool is_pool = one_of({"MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D",
                               "AveragePooling3D"});
  const bool is_global = one_of({"GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
                                 "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D"});
  if (!is_conv && !is_pool && !is_global) return false;
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  if (is_conv) out = conv(g, layer, in[0], cls);
  else if (is_pool) out = pool(g, layer, in[0], cls);
  else out = global_pool(g, layer, in[0], cls);
  return true;
}

}  // namespace keel::io::onnx_detail
