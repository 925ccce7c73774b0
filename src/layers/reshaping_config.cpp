// The configs of the reshaping layers (get_config) and their factories under the Keras class
// names. Margins are written as Keras does: ZeroPadding1D / Cropping1D (before, after), the 2-D
// and 3-D ones ((before, after), ...) per axis.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/reshaping.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/conv_config_util.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace {

using detail::ints_json;
using detail::margins_json;
using json = nlohmann::json;

template <class O>
json with_format(json c, const O& o) {
  if constexpr (requires { o.data_format; }) c["data_format"] = o.data_format;
  return c;
}

}  // namespace

json UpSampling1D::get_config() const {
  auto c = Layer::get_config();
  c["size"] = size_;
  return c;
}
json UpSampling2D::get_config() const {
  auto c = with_format(Layer::get_config(), options_);
  c["size"] = ints_json(size_);
  c["interpolation"] = options_.interpolation;
  return c;
}
json UpSampling3D::get_config() const {
  auto c = with_format(Layer::get_config(), options_);
  c["size"] = ints_json(size_);
  return c;
}

#define KEEL_MARGIN_CONFIG(Class, key)                      \
  json Class::get_config() const {                          \
    auto c = with_format(Layer::get_config(), options_);    \
    c[key] = margins_json(margins_);                        \
    return c;                                               \
  }
KEEL_MARGIN_CONFIG(ZeroPadding1D, "padding")
KEEL_MARGIN_CONFIG(ZeroPadding2D, "padding")
KEEL_MARGIN_CONFIG(ZeroPadding3D, "padding")
KEEL_MARGIN_CONFIG(Cropping1D, "cropping")
KEEL_MARGIN_CONFIG(Cropping2D, "cropping")
KEEL_MARGIN_CONFIG(Cropping3D, "cropping")
#undef KEEL_MARGIN_CONFIG

json RepeatVector::get_config() const {
  auto c = Layer::get_config();
  c["n"] = n_;
  return c;
}

namespace {

using detail::Args;

template <class O>
O base_options(const Args& a) {
  O o;
  if constexpr (requires { o.data_format; }) o.data_format = a.text("data_format", o.data_format);
  o.name = a.name();
  return o;
}

template <class L, class O, std::size_t R>
std::shared_ptr<Layer> margin_layer(const json& c, const char* cls, const char* key,
                                    std::array<std::array<int, 2>, R> def) {
  const Args a(c, cls);
  const auto m = detail::read_margins<R>(a, key, def);
  if constexpr (R == 1) return std::make_shared<L>(Margins1D(m[0][0], m[0][1]), base_options<O>(a));
  else if constexpr (R == 2) return std::make_shared<L>(Margins2D(m[0], m[1]), base_options<O>(a));
  else return std::make_shared<L>(Margins3D(m[0], m[1], m[2]), base_options<O>(a));
}

}  // namespace

void detail::register_reshaping_layers(Factories& f) {
  f["UpSampling1D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "UpSampling1D");
    return std::make_shared<UpSampling1D>(a.single("size", 2), base_options<UpSampling1DOptions>(a));
  };
  f["UpSampling2D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "UpSampling2D");
    auto o = base_options<UpSampling2DOptions>(a);
    o.interpolation = a.text("interpolation", o.interpolation);
    return std::make_shared<UpSampling2D>(a.pair("size", {2, 2}), o);
  };
  f["UpSampling3D"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "UpSampling3D");
    return std::make_shared<UpSampling3D>(read_triple(a, "size", {2, 2, 2}), base_options<UpSampling3DOptions>(a));
  };
  using P = std::array<int, 2>;
  f["ZeroPadding1D"] = [](const json& c) {
    return margin_layer<ZeroPadding1D, ZeroPadding1DOptions, 1>(c, "ZeroPadding1D", "padding", {P{1, 1}});
  };
  f["ZeroPadding2D"] = [](const json& c) {
    return margin_layer<ZeroPadding2D, ZeroPadding2DOptions, 2>(c, "ZeroPadding2D", "padding", {P{1, 1}, P{1, 1}});
  };
  f["ZeroPadding3D"] = [](const json& c) {
    return margin_layer<ZeroPadding3D, ZeroPadding3DOptions, 3>(c, "ZeroPadding3D", "padding",
                                                                {P{1, 1}, P{1, 1}, P{1, 1}});
  };
  f["Cropping1D"] = [](const json& c) {
    return margin_layer<Cropping1D, Cropping1DOptions, 1>(c, "Cropping1D", "cropping", {P{1, 1}});
  };
  f["Cropping2D"] = [](const json& c) {
    return margin_layer<Cropping2D, Cropping2DOptions, 2>(c, "Cropping2D", "cropping", {P{0, 0}, P{0, 0}});
  };
  f["Cropping3D"] = [](const json& c) {
    return margin_layer<Cropping3D, Cropping3DOptions, 3>(c, "Cropping3D", "cropping", {P{1, 1}, P{1, 1}, P{1, 1}});
  };
  f["RepeatVector"] = [](const json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "RepeatVector");
    return std::make_shared<RepeatVector>(a.required_int("n"), base_options<RepeatVectorOptions>(a));
  };
}

}  // namespace keel::layers
