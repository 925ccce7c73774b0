#pragma once
// Argument checks and layout changes shared by the convolution-family layers of conv_variants,
// pooling, reshaping and conv_lstm: Keras' validation (ValueError naming the layer), the rank
// check of build() (ShapeError), channels_first <-> channels_last for any rank, and the bias and
// activation that end a convolution.
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "keel/core/error.hpp"
#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers::detail {

// Keras lower-cases padding before checking it.
inline std::string conv_padding(const Layer& layer, const std::string& padding, bool allow_causal = false) {
  const std::string p = lowercase(padding);
  if (p == "valid" || p == "same" || (allow_causal && p == "causal")) return p;
  throw ValueError(fmt::format("{}: padding must be {}, got \"{}\"", who(layer),
                               allow_causal ? "\"valid\", \"same\" or \"causal\"" : "\"valid\" or \"same\"", padding));
}

// Grouped convolution: each group of input channels (x's last axis) has its own slice of the
// filters (the kernel's last axis).
template <class Conv>
Tensor grouped(int groups, const Tensor& x, const Tensor& k, Conv&& conv) {
  if (groups == 1) return conv(x, k);
  const int axis = static_cast<int>(x.rank()) - 1;
  const auto xs = split(x, groups, axis), ks = split(k, groups, axis);
  std::vector<Tensor> ys;
  for (std::size_t i = 0; i < xs.size(); ++i) ys.push_back(conv(xs[i], ks[i]));
  return concat(ys, axis);
}

inline void positive(const Layer& layer, const char* what, int v) {
  if (v <= 0) throw ValueError(fmt::format("{}: {} must be a positive integer, got {}", who(layer), what, v));
}

template <std::size_t R>
void positive(const Layer& layer, const char* what, const std::array<int, R>& v) {
  for (int e : v)
    if (e <= 0)
      throw ValueError(fmt::format("{}: {} must be positive integers, got ({})", who(layer), what, fmt::join(v, ", ")));
}

inline void non_negative(const Layer& layer, const char* what, int v) {
  if (v < 0) throw ValueError(fmt::format("{}: {} must be >= 0, got {}", who(layer), what, v));
}

inline void rank_is(const Layer& layer, const Shape& s, std::int64_t rank, const std::string& layout) {
  if (s.rank() != rank)
    throw ShapeError(fmt::format("{}: expected a {}-D input {}, got shape {}", who(layer), rank, layout, s.to_string()));
}

// "[batch, depth, height, width, channels]" or its channels_first order, for rank 3, 4 or 5.
inline std::string layout_of(std::int64_t rank, bool channels_first) {
  static const char* spatial[] = {"steps", "height, width", "depth, height, width"};
  const std::string sp = spatial[rank - 3];
  return channels_first ? "[batch, channels, " + sp + "]" : "[batch, " + sp + ", channels]";
}

// Same rank and channel count as at build time (spatial sizes may change).
inline void same_channels(const Layer& layer, const Shape& s, const Shape& built, std::int64_t axis) {
  if (s.rank() != built.rank() || s[axis] != built[axis])
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {} and {} channels on axis {})",
                                 who(layer), s.to_string(), built.to_string(), built.rank(), built[axis], axis));
}

inline void same_rank(const Layer& layer, const Shape& s, const Shape& built) {
  if (s.rank() != built.rank())
    throw ShapeError(fmt::format("{}: input shape {} is incompatible with the shape {} the layer was built for "
                                 "(expected rank {})",
                                 who(layer), s.to_string(), built.to_string(), built.rank()));
}

// [N, C, spatial...] -> [N, spatial..., C] and back.
inline Tensor channels_last(const Tensor& x) {
  std::vector<int> perm{0};
  for (int a = 2; a < x.rank(); ++a) perm.push_back(a);
  perm.push_back(1);
  return transpose(x, perm);
}
inline Tensor channels_first(const Tensor& x) {
  std::vector<int> perm{0, static_cast<int>(x.rank()) - 1};
  for (int a = 1; a + 1 < x.rank(); ++a) perm.push_back(a);
  return transpose(x, perm);
}

// How a convolution layer ends, from its channels_last result y: the bias (undefined: none), the
// way back to channels_first when cf, and the activation. On channels_last the bias and the
// library's elementwise activations are one pass (bias_activation); on channels_first the
// activation sees channels_first values, as in Keras (a softmax's axis -1 is the width there).
inline Tensor conv_ending(const Tensor& y, const Tensor& bias, const activations::ActivationFn& activation, bool cf) {
  if (!cf) return bias_activation(y, bias, activation);
  return activation(channels_first(bias.defined() ? bias_add(y, bias) : y));
}

// Runs op on the channels_last view of x and brings the result back to x's layout (a result of
// rank 2, [N, C], needs no change).
template <class Op>
Tensor in_channels_last(const Layer& layer, const Tensor& x, bool cf, Op&& op) {
  Tensor y = in_layer(layer, [&] { return op(cf ? channels_last(x) : x); });
  return cf && y.rank() >= 3 ? channels_first(y) : y;
}

// build()'s rank check of a pooling or resampling layer, naming the data_format's layout.
inline void build_rank(const Layer& layer, const Shape& s, std::int64_t rank, const std::string& data_format) {
  rank_is(layer, s, rank, layout_of(rank, data_format == "channels_first"));
}

}  // namespace keel::layers::detail
