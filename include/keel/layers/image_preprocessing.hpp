#pragma once
// Image preprocessing layers, as Keras 3: Resizing, CenterCrop (always applied) and
// RandomRotation, RandomZoom, RandomContrast, RandomBrightness (random, applied only when called
// with training = true; otherwise the input passes through). They accept a batch
// [batch, height, width, channels] or one image [height, width, channels] (channels first with
// data_format = "channels_first"); the output is floating point (integer images become float32).
// Pixels move with differentiable ops (gathers with constant weights), so gradients flow through.
// Randomness follows RandomFlip (keel/layers/preprocessing.hpp): a seeded layer replays its own
// sequence, an unseeded one draws from the global generator.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "keel/layers/layer.hpp"
#include "keel/layers/preprocessing.hpp"

namespace keel::layers {

// Keras' factor argument (one number f for [-|f|, |f|], or a pair {lower, upper}); the same type
// as RandomTranslation's.
using ImageFactor = TranslationFactor;

struct ResizingOptions {
  std::string interpolation = "bilinear";  // or "nearest"
  bool crop_to_aspect_ratio = false;  // resize the largest centred window with the target's aspect ratio
  bool pad_to_aspect_ratio = false;   // pad (with fill_value) to the target's aspect ratio, centred, then resize
  std::string fill_mode = "constant";  // the padding of pad_to_aspect_ratio (only "constant")
  double fill_value = 0.0;
  std::string data_format = "channels_last";
  std::string name = "";
};

// Resizes to [height, width] as tf.image.resize (half-pixel centres, no antialiasing).
class Resizing : public Layer {
 public:
  Resizing(int height, int width, ResizingOptions options = {});
  KEEL_LAYER_BOILERPLATE(Resizing)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank 3 or 4
  nlohmann::json get_config() const override;

  int height() const { return height_; }
  int width() const { return width_; }
  const ResizingOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int height_, width_;
  ResizingOptions options_;
};

struct CenterCropOptions {
  std::string data_format = "channels_last";
  std::string name = "";
};

// The centred [height, width] window (offsets (H - height) / 2, (W - width) / 2, rounded down);
// an image smaller than the target in either side is instead cropped to the target's aspect ratio
// and resized (keras.utils.smart_resize), as Keras.
class CenterCrop : public Layer {
 public:
  CenterCrop(int height, int width, CenterCropOptions options = {});
  KEEL_LAYER_BOILERPLATE(CenterCrop)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  int height() const { return height_; }
  int width() const { return width_; }
  const CenterCropOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  int height_, width_;
  CenterCropOptions options_;
};

struct RandomRotationOptions {
  std::string fill_mode = "reflect";       // "reflect", "wrap", "constant" or "nearest"
  std::string interpolation = "bilinear";  // or "nearest"
  std::optional<std::uint64_t> seed = std::nullopt;
  double fill_value = 0.0;
  std::string data_format = "channels_last";
  std::string name = "";
};

// Rotates each image about its centre by its own angle, uniform in [lower, upper] * 2 pi
// (positive: counter-clockwise), sampling as TensorFlow's image transform (the source
// coordinate is mapped by fill_mode, then interpolated; constant fill beyond the edge).
class RandomRotation : public Layer {
 public:
  explicit RandomRotation(ImageFactor factor, RandomRotationOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomRotation)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  const ImageFactor& factor() const { return factor_; }
  const RandomRotationOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  ImageFactor factor_;
  RandomRotationOptions options_;
  detail::AugmentationRandom random_;
};

struct RandomZoomOptions {
  std::string fill_mode = "reflect";
  std::string interpolation = "bilinear";
  std::optional<std::uint64_t> seed = std::nullopt;
  double fill_value = 0.0;
  std::string data_format = "channels_last";
  std::string name = "";
};

// Zooms each image about its centre: source = zoom * (output - centre) + centre per axis, zoom
// uniform in [1 + lower, 1 + upper] (positive factors zoom out). Without a width_factor the
// width uses the height's zoom (the aspect ratio is kept).
class RandomZoom : public Layer {
 public:
  explicit RandomZoom(ImageFactor height_factor, std::optional<ImageFactor> width_factor = std::nullopt,
                      RandomZoomOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomZoom)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  const ImageFactor& height_factor() const { return height_factor_; }
  const std::optional<ImageFactor>& width_factor() const { return width_factor_; }
  const RandomZoomOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  ImageFactor height_factor_;
  std::optional<ImageFactor> width_factor_;
  RandomZoomOptions options_;
  detail::AugmentationRandom random_;
};

struct RandomContrastOptions {
  std::array<double, 2> value_range = {0, 255};
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string name = "";
};

// (x - mean) * c + mean with the mean of each channel of each image, c uniform in
// [1 - lower, 1 + upper] per image (factor f: lower = upper = f, in [0, 1]), then clipped to
// value_range.
class RandomContrast : public Layer {
 public:
  explicit RandomContrast(ImageFactor factor, RandomContrastOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomContrast)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  const ImageFactor& factor() const { return factor_; }
  const RandomContrastOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  ImageFactor factor_;
  double lower_, upper_;  // the contrast factor's range is [1 - lower_, 1 + upper_]
  RandomContrastOptions options_;
  detail::AugmentationRandom random_;
};

struct RandomBrightnessOptions {
  std::array<double, 2> value_range = {0, 255};
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string name = "";
};

// x + d * (value_range[1] - value_range[0]) with d uniform in [lower, upper] per image (factor f:
// [-|f|, |f|], in [-1, 1]), then clipped to value_range.
class RandomBrightness : public Layer {
 public:
  explicit RandomBrightness(ImageFactor factor, RandomBrightnessOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomBrightness)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  const ImageFactor& factor() const { return factor_; }
  const RandomBrightnessOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }

 private:
  ImageFactor factor_;
  RandomBrightnessOptions options_;
  detail::AugmentationRandom random_;
};

}  // namespace keel::layers
