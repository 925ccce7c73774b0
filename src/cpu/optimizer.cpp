#include "cpu/optimizer.hpp"

#include <array>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "cpu/strided.hpp"

namespace keel::cpu {

namespace {

using kernel::OptimizerParams;
using kernel::OptimizerRule;
using FB = xsimd::batch<float>;

// The rules' arithmetic on batches (xsimd::sqrt, not std::sqrt, which must keep errno and would
// not vectorise).
struct SimdMath {
  static FB add(const FB& a, const FB& b) { return a + b; }
  static FB sub(const FB& a, const FB& b) { return a - b; }
  static FB mul(const FB& a, const FB& b) { return a * b; }
  static FB div(const FB& a, const FB& b) { return a / b; }
  static FB root(const FB& a) { return xsimd::sqrt(a); }
  static FB max(const FB& a, const FB& b) { return xsimd::max(a, b); }
};

// For each element the gradient is scaled and clamped and the weight decayed as StepContext
// says, then rule R runs on batches of the weight and of the slots; w and the slots are written
// back. The tail goes through a zero-padded batch so every element takes the same code.
template <OptimizerRule R>
void fused(const OptimizerParams& p, std::int64_t n, float* wp, const float* gp, float* const slot[3]) {
  const bool do_scale = p.grad_scale != 1, do_clip = p.clipvalue > 0, do_decay = p.decay != 0;
  const FB scale(static_cast<float>(p.grad_scale)), hi(static_cast<float>(p.clipvalue)),
      lo(-static_cast<float>(p.clipvalue)), decay(static_cast<float>(p.decay));
  const kernel::RuleConstants<FB, float> c(p);
  constexpr std::int64_t W = FB::size;
  const auto one = [&](float* wq, const float* gq, const std::array<float*, 3>& sq) {
    FB gi = FB::load_unaligned(gq);
    if (do_scale) gi *= scale;
    if (do_clip) gi = xsimd::min(xsimd::max(gi, lo), hi);
    FB wi = FB::load_unaligned(wq);
    if (do_decay) wi -= wi * decay;
    std::array<FB, 3> si{};
    for (std::size_t k = 0; k < 3; ++k)
      if (sq[k]) si[k] = FB::load_unaligned(sq[k]);
    kernel::apply_rule<R, SimdMath>(p, c, wi, gi, si[0], si[1], si[2]);
    wi.store_unaligned(wq);
    for (std::size_t k = 0; k < 3; ++k)
      if (sq[k]) si[k].store_unaligned(sq[k]);
  };
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    std::int64_t i = b;
    std::array<float*, 3> sq{};
    for (; i + W <= e; i += W) {
      for (std::size_t k = 0; k < 3; ++k) sq[k] = slot[k] ? slot[k] + i : nullptr;
      one(wp + i, gp + i, sq);
    }
    if (i < e) {
      const auto rest = static_cast<std::size_t>(e - i);
      alignas(64) float wb[W] = {}, gb[W] = {};
      alignas(64) std::array<std::array<float, W>, 3> sb{};
      std::memcpy(wb, wp + i, rest * sizeof(float));
      std::memcpy(gb, gp + i, rest * sizeof(float));
      for (std::size_t k = 0; k < 3; ++k) {
        sq[k] = nullptr;
        if (!slot[k]) continue;
        std::memcpy(sb[k].data(), slot[k] + i, rest * sizeof(float));
        sq[k] = sb[k].data();
      }
      one(wb, gb, sq);
      std::memcpy(wp + i, wb, rest * sizeof(float));
      for (std::size_t k = 0; k < 3; ++k)
        if (slot[k]) std::memcpy(slot[k] + i, sb[k].data(), rest * sizeof(float));
    }
  });
}

}  // namespace

void optimizer_update(const OptimizerParams& p, std::int64_t n, float* w, const float* g, float* const slot[3]) {
  bool need[3];
  kernel::slots_needed(p, need);
  float* const used[3] = {need[0] ? slot[0] : nullptr, need[1] ? slot[1] : nullptr, need[2] ? slot[2] : nullptr};
  switch (p.rule) {
    case OptimizerRule::sgd: return fused<OptimizerRule::sgd>(p, n, w, g, used);
    case OptimizerRule::sgd_momentum: return fused<OptimizerRule::sgd_momentum>(p, n, w, g, used);
    case OptimizerRule::adam: return fused<OptimizerRule::adam>(p, n, w, g, used);
    case OptimizerRule::rmsprop: return fused<OptimizerRule::rmsprop>(p, n, w, g, used);
    case OptimizerRule::adagrad: return fused<OptimizerRule::adagrad>(p, n, w, g, used);
    case OptimizerRule::nadam: return fused<OptimizerRule::nadam>(p, n, w, g, used);
  }
}

}  // namespace keel::cpu
