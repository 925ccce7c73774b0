#pragma once
// Ops of one and three spatial axes built for the convolution-family layers, channels_last like
// keel/ops/nn.hpp: 1-D inputs are [N, W, C], 3-D inputs [N, D, H, W, C]. Padding is "valid" or
// "same" with TensorFlow's rule per axis. Every op here is a composition of the differentiable
// 2-D ops (a unit axis for 1-D, a loop over the depth taps for 3-D), so each has its gradient
// and runs on any device the 2-D ops run on.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel {

// ---- convolution ----
// kernel [kd, kh, kw, in, out] (Keras' Conv3D layout).
Tensor conv3d(const Tensor& x, const Tensor& kernel, std::array<int, 3> strides = {1, 1, 1},
              std::string padding = "valid", std::array<int, 3> dilation = {1, 1, 1});
// The transpose (input gradient) of conv3d: kernel [kd, kh, kw, out, in] (Keras'
// Conv3DTranspose layout); output size per axis as conv2d_transpose (Keras'
// deconv_output_length).
Tensor conv3d_transpose(const Tensor& x, const Tensor& kernel, std::array<int, 3> strides = {1, 1, 1},
                        std::string padding = "valid",
                        std::optional<std::array<int, 3>> output_padding = std::nullopt,
                        std::array<int, 3> dilation = {1, 1, 1});
// x [N, W, C], kernel [k, out, in] (Keras' Conv1DTranspose layout).
Tensor conv1d_transpose(const Tensor& x, const Tensor& kernel, int stride = 1, std::string padding = "valid",
                        std::optional<int> output_padding = std::nullopt, int dilation = 1);
// x [N, W, C], kernel [k, in, multiplier] -> out channels in * multiplier (channel c*mult + m).
Tensor depthwise_conv1d(const Tensor& x, const Tensor& kernel, int stride = 1, std::string padding = "valid",
                        int dilation = 1);

// ---- pooling ----
Tensor max_pool1d(const Tensor& x, int pool, int stride, std::string padding = "valid");
// Averages exclude padded positions (as TensorFlow).
Tensor avg_pool1d(const Tensor& x, int pool, int stride, std::string padding = "valid");
Tensor max_pool3d(const Tensor& x, std::array<int, 3> pool, std::array<int, 3> strides,
                  std::string padding = "valid");
Tensor avg_pool3d(const Tensor& x, std::array<int, 3> pool, std::array<int, 3> strides,
                  std::string padding = "valid");

// ---- resizing ----
// Bilinear resize of [N, H, W, C] (floating) to size = {height, width} as tf.image.resize with
// half_pixel_centers and no antialiasing, differentiable with respect to x and in x's dtype
// (data::image::resize is a host loop without a gradient). Source coordinate of output o:
// (o + 0.5) * in / out - 0.5, blended between floor (clamped to 0) and ceil (clamped to in-1).
Tensor resize_bilinear(const Tensor& x, std::array<std::int64_t, 2> size);

}  // namespace keel
