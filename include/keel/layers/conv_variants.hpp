#pragma once
// Convolution layers beyond the 2-D ones, as Keras 3 names and defaults them: Conv1DTranspose,
// Conv3D, Conv3DTranspose, SeparableConv1D, SeparableConv2D, DepthwiseConv1D. Options follow the
// order of Keras' keyword arguments (constraints left out, `name` last), as in convolutional.hpp:
//   layers::Conv3D(8, {3, 3, 3}, {.strides = {2, 2, 2}, .padding = "same"})
// Inputs are channels_last ([N, W, C] / [N, D, H, W, C]) unless data_format = "channels_first".
// Kernels have Keras' layouts: Conv1DTranspose [k, filters, in], Conv3D [kd, kh, kw, in / groups,
// filters], Conv3DTranspose [kd, kh, kw, filters, in], SeparableConv1D depthwise [k, in, dm] and
// pointwise [1, in * dm, filters], SeparableConv2D depthwise [kh, kw, in, dm] and pointwise
// [1, 1, in * dm, filters], DepthwiseConv1D [k, in, dm].
#include <array>
#include <optional>
#include <string>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

// Keras' None-or-a-triple arguments (Conv3DTranspose's output_padding, 3-D pooling strides):
// `.strides = {1, 2, 2}`, `.strides = 2`, or nothing for None.
struct OptionalTriple {
  std::optional<std::array<int, 3>> value;
  OptionalTriple() = default;
  OptionalTriple(std::nullopt_t) {}                                                     // NOLINT: implicit
  OptionalTriple(int all) : value(std::array<int, 3>{all, all, all}) {}                 // NOLINT
  OptionalTriple(int d, int h, int w) : value(std::array<int, 3>{d, h, w}) {}           // NOLINT
  OptionalTriple(std::array<int, 3> v) : value(v) {}                                    // NOLINT
  explicit operator bool() const { return value.has_value(); }
  const std::array<int, 3>& operator*() const { return *value; }
  std::array<int, 3> value_or(std::array<int, 3> otherwise) const { return value.value_or(otherwise); }
};

// What every layer of this file shares: an activation and weights with initializers and
// regularizers. Each has its own Options struct (Keras' order) and forwards these.
#define KEEL_CONV_VARIANT_COMMON(Class)                 \
  KEEL_LAYER_BOILERPLATE(Class)                         \
  using Layer::build;                                   \
  using Layer::call;                                    \
  void build(const Shape& input_shape) override;        \
  Tensor call(const Tensor& inputs, bool training) override; \
  void check_input_shape(const Shape& input_shape) const override; \
  nlohmann::json get_config() const override;

// ---- Conv1DTranspose --------------------------------------------------------------------------

struct Conv1DTransposeOptions {
  int strides = 1;
  std::string padding = "valid";
  std::optional<int> output_padding = std::nullopt;  // must be smaller than strides
  std::string data_format = "channels_last";
  int dilation_rate = 1;
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint kernel_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

// [batch, steps, channels] -> [batch, new_steps, filters]; new_steps as Conv2DTranspose's rule.
class Conv1DTranspose : public Layer {
 public:
  Conv1DTranspose(int filters, int kernel_size, Conv1DTransposeOptions options = {});
  KEEL_CONV_VARIANT_COMMON(Conv1DTranspose)
  int filters() const { return filters_; }
  int kernel_size() const { return kernel_size_; }
  const Conv1DTransposeOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_, kernel_size_;
  Conv1DTransposeOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- Conv3D / Conv3DTranspose -----------------------------------------------------------------

struct Conv3DOptions {
  std::array<int, 3> strides = {1, 1, 1};
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::array<int, 3> dilation_rate = {1, 1, 1};
  int groups = 1;
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint kernel_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

// [batch, depth, height, width, channels] -> [batch, d', h', w', filters].
class Conv3D : public Layer {
 public:
  Conv3D(int filters, std::array<int, 3> kernel_size, Conv3DOptions options = {});
  Conv3D(int filters, int kernel_size, Conv3DOptions options = {})
      : Conv3D(filters, std::array<int, 3>{kernel_size, kernel_size, kernel_size}, std::move(options)) {}
  KEEL_CONV_VARIANT_COMMON(Conv3D)
  int filters() const { return filters_; }
  std::array<int, 3> kernel_size() const { return kernel_size_; }
  const Conv3DOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_;
  std::array<int, 3> kernel_size_;
  Conv3DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

struct Conv3DTransposeOptions {
  std::array<int, 3> strides = {1, 1, 1};
  std::string padding = "valid";
  OptionalTriple output_padding = std::nullopt;
  std::string data_format = "channels_last";
  std::array<int, 3> dilation_rate = {1, 1, 1};
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint kernel_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

class Conv3DTranspose : public Layer {
 public:
  Conv3DTranspose(int filters, std::array<int, 3> kernel_size, Conv3DTransposeOptions options = {});
  Conv3DTranspose(int filters, int kernel_size, Conv3DTransposeOptions options = {})
      : Conv3DTranspose(filters, std::array<int, 3>{kernel_size, kernel_size, kernel_size}, std::move(options)) {}
  KEEL_CONV_VARIANT_COMMON(Conv3DTranspose)
  int filters() const { return filters_; }
  std::array<int, 3> kernel_size() const { return kernel_size_; }
  const Conv3DTransposeOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_;
  std::array<int, 3> kernel_size_;
  Conv3DTransposeOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- separable and depthwise ------------------------------------------------------------------

struct SeparableConv1DOptions {
  int strides = 1;
  std::string padding = "valid";
  std::string data_format = "channels_last";
  int dilation_rate = 1;
  int depth_multiplier = 1;
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer depthwise_initializer = "glorot_uniform";
  initializers::Initializer pointwise_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer depthwise_regularizer = {};
  regularizers::Regularizer pointwise_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint depthwise_constraint{};
  constraints::Constraint pointwise_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

struct SeparableConv2DOptions {
  std::array<int, 2> strides = {1, 1};
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::array<int, 2> dilation_rate = {1, 1};
  int depth_multiplier = 1;
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer depthwise_initializer = "glorot_uniform";
  initializers::Initializer pointwise_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer depthwise_regularizer = {};
  regularizers::Regularizer pointwise_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint depthwise_constraint{};
  constraints::Constraint pointwise_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

// A depthwise convolution (depth_multiplier filters per channel) then a 1x1 convolution to
// `filters` channels, then the bias.
class SeparableConv1D : public Layer {
 public:
  SeparableConv1D(int filters, int kernel_size, SeparableConv1DOptions options = {});
  KEEL_CONV_VARIANT_COMMON(SeparableConv1D)
  int filters() const { return filters_; }
  int kernel_size() const { return kernel_size_; }
  const SeparableConv1DOptions& options() const { return options_; }
  Variable& depthwise_kernel() const;
  Variable& pointwise_kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_, kernel_size_;
  SeparableConv1DOptions options_;
  Variable* depthwise_ = nullptr;
  Variable* pointwise_ = nullptr;
  Variable* bias_ = nullptr;
};

class SeparableConv2D : public Layer {
 public:
  SeparableConv2D(int filters, std::array<int, 2> kernel_size, SeparableConv2DOptions options = {});
  SeparableConv2D(int filters, int kernel_size, SeparableConv2DOptions options = {})
      : SeparableConv2D(filters, std::array<int, 2>{kernel_size, kernel_size}, std::move(options)) {}
  KEEL_CONV_VARIANT_COMMON(SeparableConv2D)
  int filters() const { return filters_; }
  std::array<int, 2> kernel_size() const { return kernel_size_; }
  const SeparableConv2DOptions& options() const { return options_; }
  Variable& depthwise_kernel() const;
  Variable& pointwise_kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int filters_;
  std::array<int, 2> kernel_size_;
  SeparableConv2DOptions options_;
  Variable* depthwise_ = nullptr;
  Variable* pointwise_ = nullptr;
  Variable* bias_ = nullptr;
};

struct DepthwiseConv1DOptions {
  int strides = 1;
  std::string padding = "valid";
  int depth_multiplier = 1;
  std::string data_format = "channels_last";
  int dilation_rate = 1;
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer depthwise_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer depthwise_regularizer = {};
  regularizers::Regularizer bias_regularizer = {};
  regularizers::Regularizer activity_regularizer = {};
  constraints::Constraint depthwise_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name = "";
};

// One filter per input channel and multiplier: output channel c * depth_multiplier + m.
class DepthwiseConv1D : public Layer {
 public:
  explicit DepthwiseConv1D(int kernel_size, DepthwiseConv1DOptions options = {});
  KEEL_CONV_VARIANT_COMMON(DepthwiseConv1D)
  int kernel_size() const { return kernel_size_; }
  const DepthwiseConv1DOptions& options() const { return options_; }
  Variable& depthwise_kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int kernel_size_;
  DepthwiseConv1DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

#undef KEEL_CONV_VARIANT_COMMON

}  // namespace keel::layers
