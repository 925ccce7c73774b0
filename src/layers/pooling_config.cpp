// The configs of the 1-D and 3-D pooling layers (field lists, get_config) and their factories,
// registered under the Keras class names. As Keras, a config holds the strides a pooling
// resolved (the pool size when none were given).
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/pooling.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/conv_config_util.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V, class O>
  requires std::same_as<O, Pooling1DOptions> || std::same_as<O, Pooling3DOptions>
void fields(V&& v, O& o) {  // strides: written resolved, read beside the list
  v("padding", o.padding);
  v("data_format", o.data_format);
}

template <class V>
void fields(V&& v, GlobalPoolingOptions& o) {
  v("data_format", o.data_format);
  v("keepdims", o.keepdims);
}

}  // namespace detail

namespace {

using detail::ints_json;
using detail::write_fields;
using json = nlohmann::json;

template <class O>
json pooling_config(json c, const O& options, json pool_size, json strides) {
  write_fields(c, options);
  c["pool_size"] = std::move(pool_size);
  c["strides"] = std::move(strides);
  return c;
}

}  // namespace

json MaxPooling1D::get_config() const {
  return pooling_config(Layer::get_config(), options_, json::array({pool_size_}), json::array({strides()}));
}
json AveragePooling1D::get_config() const {
  return pooling_config(Layer::get_config(), options_, json::array({pool_size_}), json::array({strides()}));
}
json MaxPooling3D::get_config() const {
  return pooling_config(Layer::get_config(), options_, ints_json(pool_size_), ints_json(strides()));
}
json AveragePooling3D::get_config() const {
  return pooling_config(Layer::get_config(), options_, ints_json(pool_size_), ints_json(strides()));
}

#define KEEL_GLOBAL_POOLING_CONFIG(Class)  \
  json Class::get_config() const {         \
    auto c = Layer::get_config();          \
    write_fields(c, options_);             \
    return c;                              \
  }
KEEL_GLOBAL_POOLING_CONFIG(GlobalAveragePooling1D)
KEEL_GLOBAL_POOLING_CONFIG(GlobalAveragePooling3D)
KEEL_GLOBAL_POOLING_CONFIG(GlobalMaxPooling1D)
KEEL_GLOBAL_POOLING_CONFIG(GlobalMaxPooling3D)
#undef KEEL_GLOBAL_POOLING_CONFIG

namespace {

using detail::Args;
using detail::read_fields;

template <class L>
std::shared_ptr<Layer> pooling1d(const json& c, const char* cls) {
  const Args a(c, cls);
  auto o = read_fields<Pooling1DOptions>(a);
  if (a.has("strides")) o.strides = a.single("strides", 1);
  return std::make_shared<L>(a.single("pool_size", 2), o);
}

template <class L>
std::shared_ptr<Layer> pooling3d(const json& c, const char* cls) {
  const Args a(c, cls);
  auto o = read_fields<Pooling3DOptions>(a);
  if (auto s = detail::read_optional_triple(a, "strides")) o.strides = *s;
  return std::make_shared<L>(detail::read_triple(a, "pool_size", {2, 2, 2}), o);
}

template <class L>
std::shared_ptr<Layer> global_pooling(const json& c, const char* cls) {
  return std::make_shared<L>(read_fields<GlobalPoolingOptions>(Args(c, cls)));
}

}  // namespace

void detail::register_pooling_layers(Factories& f) {
  f["MaxPooling1D"] = [](const json& c) { return pooling1d<MaxPooling1D>(c, "MaxPooling1D"); };
  f["AveragePooling1D"] = [](const json& c) { return pooling1d<AveragePooling1D>(c, "AveragePooling1D"); };
  f["MaxPooling3D"] = [](const json& c) { return pooling3d<MaxPooling3D>(c, "MaxPooling3D"); };
  f["AveragePooling3D"] = [](const json& c) { return pooling3d<AveragePooling3D>(c, "AveragePooling3D"); };
  f["GlobalAveragePooling1D"] = [](const json& c) {
    return global_pooling<GlobalAveragePooling1D>(c, "GlobalAveragePooling1D");
  };
  f["GlobalAveragePooling3D"] = [](const json& c) {
    return global_pooling<GlobalAveragePooling3D>(c, "GlobalAveragePooling3D");
  };
  f["GlobalMaxPooling1D"] = [](const json& c) { return global_pooling<GlobalMaxPooling1D>(c, "GlobalMaxPooling1D"); };
  f["GlobalMaxPooling3D"] = [](const json& c) { return global_pooling<GlobalMaxPooling3D>(c, "GlobalMaxPooling3D"); };
}

}  // namespace keel::layers
