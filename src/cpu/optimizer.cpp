#include "cpu/optimizer.hpp"

#include "cpu/kernels.hpp"

namespace keel::cpu {

void optimizer_update(const kernel::OptimizerParams& p, std::int64_t n, float* w, const float* g, float* const slot[3]) {
  bool need[3];
  kernel::slots_needed(p, need);
  float* const used[3] = {need[0] ? slot[0] : nullptr, need[1] ? slot[1] : nullptr, need[2] ? slot[2] : nullptr};
  simd().optimizer_update(p, n, w, g, used);
}

}  // namespace keel::cpu
