// UpSampling1D/2D/3D, ZeroPadding1D/2D/3D, Cropping1D/2D/3D and RepeatVector: compositions of
// repeat, pad, slice, broadcast and resize_bilinear (so every one is differentiable). The padding
// and cropping layers address the spatial axes of either data_format directly.
#include "keel/layers/reshaping.hpp"

#include <vector>

#include "keel/ops/conv_nd.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/shape.hpp"
#include "layers/conv_layer_util.hpp"

namespace keel::layers {

using detail::checked_data_format;
using detail::lowercase;
using detail::positive;
using detail::who;

namespace {

int first_spatial(const std::string& data_format) { return data_format == "channels_first" ? 2 : 1; }

// Each spatial axis a repeated size[a] times (nearest-neighbour upsampling).
template <std::size_t R>
Tensor repeat_axes(const Tensor& x, const std::array<int, R>& size, int first) {
  Tensor y = x;
  for (std::size_t a = 0; a < R; ++a)
    if (size[a] != 1) y = repeat(y, size[a], first + static_cast<int>(a));
  return y;
}

template <std::size_t R>
void check_margins(const Layer& layer, const std::array<std::array<int, 2>, R>& m, const char* what) {
  for (const auto& p : m)
    if (p[0] < 0 || p[1] < 0) {
      std::vector<std::string> parts;
      for (const auto& q : m) parts.push_back(fmt::format("({}, {})", q[0], q[1]));
      throw ValueError(fmt::format("{}: {} must be non-negative, got ({})", who(layer), what, fmt::join(parts, ", ")));
    }
}

template <std::size_t R>
Tensor zero_pad(const Tensor& x, const std::array<std::array<int, 2>, R>& m, int first) {
  std::vector<std::array<std::int64_t, 2>> p(static_cast<std::size_t>(x.rank()), {0, 0});
  for (std::size_t a = 0; a < R; ++a) p[static_cast<std::size_t>(first) + a] = {m[a][0], m[a][1]};
  return pad(x, p);
}

template <std::size_t R>
Tensor crop(const Layer& layer, const Tensor& x, const std::array<std::array<int, 2>, R>& m, int first) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), size(begin.size(), -1);
  for (std::size_t a = 0; a < R; ++a) {
    const std::size_t axis = static_cast<std::size_t>(first) + a;
    const std::int64_t left = x.shape()[static_cast<std::int64_t>(axis)] - m[a][0] - m[a][1];
    if (left <= 0)  // Keras: the cropping must leave at least one element
      throw ShapeError(fmt::format("{}: cropping ({}, {}) of axis {} leaves nothing of the input {}", who(layer),
                                   m[a][0], m[a][1], axis, x.shape().to_string()));
    begin[axis] = m[a][0];
    size[axis] = left;
  }
  return slice(x, begin, size);
}

}  // namespace

// ---- UpSampling -------------------------------------------------------------------------------

UpSampling1D::UpSampling1D(int size, UpSampling1DOptions options)
    : Layer(options.name), size_(size), options_(std::move(options)) {
  positive(*this, "size", size_);
}
void UpSampling1D::build(const Shape& s) { detail::build_rank(*this, s, 3, "channels_last"); }
void UpSampling1D::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }
Tensor UpSampling1D::call(const Tensor& x, bool) {
  return detail::in_layer(*this, [&] { return repeat(x, size_, 1); });
}

UpSampling2D::UpSampling2D(std::array<int, 2> size, UpSampling2DOptions options)
    : Layer(options.name), size_(size), options_(std::move(options)) {
  positive(*this, "size", size_);
  options_.data_format = checked_data_format(*this, options_.data_format);
  options_.interpolation = lowercase(options_.interpolation);
  if (options_.interpolation != "nearest" && options_.interpolation != "bilinear")
    throw ValueError(fmt::format("{}: interpolation must be \"nearest\" or \"bilinear\", got \"{}\"", who(*this),
                                 options_.interpolation));
}
void UpSampling2D::build(const Shape& s) { detail::build_rank(*this, s, 4, options_.data_format); }
void UpSampling2D::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }
Tensor UpSampling2D::call(const Tensor& inputs, bool) {
  if (options_.interpolation == "nearest")
    return detail::in_layer(*this, [&] { return repeat_axes(inputs, size_, first_spatial(options_.data_format)); });
  return detail::in_channels_last(*this, inputs, options_.data_format == "channels_first", [&](const Tensor& x) {
    return resize_bilinear(x, {x.shape()[1] * size_[0], x.shape()[2] * size_[1]});
  });
}

UpSampling3D::UpSampling3D(std::array<int, 3> size, UpSampling3DOptions options)
    : Layer(options.name), size_(size), options_(std::move(options)) {
  positive(*this, "size", size_);
  options_.data_format = checked_data_format(*this, options_.data_format);
}
void UpSampling3D::build(const Shape& s) { detail::build_rank(*this, s, 5, options_.data_format); }
void UpSampling3D::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }
Tensor UpSampling3D::call(const Tensor& x, bool) {
  return detail::in_layer(*this, [&] { return repeat_axes(x, size_, first_spatial(options_.data_format)); });
}

// ---- ZeroPadding / Cropping -------------------------------------------------------------------

namespace {

template <class Options>
std::string data_format_of(const Layer& layer, Options& o) {
  if constexpr (requires { o.data_format; }) {
    o.data_format = checked_data_format(layer, o.data_format);
    return o.data_format;
  } else {
    (void)layer;
    return "channels_last";
  }
}

}  // namespace

#define KEEL_MARGIN_LAYER(Class, Margins, Options, rank, what, apply)                                       \
  Class::Class(Margins margins, Options options)                                                            \
      : Layer(options.name), margins_(margins.value), options_(std::move(options)) {                        \
    check_margins(*this, margins_, what);                                                                   \
    data_format_of(*this, options_);                                                                        \
  }                                                                                                         \
  void Class::build(const Shape& s) { detail::build_rank(*this, s, rank, data_format_of(*this, options_)); }        \
  void Class::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }       \
  Tensor Class::call(const Tensor& x, bool) {                                                               \
    const int first = first_spatial(data_format_of(*this, options_));                                       \
    return detail::in_layer(*this, [&] { return apply; });                                                  \
  }

KEEL_MARGIN_LAYER(ZeroPadding1D, Margins1D, ZeroPadding1DOptions, 3, "padding", zero_pad(x, margins_, first))
KEEL_MARGIN_LAYER(ZeroPadding2D, Margins2D, ZeroPadding2DOptions, 4, "padding", zero_pad(x, margins_, first))
KEEL_MARGIN_LAYER(ZeroPadding3D, Margins3D, ZeroPadding3DOptions, 5, "padding", zero_pad(x, margins_, first))
KEEL_MARGIN_LAYER(Cropping1D, Margins1D, Cropping1DOptions, 3, "cropping", crop(*this, x, margins_, first))
KEEL_MARGIN_LAYER(Cropping2D, Margins2D, Cropping2DOptions, 4, "cropping", crop(*this, x, margins_, first))
KEEL_MARGIN_LAYER(Cropping3D, Margins3D, Cropping3DOptions, 5, "cropping", crop(*this, x, margins_, first))
#undef KEEL_MARGIN_LAYER

// ---- RepeatVector -----------------------------------------------------------------------------

RepeatVector::RepeatVector(int n, RepeatVectorOptions options) : Layer(options.name), n_(n), options_(std::move(options)) {
  if (n_ < 0) throw ValueError(fmt::format("{}: n must be >= 0, got {}", who(*this), n_));
}
void RepeatVector::build(const Shape& s) { detail::rank_is(*this, s, 2, "[batch, features]"); }
void RepeatVector::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }
Tensor RepeatVector::call(const Tensor& x, bool) {
  return detail::in_layer(*this, [&] {
    return broadcast_to(expand_dims(x, 1), Shape{x.shape()[0], n_, x.shape()[1]});
  });
}

}  // namespace keel::layers
