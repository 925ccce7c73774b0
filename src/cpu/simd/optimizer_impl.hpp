#pragma once
// The fused float32 optimizer update (cpu/optimizer.hpp) written once against xsimd's batch
// type; each arch TU of src/cpu/simd/ instantiates it for its kernel table.
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "core/optimizer_rules.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu::simd_impl {

using kernel::OptimizerParams;
using kernel::OptimizerRule;

// The rules' arithmetic on batches (xsimd::sqrt, not std::sqrt, which must keep errno and would
// not vectorise).
template <class FB>
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
template <class A, OptimizerRule R>
void fused(const OptimizerParams& p, std::int64_t n, float* wp, const float* gp, float* const slot[3]) {
  using FB = xsimd::batch<float, A>;
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
    kernel::apply_rule<R, SimdMath<FB>>(p, c, wi, gi, si[0], si[1], si[2]);
    wi.store_unaligned(wq);
    for (std::size_t k = 0; k < 3; ++k)
      if (sq[k]) si[k].store_unaligned(sq[k]);
  };
  // Threads only for long weights: below 32K elements per thread the region costs more.
  const int parts = static_cast<int>(std::clamp<std::int64_t>(n / (std::int64_t{1} << 15), 1, parallel_threads()));
  parallel_ranges(n, parts, [&](std::int64_t b, std::int64_t e) {
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

template <class A>
void optimizer_update(const OptimizerParams& p, std::int64_t n, float* w, const float* g, float* const slot[3]) {
  switch (p.rule) {
    case OptimizerRule::sgd: return fused<A, OptimizerRule::sgd>(p, n, w, g, slot);
    case OptimizerRule::sgd_momentum: return fused<A, OptimizerRule::sgd_momentum>(p, n, w, g, slot);
    case OptimizerRule::adam: return fused<A, OptimizerRule::adam>(p, n, w, g, slot);
    case OptimizerRule::rmsprop: return fused<A, OptimizerRule::rmsprop>(p, n, w, g, slot);
    case OptimizerRule::adagrad: return fused<A, OptimizerRule::adagrad>(p, n, w, g, slot);
    case OptimizerRule::nadam: return fused<A, OptimizerRule::nadam>(p, n, w, g, slot);
    default: break;  // the other rules have no SIMD loop: cpu::optimizer_update runs them scalar
  }
}

}  // namespace keel::cpu::simd_impl
