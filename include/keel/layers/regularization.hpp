#pragma once
// Regularization layers, as Keras 3: SpatialDropout1D/2D/3D, GaussianNoise, GaussianDropout,
// AlphaDropout and ActivityRegularization (Dropout itself is in core.hpp).
//
// The noise layers act only in training (training = true here or in a calling layer, as
// Dropout) and are the identity otherwise. Their draws come from the random stream in effect (the
// model's stream in fit()); a seed makes them reproducible, each training call drawing anew
// (Keras' SeedGenerator). Masks riding on the inputs pass on.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::layers {

struct SpatialDropoutOptions {
  std::optional<std::uint64_t> seed{};
  std::string name{};
};

struct SpatialDropout2DOptions {
  std::string data_format = "channels_last";  // or "channels_first"
  std::optional<std::uint64_t> seed{};
  std::string name{};
};

// Drops whole feature maps: one keep/drop decision per (example, channel), broadcast over the
// steps / pixels / voxels, the kept maps scaled by 1 / (1 - rate). Inputs of rank 3 (1D: [B, T,
// C]), 4 (2D) or 5 (3D); channels last or (2D/3D) first.
class SpatialDropoutBase : public Layer {
 public:
  SpatialDropoutBase(int spatial_dims, double rate, std::string data_format, std::optional<std::uint64_t> seed,
                     std::string name);
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  double rate() const { return rate_; }
  const std::string& data_format() const { return data_format_; }
  const std::optional<std::uint64_t>& seed() const { return seed_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }  // the mask in float32

 private:
  int spatial_dims_;
  double rate_;
  std::string data_format_;
  std::optional<std::uint64_t> seed_;
  std::uint64_t calls_ = 0;
};

class SpatialDropout1D : public SpatialDropoutBase {
 public:
  explicit SpatialDropout1D(double rate, SpatialDropoutOptions options = {});
  KEEL_LAYER_BOILERPLATE(SpatialDropout1D)
};

class SpatialDropout2D : public SpatialDropoutBase {
 public:
  explicit SpatialDropout2D(double rate, SpatialDropout2DOptions options = {});
  KEEL_LAYER_BOILERPLATE(SpatialDropout2D)
};

class SpatialDropout3D : public SpatialDropoutBase {
 public:
  explicit SpatialDropout3D(double rate, SpatialDropout2DOptions options = {});
  KEEL_LAYER_BOILERPLATE(SpatialDropout3D)
};

struct GaussianNoiseOptions {
  std::optional<std::uint64_t> seed{};
  std::string name{};
};

// x + N(0, stddev^2) in training; stddev in [0, 1] (Keras' check).
class GaussianNoise : public Layer {
 public:
  explicit GaussianNoise(double stddev, GaussianNoiseOptions options = {});
  KEEL_LAYER_BOILERPLATE(GaussianNoise)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double stddev() const { return stddev_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }

 private:
  double stddev_;
  GaussianNoiseOptions options_;
  std::uint64_t calls_ = 0;
};

struct GaussianDropoutOptions {
  std::optional<std::uint64_t> seed{};
  std::string name{};
};

// x * N(1, rate / (1 - rate)) in training; rate in [0, 1) (mean-preserving multiplicative noise).
class GaussianDropout : public Layer {
 public:
  explicit GaussianDropout(double rate, GaussianDropoutOptions options = {});
  KEEL_LAYER_BOILERPLATE(GaussianDropout)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double rate() const { return rate_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }

 private:
  double rate_;
  GaussianDropoutOptions options_;
  std::uint64_t calls_ = 0;
};

struct AlphaDropoutOptions {
  std::vector<std::int64_t> noise_shape{};  // as Dropout's: -1 takes the input's size; empty: the input's shape
  std::optional<std::uint64_t> seed{};
  std::string name{};
};

// Keras' AlphaDropout, for SELU networks: keeps mean and variance. With alpha' = -scale * alpha
// (SELU's constants), kept = uniform >= rate, a = ((1 - rate) (1 + rate alpha'^2))^-1/2,
// b = -a alpha' rate:  y = a (x kept + alpha' (1 - kept)) + b  in training.
class AlphaDropout : public Layer {
 public:
  explicit AlphaDropout(double rate, AlphaDropoutOptions options = {});
  KEEL_LAYER_BOILERPLATE(AlphaDropout)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double rate() const { return rate_; }
  const AlphaDropoutOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }

 private:
  double rate_;
  AlphaDropoutOptions options_;
  std::uint64_t calls_ = 0;
};

struct ActivityRegularizationOptions {
  double l1 = 0.0;
  double l2 = 0.0;
  std::string name{};
};

// The identity, adding l1 * sum|x| + l2 * sum x^2 of its output to losses() on every call (Keras'
// activity_regularizer = L1L2(l1, l2)); fit() adds losses() to the training loss.
class ActivityRegularization : public Layer {
 public:
  explicit ActivityRegularization(ActivityRegularizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(ActivityRegularization)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const ActivityRegularizationOptions& options() const { return options_; }

 private:
  ActivityRegularizationOptions options_;
};

}  // namespace keel::layers
