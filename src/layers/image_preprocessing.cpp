// Image preprocessing layers: Resizing, CenterCrop, RandomRotation, RandomZoom, RandomContrast,
// RandomBrightness.
//
// Geometric layers work on an NHWC batch and describe their output as "taps": every output pixel
// is a weighted sum of at most four input pixels plus a weight on the fill value. The taps are
// computed on the host (they depend only on shapes and a few random numbers); the pixels then move
// with one gather per tap and products with constant weights, so the result is differentiable
// with respect to the input wherever the layer sits in a model.
#include "keel/layers/image_preprocessing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "layers/image_batch.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::Fill;
using detail::from_batch;
using detail::ImageBatch;
using detail::parse_fill;
using detail::require_image_rank;
using detail::to_batch;

using detail::checked_data_format;
using detail::who;

namespace {

// ---- taps ------------------------------------------------------------------------------------

// Output entry e = (n * out_h + i) * out_w + j reads input rows index[k][e] of the flattened
// [N * H * W, C] input with weight weight[k][e]; fill[e] is the weight of the fill value.
struct Taps {
  std::int64_t out_h = 0, out_w = 0;
  std::vector<std::int64_t> index[4];
  std::vector<double> weight[4];
  std::vector<double> fill;

  // rows[k] < 0: outside the image, so its weight goes to the fill value.
  void add(const std::int64_t (&rows)[4], const double (&w)[4]) {
    double f = 0;
    for (int k = 0; k < 4; ++k) {
      const bool out = rows[k] < 0;
      if (out) f += w[k];
      index[k].push_back(out ? 0 : rows[k]);
      weight[k].push_back(out ? 0 : w[k]);
    }
    fill.push_back(f);
  }
};

Tensor apply_taps(const Tensor& x, const Taps& t, double fill_value) {
  const std::int64_t n = x.shape()[0], h = x.shape()[1], w = x.shape()[2], c = x.shape()[3];
  const std::int64_t m = n * t.out_h * t.out_w;
  const Shape out{n, t.out_h, t.out_w, c};
  if (m == 0 || c == 0) return zeros(out, x.dtype());
  const Tensor rows = reshape(x, Shape{n * h * w, c});
  const Shape wshape{m, 1};
  Tensor y;
  for (int k = 0; k < 4; ++k) {
    const auto& wk = t.weight[k];
    if (std::all_of(wk.begin(), wk.end(), [](double v) { return v == 0; })) continue;
    const Tensor term = gather(rows, constant(t.index[k], Shape{m}), 0) * constant(wk, wshape).astype(x.dtype());
    y = y.defined() ? y + term : term;
  }
  if (fill_value != 0 && std::any_of(t.fill.begin(), t.fill.end(), [](double v) { return v != 0; })) {
    const Tensor term = constant(t.fill, wshape).astype(x.dtype()) * fill_value;
    y = y.defined() ? y + term : broadcast_to(term, Shape{m, c});
  }
  if (!y.defined()) y = zeros(Shape{m, c}, x.dtype());
  return reshape(y, out);
}

// tf.image.resize along one axis: half-pixel centres, neighbours clamped to [0, in).
struct AxisLerp {
  std::int64_t lo, hi;
  double frac;
};
std::vector<AxisLerp> resize_axis(std::int64_t in, std::int64_t out, bool bilinear) {
  std::vector<AxisLerp> v(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    if (bilinear) {
      const double src = (static_cast<double>(i) + 0.5) * scale - 0.5;
      const double fl = std::floor(src);
      v[static_cast<std::size_t>(i)] = {std::max<std::int64_t>(static_cast<std::int64_t>(fl), 0),
                                        std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(src)), in - 1),
                                        src - fl};
    } else {  // nearest: floor((i + 0.5) * scale), as TF2's resize_nearest_neighbor
      const auto s = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor((static_cast<double>(i) + 0.5) * scale)),
                                              0, in - 1);
      v[static_cast<std::size_t>(i)] = {s, s, 0};
    }
  }
  return v;
}

// Resize of an image [h, w] placed at (top, left) inside a canvas [ch, cw] of fill (no padding:
// canvas = image) to [out_h, out_w].
Taps resize_taps(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t ch, std::int64_t cw, std::int64_t top,
                 std::int64_t left, std::int64_t out_h, std::int64_t out_w, bool bilinear) {
  Taps t;
  t.out_h = out_h;
  t.out_w = out_w;
  const auto ys = resize_axis(ch, out_h, bilinear), xs = resize_axis(cw, out_w, bilinear);
  for (std::int64_t b = 0; b < n; ++b)
    for (const AxisLerp& ly : ys)
      for (const AxisLerp& lx : xs) {
        const auto at = [&](std::int64_t y, std::int64_t x) -> std::int64_t {
          y -= top;
          x -= left;
          return (y < 0 || y >= h || x < 0 || x >= w) ? -1 : (b * h + y) * w + x;
        };
        const std::int64_t rows[4] = {at(ly.lo, lx.lo), at(ly.lo, lx.hi), at(ly.hi, lx.lo), at(ly.hi, lx.hi)};
        const double wts[4] = {(1 - ly.frac) * (1 - lx.frac), (1 - ly.frac) * lx.frac, ly.frac * (1 - lx.frac),
                               ly.frac * lx.frac};
        t.add(rows, wts);
      }
  return t;
}

Tensor resize(const Tensor& x, std::int64_t height, std::int64_t width, bool bilinear) {
  const std::int64_t h = x.shape()[1], w = x.shape()[2];
  if (h == height && w == width) return x;
  return apply_taps(x, resize_taps(x.shape()[0], h, w, h, w, 0, 0, height, width, bilinear), 0);
}

// keras.utils.smart_resize's crop: the largest centred window with the target's aspect ratio.
Tensor crop_to_aspect(const Tensor& x, std::int64_t height, std::int64_t width) {
  const std::int64_t h = x.shape()[1], w = x.shape()[2];
  const std::int64_t crop_h = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(static_cast<float>(w * height) / static_cast<float>(width)), 1, h);
  const std::int64_t crop_w = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(static_cast<float>(h * width) / static_cast<float>(height)), 1, w);
  if (crop_h == h && crop_w == w) return x;
  return slice(x, {0, (h - crop_h) / 2, (w - crop_w) / 2, 0}, {-1, crop_h, crop_w, -1});
}

void check_interpolation(const Layer& layer, const std::string& interpolation) {
  if (interpolation != "bilinear" && interpolation != "nearest")
    throw ValueError(fmt::format("{}: interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", who(layer),
                                 interpolation));
}

// TensorFlow's MapCoordinate (image_ops.h): a source coordinate outside [0, len - 1] brought back
// inside by the fill mode; constant leaves it (the read then gives the fill value).
double map_coordinate(double in, std::int64_t len, Fill fill) {
  const auto n = static_cast<double>(len);
  switch (fill) {
    case Fill::constant:
      return in;
    case Fill::nearest:
      return std::clamp(in, 0.0, n - 1);
    case Fill::reflect:
      if (in < 0) {
        if (len <= 1) {
          in = 0;
        } else {
          const double sz2 = 2 * n;
          if (in < -sz2) in = sz2 * static_cast<double>(static_cast<std::int64_t>(-in / sz2)) + in;
          in = in < -n ? in + sz2 : -in - 1;
        }
      } else if (in > n - 1) {
        if (len <= 1) {
          in = 0;
        } else {
          const double sz2 = 2 * n;
          in -= sz2 * static_cast<double>(static_cast<std::int64_t>(in / sz2));
          if (in >= n) in = sz2 - in - 1;
        }
      }
      return std::clamp(in, 0.0, n - 1);
    case Fill::wrap:
      if (in < 0) {
        if (len <= 1) {
          in = 0;
        } else {
          const double sz = n - 1;
          in += n * (static_cast<double>(static_cast<std::int64_t>(-in / sz)) + 1);
        }
      } else if (in > n - 1) {
        if (len <= 1) {
          in = 0;
        } else {
          const double sz = n - 1;
          in -= n * static_cast<double>(static_cast<std::int64_t>(in / sz));
        }
      }
      return std::clamp(in, 0.0, n - 1);
  }
  return in;
}

// TensorFlow's ImageProjectiveTransform with an affine row [a0 a1 a2 b0 b1 b2] per image: output
// pixel (x, y) reads input ((a0 x + a1 y + a2), (b0 x + b1 y + b2)), mapped by fill mode, then
// bilinear over the four neighbours (or the rounded one), reading the fill value outside.
Taps affine_taps(std::int64_t n, std::int64_t h, std::int64_t w, const std::vector<std::array<double, 6>>& m, Fill fill,
                 bool bilinear) {
  Taps t;
  t.out_h = h;
  t.out_w = w;
  for (std::int64_t b = 0; b < n; ++b) {
    const auto& a = m[static_cast<std::size_t>(b)];
    const auto at = [&](double y, double x) -> std::int64_t {
      if (!(y >= 0 && y < static_cast<double>(h) && x >= 0 && x < static_cast<double>(w))) return -1;
      return (b * h + static_cast<std::int64_t>(y)) * w + static_cast<std::int64_t>(x);
    };
    for (std::int64_t i = 0; i < h; ++i)
      for (std::int64_t j = 0; j < w; ++j) {
        const auto xo = static_cast<double>(j), yo = static_cast<double>(i);
        const double x = map_coordinate(a[0] * xo + a[1] * yo + a[2], w, fill);
        const double y = map_coordinate(a[3] * xo + a[4] * yo + a[5], h, fill);
        if (!bilinear) {
          const std::int64_t rows[4] = {at(std::round(y), std::round(x)), -1, -1, -1};
          const double wts[4] = {1, 0, 0, 0};
          t.add(rows, wts);
          continue;
        }
        const double y0 = std::floor(y), x0 = std::floor(x), y1 = y0 + 1, x1 = x0 + 1;
        const std::int64_t rows[4] = {at(y0, x0), at(y0, x1), at(y1, x0), at(y1, x1)};
        const double wts[4] = {(y1 - y) * (x1 - x), (y1 - y) * (x - x0), (y - y0) * (x1 - x), (y - y0) * (x - x0)};
        t.add(rows, wts);
      }
  }
  return t;
}

void check_positive_size(const Layer& layer, int height, int width) {
  if (height <= 0 || width <= 0)
    throw ValueError(fmt::format("{}: height and width must be positive integers, got height {}, width {}", who(layer),
                                 height, width));
}

void check_factor(const Layer& layer, const ImageFactor& f, double lo, double hi, const char* what) {
  for (double v : {f.lower, f.upper})
    if (!(v >= lo && v <= hi))  // also rejects NaN
      throw ValueError(fmt::format("{}: {} must be a number or a pair of numbers in [{}, {}], got {}", who(layer), what,
                                   lo, hi,
                                   f.pair ? fmt::format("({}, {})", f.lower, f.upper) : fmt::format("{}", f.upper)));
}

std::array<double, 2> checked_range(const Layer& layer, std::array<double, 2> r) {
  if (r[0] > r[1]) std::swap(r[0], r[1]);  // Keras sorts value_range
  if (!std::isfinite(r[0]) || !std::isfinite(r[1]) || r[0] == r[1])
    throw ValueError(fmt::format("{}: value_range must be two different finite numbers, got [{}, {}]", who(layer), r[0],
                                 r[1]));
  return r;
}

}  // namespace

// ---- Resizing --------------------------------------------------------------------------------

Resizing::Resizing(int height, int width, ResizingOptions options)
    : Layer(options.name), height_(height), width_(width), options_(std::move(options)) {
  check_positive_size(*this, height_, width_);
  check_interpolation(*this, options_.interpolation);
  if (options_.crop_to_aspect_ratio && options_.pad_to_aspect_ratio)
    throw ValueError(fmt::format("{}: crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be true", who(*this)));
  if (options_.fill_mode != "constant")
    throw ValueError(fmt::format("{}: fill_mode must be \"constant\", got \"{}\"", who(*this), options_.fill_mode));
  if (!std::isfinite(options_.fill_value))
    throw ValueError(fmt::format("{}: fill_value must be finite, got {}", who(*this), options_.fill_value));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void Resizing::build(const Shape& s) { require_image_rank(*this, s); }
void Resizing::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor Resizing::call(const Tensor& inputs, bool) {
  ImageBatch b = to_batch(inputs, options_.data_format);
  const bool bilinear = options_.interpolation == "bilinear";
  const std::int64_t h = b.x.shape()[1], w = b.x.shape()[2];
  if ((h == 0 || w == 0) && b.x.shape()[0] * b.x.shape()[3] > 0)
    throw ValueError(fmt::format("{}: cannot resize an empty image of shape {}", who(*this), inputs.shape().to_string()));
  Tensor y;
  if (options_.crop_to_aspect_ratio) {
    y = resize(crop_to_aspect(b.x, height_, width_), height_, width_, bilinear);
  } else if (options_.pad_to_aspect_ratio) {
    // Keras: canvas max(h, ceil(w * H / W)) x max(w, ceil(h * W / H)), the image centred in it.
    const auto ph = std::max<std::int64_t>(
        h, static_cast<std::int64_t>(std::ceil(static_cast<double>(w) * height_ / static_cast<double>(width_))));
    const auto pw = std::max<std::int64_t>(
        w, static_cast<std::int64_t>(std::ceil(static_cast<double>(h) * width_ / static_cast<double>(height_))));
    y = apply_taps(b.x, resize_taps(b.x.shape()[0], h, w, ph, pw, (ph - h) / 2, (pw - w) / 2, height_, width_, bilinear),
                   options_.fill_value);
  } else {
    y = resize(b.x, height_, width_, bilinear);
  }
  return from_batch(b, y);
}

// ---- CenterCrop ------------------------------------------------------------------------------

CenterCrop::CenterCrop(int height, int width, CenterCropOptions options)
    : Layer(options.name), height_(height), width_(width), options_(std::move(options)) {
  check_positive_size(*this, height_, width_);
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void CenterCrop::build(const Shape& s) { require_image_rank(*this, s); }
void CenterCrop::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor CenterCrop::call(const Tensor& inputs, bool) {
  ImageBatch b = to_batch(inputs, options_.data_format);
  const std::int64_t h = b.x.shape()[1], w = b.x.shape()[2];
  if (h >= height_ && w >= width_)
    return from_batch(b, slice(b.x, {0, (h - height_) / 2, (w - width_) / 2, 0}, {-1, height_, width_, -1}));
  if ((h == 0 || w == 0) && b.x.shape()[0] * b.x.shape()[3] > 0)
    throw ValueError(fmt::format("{}: cannot resize an empty image of shape {}", who(*this), inputs.shape().to_string()));
  return from_batch(b, resize(crop_to_aspect(b.x, height_, width_), height_, width_, true));
}

// ---- RandomRotation --------------------------------------------------------------------------

RandomRotation::RandomRotation(ImageFactor factor, RandomRotationOptions options)
    : Layer(options.name), factor_(factor), options_(std::move(options)), random_(options_.seed) {
  check_factor(*this, factor_, -1, 1, "factor");
  parse_fill(*this, options_.fill_mode);
  check_interpolation(*this, options_.interpolation);
  if (!std::isfinite(options_.fill_value))
    throw ValueError(fmt::format("{}: fill_value must be finite, got {}", who(*this), options_.fill_value));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void RandomRotation::build(const Shape& s) { require_image_rank(*this, s); }
void RandomRotation::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomRotation::call(const Tensor& inputs, bool training) {
  if (!training) return inputs;
  ImageBatch b = to_batch(inputs, options_.data_format);
  const std::int64_t n = b.x.shape()[0], h = b.x.shape()[1], w = b.x.shape()[2];
  const std::vector<double> u = random_.uniform(n);
  std::vector<std::array<double, 6>> m(static_cast<std::size_t>(n));
  bool moves = false;
  for (std::size_t i = 0; i < m.size(); ++i) {
    // angle in [lower, upper] * 2 pi; the output-to-input matrix of Keras' rotation about the
    // centre ((W - 1) / 2, (H - 1) / 2):
    //   x_in = cos a x - sin a y + x_off,  y_in = sin a x + cos a y + y_off
    //   x_off = ((W-1) - (cos a (W-1) - sin a (H-1))) / 2,  y_off = ((H-1) - (sin a (W-1) + cos a (H-1))) / 2
    const double angle = (factor_.lower + u[i] * (factor_.upper - factor_.lower)) * 2 * std::numbers::pi;
    const double c = std::cos(angle), s = std::sin(angle);
    const auto wm = static_cast<double>(w - 1), hm = static_cast<double>(h - 1);
    m[i] = {c, -s, (wm - (c * wm - s * hm)) / 2, s, c, (hm - (s * wm + c * hm)) / 2};
    moves = moves || angle != 0;
  }
  if (!moves) return inputs;
  const Fill fill = parse_fill(*this, options_.fill_mode);
  const Tensor y = apply_taps(b.x, affine_taps(n, h, w, m, fill, options_.interpolation == "bilinear"),
                              fill == Fill::constant ? options_.fill_value : 0.0);
  return from_batch(b, y);
}

// ---- RandomZoom ------------------------------------------------------------------------------

RandomZoom::RandomZoom(ImageFactor height_factor, std::optional<ImageFactor> width_factor, RandomZoomOptions options)
    : Layer(options.name),
      height_factor_(height_factor),
      width_factor_(width_factor),
      options_(std::move(options)),
      random_(options_.seed) {
  check_factor(*this, height_factor_, -1, 1, "height_factor");
  if (width_factor_) check_factor(*this, *width_factor_, -1, 1, "width_factor");
  parse_fill(*this, options_.fill_mode);
  check_interpolation(*this, options_.interpolation);
  if (!std::isfinite(options_.fill_value))
    throw ValueError(fmt::format("{}: fill_value must be finite, got {}", who(*this), options_.fill_value));
  options_.data_format = checked_data_format(*this, options_.data_format);
}

void RandomZoom::build(const Shape& s) { require_image_rank(*this, s); }
void RandomZoom::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomZoom::call(const Tensor& inputs, bool training) {
  if (!training) return inputs;
  ImageBatch b = to_batch(inputs, options_.data_format);
  const std::int64_t n = b.x.shape()[0], h = b.x.shape()[1], w = b.x.shape()[2];
  // Every image's height zoom, then every image's width zoom.
  const std::vector<double> u = random_.uniform(2 * n);
  std::vector<std::array<double, 6>> m(static_cast<std::size_t>(n));
  bool moves = false;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double zy = 1 + height_factor_.lower + u[i] * (height_factor_.upper - height_factor_.lower);
    const ImageFactor& wf = width_factor_ ? *width_factor_ : height_factor_;
    const double zx = width_factor_ ? 1 + wf.lower + u[m.size() + i] * (wf.upper - wf.lower) : zy;
    // Keras' zoom matrix: x_in = zx x + (W - 1) / 2 (1 - zx), y_in = zy y + (H - 1) / 2 (1 - zy).
    m[i] = {zx, 0, static_cast<double>(w - 1) / 2 * (1 - zx), 0, zy, static_cast<double>(h - 1) / 2 * (1 - zy)};
    moves = moves || zx != 1 || zy != 1;
  }
  if (!moves) return inputs;
  const Fill fill = parse_fill(*this, options_.fill_mode);
  const Tensor y = apply_taps(b.x, affine_taps(n, h, w, m, fill, options_.interpolation == "bilinear"),
                              fill == Fill::constant ? options_.fill_value : 0.0);
  return from_batch(b, y);
}

// ---- RandomContrast --------------------------------------------------------------------------

RandomContrast::RandomContrast(ImageFactor factor, RandomContrastOptions options)
    : Layer(options.name), factor_(factor), options_(std::move(options)), random_(options_.seed) {
  // One number f: lower = upper = f (Keras' documented range [1 - f, 1 + f]); a pair as given.
  lower_ = factor_.pair ? factor_.lower : factor_.upper;
  upper_ = factor_.upper;
  for (double v : {lower_, upper_})
    if (!(v >= 0 && v <= 1))
      throw ValueError(fmt::format("{}: factor must be a number or a pair of numbers in [0, 1], got {}", who(*this),
                                   factor_.pair ? fmt::format("({}, {})", factor_.lower, factor_.upper)
                                                : fmt::format("{}", factor_.upper)));
  options_.value_range = checked_range(*this, options_.value_range);
}

void RandomContrast::build(const Shape& s) { require_image_rank(*this, s); }
void RandomContrast::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomContrast::call(const Tensor& inputs, bool training) {
  if (!training) return inputs;
  const bool single = inputs.rank() == 3;
  const Tensor x = single ? expand_dims(inputs, 0) : inputs;
  const std::int64_t n = x.shape()[0];
  const std::vector<double> u = random_.uniform(n);
  std::vector<double> c(u.size());
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = (1 - lower_) + u[i] * (upper_ + lower_);
  // (x - mean) * c + mean, the mean over height and width of each channel; clipped to value_range.
  const Tensor mean = reduce_mean(x, {1, 2}, true);
  const Tensor factor = constant(c, Shape{n, 1, 1, 1}).astype(x.dtype());
  const Tensor y = clip_by_value((x - mean) * factor + mean, options_.value_range[0], options_.value_range[1]);
  return single ? squeeze(y, {0}) : y;
}

// ---- RandomBrightness ------------------------------------------------------------------------

RandomBrightness::RandomBrightness(ImageFactor factor, RandomBrightnessOptions options)
    : Layer(options.name), factor_(factor), options_(std::move(options)), random_(options_.seed) {
  check_factor(*this, factor_, -1, 1, "factor");
  options_.value_range = checked_range(*this, options_.value_range);
}

void RandomBrightness::build(const Shape& s) { require_image_rank(*this, s); }
void RandomBrightness::check_input_shape(const Shape& s) const { require_image_rank(*this, s); }

Tensor RandomBrightness::call(const Tensor& inputs, bool training) {
  if (!training) return inputs;
  const bool single = inputs.rank() == 3;
  const Tensor x = single ? expand_dims(inputs, 0) : inputs;
  const std::int64_t n = x.shape()[0];
  const std::vector<double> u = random_.uniform(n);
  const double span = options_.value_range[1] - options_.value_range[0];
  std::vector<double> d(u.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (factor_.lower + u[i] * (factor_.upper - factor_.lower)) * span;
  // x + delta (one per image, in units of the value range), clipped to value_range.
  const Tensor y = clip_by_value(x + constant(d, Shape{n, 1, 1, 1}).astype(x.dtype()), options_.value_range[0],
                                 options_.value_range[1]);
  return single ? squeeze(y, {0}) : y;
}

}  // namespace keel::layers
