// MaxPooling1D/3D, AveragePooling1D/3D and the 1-D / 3-D global poolings: shells over the ops of
// keel/ops/conv_nd.hpp (window pools) and the reductions (global pools), with Keras' argument
// checks and channels_first handled by a transpose around the op.
#include "keel/layers/pooling.hpp"

#include <vector>

#include "keel/ops/conv_nd.hpp"
#include "keel/ops/reduce.hpp"
#include "layers/conv_layer_util.hpp"

namespace keel::layers {

using detail::checked_data_format;
using detail::conv_padding;
using detail::positive;

namespace {

template <class Options, class Size>
void validate_window(const Layer& layer, Size pool, Options& o) {
  positive(layer, "pool_size", pool);
  if (o.strides) positive(layer, "strides", *o.strides);
  o.padding = conv_padding(layer, o.padding);
  o.data_format = checked_data_format(layer, o.data_format);
}

// The spatial axes of a rank-r input: 1 .. r-2 (channels_last) or 2 .. r-1 (channels_first).
std::vector<int> spatial_axes(std::int64_t rank, const std::string& data_format) {
  const int first = data_format == "channels_first" ? 2 : 1;
  std::vector<int> axes;
  for (int a = 0; a < rank - 2; ++a) axes.push_back(first + a);
  return axes;
}

}  // namespace

using Triple = std::array<int, 3>;

#define KEEL_WINDOW_POOLING(Class, Size, Options, rank, op)                                                        \
  Class::Class(Size pool_size, Options options)                                       \
      : Layer(options.name), pool_size_(pool_size), options_(std::move(options)) {                        \
    validate_window(*this, pool_size_, options_);                                                         \
  }                                                                                                       \
  void Class::build(const Shape& s) { detail::build_rank(*this, s, rank, options_.data_format); }                 \
  void Class::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }     \
  Tensor Class::call(const Tensor& inputs, bool) {                                                        \
    return detail::in_channels_last(*this, inputs, options_.data_format == "channels_first",              \
                                    [&](const Tensor& x) { return op(x, pool_size_, strides(), options_.padding); }); \
  }

KEEL_WINDOW_POOLING(MaxPooling1D, int, Pooling1DOptions, 3, max_pool1d)
KEEL_WINDOW_POOLING(AveragePooling1D, int, Pooling1DOptions, 3, avg_pool1d)
KEEL_WINDOW_POOLING(MaxPooling3D, Triple, Pooling3DOptions, 5, max_pool3d)
KEEL_WINDOW_POOLING(AveragePooling3D, Triple, Pooling3DOptions, 5, avg_pool3d)
#undef KEEL_WINDOW_POOLING

#define KEEL_GLOBAL_POOLING(Class, rank, reduce)                                                       \
  Class::Class(GlobalPoolingOptions options) : Layer(options.name), options_(std::move(options)) {    \
    options_.data_format = checked_data_format(*this, options_.data_format);                          \
  }                                                                                                    \
  void Class::build(const Shape& s) { detail::build_rank(*this, s, rank, options_.data_format); }              \
  void Class::check_input_shape(const Shape& s) const { detail::same_rank(*this, s, built_shape()); }  \
  Tensor Class::call(const Tensor& inputs, bool) {                                                     \
    return detail::in_layer(*this, [&] {                                                               \
      return reduce(inputs, spatial_axes(rank, options_.data_format), options_.keepdims);              \
    });                                                                                                \
  }

KEEL_GLOBAL_POOLING(GlobalAveragePooling1D, 3, reduce_mean)
KEEL_GLOBAL_POOLING(GlobalAveragePooling3D, 5, reduce_mean)
KEEL_GLOBAL_POOLING(GlobalMaxPooling1D, 3, reduce_max)
KEEL_GLOBAL_POOLING(GlobalMaxPooling3D, 5, reduce_max)
#undef KEEL_GLOBAL_POOLING

}  // namespace keel::layers
