#pragma once
// Pooling layers of one and three spatial axes, as Keras 3 names and defaults them:
// MaxPooling1D/3D, AveragePooling1D/3D, GlobalAveragePooling1D/3D, GlobalMaxPooling1D/3D (the
// 2-D ones are in convolutional.hpp). Inputs are channels_last ([N, steps, C] /
// [N, D, H, W, C]) unless data_format = "channels_first":
//   layers::MaxPooling1D(2, {.strides = 1, .padding = "same"})
//   layers::AveragePooling3D({2, 2, 2})
// Strides default to the pool size (Keras' None); averages with padding "same" count only the
// positions inside the input (as Keras).
#include <array>
#include <optional>
#include <string>

#include "keel/layers/conv_variants.hpp"  // OptionalTriple
#include "keel/layers/layer.hpp"

namespace keel::layers {

struct Pooling1DOptions {
  std::optional<int> strides = std::nullopt;  // None: the pool size
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::string name = "";
};
using MaxPooling1DOptions = Pooling1DOptions;
using AveragePooling1DOptions = Pooling1DOptions;

struct Pooling3DOptions {
  OptionalTriple strides = std::nullopt;  // None: the pool size
  std::string padding = "valid";
  std::string data_format = "channels_last";
  std::string name = "";
};
using MaxPooling3DOptions = Pooling3DOptions;
using AveragePooling3DOptions = Pooling3DOptions;

struct GlobalPoolingOptions {
  std::string data_format = "channels_last";
  bool keepdims = false;  // keep the pooled axes as size 1
  std::string name = "";
};
using GlobalAveragePooling1DOptions = GlobalPoolingOptions;
using GlobalAveragePooling3DOptions = GlobalPoolingOptions;
using GlobalMaxPooling1DOptions = GlobalPoolingOptions;
using GlobalMaxPooling3DOptions = GlobalPoolingOptions;

#define KEEL_POOLING_COMMON(Class)                                   \
  KEEL_LAYER_BOILERPLATE(Class)                                      \
  using Layer::build;                                                \
  using Layer::call;                                                 \
  void build(const Shape& input_shape) override;                     \
  Tensor call(const Tensor& inputs, bool training) override;         \
  void check_input_shape(const Shape& input_shape) const override;   \
  nlohmann::json get_config() const override;                        \
                                                                     \
 protected:                                                          \
  bool floating_inputs() const override { return true; }             \
                                                                     \
 public:

class MaxPooling1D : public Layer {
 public:
  explicit MaxPooling1D(int pool_size = 2, Pooling1DOptions options = {});
  KEEL_POOLING_COMMON(MaxPooling1D)
  int pool_size() const { return pool_size_; }
  int strides() const { return options_.strides.value_or(pool_size_); }
  const Pooling1DOptions& options() const { return options_; }

 private:
  int pool_size_;
  Pooling1DOptions options_;
};

class AveragePooling1D : public Layer {
 public:
  explicit AveragePooling1D(int pool_size = 2, Pooling1DOptions options = {});
  KEEL_POOLING_COMMON(AveragePooling1D)
  int pool_size() const { return pool_size_; }
  int strides() const { return options_.strides.value_or(pool_size_); }
  const Pooling1DOptions& options() const { return options_; }

 private:
  int pool_size_;
  Pooling1DOptions options_;
};

class MaxPooling3D : public Layer {
 public:
  explicit MaxPooling3D(std::array<int, 3> pool_size = {2, 2, 2}, Pooling3DOptions options = {});
  explicit MaxPooling3D(int pool_size, Pooling3DOptions options = {})
      : MaxPooling3D(std::array<int, 3>{pool_size, pool_size, pool_size}, std::move(options)) {}
  KEEL_POOLING_COMMON(MaxPooling3D)
  std::array<int, 3> pool_size() const { return pool_size_; }
  std::array<int, 3> strides() const { return options_.strides.value_or(pool_size_); }
  const Pooling3DOptions& options() const { return options_; }

 private:
  std::array<int, 3> pool_size_;
  Pooling3DOptions options_;
};

class AveragePooling3D : public Layer {
 public:
  explicit AveragePooling3D(std::array<int, 3> pool_size = {2, 2, 2}, Pooling3DOptions options = {});
  explicit AveragePooling3D(int pool_size, Pooling3DOptions options = {})
      : AveragePooling3D(std::array<int, 3>{pool_size, pool_size, pool_size}, std::move(options)) {}
  KEEL_POOLING_COMMON(AveragePooling3D)
  std::array<int, 3> pool_size() const { return pool_size_; }
  std::array<int, 3> strides() const { return options_.strides.value_or(pool_size_); }
  const Pooling3DOptions& options() const { return options_; }

 private:
  std::array<int, 3> pool_size_;
  Pooling3DOptions options_;
};

// [N, steps, C] -> [N, C] ([N, 1, C] with keepdims); the 3-D ones pool depth, height and width.
#define KEEL_GLOBAL_POOLING(Class)                                    \
  class Class : public Layer {                                        \
   public:                                                            \
    explicit Class(GlobalPoolingOptions options = {});                \
    KEEL_POOLING_COMMON(Class)                                        \
    const GlobalPoolingOptions& options() const { return options_; }  \
                                                                      \
   private:                                                           \
    GlobalPoolingOptions options_;                                    \
  };
KEEL_GLOBAL_POOLING(GlobalAveragePooling1D)
KEEL_GLOBAL_POOLING(GlobalAveragePooling3D)
KEEL_GLOBAL_POOLING(GlobalMaxPooling1D)
KEEL_GLOBAL_POOLING(GlobalMaxPooling3D)
#undef KEEL_GLOBAL_POOLING
#undef KEEL_POOLING_COMMON

}  // namespace keel::layers
