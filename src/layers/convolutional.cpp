// Convolution and pooling layers. Each is a thin shell over the NHWC ops of keel/ops/nn.hpp:
// it validates its Keras arguments up front (ValueError naming the layer), creates Keras-named
// weights in build(), and in call() brings channels_first input to NHWC and back, so the ops
// only ever see one layout.
#include "keel/layers/convolutional.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/conv_layer_util.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::channels_first;
using detail::channels_last;
using detail::conv_ending;
using detail::checked_data_format;
using detail::in_layer;
using detail::like;
using detail::lowercase;
using detail::required;
using detail::who;

namespace {

// Keras lower-cases padding and data_format before checking them; so do we.
std::string checked_padding(const Layer& layer, const std::string& padding, bool allow_causal) {
  const std::string p = lowercase(padding);
  if (p == "valid" || p == "same" || (allow_causal && p == "causal")) return p;
  throw ValueError(fmt::format("{}: padding must be {}, got \"{}\"", who(layer),
                               allow_causal ? "\"valid\", \"same\" or \"causal\"" : "\"valid\" or \"same\"",
                               padding));
}

void check_positive(const Layer& layer, const char* what, int value) {
  if (value <= 0) throw ValueError(fmt::format("{}: {} must be a positive integer, got {}", who(layer), what, value));
}

void check_positive(const Layer& layer, const char* what, std::array<int, 2> value) {
  if (value[0] <= 0 || value[1] <= 0)
    throw ValueError(fmt::format("{}: {} must be positive integers, got ({}, {})", who(layer), what, value[0],
                                 value[1]));
}

void require_rank(const Layer& layer, const Shape& s, std::int64_t rank, const char* layout) {
  if (s.rank() != rank)
    throw ShapeError(fmt::format("{}: expected a {}-D input {}, got shape {}", who(layer), rank, layout, s.to_string()));
}

// The same rank and number of channels as at build time (spatial sizes may change).
void check_channels(const Layer& layer, const Shape& s, const Shape& built, std::int64_t channel_axis) {
  if (s.rank() != built.rank() || s[channel_axis] != built[channel_axis])
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {} and {} channels on axis {})",
                                 who(layer), s.to_string(), built.to_string(), built.rank(), built[channel_axis],
                                 channel_axis));
}

void check_rank_only(const Layer& layer, const Shape& s, const Shape& built) {
  if (s.rank() != built.rank())
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {})",
                                 who(layer), s.to_string(), built.to_string(), built.rank()));
}

// Keras accepts an initializer or activation by name in a config, which is what we keep.

void add_activity_loss(Layer& layer, const regularizers::Regularizer& r, const Tensor& y) {
  if (r.active()) layer.add_loss(r(y));
}

// Conv1D's and Conv2D's arguments; padding and data_format come back lower-cased.
template <class KernelSize, class Options>
void validate_conv(const Layer& layer, int filters, KernelSize kernel_size, Options& options, bool allow_causal) {
  check_positive(layer, "filters", filters);
  check_positive(layer, "kernel_size", kernel_size);
  check_positive(layer, "strides", options.strides);
  check_positive(layer, "dilation_rate", options.dilation_rate);
  check_positive(layer, "groups", options.groups);
  options.padding = checked_padding(layer, options.padding, allow_causal);
  options.data_format = checked_data_format(layer, options.data_format);
  if (filters % options.groups != 0)
    throw ValueError(fmt::format("{}: filters ({}) must be divisible by groups ({})", who(layer), filters,
                                 options.groups));
}

// The input channels (axis channel_axis of s) each of `groups` groups sees; ShapeError unless
// the groups divide them.
std::int64_t channels_per_group(const Layer& layer, const Shape& s, std::int64_t channel_axis, int groups) {
  const std::int64_t in = s[channel_axis];
  if (in % groups != 0)
    throw ShapeError(fmt::format("{}: the input's {} channels (shape {}) are not divisible by groups ({})", who(layer),
                                 in, s.to_string(), groups));
  return in / groups;
}

const char* image_layout(const std::string& data_format) {
  return data_format == "channels_first" ? "[batch, channels, height, width]" : "[batch, height, width, channels]";
}

// A convolution layer's call() around its op: op(x, kernel) sees NHWC input in the compute
// dtype; then come the bias, the way back to channels_first, the activation and its loss.
template <class Options, class Op>
Tensor conv_call(Layer& layer, const Tensor& inputs, const Variable* kernel, const Variable* bias,
                 const Options& options, Op&& op) {
  const bool cf = options.data_format == "channels_first";
  Tensor x = inputs;  // in the compute dtype (Layer::operator())
  if (cf) x = channels_last(x);
  const Tensor k = like(kernel->value(), x);
  Tensor y = in_layer(layer, [&] { return op(x, k); });
  y = conv_ending(y, bias ? like(bias->value(), y) : Tensor(), options.activation, cf);
  add_activity_loss(layer, options.activity_regularizer, y);
  return y;
}

}  // namespace

// ---- Conv1D ----------------------------------------------------------------------------------

Conv1D::Conv1D(int filters, int kernel_size, Conv1DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  validate_conv(*this, filters_, kernel_size_, options_, /*allow_causal=*/true);
}

void Conv1D::build(const Shape& s) {
  require_rank(*this, s, 3, options_.data_format == "channels_first" ? "[batch, channels, steps]"
                                                                      : "[batch, steps, channels]");
  const std::int64_t in = channels_per_group(*this, s, options_.data_format == "channels_first" ? 1 : 2,
                                             options_.groups);
  kernel_ = &add_weight("kernel", Shape{kernel_size_, in, filters_}, options_.kernel_initializer, true,
                        options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{filters_}, options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
}

void Conv1D::check_input_shape(const Shape& s) const {
  check_channels(*this, s, built_shape(), options_.data_format == "channels_first" ? 1 : 2);
}

Tensor Conv1D::call(const Tensor& inputs, bool) {
  return conv_call(*this, inputs, kernel_, bias_, options_, [&](const Tensor& x, const Tensor& k) {
    return detail::grouped(options_.groups, x, k, [&](const Tensor& xg, const Tensor& kg) {
      return conv1d(xg, kg, options_.strides, options_.padding, options_.dilation_rate);
    });
  });
}

Variable& Conv1D::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv1D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- Conv2D ----------------------------------------------------------------------------------

Conv2D::Conv2D(int filters, std::array<int, 2> kernel_size, Conv2DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  validate_conv(*this, filters_, kernel_size_, options_, /*allow_causal=*/false);
}

void Conv2D::build(const Shape& s) {
  require_rank(*this, s, 4, image_layout(options_.data_format));
  const std::int64_t in = channels_per_group(*this, s, options_.data_format == "channels_first" ? 1 : 3,
                                             options_.groups);
  kernel_ = &add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], in, filters_}, options_.kernel_initializer,
                        true, options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{filters_}, options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
}

void Conv2D::check_input_shape(const Shape& s) const {
  check_channels(*this, s, built_shape(), options_.data_format == "channels_first" ? 1 : 3);
}

Tensor Conv2D::call(const Tensor& inputs, bool) {
  return conv_call(*this, inputs, kernel_, bias_, options_, [&](const Tensor& x, const Tensor& k) {
    return detail::grouped(options_.groups, x, k, [&](const Tensor& xg, const Tensor& kg) {
      return conv2d(xg, kg, options_.strides, options_.padding, options_.dilation_rate);
    });
  });
}

Variable& Conv2D::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv2D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- Conv2DTranspose -------------------------------------------------------------------------

Conv2DTranspose::Conv2DTranspose(int filters, std::array<int, 2> kernel_size, Conv2DTransposeOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  check_positive(*this, "filters", filters_);
  check_positive(*this, "kernel_size", kernel_size_);
  check_positive(*this, "strides", options_.strides);
  check_positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = checked_padding(*this, options_.padding, false);
  options_.data_format = checked_data_format(*this, options_.data_format);
  if (options_.output_padding) {
    const auto& p = *options_.output_padding;
    for (int a = 0; a < 2; ++a)
      if (p[a] < 0 || p[a] >= options_.strides[a])
        throw ValueError(fmt::format("{}: output_padding ({}, {}) must be >= 0 and smaller than the strides ({}, {})",
                                     who(*this), p[0], p[1], options_.strides[0], options_.strides[1]));
  }
}

void Conv2DTranspose::build(const Shape& s) {
  require_rank(*this, s, 4, image_layout(options_.data_format));
  const std::int64_t in = s[options_.data_format == "channels_first" ? 1 : 3];
  // Keras' layout for the transpose: [kh, kw, filters (out), in].
  kernel_ = &add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], filters_, in}, options_.kernel_initializer,
                        true, options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{filters_}, options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
}

void Conv2DTranspose::check_input_shape(const Shape& s) const {
  check_channels(*this, s, built_shape(), options_.data_format == "channels_first" ? 1 : 3);
}

Tensor Conv2DTranspose::call(const Tensor& inputs, bool) {
  return conv_call(*this, inputs, kernel_, bias_, options_, [&](const Tensor& x, const Tensor& k) {
    return conv2d_transpose(x, k, options_.strides, options_.padding, options_.output_padding.value,
                            options_.dilation_rate);
  });
}

Variable& Conv2DTranspose::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv2DTranspose::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- DepthwiseConv2D -------------------------------------------------------------------------

DepthwiseConv2D::DepthwiseConv2D(std::array<int, 2> kernel_size, DepthwiseConv2DOptions options)
    : Layer(options.name), kernel_size_(kernel_size), options_(std::move(options)) {
  check_positive(*this, "kernel_size", kernel_size_);
  check_positive(*this, "strides", options_.strides);
  check_positive(*this, "depth_multiplier", options_.depth_multiplier);
  check_positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = checked_padding(*this, options_.padding, false);
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void DepthwiseConv2D::build(const Shape& s) {
  require_rank(*this, s, 4, image_layout(options_.data_format));
  const std::int64_t in = s[options_.data_format == "channels_first" ? 1 : 3];
  kernel_ = &add_weight("depthwise_kernel", Shape{kernel_size_[0], kernel_size_[1], in, options_.depth_multiplier},
                        options_.depthwise_initializer, true, options_.depthwise_regularizer, options_.depthwise_constraint);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{in * options_.depth_multiplier}, options_.bias_initializer, true,
                        options_.bias_regularizer, options_.bias_constraint);
}

void DepthwiseConv2D::check_input_shape(const Shape& s) const {
  check_channels(*this, s, built_shape(), options_.data_format == "channels_first" ? 1 : 3);
}

Tensor DepthwiseConv2D::call(const Tensor& inputs, bool) {
  return conv_call(*this, inputs, kernel_, bias_, options_, [&](const Tensor& x, const Tensor& k) {
    return depthwise_conv2d(x, k, options_.strides, options_.padding, options_.dilation_rate);
  });
}

Variable& DepthwiseConv2D::depthwise_kernel() const { return required(*this, kernel_, "depthwise_kernel", "use_bias"); }
Variable& DepthwiseConv2D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- MaxPooling2D / AveragePooling2D ---------------------------------------------------------

namespace {

// The two window poolings differ only in their op; this holds what they share.
template <class Options>
void validate_pooling(const Layer& layer, std::array<int, 2> pool_size, Options& options) {
  check_positive(layer, "pool_size", pool_size);
  if (options.strides) check_positive(layer, "strides", *options.strides);
  options.padding = checked_padding(layer, options.padding, false);
  options.data_format = checked_data_format(layer, options.data_format);
}

template <class Op>
Tensor pool_call(const Layer& layer, const Tensor& inputs, const std::string& data_format, Op&& op) {
  const bool cf = data_format == "channels_first";
  Tensor x = inputs;  // in the compute dtype (Layer::operator())
  if (cf) x = channels_last(x);
  Tensor y = in_layer(layer, [&] { return op(x); });
  return cf && y.rank() >= 3 ? channels_first(y) : y;  // [N, C] needs no change
}

}  // namespace

MaxPooling2D::MaxPooling2D(std::array<int, 2> pool_size, MaxPooling2DOptions options)
    : Layer(options.name), pool_size_(pool_size), options_(std::move(options)) {
  validate_pooling(*this, pool_size_, options_);
}

void MaxPooling2D::build(const Shape& s) { require_rank(*this, s, 4, image_layout(options_.data_format)); }

void MaxPooling2D::check_input_shape(const Shape& s) const { check_rank_only(*this, s, built_shape()); }

Tensor MaxPooling2D::call(const Tensor& inputs, bool) {
  return pool_call(*this, inputs, options_.data_format,
                   [&](const Tensor& x) { return max_pool2d(x, pool_size_, strides(), options_.padding); });
}

AveragePooling2D::AveragePooling2D(std::array<int, 2> pool_size, AveragePooling2DOptions options)
    : Layer(options.name), pool_size_(pool_size), options_(std::move(options)) {
  validate_pooling(*this, pool_size_, options_);
}

void AveragePooling2D::build(const Shape& s) { require_rank(*this, s, 4, image_layout(options_.data_format)); }

void AveragePooling2D::check_input_shape(const Shape& s) const { check_rank_only(*this, s, built_shape()); }

Tensor AveragePooling2D::call(const Tensor& inputs, bool) {
  return pool_call(*this, inputs, options_.data_format,
                   [&](const Tensor& x) { return avg_pool2d(x, pool_size_, strides(), options_.padding); });
}

// ---- global pooling --------------------------------------------------------------------------

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalAveragePooling2DOptions options)
    : Layer(options.name), options_(std::move(options)) {
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void GlobalAveragePooling2D::build(const Shape& s) { require_rank(*this, s, 4, image_layout(options_.data_format)); }

void GlobalAveragePooling2D::check_input_shape(const Shape& s) const { check_rank_only(*this, s, built_shape()); }

Tensor GlobalAveragePooling2D::call(const Tensor& inputs, bool) {
  // With keepdims the [N, 1, 1, C] result goes back to channels_first like any image.
  return pool_call(*this, inputs, options_.data_format, [&](const Tensor& x) {
    return global_avg_pool2d(x, options_.keepdims);
  });
}

GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalMaxPooling2DOptions options)
    : Layer(options.name), options_(std::move(options)) {
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void GlobalMaxPooling2D::build(const Shape& s) { require_rank(*this, s, 4, image_layout(options_.data_format)); }

void GlobalMaxPooling2D::check_input_shape(const Shape& s) const { check_rank_only(*this, s, built_shape()); }

Tensor GlobalMaxPooling2D::call(const Tensor& inputs, bool) {
  return pool_call(*this, inputs, options_.data_format, [&](const Tensor& x) {
    return global_max_pool2d(x, options_.keepdims);
  });
}

}  // namespace keel::layers
