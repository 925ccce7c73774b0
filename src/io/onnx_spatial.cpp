// ONNX forms of the layers that move data along the spatial axes without weights:
// UpSampling1D/2D/3D (Resize), ZeroPadding1D/2D/3D (Pad), Cropping1D/2D/3D (Slice), RepeatVector
// (Unsqueeze + Tile), and TimeDistributed (its inner layer's converter on [batch * time, ...]).
// The first three work in whichever layout their input is in: a convolution's channels-first
// output is padded, cropped or upsampled without a Transpose.
#include <fmt/core.h>

#include <array>
#include <limits>

#include "io/onnx_builder.hpp"
#include "keel/layers/recurrent.hpp"

namespace keel::io::onnx_detail {
namespace {

std::size_t spatial_axes(const std::string& cls) { return cls.back() == 'D' ? static_cast<std::size_t>(cls[cls.size() - 2] - '0') : 0; }

void check_rank(const layers::Layer& layer, const Value& x, std::size_t n) {
  if (x.rank() != static_cast<std::int64_t>(n) + 2)
    throw ValueError(fmt::format("export_onnx: {}: expected a rank-{} input, got rank {}", who(layer), n + 2, x.rank()));
}

// Keras' margins of ZeroPadding / Cropping as (before, after) per spatial axis: ZeroPadding1D's
// config holds one pair [b, a], the 2-D and 3-D ones a pair per axis.
std::vector<std::array<std::int64_t, 2>> margins(const nlohmann::json& c, const char* key, const layers::Layer& layer,
                                                 std::size_t n) {
  const nlohmann::json& m = cfg(c, key, layer);
  std::vector<std::array<std::int64_t, 2>> out;
  const auto pair = [&](const nlohmann::json& p) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
      throw ValueError(fmt::format("export_onnx: {}: {} {} is not a list of (before, after) pairs", who(layer), key, m.dump()));
    out.push_back({p[0].get<std::int64_t>(), p[1].get<std::int64_t>()});
  };
  if (n == 1 && m.is_array() && m.size() == 2 && m[0].is_number_integer()) {
    pair(m);
  } else if (m.is_array() && m.size() == n) {
    for (const auto& p : m) pair(p);
  } else {
    throw ValueError(fmt::format("export_onnx: {}: {} {} does not give {} axes", who(layer), key, m.dump(), n));
  }
  return out;
}

Value upsampling(GraphBuilder& g, layers::Layer& layer, const Value& x, std::size_t n) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  check_rank(layer, x, n);
  const auto size = cfg_ints(c, "size", layer, n);
  const std::string interpolation = cfg_str(c, "interpolation", layer, "nearest");
  std::vector<float> scales(static_cast<std::size_t>(x.rank()), 1.f);
  for (std::size_t i = 0; i < n; ++i)
    scales[static_cast<std::size_t>(g.physical_axis(x, static_cast<std::int64_t>(i) + 1))] = static_cast<float>(size[i]);
  std::vector<Attr> attrs;
  if (interpolation == "nearest") {
    // Keras repeats each element: output i reads input floor(i / size).
    attrs = {attr("mode", "nearest"), attr("coordinate_transformation_mode", "asymmetric"), attr("nearest_mode", "floor")};
  } else if (interpolation == "bilinear") {
    // tf.image.resize's bilinear with half-pixel centres, no antialiasing (what keel computes).
    attrs = {attr("mode", "linear"), attr("coordinate_transformation_mode", "half_pixel")};
  } else {
    throw ValueError(fmt::format("export_onnx: {}: interpolation '{}' is not exported", who(layer), interpolation));
  }
  const std::string base = layer.name();
  Value out = x;
  out.shape = output_shape_of(layer, {x});
  out.name = g.op("Resize", {x.name, "", g.weight(base + "/scales", scales, {x.rank()})}, base, attrs);
  return out;
}

Value zero_padding(GraphBuilder& g, layers::Layer& layer, const Value& x, std::size_t n) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  check_rank(layer, x, n);
  const auto m = margins(c, "padding", layer, n);
  std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * x.rank()), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto p = static_cast<std::size_t>(g.physical_axis(x, static_cast<std::int64_t>(i) + 1));
    pads[p] = m[i][0];
    pads[p + static_cast<std::size_t>(x.rank())] = m[i][1];
  }
  const std::string base = layer.name();
  Value out = x;
  out.shape = output_shape_of(layer, {x});
  out.name = g.op("Pad", {x.name, g.ints(base + "/pads", pads)}, base, {attr("mode", "constant")});
  return out;
}

Value cropping(GraphBuilder& g, layers::Layer& layer, const Value& x, std::size_t n) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  check_rank(layer, x, n);
  const auto m = margins(c, "cropping", layer, n);
  std::vector<std::int64_t> starts, ends, axes;
  for (std::size_t i = 0; i < n; ++i) {
    axes.push_back(g.physical_axis(x, static_cast<std::int64_t>(i) + 1));
    starts.push_back(m[i][0]);
    // A negative end counts from the end of the axis, whatever its size.
    ends.push_back(m[i][1] > 0 ? -m[i][1] : std::numeric_limits<std::int64_t>::max());
  }
  const std::string base = layer.name();
  Value out = x;
  out.shape = output_shape_of(layer, {x});
  out.name = g.op("Slice", {x.name, g.ints(base + "/starts", starts), g.ints(base + "/ends", ends),
                            g.ints(base + "/axes", axes)}, base);
  return out;
}

// [N, F] -> [N, n, F].
Value repeat_vector(GraphBuilder& g, layers::Layer& layer, const Value& x0) {
  const nlohmann::json c = layer.get_config();
  const Value x = g.to_last(x0);
  if (x.rank() != 2)
    throw ValueError(fmt::format("export_onnx: {}: expected a [batch, features] input, got rank {}", who(layer), x.rank()));
  const std::int64_t times = cfg(c, "n", layer).get<std::int64_t>();
  const std::string base = layer.name();
  Value out = x;
  out.shape = {-1, times, x.shape[1]};
  out.name = g.op("Tile", {g.unsqueeze(x.name, {1}, base), g.ints(base + "/repeats", {1, times, 1})}, base);
  return out;
}

// The inner layer on [N * T, ...]: Reshape in, the inner converter, Reshape out (keel's
// TimeDistributed does the same). The time length must be known.
Value time_distributed(GraphBuilder& g, layers::TimeDistributed& layer, const Value& x0) {
  const Value x = g.to_last(x0);
  if (x.rank() < 3 || x.shape[1] < 0)
    throw ValueError(fmt::format("export_onnx: {}: expected a [batch, time, ...] input with a known time length", who(layer)));
  const std::string base = layer.name();
  std::vector<std::int64_t> merged{-1};
  merged.insert(merged.end(), x.shape.begin() + 2, x.shape.end());
  Value step = x;
  step.shape = merged;
  step.name = g.op("Reshape", {x.name, g.ints(base + "/merge_time", merged)}, base);
  const Value y = g.to_last(convert_layer(g, *layer.layer(), {step}));
  std::vector<std::int64_t> split{-1, x.shape[1]};
  split.insert(split.end(), y.shape.begin() + 1, y.shape.end());
  for (std::size_t i = 2; i < split.size(); ++i)
    if (split[i] < 0)
      throw ValueError(fmt::format("export_onnx: {}: the inner layer's output has an unknown dimension", who(layer)));
  Value out = y;
  out.shape = split;
  out.name = g.op("Reshape", {y.name, g.ints(base + "/split_time", split)}, base);
  return out;
}

}  // namespace

bool convert_spatial(GraphBuilder& g, layers::Layer& layer, const std::vector<Value>& in, Value& out) {
  const std::string cls = layer.class_name();
  const bool upsample = cls.rfind("UpSampling", 0) == 0, pad = cls.rfind("ZeroPadding", 0) == 0,
             crop = cls.rfind("Cropping", 0) == 0;
  if (!upsample && !pad && !crop && cls != "RepeatVector" && cls != "TimeDistributed") return false;
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  if (cls == "RepeatVector") {
    out = repeat_vector(g, layer, in[0]);
  } else if (cls == "TimeDistributed") {
    auto* td = dynamic_cast<layers::TimeDistributed*>(&layer);
    if (!td) throw ValueError(fmt::format("export_onnx: {} is not keel's TimeDistributed", who(layer)));
    out = time_distributed(g, *td, in[0]);
  } else {
    const std::size_t n = spatial_axes(cls);
    out = upsample ? upsampling(g, layer, in[0], n) : pad ? zero_padding(g, layer, in[0], n) : cropping(g, layer, in[0], n);
  }
  return true;
}

}  // namespace keel::io::onnx_detail
