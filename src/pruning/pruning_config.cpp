// PruneLowMagnitude's config (tfmot's get_config: the wrapped layer, pruning_schedule,
// block_size, block_pooling_type, sparsity_m_by_n) and its registration.
#include <nlohmann/json.hpp>

#include "keel/pruning/pruning.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/config_args.hpp"
#include "pruning/pruning_internal.hpp"

namespace keel::pruning {

nlohmann::json PruneLowMagnitude::get_config() const {
  nlohmann::json c = Layer::get_config();
  c["layer"] = layers::serialize(*layer_);
  c["pruning_schedule"] = detail::schedule_json(schedule_);
  c["block_size"] = nlohmann::json::array({options_.block_size[0], options_.block_size[1]});
  c["block_pooling_type"] = options_.block_pooling_type;
  c["sparsity_m_by_n"] = options_.sparsity_m_by_n
                             ? nlohmann::json::array({(*options_.sparsity_m_by_n)[0], (*options_.sparsity_m_by_n)[1]})
                             : nlohmann::json(nullptr);
  return c;
}

}  // namespace keel::pruning

namespace keel::layers::detail {

void register_pruning_layers(Factories& f) {
  f["PruneLowMagnitude"] = [](const nlohmann::json& c) -> std::shared_ptr<Layer> {
    const Args a(c, "PruneLowMagnitude");
    pruning::PruningOptions o;
    o.block_size = a.pair("block_size", o.block_size);
    o.block_pooling_type = a.text("block_pooling_type", o.block_pooling_type);
    if (a.has("sparsity_m_by_n")) o.sparsity_m_by_n = a.pair("sparsity_m_by_n", {2, 4});
    pruning::PruningSchedule schedule = pruning::ConstantSparsity{};
    if (a.has("pruning_schedule")) schedule = pruning::detail::schedule_from_json(*a.find("pruning_schedule"));
    return std::make_shared<pruning::PruneLowMagnitude>(LayerRef(a.sublayer("layer")), schedule, o);
  };
}

}  // namespace keel::layers::detail
