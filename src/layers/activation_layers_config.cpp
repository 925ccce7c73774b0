// The configs of PReLU, ELU and ThresholdedReLU, and the factories the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/activation_layers.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, PReLUOptions& o) {
  v("alpha_initializer", o.alpha_initializer);
  v("alpha_regularizer", o.alpha_regularizer);
  v("alpha_constraint", o.alpha_constraint);
  v("shared_axes", o.shared_axes);
}

template <class V> void fields(V&&, ELUOptions&) {}
template <class V> void fields(V&&, ThresholdedReLUOptions&) {}

}  // namespace detail

using json = nlohmann::json;

nlohmann::json PReLU::get_config() const {
  auto c = Layer::get_config();
  detail::write_fields(c, options_);
  return c;
}

nlohmann::json ELU::get_config() const {
  auto c = Layer::get_config();
  c["alpha"] = alpha_;
  return c;
}

nlohmann::json ThresholdedReLU::get_config() const {
  auto c = Layer::get_config();
  c["theta"] = theta_;
  return c;
}

void detail::register_activation_layers(Factories& f) {
  f["PReLU"] = [](const json& c) { return std::make_shared<PReLU>(read_fields<PReLUOptions>(Args(c, "PReLU"))); };
  f["ELU"] = [](const json& c) {
    const Args a(c, "ELU");
    return std::make_shared<ELU>(a.number("alpha", 1.0), read_fields<ELUOptions>(a));
  };
  f["ThresholdedReLU"] = [](const json& c) {
    const Args a(c, "ThresholdedReLU");
    return std::make_shared<ThresholdedReLU>(a.number("theta", 1.0), read_fields<ThresholdedReLUOptions>(a));
  };
}

}  // namespace keel::layers
