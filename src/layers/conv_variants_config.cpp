// The configs of Conv1DTranspose, Conv3D, Conv3DTranspose, SeparableConv1D/2D and
// DepthwiseConv1D: one field list per options struct (the triples and Conv1DTranspose's
// output_padding, which fields.hpp does not spell, are written and read beside it), get_config,
// and the factories registered under the Keras class names.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/conv_variants.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/conv_config_util.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V, class O>
void variant_weight_fields(V&& v, O& o) {
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
  if constexpr (requires { o.depthwise_initializer; }) {
    v("depthwise_initializer", o.depthwise_initializer);
    v("depthwise_regularizer", o.depthwise_regularizer, Spelling::keras3);
    v("depthwise_constraint", o.depthwise_constraint);
  }
  if constexpr (requires { o.pointwise_initializer; }) {
    v("pointwise_initializer", o.pointwise_initializer);
    v("pointwise_regularizer", o.pointwise_regularizer, Spelling::keras3);
    v("pointwise_constraint", o.pointwise_constraint);
  }
}

template <class V>
void fields(V&& v, Conv1DTransposeOptions& o) {
  v("strides", o.strides, Spelling::one_tuple);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate, Spelling::one_tuple);
  variant_weight_fields(v, o);
}

// strides, dilation_rate (and output_padding) are triples: see triple_fields below.
template <class V, class O>
  requires std::same_as<O, Conv3DOptions> || std::same_as<O, Conv3DTransposeOptions>
void fields(V&& v, O& o) {
  v("padding", o.padding);
  v("data_format", o.data_format);
  if constexpr (requires { o.groups; }) v("groups", o.groups);
  variant_weight_fields(v, o);
}

template <class V>
void fields(V&& v, SeparableConv1DOptions& o) {
  v("strides", o.strides, Spelling::one_tuple);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate, Spelling::one_tuple);
  v("depth_multiplier", o.depth_multiplier);
  variant_weight_fields(v, o);
}

template <class V>
void fields(V&& v, SeparableConv2DOptions& o) {
  v("strides", o.strides);
  v("padding", o.padding);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate);
  v("depth_multiplier", o.depth_multiplier);
  variant_weight_fields(v, o);
}

template <class V>
void fields(V&& v, DepthwiseConv1DOptions& o) {
  v("strides", o.strides, Spelling::one_tuple);
  v("padding", o.padding);
  v("depth_multiplier", o.depth_multiplier);
  v("data_format", o.data_format);
  v("dilation_rate", o.dilation_rate, Spelling::one_tuple);
  variant_weight_fields(v, o);
}

}  // namespace detail

namespace {

using detail::ints_json;
using detail::pair_json;
using detail::write_fields;
using json = nlohmann::json;

template <class O>
void write_triples(json& c, const O& o) {
  c["strides"] = ints_json(o.strides);
  c["dilation_rate"] = ints_json(o.dilation_rate);
  if constexpr (requires { o.output_padding.value; })
    c["output_padding"] = o.output_padding ? ints_json(*o.output_padding) : json(nullptr);
}

}  // namespace

nlohmann::json Conv1DTranspose::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = json::array({kernel_size_});
  write_fields(c, options_);
  c["output_padding"] = options_.output_padding ? json::array({*options_.output_padding}) : json(nullptr);
  return c;
}

nlohmann::json Conv3D::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = ints_json(kernel_size_);
  write_fields(c, options_);
  write_triples(c, options_);
  return c;
}

nlohmann::json Conv3DTranspose::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = ints_json(kernel_size_);
  write_fields(c, options_);
  write_triples(c, options_);
  return c;
}

nlohmann::json SeparableConv1D::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = json::array({kernel_size_});
  write_fields(c, options_);
  return c;
}

nlohmann::json SeparableConv2D::get_config() const {
  auto c = Layer::get_config();
  c["filters"] = filters_;
  c["kernel_size"] = pair_json(kernel_size_);
  write_fields(c, options_);
  return c;
}

nlohmann::json DepthwiseConv1D::get_config() const {
  auto c = Layer::get_config();
  c["kernel_size"] = json::array({kernel_size_});
  write_fields(c, options_);
  return c;
}

namespace {

using detail::Args;
using detail::read_fields;

void need(const Args& a, const char* key, const char* cls) {
  if (!a.has(key)) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls, key));
}

template <class L, class O>
std::shared_ptr<Layer> conv3d_like(const json& c, const char* cls) {
  const Args a(c, cls);
  auto o = read_fields<O>(a);
  o.strides = detail::read_triple(a, "strides", o.strides);
  o.dilation_rate = detail::read_triple(a, "dilation_rate", o.dilation_rate);
  if constexpr (requires { o.output_padding.value; })
    if (auto p = detail::read_optional_triple(a, "output_padding")) o.output_padding = *p;
  need(a, "kernel_size", cls);
  return std::make_shared<L>(a.required_int("filters"), detail::read_triple(a, "kernel_size", {1, 1, 1}), o);
}

}  // namespace

void detail::register_conv_variant_layers(Factories& f) {
  f["Conv1DTranspose"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "Conv1DTranspose");
    auto o = read_fields<Conv1DTransposeOptions>(a);
    if (a.has("output_padding")) o.output_padding = a.single("output_padding", 0);
    need(a, "kernel_size", "Conv1DTranspose");
    return std::make_shared<Conv1DTranspose>(a.required_int("filters"), a.single("kernel_size", 1), o);
  };
  f["Conv3D"] = [](const json& c) { return conv3d_like<Conv3D, Conv3DOptions>(c, "Conv3D"); };
  f["Conv3DTranspose"] = [](const json& c) {
    return conv3d_like<Conv3DTranspose, Conv3DTransposeOptions>(c, "Conv3DTranspose");
  };
  f["SeparableConv1D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "SeparableConv1D");
    auto o = read_fields<SeparableConv1DOptions>(a);
    need(a, "kernel_size", "SeparableConv1D");
    return std::make_shared<SeparableConv1D>(a.required_int("filters"), a.single("kernel_size", 1), o);
  };
  f["SeparableConv2D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "SeparableConv2D");
    auto o = read_fields<SeparableConv2DOptions>(a);
    need(a, "kernel_size", "SeparableConv2D");
    return std::make_shared<SeparableConv2D>(a.required_int("filters"), a.pair("kernel_size", {1, 1}), o);
  };
  f["DepthwiseConv1D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "DepthwiseConv1D");
    auto o = read_fields<DepthwiseConv1DOptions>(a);
    need(a, "kernel_size", "DepthwiseConv1D");
    return std::make_shared<DepthwiseConv1D>(a.single("kernel_size", 1), o);
  };
}

}  // namespace keel::layers
