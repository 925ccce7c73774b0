// Conv1DTranspose, Conv3D, Conv3DTranspose, SeparableConv1D/2D and DepthwiseConv1D: thin shells
// over the ops of keel/ops/conv_nd.hpp and keel/ops/nn.hpp. Each validates its Keras arguments
// up front, creates Keras-named weights in build(), and in call() runs its op on the
// channels_last view of the input, adds the bias, returns to the input's layout and applies the
// activation (Keras' order: bias, then activation).
#include "keel/layers/conv_variants.hpp"

#include <string>
#include <vector>

#include "keel/ops/conv_nd.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/conv_layer_util.hpp"

namespace keel::layers {

using detail::checked_data_format;
using detail::conv_padding;
using detail::like;
using detail::positive;
using detail::required;
using detail::who;

namespace {

std::int64_t channel_axis(const std::string& data_format, std::int64_t rank) {
  return data_format == "channels_first" ? 1 : rank - 1;
}

// op(x, weights...) on channels_last input in the compute dtype, then the ending (bias, layout,
// activation: conv_ending) and the activity regularizer.
template <class Options, class Op>
Tensor conv_variant_call(Layer& layer, const Tensor& inputs, const Variable* bias, const Options& o, Op&& op) {
  const bool cf = o.data_format == "channels_first";
  Tensor y = detail::in_layer(layer, [&] { return op(cf ? detail::channels_last(inputs) : inputs); });
  y = detail::conv_ending(y, bias ? like(bias->value(), y) : Tensor(), o.activation, cf);
  if (o.activity_regularizer.active()) layer.add_loss(o.activity_regularizer(y));
  return y;
}

Variable* add_bias(Layer& layer, bool use_bias, std::int64_t n, const initializers::Initializer& init,
                   const regularizers::Regularizer& reg, const constraints::Constraint& constraint) {
  return use_bias ? &layer.add_weight("bias", Shape{n}, init, true, reg, constraint) : nullptr;
}

}  // namespace

// ---- Conv1DTranspose --------------------------------------------------------------------------

Conv1DTranspose::Conv1DTranspose(int filters, int kernel_size, Conv1DTransposeOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  positive(*this, "filters", filters_);
  positive(*this, "kernel_size", kernel_size_);
  positive(*this, "strides", options_.strides);
  positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = conv_padding(*this, options_.padding);
  options_.data_format = checked_data_format(*this, options_.data_format);
  if (options_.output_padding && (*options_.output_padding < 0 || *options_.output_padding >= options_.strides))
    throw ValueError(fmt::format("{}: output_padding ({}) must be >= 0 and smaller than strides ({})", who(*this),
                                 *options_.output_padding, options_.strides));
}

void Conv1DTranspose::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 3, detail::layout_of(3, cf));
  kernel_ = &add_weight("kernel", Shape{kernel_size_, filters_, s[channel_axis(options_.data_format, 3)]},
                        options_.kernel_initializer, true, options_.kernel_regularizer, options_.kernel_constraint);
  bias_ = add_bias(*this, options_.use_bias, filters_, options_.bias_initializer, options_.bias_regularizer, options_.bias_constraint);
}

void Conv1DTranspose::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 3));
}

Tensor Conv1DTranspose::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    return conv1d_transpose(x, like(kernel_->value(), x), options_.strides, options_.padding, options_.output_padding,
                            options_.dilation_rate);
  });
}

Variable& Conv1DTranspose::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv1DTranspose::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- Conv3D -----------------------------------------------------------------------------------

Conv3D::Conv3D(int filters, std::array<int, 3> kernel_size, Conv3DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  positive(*this, "filters", filters_);
  positive(*this, "kernel_size", kernel_size_);
  positive(*this, "strides", options_.strides);
  positive(*this, "dilation_rate", options_.dilation_rate);
  positive(*this, "groups", options_.groups);
  options_.padding = conv_padding(*this, options_.padding);
  options_.data_format = checked_data_format(*this, options_.data_format);
  if (filters_ % options_.groups != 0)
    throw ValueError(fmt::format("{}: filters ({}) must be divisible by groups ({})", who(*this), filters_,
                                 options_.groups));
}

void Conv3D::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 5, detail::layout_of(5, cf));
  const std::int64_t in = s[channel_axis(options_.data_format, 5)];
  if (in % options_.groups != 0)
    throw ShapeError(fmt::format("{}: the input's {} channels (shape {}) are not divisible by groups ({})", who(*this),
                                 in, s.to_string(), options_.groups));
  kernel_ = &add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], kernel_size_[2], in / options_.groups, filters_},
                        options_.kernel_initializer, true, options_.kernel_regularizer, options_.kernel_constraint);
  bias_ = add_bias(*this, options_.use_bias, filters_, options_.bias_initializer, options_.bias_regularizer, options_.bias_constraint);
}

void Conv3D::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 5));
}

Tensor Conv3D::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    return detail::grouped(options_.groups, x, like(kernel_->value(), x), [&](const Tensor& xg, const Tensor& kg) {
      return conv3d(xg, kg, options_.strides, options_.padding, options_.dilation_rate);
    });
  });
}

Variable& Conv3D::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv3D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- Conv3DTranspose --------------------------------------------------------------------------

Conv3DTranspose::Conv3DTranspose(int filters, std::array<int, 3> kernel_size, Conv3DTransposeOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  positive(*this, "filters", filters_);
  positive(*this, "kernel_size", kernel_size_);
  positive(*this, "strides", options_.strides);
  positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = conv_padding(*this, options_.padding);
  options_.data_format = checked_data_format(*this, options_.data_format);
  if (options_.output_padding)
    for (int a = 0; a < 3; ++a)
      if ((*options_.output_padding)[a] < 0 || (*options_.output_padding)[a] >= options_.strides[a])
        throw ValueError(fmt::format("{}: output_padding ({}) must be >= 0 and smaller than the strides ({})",
                                     who(*this), fmt::join(*options_.output_padding, ", "),
                                     fmt::join(options_.strides, ", ")));
}

void Conv3DTranspose::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 5, detail::layout_of(5, cf));
  const std::int64_t in = s[channel_axis(options_.data_format, 5)];
  kernel_ = &add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], kernel_size_[2], filters_, in},
                        options_.kernel_initializer, true, options_.kernel_regularizer, options_.kernel_constraint);
  bias_ = add_bias(*this, options_.use_bias, filters_, options_.bias_initializer, options_.bias_regularizer, options_.bias_constraint);
}

void Conv3DTranspose::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 5));
}

Tensor Conv3DTranspose::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    return conv3d_transpose(x, like(kernel_->value(), x), options_.strides, options_.padding,
                            options_.output_padding.value, options_.dilation_rate);
  });
}

Variable& Conv3DTranspose::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& Conv3DTranspose::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- SeparableConv1D / SeparableConv2D --------------------------------------------------------

namespace {

template <class Options, class Size>
void validate_separable(const Layer& layer, int filters, Size kernel_size, Options& o) {
  positive(layer, "filters", filters);
  positive(layer, "kernel_size", kernel_size);
  positive(layer, "strides", o.strides);
  positive(layer, "dilation_rate", o.dilation_rate);
  positive(layer, "depth_multiplier", o.depth_multiplier);
  o.padding = conv_padding(layer, o.padding);
  o.data_format = checked_data_format(layer, o.data_format);
}

}  // namespace

SeparableConv1D::SeparableConv1D(int filters, int kernel_size, SeparableConv1DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  validate_separable(*this, filters_, kernel_size_, options_);
}

void SeparableConv1D::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 3, detail::layout_of(3, cf));
  const std::int64_t in = s[channel_axis(options_.data_format, 3)], dm = options_.depth_multiplier;
  depthwise_ = &add_weight("depthwise_kernel", Shape{kernel_size_, in, dm}, options_.depthwise_initializer, true,
                           options_.depthwise_regularizer, options_.depthwise_constraint);
  pointwise_ = &add_weight("pointwise_kernel", Shape{1, in * dm, filters_}, options_.pointwise_initializer, true,
                           options_.pointwise_regularizer, options_.pointwise_constraint);
  bias_ = add_bias(*this, options_.use_bias, filters_, options_.bias_initializer, options_.bias_regularizer, options_.bias_constraint);
}

void SeparableConv1D::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 3));
}

Tensor SeparableConv1D::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    const Tensor d = depthwise_conv1d(x, like(depthwise_->value(), x), options_.strides, options_.padding,
                                      options_.dilation_rate);
    return conv1d(d, like(pointwise_->value(), x));
  });
}

Variable& SeparableConv1D::depthwise_kernel() const { return required(*this, depthwise_, "depthwise_kernel", "use_bias"); }
Variable& SeparableConv1D::pointwise_kernel() const { return required(*this, pointwise_, "pointwise_kernel", "use_bias"); }
Variable& SeparableConv1D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

SeparableConv2D::SeparableConv2D(int filters, std::array<int, 2> kernel_size, SeparableConv2DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  validate_separable(*this, filters_, kernel_size_, options_);
}

void SeparableConv2D::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 4, detail::layout_of(4, cf));
  const std::int64_t in = s[channel_axis(options_.data_format, 4)], dm = options_.depth_multiplier;
  depthwise_ = &add_weight("depthwise_kernel", Shape{kernel_size_[0], kernel_size_[1], in, dm},
                           options_.depthwise_initializer, true, options_.depthwise_regularizer, options_.depthwise_constraint);
  pointwise_ = &add_weight("pointwise_kernel", Shape{1, 1, in * dm, filters_}, options_.pointwise_initializer, true,
                           options_.pointwise_regularizer, options_.pointwise_constraint);
  bias_ = add_bias(*this, options_.use_bias, filters_, options_.bias_initializer, options_.bias_regularizer, options_.bias_constraint);
}

void SeparableConv2D::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 4));
}

Tensor SeparableConv2D::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    const Tensor d = depthwise_conv2d(x, like(depthwise_->value(), x), options_.strides, options_.padding,
                                      options_.dilation_rate);
    return conv2d(d, like(pointwise_->value(), x));
  });
}

Variable& SeparableConv2D::depthwise_kernel() const { return required(*this, depthwise_, "depthwise_kernel", "use_bias"); }
Variable& SeparableConv2D::pointwise_kernel() const { return required(*this, pointwise_, "pointwise_kernel", "use_bias"); }
Variable& SeparableConv2D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

// ---- DepthwiseConv1D --------------------------------------------------------------------------

DepthwiseConv1D::DepthwiseConv1D(int kernel_size, DepthwiseConv1DOptions options)
    : Layer(options.name), kernel_size_(kernel_size), options_(std::move(options)) {
  positive(*this, "kernel_size", kernel_size_);
  positive(*this, "strides", options_.strides);
  positive(*this, "depth_multiplier", options_.depth_multiplier);
  positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = conv_padding(*this, options_.padding);
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void DepthwiseConv1D::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 3, detail::layout_of(3, cf));
  const std::int64_t in = s[channel_axis(options_.data_format, 3)];
  kernel_ = &add_weight("depthwise_kernel", Shape{kernel_size_, in, options_.depth_multiplier},
                        options_.depthwise_initializer, true, options_.depthwise_regularizer, options_.depthwise_constraint);
  bias_ = add_bias(*this, options_.use_bias, in * options_.depth_multiplier, options_.bias_initializer,
                   options_.bias_regularizer, options_.bias_constraint);
}

void DepthwiseConv1D::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), channel_axis(options_.data_format, 3));
}

Tensor DepthwiseConv1D::call(const Tensor& inputs, bool) {
  return conv_variant_call(*this, inputs, bias_, options_, [&](const Tensor& x) {
    return depthwise_conv1d(x, like(kernel_->value(), x), options_.strides, options_.padding, options_.dilation_rate);
  });
}

Variable& DepthwiseConv1D::depthwise_kernel() const { return required(*this, kernel_, "depthwise_kernel", "use_bias"); }
Variable& DepthwiseConv1D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

}  // namespace keel::layers
