#pragma once
// ConvLSTM2D: an LSTM whose gates are convolutions (Keras 3's ConvLSTM2D). Input
// [batch, time, rows, cols, channels] (channels_last) or [batch, time, channels, rows, cols].
// Gates in Keras' order i, f, c, o: kernel [kh, kw, channels, 4 * filters], recurrent_kernel
// [kh, kw, filters, 4 * filters], bias [4 * filters]:
//   z = conv2d(x_t, kernel, strides, padding, dilation) + bias + conv2d(h, recurrent_kernel, 1, "same")
//   i, f, o = recurrent_activation(z_i, z_f, z_o);  c' = f * c + i * activation(z_c);
//   h' = o * activation(c')
// States h and c are [batch, rows', cols', filters] (rows', cols' those of the input
// convolution), zeros at the start. Returns the last h, or every h ([batch, time, rows', cols',
// filters], in processing order) with return_sequences; call_with_state() also returns {h, c}.
// dropout / recurrent_dropout (training only) draw one mask per call for the inputs and one for
// h, reused at every step, as Keras' cell does.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

struct ConvLSTM2DOptions {
  std::array<int, 2> strides = {1, 1};
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::array<int, 2> dilation_rate = {1, 1};
  activations::ActivationFn activation = "tanh";
  activations::ActivationFn recurrent_activation = "sigmoid";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer recurrent_initializer = "orthogonal";
  initializers::Initializer bias_initializer = "zeros";
  bool unit_forget_bias = true;
  regularizers::Regularizer kernel_regularizer = {};
  regularizers::Regularizer recurrent_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint kernel_constraint{};
  constraints::Constraint recurrent_constraint{};
  constraints::Constraint bias_constraint{};
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<std::uint64_t> seed = std::nullopt;
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  std::string name = "";
};

class ConvLSTM2D : public Layer {
 public:
  ConvLSTM2D(int filters, std::array<int, 2> kernel_size, ConvLSTM2DOptions options = {});
  ConvLSTM2D(int filters, int kernel_size, ConvLSTM2DOptions options = {})
      : ConvLSTM2D(filters, std::array<int, 2>{kernel_size, kernel_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(ConvLSTM2D)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  // {output, h, c}: Keras' `output, h, c = layer(x)` with return_state.
  std::vector<Tensor> call_with_state(const Tensor& x, bool training = false);
  std::vector<Tensor> states() const { return states_; }  // {h, c} of the last call

  int filters() const { return filters_; }
  std::array<int, 2> kernel_size() const { return kernel_size_; }
  const ConvLSTM2DOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& recurrent_kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_;
  std::array<int, 2> kernel_size_;
  ConvLSTM2DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* recurrent_kernel_ = nullptr;
  Variable* bias_ = nullptr;
  std::vector<Tensor> states_;
  std::uint64_t training_calls_ = 0;
};

}  // namespace keel::layers
