// Convolutions and poolings of one and three spatial axes as compositions of the 2-D ops:
// a 1-D op is its 2-D op over a unit height; a 3-D op loops over the kd depth taps and runs the
// 2-D op on every depth slice at once (the depth folded into the batch). Compositions of
// differentiable ops, so the gradients come with them, on every device the 2-D ops support.
#include "keel/ops/conv_nd.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "ops/padding.hpp"

namespace keel {

namespace {

using kernel::Padding;

void check_nd_rank(const char* op, const char* what, const Tensor& t, std::int64_t rank, const char* layout) {
  if (t.rank() != rank)
    throw ShapeError(fmt::format("{}: expected a rank-{} {} {}, got shape {}", op, rank, what, layout,
                                 t.shape().to_string()));
}

template <std::size_t R>
void check_positive_nd(const char* op, const char* what, const std::array<int, R>& v) {
  for (int e : v)
    if (e <= 0) throw ValueError(fmt::format("{}: {} must be positive, got {}", op, what, fmt::join(v, ", ")));
}

// Keras' deconv_output_length for one axis (k_eff the dilated kernel size).
std::int64_t deconv_length(std::int64_t in, std::int64_t k_eff, std::int64_t stride, Padding pad,
                           std::optional<int> output_padding) {
  if (!output_padding)
    return pad == Padding::valid ? in * stride + std::max<std::int64_t>(k_eff - stride, 0) : in * stride;
  const std::int64_t p = pad == Padding::same ? k_eff / 2 : 0;
  return (in - 1) * stride + k_eff - 2 * p + *output_padding;
}

// x's depth axis (axis 1 of [N, D, ...]) sliced from `begin`, `count` elements `stride` apart.
Tensor depth_taps(const Tensor& x, std::int64_t begin, std::int64_t count, std::int64_t stride) {
  return strided_slice(x, {0, begin}, {x.shape()[0], begin + (count - 1) * stride + 1}, {1, stride});
}

// The 3-D pooling: the 2-D pool over (H, W) of every depth slice, then a pool over the depth
// (a [D, H*W*C] "image" with a [pd, 1] window). Max windows separate by axis; so do averages that
// exclude padding, because the count of a 3-D window is the product of its per-axis counts.
template <class Pool2d>
Tensor pool3d(const char* op, const Tensor& x, std::array<int, 3> pool, std::array<int, 3> strides,
              const std::string& padding, Pool2d&& pool2d) {
  detail::check_defined(x, op);
  check_nd_rank(op, "input", x, 5, "NDHWC [batch, depth, height, width, channels]");
  check_positive_nd(op, "pool size", pool);
  check_positive_nd(op, "strides", strides);
  const Padding mode = detail::parse_padding(padding, op);
  const auto& d = x.shape().dims();
  for (int a = 0; a < 3; ++a)
    if (mode == Padding::valid && pool[a] > d[a + 1])
      throw ShapeError(fmt::format("{}: pool size ({}) is larger than the input {} with padding \"valid\"", op,
                                   fmt::join(pool, ", "), x.shape().to_string()));
  const std::int64_t n = d[0], depth = d[1], c = d[4];
  const Tensor planes = pool2d(reshape(x, {n * depth, d[2], d[3], c}), std::array<int, 2>{pool[1], pool[2]},
                               std::array<int, 2>{strides[1], strides[2]}, padding);
  const std::int64_t oh = planes.shape()[1], ow = planes.shape()[2];
  const Tensor cols = reshape(planes, {n, depth, oh * ow * c, 1});
  const Tensor y = pool2d(cols, std::array<int, 2>{pool[0], 1}, std::array<int, 2>{strides[0], 1}, padding);
  return reshape(y, {n, y.shape()[1], oh, ow, c});
}

}  // namespace

// ---- 3-D convolution -------------------------------------------------------------------------

namespace {

// Pads axis 1 (the depth) of [N, D, H, W, C] with zeros.
Tensor pad_depth(const Tensor& x, std::int64_t before, std::int64_t after) {
  if (before == 0 && after == 0) return x;
  return pad(x, {{0, 0}, {before, after}, {0, 0}, {0, 0}, {0, 0}});
}

void check_conv3d_operands(const char* op, const Tensor& x, const Tensor& kernel, const char* kernel_layout,
                           std::int64_t kernel_in_axis) {
  detail::check_defined(x, op, "input");
  detail::check_defined(kernel, op, "kernel");
  check_nd_rank(op, "input", x, 5, "NDHWC [batch, depth, height, width, channels]");
  check_nd_rank(op, "kernel", kernel, 5, kernel_layout);
  const auto& d = x.shape().dims();
  const auto& k = kernel.shape().dims();
  if (k[static_cast<std::size_t>(kernel_in_axis)] != d[4])
    throw ShapeError(fmt::format("{}: kernel in_channels (axis {}) {} differ from the input's channels {}: input {}, "
                                 "kernel {}",
                                 op, kernel_in_axis, k[static_cast<std::size_t>(kernel_in_axis)], d[4],
                                 x.shape().to_string(), kernel.shape().to_string()));
  if (k[0] <= 0 || k[1] <= 0 || k[2] <= 0)
    throw ShapeError(fmt::format("{}: the kernel's spatial sizes must be positive, got kernel {} for input {}", op,
                                 kernel.shape().to_string(), x.shape().to_string()));
}

}  // namespace

Tensor conv3d(const Tensor& x, const Tensor& kernel, std::array<int, 3> strides, std::string padding,
              std::array<int, 3> dilation) {
  constexpr const char* op = "conv3d";
  check_conv3d_operands(op, x, kernel, "[depth, height, width, in_channels, out_channels]", 3);
  check_positive_nd(op, "strides", strides);
  check_positive_nd(op, "dilation", dilation);
  const Padding mode = detail::parse_padding(padding, op);
  const auto& d = x.shape().dims();
  const auto& k = kernel.shape().dims();
  const std::int64_t kd = k[0], k_eff = (kd - 1) * dilation[0] + 1;
  if (mode == Padding::valid && k_eff > d[1])
    throw ShapeError(fmt::format("{}: kernel {} with depth dilation {} spans {}, deeper than the input {} (depth {}) "
                                 "with padding \"valid\"",
                                 op, kernel.shape().to_string(), dilation[0], k_eff, x.shape().to_string(), d[1]));
  const kernel::AxisWindow dw = kernel::window_axis(d[1], kd, strides[0], dilation[0], mode);
  const std::int64_t n = d[0], od = dw.out;
  if (od == 0) {  // an empty depth: the 2-D conv still checks (and sizes) height and width
    const Tensor plane = conv2d(reshape(x, {0, d[2], d[3], d[4]}), squeeze(slice(kernel, {0, 0, 0, 0, 0}, {1, -1, -1, -1, -1}), {0}),
                                {strides[1], strides[2]}, padding, {dilation[1], dilation[2]});
    return zeros({n, 0, plane.shape()[1], plane.shape()[2], k[4]}, x.dtype()).to(x.device());
  }
  // Pad the depth explicitly (height and width are conv2d's); tap t then reads the depth slices
  // t * dilation + o * stride (o < od) of the padded input, all od of them as one batch.
  const std::int64_t span = (od - 1) * strides[0] + k_eff;
  const Tensor xp = pad_depth(x, dw.pad_before, std::max<std::int64_t>(span - d[1] - dw.pad_before, 0));
  Tensor y;
  for (std::int64_t t = 0; t < kd; ++t) {
    const Tensor taps = depth_taps(xp, t * dilation[0], od, strides[0]);  // [N, od, H, W, C]
    const Tensor kt = squeeze(slice(kernel, {t, 0, 0, 0, 0}, {1, -1, -1, -1, -1}), {0});
    const Tensor yt = conv2d(reshape(taps, {n * od, d[2], d[3], d[4]}), kt, {strides[1], strides[2]}, padding,
                             {dilation[1], dilation[2]});
    y = y.defined() ? y + yt : yt;
  }
  return reshape(y, {n, od, y.shape()[1], y.shape()[2], k[4]});
}

Tensor conv3d_transpose(const Tensor& x, const Tensor& kernel, std::array<int, 3> strides, std::string padding,
                        std::optional<std::array<int, 3>> output_padding, std::array<int, 3> dilation) {
  constexpr const char* op = "conv3d_transpose";
  check_conv3d_operands(op, x, kernel, "[depth, height, width, out_channels, in_channels]", 4);
  check_positive_nd(op, "strides", strides);
  check_positive_nd(op, "dilation", dilation);
  const Padding mode = detail::parse_padding(padding, op);
  if (output_padding)
    for (int a = 0; a < 3; ++a)
      if ((*output_padding)[a] < 0 || (*output_padding)[a] >= strides[a])
        throw ValueError(fmt::format("{}: output_padding [{}] must be >= 0 and smaller than the strides [{}]", op,
                                     fmt::join(*output_padding, ", "), fmt::join(strides, ", ")));
  const auto& d = x.shape().dims();
  const auto& k = kernel.shape().dims();
  const std::int64_t n = d[0], depth = d[1], kd = k[0], sd = strides[0];
  const std::int64_t k_eff = (kd - 1) * dilation[0] + 1;
  const std::int64_t out_depth =
      deconv_length(depth, k_eff, sd, mode, output_padding ? std::optional<int>((*output_padding)[0]) : std::nullopt);
  const kernel::AxisWindow dw = kernel::window_axis(out_depth, kd, sd, dilation[0], mode);
  if (depth == 0 || out_depth < 0 || dw.out != depth)
    throw ValueError(fmt::format("{}: output depth {} (from input {}, kernel {}, strides [{}], padding \"{}\") does "
                                 "not map back to the input's depth {}",
                                 op, out_depth, x.shape().to_string(), kernel.shape().to_string(),
                                 fmt::join(strides, ", "), padding, depth));
  std::optional<std::array<int, 2>> hw_padding;
  if (output_padding) hw_padding = std::array<int, 2>{(*output_padding)[1], (*output_padding)[2]};
  // Every input depth slice i through tap t lands on depth i * stride + t * dilation of the
  // unpadded ("full") output of (depth - 1) * stride + k_eff slices; the result is that output
  // from pad_before on (zeros past its end), which is the adjoint of conv3d's depth padding.
  const Tensor planes = reshape(x, {n * depth, d[2], d[3], d[4]});
  const std::int64_t full = (depth - 1) * sd + k_eff, spread = (depth - 1) * sd + 1;
  Tensor y;
  for (std::int64_t t = 0; t < kd; ++t) {
    const Tensor kt = squeeze(slice(kernel, {t, 0, 0, 0, 0}, {1, -1, -1, -1, -1}), {0});
    const Tensor pt = conv2d_transpose(planes, kt, {strides[1], strides[2]}, padding, hw_padding,
                                       {dilation[1], dilation[2]});
    const std::int64_t oh = pt.shape()[1], ow = pt.shape()[2], f = pt.shape()[3];
    Tensor yt = reshape(pt, {n, depth, oh, ow, f});
    if (sd > 1) {  // stride - 1 zero slices after each input slice
      yt = pad(expand_dims(yt, 2), {{0, 0}, {0, 0}, {0, sd - 1}, {0, 0}, {0, 0}, {0, 0}});
      yt = slice(reshape(yt, {n, depth * sd, oh, ow, f}), {0, 0, 0, 0, 0}, {-1, spread, -1, -1, -1});
    }
    const std::int64_t shift = t * dilation[0];
    yt = pad_depth(yt, shift, full - spread - shift);
    y = y.defined() ? y + yt : yt;
  }
  const std::int64_t end = dw.pad_before + out_depth;
  if (end > full) y = pad_depth(y, 0, end - full);
  return slice(y, {0, dw.pad_before, 0, 0, 0}, {-1, out_depth, -1, -1, -1});
}

// ---- 1-D convolutions ------------------------------------------------------------------------

namespace {

void check_1d(const char* op, const Tensor& x, const Tensor& kernel, const char* kernel_layout) {
  detail::check_defined(x, op, "input");
  detail::check_defined(kernel, op, "kernel");
  check_nd_rank(op, "input", x, 3, "NWC [batch, width, channels]");
  check_nd_rank(op, "kernel", kernel, 3, kernel_layout);
}

}  // namespace

Tensor conv1d_transpose(const Tensor& x, const Tensor& kernel, int stride, std::string padding,
                        std::optional<int> output_padding, int dilation) {
  check_1d("conv1d_transpose", x, kernel, "[width, out_channels, in_channels]");
  std::optional<std::array<int, 2>> op2;
  if (output_padding) op2 = std::array<int, 2>{0, *output_padding};
  // conv2d_transpose over [N, 1, W, C] with a [1, k, out, in] kernel.
  return squeeze(conv2d_transpose(expand_dims(x, 1), expand_dims(kernel, 0), {1, stride}, padding, op2,
                                  {1, dilation}),
                 {1});
}

Tensor depthwise_conv1d(const Tensor& x, const Tensor& kernel, int stride, std::string padding, int dilation) {
  check_1d("depthwise_conv1d", x, kernel, "[width, in_channels, multiplier]");
  return squeeze(depthwise_conv2d(expand_dims(x, 1), expand_dims(kernel, 0), {1, stride}, padding, {1, dilation}),
                 {1});
}

// ---- pooling ---------------------------------------------------------------------------------

namespace {

template <class Pool2d>
Tensor pool1d(const char* op, const Tensor& x, int pool, int stride, const std::string& padding, Pool2d&& pool2d) {
  detail::check_defined(x, op);
  check_nd_rank(op, "input", x, 3, "NWC [batch, width, channels]");
  return squeeze(pool2d(expand_dims(x, 1), std::array<int, 2>{1, pool}, std::array<int, 2>{1, stride}, padding),
                 {1});
}

Tensor max2(const Tensor& x, std::array<int, 2> p, std::array<int, 2> s, const std::string& padding) {
  return max_pool2d(x, p, s, padding);
}
Tensor avg2(const Tensor& x, std::array<int, 2> p, std::array<int, 2> s, const std::string& padding) {
  return avg_pool2d(x, p, s, padding);
}

}  // namespace

Tensor max_pool1d(const Tensor& x, int pool, int stride, std::string padding) {
  return pool1d("max_pool1d", x, pool, stride, padding, max2);
}
Tensor avg_pool1d(const Tensor& x, int pool, int stride, std::string padding) {
  return pool1d("avg_pool1d", x, pool, stride, padding, avg2);
}
Tensor max_pool3d(const Tensor& x, std::array<int, 3> pool, std::array<int, 3> strides, std::string padding) {
  return pool3d("max_pool3d", x, pool, strides, padding, max2);
}
Tensor avg_pool3d(const Tensor& x, std::array<int, 3> pool, std::array<int, 3> strides, std::string padding) {
  return pool3d("avg_pool3d", x, pool, strides, padding, avg2);
}

}  // namespace keel
