// The configs of the regularization layers: one field list per options struct, get_config, and
// the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/regularization.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, SpatialDropoutOptions& o) {
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, SpatialDropout2DOptions& o) {
  v("data_format", o.data_format);
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, GaussianNoiseOptions& o) {
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, GaussianDropoutOptions& o) {
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, AlphaDropoutOptions& o) {
  v("noise_shape", o.noise_shape);
  v("seed", o.seed);
}

template <class V>
void fields(V&& v, ActivityRegularizationOptions& o) {
  v("l1", o.l1);
  v("l2", o.l2);
}

}  // namespace detail

using detail::write_fields;
using json = nlohmann::json;

nlohmann::json SpatialDropoutBase::get_config() const {
  auto c = Layer::get_config();
  c["rate"] = rate_;
  if (spatial_dims_ > 1) c["data_format"] = data_format_;
  c["seed"] = seed_ ? json(*seed_) : json(nullptr);
  return c;
}

nlohmann::json GaussianNoise::get_config() const {
  auto c = Layer::get_config();
  c["stddev"] = stddev_;
  write_fields(c, options_);
  return c;
}

nlohmann::json GaussianDropout::get_config() const {
  auto c = Layer::get_config();
  c["rate"] = rate_;
  write_fields(c, options_);
  return c;
}

nlohmann::json AlphaDropout::get_config() const {
  auto c = Layer::get_config();
  c["rate"] = rate_;
  write_fields(c, options_);
  return c;
}

nlohmann::json ActivityRegularization::get_config() const {
  auto c = Layer::get_config();
  write_fields(c, options_);
  return c;
}

void detail::register_regularization_layers(Factories& f) {
  f["SpatialDropout1D"] = [](const json& c) {
    const Args a(c, "SpatialDropout1D");
    return std::make_shared<SpatialDropout1D>(a.required_number("rate"), read_fields<SpatialDropoutOptions>(a));
  };
  f["SpatialDropout2D"] = [](const json& c) {
    const Args a(c, "SpatialDropout2D");
    return std::make_shared<SpatialDropout2D>(a.required_number("rate"), read_fields<SpatialDropout2DOptions>(a));
  };
  f["SpatialDropout3D"] = [](const json& c) {
    const Args a(c, "SpatialDropout3D");
    return std::make_shared<SpatialDropout3D>(a.required_number("rate"), read_fields<SpatialDropout2DOptions>(a));
  };
  f["GaussianNoise"] = [](const json& c) {
    const Args a(c, "GaussianNoise");
    return std::make_shared<GaussianNoise>(a.required_number("stddev"), read_fields<GaussianNoiseOptions>(a));
  };
  f["GaussianDropout"] = [](const json& c) {
    const Args a(c, "GaussianDropout");
    return std::make_shared<GaussianDropout>(a.required_number("rate"), read_fields<GaussianDropoutOptions>(a));
  };
  f["AlphaDropout"] = [](const json& c) {
    const Args a(c, "AlphaDropout");
    return std::make_shared<AlphaDropout>(a.required_number("rate"), read_fields<AlphaDropoutOptions>(a));
  };
  f["ActivityRegularization"] = [](const json& c) {
    return std::make_shared<ActivityRegularization>(
        read_fields<ActivityRegularizationOptions>(Args(c, "ActivityRegularization")));
  };
}

}  // namespace keel::layers
