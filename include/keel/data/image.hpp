#pragma once
// Image preprocessing and augmentation, after tf.image. Images are NHWC: one image [H, W, C] or
// a batch [N, H, W, C]. Random functions take an optional seed: the same seed gives the same
// result (Philox, independent of threads); without one they draw from the global generator, so
// random::set_seed makes them reproducible too. Results live on the input's device.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel::data::image {

// Mirror along the width (left_right) or height (up_down) axis. Any dtype.
Tensor flip_left_right(const Tensor& image);
Tensor flip_up_down(const Tensor& image);
// Each image (each one of a batch independently) is flipped with probability 1/2.
Tensor random_flip_left_right(const Tensor& image, std::optional<std::uint64_t> seed = {});
Tensor random_flip_up_down(const Tensor& image, std::optional<std::uint64_t> seed = {});

// A window of `size` at a uniformly random offset (one offset for the whole tensor, as
// tf.image.random_crop). `size` has the image's rank, or is {h, w} (all images and channels
// kept). Any dtype.
Tensor random_crop(const Tensor& image, const Shape& size, std::optional<std::uint64_t> seed = {});

// image + delta (float dtypes).
Tensor adjust_brightness(const Tensor& image, double delta);
// delta uniform in [-max_delta, max_delta), one for the whole tensor (tf.image.random_brightness).
Tensor random_brightness(const Tensor& image, double max_delta, std::optional<std::uint64_t> seed = {});
// (x - mean) * factor + mean, with the mean of each channel of each image (float dtypes).
Tensor adjust_contrast(const Tensor& image, double factor);
// factor uniform in [lower, upper), one for the whole tensor (tf.image.random_contrast).
Tensor random_contrast(const Tensor& image, double lower, double upper,
                       std::optional<std::uint64_t> seed = {});

// Resizes to size = {height, width}. "bilinear" (default) or "nearest", with TF2's half-pixel
// centers and no antialiasing (tf.image.resize). Bilinear returns float32 whatever the input
// dtype; nearest keeps the dtype.
Tensor resize(const Tensor& image, std::array<std::int64_t, 2> size, const std::string& method = "bilinear");

// (x - mean) / max(stddev, 1/sqrt(H*W*C)) per image. Integer images give float32.
Tensor per_image_standardization(const Tensor& image);

}  // namespace keel::data::image
