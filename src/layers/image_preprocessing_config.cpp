// The configs of the image preprocessing layers: one field list per options struct, get_config,
// and the factories the registry rebuilds them with under their Keras class names.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/image_preprocessing.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, ResizingOptions& o) {
  v("interpolation", o.interpolation);
  v("crop_to_aspect_ratio", o.crop_to_aspect_ratio);
  v("pad_to_aspect_ratio", o.pad_to_aspect_ratio);
  v("fill_mode", o.fill_mode);
  v("fill_value", o.fill_value);
  v("data_format", o.data_format);
}

template <class V>
void fields(V&& v, CenterCropOptions& o) {
  v("data_format", o.data_format);
}

template <class V, class O>
  requires std::same_as<O, RandomRotationOptions> || std::same_as<O, RandomZoomOptions>
void fields(V&& v, O& o) {
  v("fill_mode", o.fill_mode);
  v("interpolation", o.interpolation);
  v("seed", o.seed);
  v("fill_value", o.fill_value);
  v("data_format", o.data_format);
}

// value_range is a pair of numbers, written and read beside the field list.
template <class V, class O>
  requires std::same_as<O, RandomContrastOptions> || std::same_as<O, RandomBrightnessOptions>
void fields(V&& v, O& o) {
  v("seed", o.seed);
}

}  // namespace detail

namespace {

using detail::write_fields;
using json = nlohmann::json;

// A factor as it was given: one number, or a pair.
json image_factor_json(const ImageFactor& f) { return f.pair ? json::array({f.lower, f.upper}) : json(f.upper); }

ImageFactor read_factor(const detail::Args& a, const json& c, const char* key, const char* cls) {
  const json* v = a.find(key);
  if (!v) throw ValueError(fmt::format("{}.from_config: the config has no '{}'", cls, key));
  if (v->is_array()) {
    if (v->size() != 2) a.bad(key, "a number or a pair of numbers", *v);
    return ImageFactor(a.number_of(key, (*v)[0]), a.number_of(key, (*v)[1]));
  }
  (void)c;
  return ImageFactor(a.number_of(key, *v));
}

std::array<double, 2> read_range(const detail::Args& a, std::array<double, 2> def) {
  const json* v = a.find("value_range");
  if (!v) return def;
  if (!v->is_array() || v->size() != 2) a.bad("value_range", "a pair of numbers", *v);
  return {a.number_of("value_range", (*v)[0]), a.number_of("value_range", (*v)[1])};
}

}  // namespace

nlohmann::json Resizing::get_config() const {
  auto c = Layer::get_config();
  c["height"] = height_;
  c["width"] = width_;
  write_fields(c, options_);
  return c;
}

nlohmann::json CenterCrop::get_config() const {
  auto c = Layer::get_config();
  c["height"] = height_;
  c["width"] = width_;
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomRotation::get_config() const {
  auto c = Layer::get_config();
  c["factor"] = image_factor_json(factor_);
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomZoom::get_config() const {
  auto c = Layer::get_config();
  c["height_factor"] = image_factor_json(height_factor_);
  c["width_factor"] = width_factor_ ? image_factor_json(*width_factor_) : json(nullptr);
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomContrast::get_config() const {
  auto c = Layer::get_config();
  c["factor"] = image_factor_json(factor_);
  c["value_range"] = json::array({options_.value_range[0], options_.value_range[1]});
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomBrightness::get_config() const {
  auto c = Layer::get_config();
  c["factor"] = image_factor_json(factor_);
  c["value_range"] = json::array({options_.value_range[0], options_.value_range[1]});
  write_fields(c, options_);
  return c;
}

void detail::register_image_preprocessing_layers(Factories& f) {
  f["Resizing"] = [](const json& c) {
    const Args a(c, "Resizing");
    return std::make_shared<Resizing>(a.required_int("height"), a.required_int("width"),
                                      read_fields<ResizingOptions>(a));
  };
  f["CenterCrop"] = [](const json& c) {
    const Args a(c, "CenterCrop");
    return std::make_shared<CenterCrop>(a.required_int("height"), a.required_int("width"),
                                        read_fields<CenterCropOptions>(a));
  };
  f["RandomRotation"] = [](const json& c) {
    const Args a(c, "RandomRotation");
    return std::make_shared<RandomRotation>(read_factor(a, c, "factor", "RandomRotation"),
                                            read_fields<RandomRotationOptions>(a));
  };
  f["RandomZoom"] = [](const json& c) {
    const Args a(c, "RandomZoom");
    std::optional<ImageFactor> width;
    if (a.has("width_factor")) width = read_factor(a, c, "width_factor", "RandomZoom");
    return std::make_shared<RandomZoom>(read_factor(a, c, "height_factor", "RandomZoom"), width,
                                        read_fields<RandomZoomOptions>(a));
  };
  f["RandomContrast"] = [](const json& c) {
    const Args a(c, "RandomContrast");
    auto o = read_fields<RandomContrastOptions>(a);
    o.value_range = read_range(a, o.value_range);
    return std::make_shared<RandomContrast>(read_factor(a, c, "factor", "RandomContrast"), o);
  };
  f["RandomBrightness"] = [](const json& c) {
    const Args a(c, "RandomBrightness");
    auto o = read_fields<RandomBrightnessOptions>(a);
    o.value_range = read_range(a, o.value_range);
    return std::make_shared<RandomBrightness>(read_factor(a, c, "factor", "RandomBrightness"), o);
  };
}

}  // namespace keel::layers
