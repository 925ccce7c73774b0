#pragma once
// Convolution and pooling layers, as Keras 3 names and defaults them: Conv1D, Conv2D,
// Conv2DTranspose, DepthwiseConv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D,
// GlobalMaxPooling2D.
//
// Each layer takes its Keras keyword arguments as an `XOptions` struct, last, whose fields follow
// the order of Keras' keyword arguments (constraints, which keel does not have, are left out;
// `name` stands for Keras' **kwargs and comes last), so that a call reads like Keras:
//   layers::Conv2D(32, {3, 3}, {.strides = {1, 1}, .padding = "same", .activation = "relu"})
//   layers::MaxPooling2D({2, 2})
// Images are channels_last (NHWC) unless data_format = "channels_first". Kernels have Keras'
// layouts: Conv2D [kh, kw, in / groups, filters], Conv1D [k, in / groups, filters],
// DepthwiseConv2D [kh, kw, in, depth_multiplier], Conv2DTranspose [kh, kw, filters, in].
#include <array>
#include <optional>
#include <string>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

// Keras' None-or-a-pair arguments (pooling strides, Conv2DTranspose output_padding). A plain
// std::optional<std::array<int, 2>> would need `.strides = {{1, 1}}`; this reads like Keras:
// `.strides = {1, 1}`, `.strides = 2`, or nothing for None.
struct OptionalPair {
  std::optional<std::array<int, 2>> value;
  OptionalPair() = default;
  OptionalPair(std::nullopt_t) {}                                          // NOLINT: implicit
  OptionalPair(int both) : value(std::array<int, 2>{both, both}) {}       // NOLINT
  OptionalPair(int first, int second) : value(std::array<int, 2>{first, second}) {}  // NOLINT
  OptionalPair(std::array<int, 2> pair) : value(pair) {}                  // NOLINT
  bool has_value() const { return value.has_value(); }
  explicit operator bool() const { return value.has_value(); }
  const std::array<int, 2>& operator*() const { return *value; }
  std::array<int, 2> value_or(std::array<int, 2> otherwise) const { return value.value_or(otherwise); }
};

// ---- convolutions ---------------------------------------------------------------------------

struct Conv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal"
  std::string data_format = "channels_last";
  int dilation_rate = 1;
  int groups = 1;
  activations::ActivationFn activation = "linear";  // Keras' None
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

// Input [batch, steps, channels] -> [batch, new_steps, filters].
class Conv1D : public Layer {
 public:
  Conv1D(int filters, int kernel_size, Conv1DOptions options = {});
  KEEL_LAYER_BOILERPLATE(Conv1D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  int filters() const { return filters_; }
  int kernel_size() const { return kernel_size_; }
  const Conv1DOptions& options() const { return options_; }
  Variable& kernel() const;  // ValueError before the layer is built
  Variable& bias() const;    // ValueError before build or with use_bias = false

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  int filters_;
  int kernel_size_;
  Conv1DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

struct Conv2DOptions {
  std::array<int, 2> strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same"
  std::string data_format = "channels_last";
  std::array<int, 2> dilation_rate = {1, 1};
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

// Input [batch, height, width, channels] -> [batch, new_height, new_width, filters].
class Conv2D : public Layer {
 public:
  Conv2D(int filters, std::array<int, 2> kernel_size, Conv2DOptions options = {});
  Conv2D(int filters, int kernel_size, Conv2DOptions options = {})  // Keras' kernel_size=3
      : Conv2D(filters, std::array<int, 2>{kernel_size, kernel_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(Conv2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  int filters() const { return filters_; }
  std::array<int, 2> kernel_size() const { return kernel_size_; }
  const Conv2DOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  int filters_;
  std::array<int, 2> kernel_size_;
  Conv2DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

struct Conv2DTransposeOptions {
  std::array<int, 2> strides = {1, 1};
  std::string padding = "valid";
  // Extra rows/columns on one side of the output; each must be smaller than its stride.
  OptionalPair output_padding = std::nullopt;
  std::string data_format = "channels_last";
  std::array<int, 2> dilation_rate = {1, 1};
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

// The transpose (gradient) of Conv2D: kernel [kh, kw, filters, in]. Output size per axis as
// Keras' deconv_output_length: valid (in - 1) * s + max(k_eff, s), same in * s (without
// output_padding).
class Conv2DTranspose : public Layer {
 public:
  Conv2DTranspose(int filters, std::array<int, 2> kernel_size, Conv2DTransposeOptions options = {});
  Conv2DTranspose(int filters, int kernel_size, Conv2DTransposeOptions options = {})
      : Conv2DTranspose(filters, std::array<int, 2>{kernel_size, kernel_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(Conv2DTranspose)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  int filters() const { return filters_; }
  std::array<int, 2> kernel_size() const { return kernel_size_; }
  const Conv2DTransposeOptions& options() const { return options_; }
  Variable& kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  int filters_;
  std::array<int, 2> kernel_size_;
  Conv2DTransposeOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

struct DepthwiseConv2DOptions {
  std::array<int, 2> strides = {1, 1};
  std::string padding = "valid";
  int depth_multiplier = 1;
  std::string data_format = "channels_last";
  std::array<int, 2> dilation_rate = {1, 1};
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

// One filter per input channel: output channel c * depth_multiplier + m.
class DepthwiseConv2D : public Layer {
 public:
  explicit DepthwiseConv2D(std::array<int, 2> kernel_size, DepthwiseConv2DOptions options = {});
  explicit DepthwiseConv2D(int kernel_size, DepthwiseConv2DOptions options = {})
      : DepthwiseConv2D(std::array<int, 2>{kernel_size, kernel_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(DepthwiseConv2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  std::array<int, 2> kernel_size() const { return kernel_size_; }
  const DepthwiseConv2DOptions& options() const { return options_; }
  Variable& depthwise_kernel() const;
  Variable& bias() const;

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  std::array<int, 2> kernel_size_;
  DepthwiseConv2DOptions options_;
  Variable* kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- pooling --------------------------------------------------------------------------------

struct MaxPooling2DOptions {
  OptionalPair strides = std::nullopt;  // Keras' None: the pool size
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::string name = "";
};

class MaxPooling2D : public Layer {
 public:
  explicit MaxPooling2D(std::array<int, 2> pool_size = {2, 2}, MaxPooling2DOptions options = {});
  explicit MaxPooling2D(int pool_size, MaxPooling2DOptions options = {})
      : MaxPooling2D(std::array<int, 2>{pool_size, pool_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(MaxPooling2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank only
  nlohmann::json get_config() const override;

  std::array<int, 2> pool_size() const { return pool_size_; }
  std::array<int, 2> strides() const { return options_.strides.value_or(pool_size_); }
  const MaxPooling2DOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  std::array<int, 2> pool_size_;
  MaxPooling2DOptions options_;
};

struct AveragePooling2DOptions {
  OptionalPair strides = std::nullopt;  // Keras' None: the pool size
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::string name = "";
};

// With padding "same", windows average only the positions inside the image (as Keras).
class AveragePooling2D : public Layer {
 public:
  explicit AveragePooling2D(std::array<int, 2> pool_size = {2, 2}, AveragePooling2DOptions options = {});
  explicit AveragePooling2D(int pool_size, AveragePooling2DOptions options = {})
      : AveragePooling2D(std::array<int, 2>{pool_size, pool_size}, std::move(options)) {}
  KEEL_LAYER_BOILERPLATE(AveragePooling2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  std::array<int, 2> pool_size() const { return pool_size_; }
  std::array<int, 2> strides() const { return options_.strides.value_or(pool_size_); }
  const AveragePooling2DOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  std::array<int, 2> pool_size_;
  AveragePooling2DOptions options_;
};

struct GlobalAveragePooling2DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::string name = "";
};

// [batch, height, width, channels] -> [batch, channels] ([batch, 1, 1, channels] with keepdims).
class GlobalAveragePooling2D : public Layer {
 public:
  explicit GlobalAveragePooling2D(GlobalAveragePooling2DOptions options = {});
  KEEL_LAYER_BOILERPLATE(GlobalAveragePooling2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const GlobalAveragePooling2DOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  GlobalAveragePooling2DOptions options_;
};

struct GlobalMaxPooling2DOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;
  std::string name = "";
};

class GlobalMaxPooling2D : public Layer {
 public:
  explicit GlobalMaxPooling2D(GlobalMaxPooling2DOptions options = {});
  KEEL_LAYER_BOILERPLATE(GlobalMaxPooling2D)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const GlobalMaxPooling2DOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  GlobalMaxPooling2DOptions options_;
};

}  // namespace keel::layers
