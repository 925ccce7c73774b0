// Image augmentation layers: RandomFlip, RandomCrop, RandomTranslation.
//
// Everything works on a batch in NHWC: a single image gets a batch axis, channels_first input is
// transposed, and both are undone at the end. The random numbers are few (one or two per image
// and call), so they are drawn on the host; the pixels then move with differentiable ops
// (gather, where, slice, products with constant weights), so a model may put these layers
// anywhere, even behind trainable layers.
//
// Resampling (translation, and the resize of RandomCrop's inference path) is separable: an
// output pixel is a weighted sum of at most two source rows, then of at most two source
// columns. resample_axis() does one axis for a whole batch with one gather per source (each
// image may have its own source positions) and constant weights.
#include "keel/layers/preprocessing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"
#include "layers/image_batch.hpp"
#include "layers/layer_util.hpp"
#include "ops/philox.hpp"

namespace keel::layers {

using detail::Fill;
using detail::from_batch;
using detail::ImageBatch;
using detail::parse_fill;
using detail::require_image_rank;
using detail::to_batch;

using detail::checked_data_format;
using detail::who;

// ---- randomness ------------------------------------------------------------------------------

namespace {
// The Philox stream word of seeded augmentation layers ("aug " in ASCII): random.cpp uses small
// stream words and dropout its own, so a layer seed never replays what set_seed(seed) gives the
// global generator or a dropout with the same seed.
constexpr std::uint32_t kSeededStream = 0x61756720u;
}  // namespace

std::vector<double> detail::AugmentationRandom::uniform(std::int64_t count) {
  std::vector<double> out(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  if (out.empty()) return out;
  const auto blocks = static_cast<std::uint64_t>((count + 3) / 4);
  random::PhiloxState state{};
  std::uint32_t stream = 0;
  if (seed_) {
    // Call k of a seeded layer owns counters [k * 2^32, (k + 1) * 2^32): its own sequence.
    state = {*seed_, calls_++ << 32};
    stream = kSeededStream;
  } else {
    state = random::reserve(static_cast<std::uint64_t>(count));
  }
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const auto words = random::philox::block(state, b, stream);
    for (std::uint64_t j = 0; j < 4; ++j) {
      const std::uint64_t i = b * 4 + j;
      if (i < out.size()) out[i] = static_cast<double>(words[j]) * 0x1.0p-32;  // [0, 1)
    }
  }
  return out;
}

namespace {

// One resampled axis: for image n and output position i (entry n * out + i), source positions
// index[k] with weights weight[k] (k = 0, 1), plus fill_weight times the fill value.
struct AxisSampling {
  std::int64_t out = 0;
  std::vector<std::int64_t> index[2];
  std::vector<double> weight[2];
  std::vector<double> fill_weight;
};

// Resamples axis 1 of x [N, L, M, C] to s.out positions.
Tensor resample_axis(const Tensor& x, const AxisSampling& s, double fill_value) {
  const std::int64_t n = x.shape()[0], len = x.shape()[1], m = x.shape()[2], c = x.shape()[3];
  const Tensor rows = reshape(x, Shape{n * len, m, c});
  const Shape wshape{n * s.out, 1, 1};
  Tensor y;
  for (int k = 0; k < 2; ++k) {
    const auto& w = s.weight[k];
    if (std::all_of(w.begin(), w.end(), [](double v) { return v == 0; })) continue;
    std::vector<std::int64_t> flat(s.index[k].size());
    for (std::size_t j = 0; j < flat.size(); ++j)
      flat[j] = static_cast<std::int64_t>(j) / s.out * len + s.index[k][j];  // row of image j / out
    const Tensor g = gather(rows, constant(flat, Shape{n * s.out}), 0);
    const Tensor term = g * constant(w, wshape).astype(x.dtype());
    y = y.defined() ? y + term : term;
  }
  const auto& fw = s.fill_weight;
  if (fill_value != 0 && std::any_of(fw.begin(), fw.end(), [](double v) { return v != 0; })) {
    const Tensor term = constant(fw, wshape).astype(x.dtype()) * fill_value;
    y = y.defined() ? y + term : broadcast_to(term, Shape{n * s.out, m, c});
  }
  if (!y.defined()) y = zeros(Shape{n * s.out, m, c}, x.dtype());  // every source is fill 0
  return reshape(y, Shape{n, s.out, m, c});
}

// Axis 2 (width) of x [N, H, W, C], through a transpose.
Tensor resample_width(const Tensor& x, const AxisSampling& s, double fill_value) {
  return transpose(resample_axis(transpose(x, {0, 2, 1, 3}), s, fill_value), {0, 2, 1, 3});
}

// tf.image.resize(method="bilinear", antialias=False) along one axis: half-pixel centres,
// source (i + 0.5) * in / out - 0.5, neighbours clamped to the image. The same for every image.
AxisSampling bilinear_resize_axis(std::int64_t batch, std::int64_t in, std::int64_t out) {
  AxisSampling s;
  s.out = out;
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t i = 0; i < out; ++i) {
      const double src = (static_cast<double>(i) + 0.5) * scale - 0.5;
      const double lo = std::floor(src);
      const double lerp = src - lo;
      s.index[0].push_back(std::max<std::int64_t>(static_cast<std::int64_t>(lo), 0));
      s.index[1].push_back(std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(src)), in - 1));
      s.weight[0].push_back(1 - lerp);
      s.weight[1].push_back(lerp);
      s.fill_weight.push_back(0);
    }
  return s;
}

Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width) {
  const std::int64_t n = x.shape()[0];
  Tensor y = x;
  if (x.shape()[1] != height) y = resample_axis(y, bilinear_resize_axis(n, x.shape()[1], height), 0);
  if (x.shape()[2] != width) y = resample_width(y, bilinear_resize_axis(n, x.shape()[2], width), 0);
  return y;
}

}  // namespace

// ---- RandomFlip ------------------------------------------------------------------------------

RandomFlip::RandomFlip(std::string mode, RandomFlipOptions options)
    : Layer(options.name), mode_(std::move(mode)), options_(std::move(options)), random_(options_.seed) {
  if (mode_ != "horizontal" && mode_ != "vertical" && mode_ != "horizontal_and_vertical")
    throw ValueError(fmt::format("{}: mode must be \"horizontal\", \"vertical\" or \"horizontal_and_vertical\", "
                                 "got \"{}\"", who(*this), mode_));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void RandomFlip::build(const Shape& s) { require_image_rank(*this, s); }
void RandomFlip::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomFlip::call(const Tensor& inputs, bool training) {
  const Tensor& x = inputs;  // in the compute dtype (Layer::operator())
  if (!training) return x;
  ImageBatch b = to_batch(x, options_.data_format);
  const std::int64_t n = b.x.shape()[0];
  std::vector<int> axes;  // NHWC: width is axis 2, height axis 1
  if (mode_ != "vertical") axes.push_back(2);
  if (mode_ != "horizontal") axes.push_back(1);
  const std::vector<double> u = random_.uniform(n * static_cast<std::int64_t>(axes.size()));
  Tensor y = b.x;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    // Image i flips along this axis when its number is <= 1/2 (Keras' test).
    std::vector<bool> flip(static_cast<std::size_t>(n));
    std::size_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      flip[static_cast<std::size_t>(i)] = u[a * static_cast<std::size_t>(n) + static_cast<std::size_t>(i)] <= 0.5;
      count += flip[static_cast<std::size_t>(i)] ? 1 : 0;
    }
    if (count == 0) continue;
    const std::int64_t len = y.shape()[axes[a]];
    std::vector<std::int64_t> reversed(static_cast<std::size_t>(len));
    for (std::int64_t i = 0; i < len; ++i) reversed[static_cast<std::size_t>(i)] = len - 1 - i;
    const Tensor flipped = gather(y, constant(reversed, Shape{len}), axes[a]);
    if (count == static_cast<std::size_t>(n)) {
      y = flipped;
    } else {
      std::vector<bool> mask(flip.begin(), flip.end());
      y = where(constant(mask, Shape{n, 1, 1, 1}), flipped, y);
    }
  }
  return from_batch(b, y);
}

// ---- RandomCrop ------------------------------------------------------------------------------

RandomCrop::RandomCrop(int height, int width, RandomCropOptions options)
    : Layer(options.name), height_(height), width_(width), options_(std::move(options)), random_(options_.seed) {
  if (height_ <= 0 || width_ <= 0)
    throw ValueError(fmt::format("{}: height and width must be positive integers, got height {}, width {}",
                                 who(*this), height_, width_));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void RandomCrop::build(const Shape& s) { require_image_rank(*this, s); }
void RandomCrop::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomCrop::call(const Tensor& inputs, bool training) {
  ImageBatch b = to_batch(inputs, options_.data_format);
  const std::int64_t h = b.x.shape()[1], w = b.x.shape()[2];
  Tensor y;
  if (training && h >= height_ && w >= width_) {
    // One offset for the whole batch, uniform over the h - height + 1 (w - width + 1) positions.
    const std::vector<double> u = random_.uniform(2);
    const std::int64_t top = std::min<std::int64_t>(static_cast<std::int64_t>(u[0] * double(h - height_ + 1)), h - height_);
    const std::int64_t left = std::min<std::int64_t>(static_cast<std::int64_t>(u[1] * double(w - width_ + 1)), w - width_);
    y = slice(b.x, {0, top, left, 0}, {-1, height_, width_, -1});
  } else {
    // keras.utils.smart_resize: the largest centred window with the target's aspect ratio,
    // then a bilinear resize to the target (nothing to resize when the window is the target).
    const std::int64_t crop_h = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(static_cast<double>(w) * height_ / width_), 1, h);
    const std::int64_t crop_w = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(static_cast<double>(h) * width_ / height_), 1, w);
    const std::int64_t top = (h - crop_h) / 2, left = (w - crop_w) / 2;
    y = (crop_h == h && crop_w == w) ? b.x : slice(b.x, {0, top, left, 0}, {-1, crop_h, crop_w, -1});
    y = resize_bilinear(y, height_, width_);
  }
  return from_batch(b, y);
}

// ---- RandomTranslation -----------------------------------------------------------------------

namespace {

// Where source position p (possibly outside [0, len)) reads from; -1 for the fill value.
std::int64_t map_position(std::int64_t p, std::int64_t len, Fill fill) {
  if (p >= 0 && p < len) return p;
  switch (fill) {
    case Fill::constant:
      return -1;
    case Fill::nearest:
      return p < 0 ? 0 : len - 1;
    case Fill::wrap:
      return ((p % len) + len) % len;
    case Fill::reflect: {
      // About the edge of the outer pixels: period 2 * len over (a b c d d c b a).
      const std::int64_t period = 2 * len;
      const std::int64_t q = ((p % period) + period) % period;
      return q < len ? q : period - 1 - q;
    }
  }
  return -1;
}

// The sampling of one axis of length len when image n is shifted by shift[n] (source position
// of output i: i - shift[n]), as TensorFlow's image transform: bilinear between the two
// neighbours, or the nearest one (halves rounded away from zero).
AxisSampling shifted_axis(const std::vector<double>& shift, std::int64_t len, Fill fill, bool bilinear) {
  AxisSampling s;
  s.out = len;
  for (double d : shift)
    for (std::int64_t i = 0; i < len; ++i) {
      const double src = static_cast<double>(i) - d;
      std::int64_t pos[2];
      double weight[2];
      if (bilinear) {
        const double lo = std::floor(src);
        pos[0] = static_cast<std::int64_t>(lo);
        pos[1] = pos[0] + 1;
        weight[1] = src - lo;
        weight[0] = 1 - weight[1];
      } else {
        pos[0] = pos[1] = static_cast<std::int64_t>(std::round(src));
        weight[0] = 1;
        weight[1] = 0;
      }
      double fill_weight = 0;
      for (int k = 0; k < 2; ++k) {
        const std::int64_t at = map_position(pos[k], len, fill);
        if (at < 0) {
          fill_weight += weight[k];
          weight[k] = 0;
        }
        s.index[k].push_back(at < 0 ? 0 : at);
        s.weight[k].push_back(weight[k]);
      }
      s.fill_weight.push_back(fill_weight);
    }
  return s;
}

}  // namespace

RandomTranslation::RandomTranslation(TranslationFactor height_factor, TranslationFactor width_factor,
                                     RandomTranslationOptions options)
    : Layer(options.name),
      height_factor_(height_factor),
      width_factor_(width_factor),
      options_(std::move(options)),
      random_(options_.seed) {
  const auto check = [&](const TranslationFactor& f, const char* what) {
    for (double v : {f.lower, f.upper})
      if (!(v >= -1 && v <= 1))  // also rejects NaN
        throw ValueError(fmt::format("{}: {} must be a number or a pair of numbers in [-1, 1], got {}", who(*this),
                                     what, f.pair ? fmt::format("({}, {})", f.lower, f.upper)
                                                  : fmt::format("{}", f.upper)));
  };
  check(height_factor_, "height_factor");
  check(width_factor_, "width_factor");
  parse_fill(*this, options_.fill_mode);
  if (options_.interpolation != "bilinear" && options_.interpolation != "nearest")
    throw ValueError(fmt::format("{}: interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", who(*this),
                                 options_.interpolation));
  if (!std::isfinite(options_.fill_value))
    throw ValueError(fmt::format("{}: fill_value must be finite, got {}", who(*this), options_.fill_value));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void RandomTranslation::build(const Shape& s) { require_image_rank(*this, s); }
void RandomTranslation::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomTranslation::call(const Tensor& inputs, bool training) {
  const Tensor& x = inputs;  // in the compute dtype (Layer::operator())
  if (!training) return x;
  ImageBatch b = to_batch(x, options_.data_format);
  const std::int64_t n = b.x.shape()[0], h = b.x.shape()[1], w = b.x.shape()[2];
  // Keras' order: every image's height shift, then every image's width shift.
  const std::vector<double> u = random_.uniform(2 * n);
  std::vector<double> dy(static_cast<std::size_t>(n)), dx(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < dy.size(); ++i) {
    dy[i] = (height_factor_.lower + u[i] * (height_factor_.upper - height_factor_.lower)) * static_cast<double>(h);
    dx[i] = (width_factor_.lower + u[dy.size() + i] * (width_factor_.upper - width_factor_.lower)) *
            static_cast<double>(w);
  }
  const Fill fill = parse_fill(*this, options_.fill_mode);
  const bool bilinear = options_.interpolation == "bilinear";
  const double fill_value = fill == Fill::constant ? options_.fill_value : 0.0;
  const auto moves = [](const std::vector<double>& d) {
    return std::any_of(d.begin(), d.end(), [](double v) { return v != 0; });
  };
  // Rows, then columns: for a translation the two-dimensional interpolation factorises, the fill
  // value included (a row made of fill stays fill after the column pass, whose weights sum to 1).
  Tensor y = b.x;
  if (moves(dy)) y = resample_axis(y, shifted_axis(dy, h, fill, bilinear), fill_value);
  if (moves(dx)) y = resample_width(y, shifted_axis(dx, w, fill, bilinear), fill_value);
  return from_batch(b, y);
}

}  // namespace keel::layers
