#pragma once
// Reshaping layers, as Keras 3 names and defaults them: UpSampling1D/2D/3D, ZeroPadding1D/2D/3D,
// Cropping1D/2D/3D, RepeatVector. Inputs are channels_last unless data_format =
// "channels_first" (the 1-D layers are always [batch, steps, features], as Keras).
//   layers::UpSampling2D({2, 2}, {.interpolation = "bilinear"})
//   layers::ZeroPadding2D({{1, 0}, {2, 2}})      // ((top, bottom), (left, right))
//   layers::Cropping1D({1, 2})                    // (left, right)
#include <array>
#include <string>

#include "keel/layers/layer.hpp"

namespace keel::layers {

// Keras' margins: an int for every side, one symmetric int per axis, or a (before, after) pair
// per axis. Margins1D's pair is (before, after), as Keras' ZeroPadding1D / Cropping1D read it.
struct Margins1D {
  std::array<std::array<int, 2>, 1> value;
  Margins1D(int both) : value{{{both, both}}} {}                          // NOLINT: implicit
  Margins1D(int before, int after) : value{{{before, after}}} {}          // NOLINT
};
struct Margins2D {
  std::array<std::array<int, 2>, 2> value;
  Margins2D(int all) : value{{{all, all}, {all, all}}} {}                  // NOLINT
  Margins2D(int h, int w) : value{{{h, h}, {w, w}}} {}                     // NOLINT
  Margins2D(std::array<int, 2> h, std::array<int, 2> w) : value{{h, w}} {}  // NOLINT
};
struct Margins3D {
  std::array<std::array<int, 2>, 3> value;
  Margins3D(int all) : value{{{all, all}, {all, all}, {all, all}}} {}              // NOLINT
  Margins3D(int d, int h, int w) : value{{{d, d}, {h, h}, {w, w}}} {}              // NOLINT
  Margins3D(std::array<int, 2> d, std::array<int, 2> h, std::array<int, 2> w) : value{{d, h, w}} {}  // NOLINT
};

struct ReshapingOptions {
  std::string data_format = "channels_last";
  std::string name = "";
};
struct UpSampling1DOptions {
  std::string name = "";
};
struct UpSampling2DOptions {
  std::string data_format = "channels_last";
  std::string interpolation = "nearest";  // or "bilinear" (tf.image.resize, half-pixel centers)
  std::string name = "";
};
using UpSampling3DOptions = ReshapingOptions;
using ZeroPadding1DOptions = ReshapingOptions;  // Keras 3.6 added its data_format
using ZeroPadding2DOptions = ReshapingOptions;
using ZeroPadding3DOptions = ReshapingOptions;
using Cropping1DOptions = UpSampling1DOptions;
using Cropping2DOptions = ReshapingOptions;
using Cropping3DOptions = ReshapingOptions;

#define KEEL_RESHAPING_COMMON(Class)                                \
  KEEL_LAYER_BOILERPLATE(Class)                                     \
  using Layer::build;                                               \
  using Layer::call;                                                \
  void build(const Shape& input_shape) override;                    \
  Tensor call(const Tensor& inputs, bool training) override;        \
  void check_input_shape(const Shape& input_shape) const override;  \
  nlohmann::json get_config() const override;

// Repeats every step `size` times: [N, steps, C] -> [N, steps * size, C].
class UpSampling1D : public Layer {
 public:
  explicit UpSampling1D(int size = 2, UpSampling1DOptions options = {});
  KEEL_RESHAPING_COMMON(UpSampling1D)
  int size() const { return size_; }

 private:
  int size_;
  UpSampling1DOptions options_;
};

// "nearest" repeats rows and columns; "bilinear" resizes to (H * size[0], W * size[1]).
class UpSampling2D : public Layer {
 public:
  explicit UpSampling2D(std::array<int, 2> size = {2, 2}, UpSampling2DOptions options = {});
  explicit UpSampling2D(int size, UpSampling2DOptions options = {})
      : UpSampling2D(std::array<int, 2>{size, size}, std::move(options)) {}
  KEEL_RESHAPING_COMMON(UpSampling2D)
  std::array<int, 2> size() const { return size_; }
  const UpSampling2DOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return options_.interpolation == "bilinear"; }

 private:
  std::array<int, 2> size_;
  UpSampling2DOptions options_;
};

class UpSampling3D : public Layer {
 public:
  explicit UpSampling3D(std::array<int, 3> size = {2, 2, 2}, UpSampling3DOptions options = {});
  explicit UpSampling3D(int size, UpSampling3DOptions options = {})
      : UpSampling3D(std::array<int, 3>{size, size, size}, std::move(options)) {}
  KEEL_RESHAPING_COMMON(UpSampling3D)
  std::array<int, 3> size() const { return size_; }

 private:
  std::array<int, 3> size_;
  UpSampling3DOptions options_;
};

#define KEEL_MARGIN_LAYER(Class, Margins, R, Options, default_margins)      \
  class Class : public Layer {                                              \
   public:                                                                  \
    explicit Class(Margins margins = default_margins, Options options = {}); \
    KEEL_RESHAPING_COMMON(Class)                                            \
    const std::array<std::array<int, 2>, R>& margins() const { return margins_; } \
                                                                            \
   private:                                                                 \
    std::array<std::array<int, 2>, R> margins_;                             \
    Options options_;                                                       \
  };

// Zeros before and after each spatial axis.
KEEL_MARGIN_LAYER(ZeroPadding1D, Margins1D, 1, ZeroPadding1DOptions, 1)
KEEL_MARGIN_LAYER(ZeroPadding2D, Margins2D, 2, ZeroPadding2DOptions, 1)
KEEL_MARGIN_LAYER(ZeroPadding3D, Margins3D, 3, ZeroPadding3DOptions, 1)
// Drops that many elements before and after each spatial axis (Keras' defaults: Cropping1D
// (1, 1), Cropping2D none, Cropping3D one on every side).
KEEL_MARGIN_LAYER(Cropping1D, Margins1D, 1, Cropping1DOptions, 1)
KEEL_MARGIN_LAYER(Cropping2D, Margins2D, 2, Cropping2DOptions, 0)
KEEL_MARGIN_LAYER(Cropping3D, Margins3D, 3, Cropping3DOptions, 1)
#undef KEEL_MARGIN_LAYER

struct RepeatVectorOptions {
  std::string name = "";
};

// [N, features] -> [N, n, features].
class RepeatVector : public Layer {
 public:
  explicit RepeatVector(int n, RepeatVectorOptions options = {});
  KEEL_RESHAPING_COMMON(RepeatVector)
  int n() const { return n_; }

 private:
  int n_;
  RepeatVectorOptions options_;
};

#undef KEEL_RESHAPING_COMMON

}  // namespace keel::layers
