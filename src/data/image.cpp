// data::image: augmentation and resizing. Pixel-moving functions (flips, resize) run as plain
// loops on a host copy, which works for every dtype as bytes; arithmetic ones (brightness,
// contrast, standardization) are written with ops so they run where the image lives.
#include "keel/data/image.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/philox.hpp"

namespace keel::data::image {

namespace {

// Seeded calls use a Philox stream word of their own per function, so one seed given to two
// functions (or to set_seed / dropout) does not produce correlated decisions.
constexpr std::uint32_t kFlipLeftRight = 0x666c6c72u;  // "fllr"
constexpr std::uint32_t kFlipUpDown = 0x666c7564u;     // "flud"
constexpr std::uint32_t kCrop = 0x63726f70u;           // "crop"
constexpr std::uint32_t kBrightness = 0x62726967u;     // "brig"
constexpr std::uint32_t kContrast = 0x636f6e74u;       // "cont"

struct Dims {
  std::int64_t n, h, w, c;
};

Dims image_dims(const Tensor& x, const char* op) {
  keel::detail::check_defined(x, op);
  const auto& d = x.shape().dims();
  if (d.size() == 3) return {1, d[0], d[1], d[2]};
  if (d.size() == 4) return {d[0], d[1], d[2], d[3]};
  throw ShapeError(fmt::format("{}: expected an image [H,W,C] or a batch [N,H,W,C], got shape {}", op,
                               x.shape().to_string()));
}

void check_float(const Tensor& x, const char* op) {
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating-point image, got {}; convert it with astype(DType::float32)",
                                 op, name(x.dtype())));
}

// `count` random 32-bit words: a pure function of the seed, or fresh from the global generator.
std::vector<std::uint32_t> draw_words(std::optional<std::uint64_t> seed, std::uint32_t stream, std::size_t count) {
  random::PhiloxState state{};
  if (seed) {
    state = {*seed, 0};
  } else {
    state = random::reserve(count);
    stream = 0;  // reserved counter space is drawn on the global generator's own stream
  }
  std::vector<std::uint32_t> out;
  out.reserve(count + 3);
  for (std::uint64_t b = 0; out.size() < count; ++b) {
    const auto w = random::philox::block(state, b, stream);
    out.insert(out.end(), w.begin(), w.end());
  }
  out.resize(count);
  return out;
}

double unit_double(std::uint32_t hi, std::uint32_t lo) {  // [0, 1) with 53 random bits
  return static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}

Tensor host_contiguous(const Tensor& x) { return (x.device().is_cpu() ? x : x.to(Device::cpu())).contiguous(); }
Tensor on_device(const Tensor& y, Device d) { return d.is_cpu() ? y : y.to(d); }

enum class Axis { width, height };

Tensor flip(const Tensor& image, const std::vector<bool>& which, Axis axis, const char* op) {
  const Dims d = image_dims(image, op);
  if (std::none_of(which.begin(), which.end(), [](bool b) { return b; })) return image;
  const Tensor src = host_contiguous(image);
  Tensor out = keel::detail::empty_tensor(src.shape(), src.dtype(), Device::cpu());
  const auto pixel = static_cast<std::size_t>(d.c) * itemsize(src.dtype());
  const std::size_t row = static_cast<std::size_t>(d.w) * pixel;
  const std::size_t plane = static_cast<std::size_t>(d.h) * row;
  const char* s = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  for (std::int64_t n = 0; n < d.n; ++n) {
    const char* si = s + static_cast<std::size_t>(n) * plane;
    char* oi = o + static_cast<std::size_t>(n) * plane;
    if (!which[static_cast<std::size_t>(n)]) {
      std::memcpy(oi, si, plane);
    } else if (axis == Axis::height) {
      for (std::int64_t y = 0; y < d.h; ++y)
        std::memcpy(oi + static_cast<std::size_t>(y) * row, si + static_cast<std::size_t>(d.h - 1 - y) * row, row);
    } else {
      for (std::int64_t y = 0; y < d.h; ++y)
        for (std::int64_t x = 0; x < d.w; ++x)
          std::memcpy(oi + static_cast<std::size_t>(y) * row + static_cast<std::size_t>(x) * pixel,
                      si + static_cast<std::size_t>(y) * row + static_cast<std::size_t>(d.w - 1 - x) * pixel, pixel);
    }
  }
  return on_device(out, image.device());
}

Tensor random_flip(const Tensor& image, std::optional<std::uint64_t> seed, Axis axis, std::uint32_t stream,
                   const char* op) {
  const Dims d = image_dims(image, op);
  const auto words = draw_words(seed, stream, static_cast<std::size_t>(d.n));
  std::vector<bool> which(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) which[i] = random::philox::unit_float(words[i]) < 0.5f;
  return flip(image, which, axis, op);
}

// TF2's half-pixel-centre source coordinate of output index i.
struct Lerp {
  std::int64_t lower, upper;
  float frac;
};
std::vector<Lerp> bilinear_weights(std::int64_t out_size, std::int64_t in_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  std::vector<Lerp> w(static_cast<std::size_t>(out_size));
  for (std::int64_t i = 0; i < out_size; ++i) {
    const float in = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float in_floor = std::floor(in);
    w[static_cast<std::size_t>(i)] = {std::max<std::int64_t>(static_cast<std::int64_t>(in_floor), 0),
                                      std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(in)), in_size - 1),
                                      in - in_floor};
  }
  return w;
}
std::vector<std::int64_t> nearest_index(std::int64_t out_size, std::int64_t in_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(out_size));
  for (std::int64_t i = 0; i < out_size; ++i)
    idx[static_cast<std::size_t>(i)] = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::floor((static_cast<float>(i) + 0.5f) * scale)), 0, in_size - 1);
  return idx;
}

}  // namespace

Tensor flip_left_right(const Tensor& image) {
  const Dims d = image_dims(image, "image.flip_left_right");
  return flip(image, std::vector<bool>(static_cast<std::size_t>(d.n), true), Axis::width, "image.flip_left_right");
}

Tensor flip_up_down(const Tensor& image) {
  const Dims d = image_dims(image, "image.flip_up_down");
  return flip(image, std::vector<bool>(static_cast<std::size_t>(d.n), true), Axis::height, "image.flip_up_down");
}

Tensor random_flip_left_right(const Tensor& image, std::optional<std::uint64_t> seed) {
  return random_flip(image, seed, Axis::width, kFlipLeftRight, "image.random_flip_left_right");
}

Tensor random_flip_up_down(const Tensor& image, std::optional<std::uint64_t> seed) {
  return random_flip(image, seed, Axis::height, kFlipUpDown, "image.random_flip_up_down");
}

Tensor random_crop(const Tensor& image, const Shape& size, std::optional<std::uint64_t> seed) {
  const char* op = "image.random_crop";
  image_dims(image, op);
  const auto& dims = image.shape().dims();
  std::vector<std::int64_t> want;
  if (size.rank() == image.rank()) {
    want = size.dims();
  } else if (size.rank() == 2) {
    want = dims;
    want[want.size() - 3] = size[0];
    want[want.size() - 2] = size[1];
  } else {
    throw ShapeError(fmt::format("{}: size {} must have the image's rank ({}) or be {{height, width}}", op,
                                 size.to_string(), image.rank()));
  }
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] < 0 || want[i] > dims[i])
      throw ValueError(fmt::format("{}: crop size {} does not fit in the image shape {}", op, Shape(want).to_string(),
                                   image.shape().to_string()));
  const auto words = draw_words(seed, kCrop, 2 * want.size());
  std::vector<std::int64_t> begin(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    // The modulo bias of a 64-bit draw over an image-sized range is below 2^-40: negligible.
    const std::uint64_t r = (static_cast<std::uint64_t>(words[2 * i]) << 32) | words[2 * i + 1];
    begin[i] = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(dims[i] - want[i] + 1));
  }
  return slice(image, begin, want).contiguous();
}

Tensor adjust_brightness(const Tensor& image, double delta) {
  image_dims(image, "image.adjust_brightness");
  check_float(image, "image.adjust_brightness");
  return image + delta;
}

Tensor random_brightness(const Tensor& image, double max_delta, std::optional<std::uint64_t> seed) {
  if (!(max_delta >= 0))
    throw ValueError(fmt::format("image.random_brightness: max_delta must be non-negative, got {}", max_delta));
  image_dims(image, "image.random_brightness");
  check_float(image, "image.random_brightness");
  const auto w = draw_words(seed, kBrightness, 2);
  return adjust_brightness(image, -max_delta + 2 * max_delta * unit_double(w[0], w[1]));
}

Tensor adjust_contrast(const Tensor& image, double factor) {
  image_dims(image, "image.adjust_contrast");
  check_float(image, "image.adjust_contrast");
  const Tensor mean = reduce_mean(image, {-3, -2}, true);
  return (image - mean) * factor + mean;
}

Tensor random_contrast(const Tensor& image, double lower, double upper, std::optional<std::uint64_t> seed) {
  if (!(lower >= 0)) throw ValueError(fmt::format("image.random_contrast: lower must be non-negative, got {}", lower));
  if (!(upper > lower))
    throw ValueError(fmt::format("image.random_contrast: upper ({}) must be greater than lower ({})", upper, lower));
  image_dims(image, "image.random_contrast");
  check_float(image, "image.random_contrast");
  const auto w = draw_words(seed, kContrast, 2);
  return adjust_contrast(image, lower + (upper - lower) * unit_double(w[0], w[1]));
}

Tensor resize(const Tensor& image, std::array<std::int64_t, 2> size, const std::string& method) {
  const char* op = "image.resize";
  const Dims d = image_dims(image, op);
  if (size[0] <= 0 || size[1] <= 0)
    throw ValueError(fmt::format("{}: the target size must be positive, got [{}, {}]", op, size[0], size[1]));
  if (method != "bilinear" && method != "nearest")
    throw ValueError(fmt::format("{}: unknown method '{}' (bilinear or nearest)", op, method));
  if ((d.h == 0 || d.w == 0) && d.n * d.c > 0)
    throw ValueError(fmt::format("{}: cannot resize an empty image of shape {}", op, image.shape().to_string()));
  std::vector<std::int64_t> out_dims = image.shape().dims();
  out_dims[out_dims.size() - 3] = size[0];
  out_dims[out_dims.size() - 2] = size[1];
  // The output (and the per-row and per-column tables below, as large as its sides) must be
  // countable and exist before any work: a huge target size is an error, not a crash.
  const DType out_dtype = method == "nearest" ? image.dtype() : DType::float32;
  if (keel::detail::checked_elements(Shape(out_dims), op) == 0)
    return on_device(keel::detail::empty_tensor(Shape(out_dims), out_dtype, Device::cpu(), op), image.device());
  const auto tables = [&](auto make) {
    try {
      return std::make_pair(make(size[0], d.h), make(size[1], d.w));
    } catch (const std::bad_alloc&) {
      throw ResourceExhaustedError(fmt::format("{}: out of memory for the index tables of a [{}, {}] resize", op,
                                               size[0], size[1]));
    }
  };
  const auto h = static_cast<std::size_t>(size[0]), w = static_cast<std::size_t>(size[1]);
  const auto c = static_cast<std::size_t>(d.c);
  const auto in_h = static_cast<std::size_t>(d.h), in_w = static_cast<std::size_t>(d.w);

  if (method == "nearest") {
    const Tensor src = host_contiguous(image);
    Tensor out = keel::detail::empty_tensor(Shape(out_dims), src.dtype(), Device::cpu(), op);
    const auto [ys, xs] = tables(nearest_index);
    const std::size_t pixel = c * itemsize(src.dtype());
    const char* s = static_cast<const char*>(src.raw_data());
    char* o = static_cast<char*>(out.raw_data());
    for (std::size_t n = 0; n < static_cast<std::size_t>(d.n); ++n)
      for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < w; ++x)
          std::memcpy(o + ((n * h + y) * w + x) * pixel,
                      s + ((n * in_h + static_cast<std::size_t>(ys[y])) * in_w + static_cast<std::size_t>(xs[x])) * pixel,
                      pixel);
    return on_device(out, image.device());
  }

  const Tensor src = host_contiguous(image.dtype() == DType::float32 ? image : image.astype(DType::float32));
  Tensor out = keel::detail::empty_tensor(Shape(out_dims), DType::float32, Device::cpu(), op);
  const auto [ys, xs] = tables(bilinear_weights);
  const float* s = src.data<float>();
  auto* o = static_cast<float*>(out.raw_data());
  for (std::size_t n = 0; n < static_cast<std::size_t>(d.n); ++n) {
    const float* img = s + n * in_h * in_w * c;
    for (std::size_t y = 0; y < h; ++y) {
      const Lerp& ly = ys[y];
      const float* top = img + static_cast<std::size_t>(ly.lower) * in_w * c;
      const float* bottom = img + static_cast<std::size_t>(ly.upper) * in_w * c;
      for (std::size_t x = 0; x < w; ++x) {
        const Lerp& lx = xs[x];
        const std::size_t l = static_cast<std::size_t>(lx.lower) * c, r = static_cast<std::size_t>(lx.upper) * c;
        float* dst = o + ((n * h + y) * w + x) * c;
        for (std::size_t k = 0; k < c; ++k) {
          // The order of operations of TF's kernel, so results agree to the last bit or two.
          const float t = top[l + k] + (top[r + k] - top[l + k]) * lx.frac;
          const float b = bottom[l + k] + (bottom[r + k] - bottom[l + k]) * lx.frac;
          dst[k] = t + (b - t) * ly.frac;
        }
      }
    }
  }
  return on_device(out, image.device());
}

Tensor per_image_standardization(const Tensor& image) {
  const Dims d = image_dims(image, "image.per_image_standardization");
  const DType dt = image.dtype();
  // Half-precision images are standardised in float32 (the sums need the range) and cast back.
  const bool wide = dt == DType::float32 || dt == DType::float64;
  const Tensor x = wide ? image : image.astype(DType::float32);
  const std::vector<int> axes{-3, -2, -1};
  const auto [mean, variance] = moments(x, axes, true);  // one pass for both statistics
  const Tensor stddev = sqrt(variance);
  const double min_stddev = 1.0 / std::sqrt(static_cast<double>(std::max<std::int64_t>(1, d.h * d.w * d.c)));
  const Tensor out = (x - mean) / maximum(stddev, min_stddev);
  return is_floating(dt) && !wide ? out.astype(dt) : out;
}

}  // namespace keel::data::image
