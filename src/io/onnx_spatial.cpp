// ONNX forms of the layers that move data along the spatial axes without weights:
// UpSampling1D/2D/3D (Resize), ZeroPadding1D/2D/3D (Pad), Cropping1D/2D/3D (Slice), RepeatVector
// (Unsqueeze + Tile), Resizing and CenterCrop (Resize, Slice), and TimeDistributed (its inner layer's converter on [batch * time, ...]).
// The first three work in whichever layout their input is in: a convolution's channels-first
// output is padded, cropped or upsampled without a Transpose.
#include <fmt/core.h>

#include <algorithm>
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

// keel's image crop of rows [top, top + h) and columns [left, left + w) of an NHWC-logical value.
std::string crop_image(GraphBuilder& g, const Value& x, std::int64_t top, std::int64_t left, std::int64_t h,
                       std::int64_t w, const std::string& base) {
  return g.op("Slice", {x.name, g.ints(base + "/starts", {top, left}), g.ints(base + "/ends", {top + h, left + w}),
                        g.ints(base + "/axes", {g.physical_axis(x, 1), g.physical_axis(x, 2)})}, base);
}

// Resizing (bilinear or nearest, as tf.image.resize with half-pixel centres; crop_to_aspect_ratio
// as a static crop first) and CenterCrop of an input at least as large as the crop. The image
// sizes must be known.
Value image_resize(GraphBuilder& g, layers::Layer& layer, const Value& x, const std::string& cls) {
  const nlohmann::json c = layer.get_config();
  channels_last_only(c, layer);
  check_rank(layer, x, 2);
  const std::int64_t h = x.shape[1], w = x.shape[2];
  const std::int64_t height = cfg(c, "height", layer).get<std::int64_t>(), width = cfg(c, "width", layer).get<std::int64_t>();
  if (h <= 0 || w <= 0)
    throw ValueError(fmt::format("export_onnx: {}: the image size must be known and non-zero, got {}x{}", who(layer), h, w));
  const std::string base = layer.name();
  Value out = x;
  out.shape = {-1, height, width, x.shape[3]};
  if (cls == "CenterCrop") {
    if (h < height || w < width)
      throw ValueError(fmt::format("export_onnx: {}: an image of {}x{} smaller than the {}x{} crop (keel resizes it) "
                                   "is not exported", who(layer), h, w, height, width));
    out.name = crop_image(g, x, (h - height) / 2, (w - width) / 2, height, width, base);
    return out;
  }
  if (c.value("pad_to_aspect_ratio", false))
    throw ValueError(fmt::format("export_onnx: {}: pad_to_aspect_ratio is not exported", who(layer)));
  const std::string interpolation = cfg_str(c, "interpolation", layer, "bilinear");
  if (interpolation != "bilinear" && interpolation != "nearest")
    throw ValueError(fmt::format("export_onnx: {}: interpolation '{}' is not exported", who(layer), interpolation));
  std::string in = x.name;
  std::int64_t ch = h, cw = w;
  if (c.value("crop_to_aspect_ratio", false)) {
    // keras.utils.smart_resize's crop: the largest centred window of the target's aspect ratio.
    ch = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<float>(w * height) / static_cast<float>(width)), 1, h);
    cw = std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<float>(h * width) / static_cast<float>(height)), 1, w);
    if (ch != h || cw != w) in = crop_image(g, x, (h - ch) / 2, (w - cw) / 2, ch, cw, base);
  }
  if (ch == height && cw == width) {
    out.name = in == x.name ? g.op("Identity", {in}, base) : in;
    return out;
  }
  // The output size by axis, the input's own (Shape) on the batch and channel axes: Resize's
  // "sizes" (float scales could round an output length down).
  std::vector<std::int64_t> target(4, 0);
  target[static_cast<std::size_t>(g.physical_axis(x, 1))] = height;
  target[static_cast<std::size_t>(g.physical_axis(x, 2))] = width;
  std::vector<std::int64_t> is_spatial(4, 0);
  is_spatial[static_cast<std::size_t>(g.physical_axis(x, 1))] = is_spatial[static_cast<std::size_t>(g.physical_axis(x, 2))] = 1;
  const std::string mask = g.op("Cast", {g.ints(base + "/spatial_axes", is_spatial)}, base, {attr("to", 9)});  // BOOL
  const std::string sizes = g.op("Where", {mask, g.ints(base + "/sizes", target), g.op("Shape", {in}, base)}, base);
  // nearest: TF2's source floor((i + 0.5) * in / out), ONNX's tf_half_pixel_for_nn with floor.
  const std::vector<Attr> attrs =
      interpolation == "nearest"
          ? std::vector<Attr>{attr("mode", "nearest"), attr("coordinate_transformation_mode", "tf_half_pixel_for_nn"),
                              attr("nearest_mode", "floor")}
          : std::vector<Attr>{attr("mode", "linear"), attr("coordinate_transformation_mode", "half_pixel")};
  out.name = g.op("Resize", {in, "", "", sizes}, base, attrs);
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
  const bool image = cls == "Resizing" || cls == "CenterCrop";
  if (!upsample && !pad && !crop && !image && cls != "RepeatVector" && cls != "TimeDistributed") return false;
  if (in.size() != 1) throw ValueError(fmt::format("export_onnx: {}: expected one input, got {}", who(layer), in.size()));
  if (cls == "RepeatVector") {
    out = repeat_vector(g, layer, in[0]);
  } else if (image) {
    out = image_resize(g, layer, in[0], cls);
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
