// The configs of the random augmentation layers: one field list per options struct, get_config,
// and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/preprocessing.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V, class O>
  requires std::same_as<O, RandomFlipOptions> || std::same_as<O, RandomCropOptions>
void fields(V&& v, O& o) {
  v("seed", o.seed);
  v("data_format", o.data_format);
}

template <class V>
void fields(V&& v, RandomTranslationOptions& o) {
  v("fill_mode", o.fill_mode);
  v("interpolation", o.interpolation);
  v("seed", o.seed);
  v("fill_value", o.fill_value);
  v("data_format", o.data_format);
}

}  // namespace detail

namespace {

using detail::write_fields;
using json = nlohmann::json;

// A factor as it was given: one number, or a pair.
json translation_factor_json(const TranslationFactor& f) { return f.pair ? json::array({f.lower, f.upper}) : json(f.upper); }

TranslationFactor translation_factor(const detail::Args& a, const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) throw ValueError(fmt::format("RandomTranslation.from_config: the config has no '{}'", key));
  if (it->is_array()) {
    if (it->size() != 2) a.bad(key, "a number or a pair of numbers", *it);
    return TranslationFactor(a.number_of(key, (*it)[0]), a.number_of(key, (*it)[1]));
  }
  return TranslationFactor(a.number_of(key, *it));
}

}  // namespace

nlohmann::json RandomFlip::get_config() const {
  auto c = Layer::get_config();
  c["mode"] = mode_;
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomCrop::get_config() const {
  auto c = Layer::get_config();
  c["height"] = height_;
  c["width"] = width_;
  write_fields(c, options_);
  return c;
}

nlohmann::json RandomTranslation::get_config() const {
  auto c = Layer::get_config();
  c["height_factor"] = translation_factor_json(height_factor_);
  c["width_factor"] = translation_factor_json(width_factor_);
  write_fields(c, options_);
  return c;
}

void detail::register_preprocessing_layers(Factories& f) {
  f["RandomFlip"] = [](const json& c) {
    const Args a(c, "RandomFlip");
    return std::make_shared<RandomFlip>(a.text("mode", "horizontal_and_vertical"), read_fields<RandomFlipOptions>(a));
  };
  f["RandomCrop"] = [](const json& c) {
    const Args a(c, "RandomCrop");
    return std::make_shared<RandomCrop>(a.required_int("height"), a.required_int("width"),
                                        read_fields<RandomCropOptions>(a));
  };
  f["RandomTranslation"] = [](const json& c) {
    const Args a(c, "RandomTranslation");
    return std::make_shared<RandomTranslation>(translation_factor(a, c, "height_factor"),
                                               translation_factor(a, c, "width_factor"),
                                               read_fields<RandomTranslationOptions>(a));
  };
}

}  // namespace keel::layers
