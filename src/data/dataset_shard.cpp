// The argument checks of Dataset::shard (the template itself is in the header).
#include <fmt/core.h>

#include "keel/data/dataset.hpp"

namespace keel::data::detail {

void check_shard(std::int64_t num_shards, std::int64_t index) {
  if (num_shards < 1) throw ValueError(fmt::format("shard: num_shards must be >= 1, got {}", num_shards));
  if (index < 0 || index >= num_shards)
    throw ValueError(fmt::format("shard: index must be in [0, {}), got {}", num_shards, index));
}

}  // namespace keel::data::detail
