#pragma once
// What the image preprocessing layers (image_preprocessing.cpp: Resizing, CenterCrop, RandomZoom,
// RandomRotation...; preprocessing.cpp: RandomFlip, RandomTranslation, RandomCrop...) share: the
// rank check, an input as an NHWC batch and back, and Keras' fill modes.
#include <string>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/layers/layer.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers::detail {

inline void require_image_rank(const Layer& layer, const Shape& s) {
  if (s.rank() != 3 && s.rank() != 4)
    throw ShapeError(fmt::format("{}: expected an image (rank 3) or a batch of images (rank 4), got shape {}",
                                 who(layer), s.to_string()));
}

// The input as an NHWC batch, and the way back to its own layout.
struct ImageBatch {
  Tensor x;  // NHWC
  bool single = false, channels_first = false;
};

inline ImageBatch to_batch(const Tensor& in, const std::string& data_format) {
  ImageBatch b;
  b.single = in.rank() == 3;
  b.channels_first = data_format == "channels_first";
  b.x = b.single ? expand_dims(in, 0) : in;
  if (b.channels_first) b.x = transpose(b.x, {0, 2, 3, 1});
  return b;
}

inline Tensor from_batch(const ImageBatch& b, Tensor y) {
  if (b.channels_first) y = transpose(y, {0, 3, 1, 2});
  return b.single ? squeeze(y, {0}) : y;
}

// Keras' fill_mode: where a sample outside the image reads from.
enum class Fill { reflect, wrap, constant, nearest };

inline Fill parse_fill(const Layer& layer, const std::string& mode) {
  if (mode == "reflect") return Fill::reflect;
  if (mode == "wrap") return Fill::wrap;
  if (mode == "constant") return Fill::constant;
  if (mode == "nearest") return Fill::nearest;
  throw ValueError(fmt::format("{}: fill_mode must be \"reflect\", \"wrap\", \"constant\" or \"nearest\", got \"{}\"",
                               who(layer), mode));
}

}  // namespace keel::layers::detail
