// The configs of the convolution and pooling layers: one field list per options struct,
// get_config, and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/convolutional.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

// The weights' fields every convolution shares (DepthwiseConv2D names its kernel "depthwise").
template <class V, class O>
void conv_weight_fields(V&& v, O& o) {
  v("activation", o.activation);
  v("use_bias", o.use_bias);
  v("bias_initializer", o.bias_initializer);
  v("bias_regularizer", o.bias_regularizer, Spelling::keras3);
  v("activity_regularizer", o.activity_regularizer, Spelling::keras3);
  v("bias_constraint", o.bias_constraint);
  if constexpr (requires { o.kernel_initializer; }) {
    v("kernel_initializer", o.kernel_initializer);
    v("kernel_regularizer", o.kernel_regularizer, Spelling::keras3);
    v("kernel_constraint", o.kernel_constraint);
  }
}

template <class V>
void fields(V&& v, Conv1DOptions& o) {
  v("strides", o.strides, Spelling::one_tuple);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate, Spelling::one_tuple);
  v("groups", o.groups);
  conv_weight_fields(v, o);
}

template <class V>
void fields(V&& v, Conv2DOptions& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate);
  v("groups", o.groups);
  conv_weight_fields(v, o);
}

template <class V>
void fields(V&& v, Conv2DTransposeOptions& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("output_padding", o.output_padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate);
  conv_weight_fields(v, o);
}

template <class V>
void fields(V&& v, DepthwiseConv2DOptions& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("depth_multiplier", o.depth_multiplier);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate);
  v("depthwise_initializer", o.depthwise_initializer);
  v("depthwise_regularizer", o.depthwise_regularizer, Spelling::keras3);
  v("depthwise_constraint", o.depthwise_constraint);
  conv_weight_fields(v, o);
}

template <class V, class O>
  requires std::same_as<O, MaxPooling2DOptions> || std::same_as<O, AveragePooling2DOptions>
void fields(V&& v, O& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("data_format", o.data_format);
}

template <class V, class O>
  requires std::same_as<O, GlobalAveragePooling2DOptions> || std::same_as<O, GlobalMaxPooling2DOptions>
void fields(V&& v, O& o) {
  v("data_format", o.data_format);
  v("keepdims", o.keepdims);
}

}  // namespace detail

namespace {

using detail::pair_json;
using detail::write_fields;
using json = nlohmann::json;

json conv_config(json c, int filters, json kernel_size) {
  c["filters"] = filters;
  c["kernel_size"] = std::move(kernel_size);
  return c;
}

// Keras writes the strides a pooling resolved (the pool size when none were given).
template <class O>
json pooling_2d_config(json c, std::array<int, 2> pool_size, const O& options) {
  write_fields(c, options);
  c["pool_size"] = pair_json(pool_size);
  c["strides"] = pair_json(options.strides.value_or(pool_size));
  return c;
}

}  // namespace

nlohmann::json Conv1D::get_config() const {
  auto c = conv_config(Layer::get_config(), filters_, json::array({kernel_size_}));
  write_fields(c, options_);
  return c;
}

nlohmann::json Conv2D::get_config() const {
  auto c = conv_config(Layer::get_config(), filters_, pair_json(kernel_size_));
  write_fields(c, options_);
  return c;
}

nlohmann::json Conv2DTranspose::get_config() const {
  auto c = conv_config(Layer::get_config(), filters_, pair_json(kernel_size_));
  write_fields(c, options_);
  return c;
}

nlohmann::json DepthwiseConv2D::get_config() const {
  auto c = Layer::get_config();
  c["kernel_size"] = pair_json(kernel_size_);
  write_fields(c, options_);
  return c;
}

nlohmann::json MaxPooling2D::get_config() const { return pooling_2d_config(Layer::get_config(), pool_size_, options_); }

nlohmann::json AveragePooling2D::get_config() const {
  return pooling_2d_config(Layer::get_config(), pool_size_, options_);
}

nlohmann::json GlobalAveragePooling2D::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

nlohmann::json GlobalMaxPooling2D::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

namespace {

using detail::Args;
using detail::read_fields;

void require_kernel_size(const Args& a, const char* cls) {
  if (!a.has("kernel_size")) throw ValueError(fmt::format("{}.from_config: the config has no 'kernel_size'", cls));
}

template <class L, class O>
std::shared_ptr<Layer> convolution(const json& c, const char* cls) {
  const Args a(c, cls);
  auto o = read_fields<O>(a);
  require_kernel_size(a, cls);
  if constexpr (std::is_same_v<L, Conv1D>) return std::make_shared<L>(a.required_int("filters"), a.single("kernel_size", 1), o);
  else return std::make_shared<L>(a.required_int("filters"), a.pair("kernel_size", {1, 1}), o);
}

template <class L, class O>
std::shared_ptr<Layer> pooling(const json& c, const char* cls) {
  const Args a(c, cls);
  return std::make_shared<L>(a.pair("pool_size", {2, 2}), read_fields<O>(a));
}

template <class L, class O>
std::shared_ptr<Layer> global_pooling_2d(const json& c, const char* cls) {
  return std::make_shared<L>(read_fields<O>(Args(c, cls)));
}

}  // namespace

void detail::register_convolutional_layers(Factories& f) {
  f["Conv1D"] = [](const json& c) { return convolution<Conv1D, Conv1DOptions>(c, "Conv1D"); };
  f["Conv2D"] = [](const json& c) { return convolution<Conv2D, Conv2DOptions>(c, "Conv2D"); };
  f["Conv2DTranspose"] = [](const json& c) {
    return convolution<Conv2DTranspose, Conv2DTransposeOptions>(c, "Conv2DTranspose");
  };
  f["DepthwiseConv2D"] = [](const json& c) {
    const Args a(c, "DepthwiseConv2D");
    auto o = read_fields<DepthwiseConv2DOptions>(a);
    require_kernel_size(a, "DepthwiseConv2D");
    return std::make_shared<DepthwiseConv2D>(a.pair("kernel_size", {1, 1}), o);
  };
  f["MaxPooling2D"] = [](const json& c) { return pooling<MaxPooling2D, MaxPooling2DOptions>(c, "MaxPooling2D"); };
  f["AveragePooling2D"] = [](const json& c) {
    return pooling<AveragePooling2D, AveragePooling2DOptions>(c, "AveragePooling2D");
  };
  f["GlobalAveragePooling2D"] = [](const json& c) {
    return global_pooling_2d<GlobalAveragePooling2D, GlobalAveragePooling2DOptions>(c, "GlobalAveragePooling2D");
  };
  f["GlobalMaxPooling2D"] = [](const json& c) {
    return global_pooling_2d<GlobalMaxPooling2D, GlobalMaxPooling2DOptions>(c, "GlobalMaxPooling2D");
  };
}

}  // namespace keel::layers
