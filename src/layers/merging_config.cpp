// The configs of the merging layers (Average, Subtract, Maximum, Minimum, Dot) and the factories
// the registry rebuilds them with.
#include <nlohmann/json.hpp>

#include <memory>

#include "keel/layers/merging.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/fields.hpp"

namespace keel::layers {

namespace detail {

template <class V>
void fields(V&& v, DotOptions& o) {
  v("normalize", o.normalize);
}

// The layers whose options hold only the base fields (name).
template <class V> void fields(V&&, AverageOptions&) {}
template <class V> void fields(V&&, SubtractOptions&) {}
template <class V> void fields(V&&, MaximumOptions&) {}
template <class V> void fields(V&&, MinimumOptions&) {}

}  // namespace detail

using json = nlohmann::json;

nlohmann::json Dot::get_config() const {
  auto c = Layer::get_config();
  // Keras writes an int for one axis and a pair otherwise.
  c["axes"] = axes_.single() ? json(axes_.axes[0]) : json::array({axes_.axes[0], axes_.axes[1]});
  detail::write_fields(c, options_);
  return c;
}

namespace {

template <class L, class O>
void plain(detail::Factories& f, const char* cls) {
  f[cls] = [cls](const json& c) { return std::make_shared<L>(detail::read_fields<O>(detail::Args(c, cls))); };
}

}  // namespace

void detail::register_merging_layers(Factories& f) {
  plain<Average, AverageOptions>(f, "Average");
  plain<Subtract, SubtractOptions>(f, "Subtract");
  plain<Maximum, MaximumOptions>(f, "Maximum");
  plain<Minimum, MinimumOptions>(f, "Minimum");
  f["Dot"] = [](const json& c) {
    const Args a(c, "Dot");
    if (!a.has("axes")) throw ValueError("Dot.from_config: the config has no 'axes'");
    const std::vector<int> axes = a.ints("axes");
    if (axes.size() != 1 && axes.size() != 2)
      throw ValueError(fmt::format("Dot.from_config: 'axes' must be an integer or a pair, got {} values", axes.size()));
    const DotAxes d = axes.size() == 1 ? DotAxes(axes[0]) : DotAxes(axes[0], axes[1]);
    return std::make_shared<Dot>(d, read_fields<DotOptions>(a));
  };
}

}  // namespace keel::layers
