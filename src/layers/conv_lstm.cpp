// ConvLSTM2D: a step loop over time of two convolutions and the LSTM gate maths, all ops with
// gradients (the loop is unrolled on the tape). The input convolution of every step is one
// conv2d over the time axis folded into the batch.
#include "keel/layers/conv_lstm.hpp"

#include <vector>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/conv_layer_util.hpp"

namespace keel::layers {

using detail::checked_data_format;
using detail::like;
using detail::positive;
using detail::required;
using detail::who;

namespace {

void check_dropout_rate(const Layer& layer, const char* what, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    throw ValueError(fmt::format("{}: {} must be in [0, 1), got {}", who(layer), what, rate));
}

}  // namespace

ConvLSTM2D::ConvLSTM2D(int filters, std::array<int, 2> kernel_size, ConvLSTM2DOptions options)
    : Layer(options.name), filters_(filters), kernel_size_(kernel_size), options_(std::move(options)) {
  positive(*this, "filters", filters_);
  positive(*this, "kernel_size", kernel_size_);
  positive(*this, "strides", options_.strides);
  positive(*this, "dilation_rate", options_.dilation_rate);
  options_.padding = detail::conv_padding(*this, options_.padding);
  options_.data_format = checked_data_format(*this, options_.data_format);
  check_dropout_rate(*this, "dropout", options_.dropout);
  check_dropout_rate(*this, "recurrent_dropout", options_.recurrent_dropout);
}

void ConvLSTM2D::build(const Shape& s) {
  const bool cf = options_.data_format == "channels_first";
  detail::rank_is(*this, s, 5, cf ? "[batch, time, channels, rows, cols]" : "[batch, time, rows, cols, channels]");
  const std::int64_t in = s[cf ? 2 : 4], f = filters_;
  kernel_ = &add_weight("kernel", Shape{kernel_size_[0], kernel_size_[1], in, 4 * f}, options_.kernel_initializer,
                        true, options_.kernel_regularizer, options_.kernel_constraint);
  recurrent_kernel_ = &add_weight("recurrent_kernel", Shape{kernel_size_[0], kernel_size_[1], f, 4 * f},
                                  options_.recurrent_initializer, true, options_.recurrent_regularizer, options_.recurrent_constraint);
  if (options_.use_bias) {
    initializers::Initializer init = options_.bias_initializer;
    if (options_.unit_forget_bias) {
      // Keras: the forget block starts at ones, the other three from bias_initializer.
      const initializers::Initializer base = options_.bias_initializer;
      init = initializers::Initializer(
          [base, f](const Shape&, DType dtype) {
            return concat({base(Shape{f}, dtype), ones(Shape{f}, dtype), base(Shape{2 * f}, dtype)}, 0);
          },
          base.name());
    }
    bias_ = &add_weight("bias", Shape{4 * f}, init, true, options_.bias_regularizer, options_.bias_constraint);
  }
}

void ConvLSTM2D::check_input_shape(const Shape& s) const {
  detail::same_channels(*this, s, built_shape(), options_.data_format == "channels_first" ? 2 : 4);
}

Tensor ConvLSTM2D::call(const Tensor& inputs, bool training) {
  const bool cf = options_.data_format == "channels_first";
  // [N, T, C, H, W] -> [N, T, H, W, C]: the convolutions see NHWC.
  const Tensor x = cf ? transpose(inputs, {0, 1, 3, 4, 2}) : inputs;
  const auto& d = x.shape().dims();
  const std::int64_t n = d[0], steps = d[1], f = filters_;
  if (steps == 0)
    throw ShapeError(fmt::format("{}: the input {} has no time steps", who(*this), inputs.shape().to_string()));
  const Tensor k = like(kernel_->value(), x), rk = like(recurrent_kernel_->value(), x);
  Tensor xs = reshape(x, {n * steps, d[2], d[3], d[4]});
  const bool drop = training && options_.dropout > 0, rdrop = training && options_.recurrent_dropout > 0;
  std::uint64_t seed = 0;
  if (drop || rdrop) seed = detail::mix(options_.seed.value_or(0x636c73746dULL) + ++training_calls_);
  if (drop) {  // one mask per call, the same for every step (Keras' cell)
    const Tensor mask = dropout(ones(Shape{n, 1, d[2], d[3], d[4]}, x.dtype()).to(x.device()), options_.dropout,
                                options_.seed ? std::optional<std::uint64_t>(seed) : std::nullopt);
    xs = reshape(x * mask, {n * steps, d[2], d[3], d[4]});
  }
  // Every step's input convolution at once; then the time axis back.
  Tensor z_in = detail::in_layer(*this, [&] {
    return conv2d(xs, k, options_.strides, options_.padding, options_.dilation_rate);
  });
  if (bias_) z_in = z_in + like(bias_->value(), z_in);
  const std::int64_t oh = z_in.shape()[1], ow = z_in.shape()[2];
  z_in = reshape(z_in, {n, steps, oh, ow, 4 * f});
  Tensor h = zeros(Shape{n, oh, ow, f}, x.dtype()).to(x.device()), c = h;
  Tensor rmask;
  if (rdrop)
    rmask = dropout(ones(Shape{n, oh, ow, f}, x.dtype()).to(x.device()), options_.recurrent_dropout,
                    options_.seed ? std::optional<std::uint64_t>(detail::mix(seed)) : std::nullopt);
  std::vector<Tensor> outputs;
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t t = options_.go_backwards ? steps - 1 - s : s;
    const Tensor zt = squeeze(slice(z_in, {0, t, 0, 0, 0}, {-1, 1, -1, -1, -1}), {1});
    const Tensor z = zt + conv2d(rmask.defined() ? h * rmask : h, rk, {1, 1}, "same");
    const auto g = split(z, 4, 3);
    const Tensor i = options_.recurrent_activation(g[0]), fg = options_.recurrent_activation(g[1]);
    const Tensor o = options_.recurrent_activation(g[3]);
    c = fg * c + i * options_.activation(g[2]);
    h = o * options_.activation(c);
    if (options_.return_sequences) outputs.push_back(h);
  }
  Tensor y = options_.return_sequences ? stack(outputs, 1) : h;
  if (cf) y = y.rank() == 5 ? transpose(y, {0, 1, 4, 2, 3}) : transpose(y, {0, 3, 1, 2});
  Tensor hs = cf ? transpose(h, {0, 3, 1, 2}) : h, cs = cf ? transpose(c, {0, 3, 1, 2}) : c;
  states_ = {hs, cs};
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  return y;
}

std::vector<Tensor> ConvLSTM2D::call_with_state(const Tensor& x, bool training) {
  Tensor y = (*this)(x, training);
  return {y, states_[0], states_[1]};
}

Variable& ConvLSTM2D::kernel() const { return required(*this, kernel_, "kernel", "use_bias"); }
Variable& ConvLSTM2D::recurrent_kernel() const { return required(*this, recurrent_kernel_, "recurrent_kernel", "use_bias"); }
Variable& ConvLSTM2D::bias() const { return required(*this, bias_, "bias", "use_bias"); }

}  // namespace keel::layers
