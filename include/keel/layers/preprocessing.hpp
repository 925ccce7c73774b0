#pragma once
// Image augmentation layers, as Keras 3: RandomFlip, RandomCrop, RandomTranslation. They change
// their input only when called with training = true (RandomCrop still brings the image to its
// target size otherwise); they accept a batch [batch, height, width, channels] or one image
// [height, width, channels] (channels first with data_format = "channels_first"), and their
// output is floating point (integer images become float32), as in Keras.
//
// Randomness: a layer with a seed draws from its own Philox stream (the same seed gives the same
// sequence of augmentations, call after call, whatever else runs); without a seed it draws from
// keel's global generator, so random::set_seed makes it reproducible too.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::layers {

namespace detail {
// Draws uniform numbers in [0, 1) for one call of an augmentation layer (see above).
class AugmentationRandom {
 public:
  explicit AugmentationRandom(std::optional<std::uint64_t> seed = std::nullopt) : seed_(seed) {}
  std::vector<double> uniform(std::int64_t count);
  std::optional<std::uint64_t> seed() const { return seed_; }

 private:
  std::optional<std::uint64_t> seed_;
  std::uint64_t calls_ = 0;
};
}  // namespace detail

struct RandomFlipOptions {
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string data_format = "channels_last";
  std::string name = "";
};

// mode: "horizontal" (left-right), "vertical" (top-bottom) or "horizontal_and_vertical". Each
// image is flipped with probability 1/2 along each axis of the mode (independently per axis).
class RandomFlip : public Layer {
 public:
  explicit RandomFlip(std::string mode = "horizontal_and_vertical", RandomFlipOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomFlip)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank 3 or 4
  nlohmann::json get_config() const override;

  const std::string& mode() const { return mode_; }
  const RandomFlipOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  std::string mode_;
  RandomFlipOptions options_;
  detail::AugmentationRandom random_;
};

struct RandomCropOptions {
  std::optional<std::uint64_t> seed = std::nullopt;
  std::string data_format = "channels_last";
  std::string name = "";
};

// Output [.., height, width, channels]. In training, an image at least as large as the target
// is cropped at one random position (the same for the whole batch, as Keras). Otherwise (at
// inference, or a smaller image) the largest centred window with the target's aspect ratio is
// cut out and resized to the target with bilinear interpolation (Keras' documented behaviour,
// keras.utils.smart_resize): a centre crop when only the size differs in one axis.
class RandomCrop : public Layer {
 public:
  RandomCrop(int height, int width, RandomCropOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomCrop)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank 3 or 4
  nlohmann::json get_config() const override;

  int height() const { return height_; }
  int width() const { return width_; }
  const RandomCropOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  int height_, width_;
  RandomCropOptions options_;
  detail::AugmentationRandom random_;
};

// Keras' factor argument: one number f for the range [-|f|, |f|], or a pair {lower, upper};
// fractions of the image's height or width, each in [-1, 1].
// (RandomTranslation checks the range and names itself when it is wrong.)
struct TranslationFactor {
  double lower = 0, upper = 0;  // sorted
  bool pair = false;            // given as a pair (get_config writes it back as one)
  TranslationFactor(double factor)  // NOLINT: implicit, so RandomTranslation(0.1, 0.2) reads like Keras
      : lower(factor < 0 ? factor : -factor), upper(factor < 0 ? -factor : factor) {}
  TranslationFactor(double a, double b)  // RandomTranslation({-0.2, 0.3}, 0.1)
      : lower(a < b ? a : b), upper(a < b ? b : a), pair(true) {}
};

struct RandomTranslationOptions {
  std::string fill_mode = "reflect";  // "reflect", "wrap", "constant" or "nearest"
  std::string interpolation = "bilinear";  // or "nearest"
  std::optional<std::uint64_t> seed = std::nullopt;
  double fill_value = 0.0;  // for fill_mode "constant"
  std::string data_format = "channels_last";
  std::string name = "";
};

// Shifts each image by its own random (dx, dy) = (u * width, v * height), u and v uniform in the
// width and height factor ranges; positive moves the content right / down. Pixels that come
// from outside the image follow fill_mode:
//   reflect  (d c b a | a b c d | d c b a)     wrap     (a b c d | a b c d | a b c d)
//   constant (k k k k | a b c d | k k k k)     nearest  (a a a a | a b c d | d d d d)
// Fractional shifts are interpolated (bilinear or nearest), as TensorFlow's image transform.
class RandomTranslation : public Layer {
 public:
  RandomTranslation(TranslationFactor height_factor, TranslationFactor width_factor,
                    RandomTranslationOptions options = {});
  KEEL_LAYER_BOILERPLATE(RandomTranslation)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank 3 or 4
  nlohmann::json get_config() const override;

  const TranslationFactor& height_factor() const { return height_factor_; }
  const TranslationFactor& width_factor() const { return width_factor_; }
  const RandomTranslationOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  TranslationFactor height_factor_, width_factor_;
  RandomTranslationOptions options_;
  detail::AugmentationRandom random_;
};

}  // namespace keel::layers
