#include "cpu/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

// The rules' arithmetic on one float, in the order the rules write (no contraction is asked
// for, and the CUDA kernel rounds each operation on its own as well).
struct ScalarMath {
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static float div(float a, float b) { return a / b; }
  static float root(float a) { return std::sqrt(a); }
  // NaN propagates, as tf.maximum does.
  static float max(float a, float b) { return std::isnan(a) ? a : (std::isnan(b) ? b : (a >= b ? a : b)); }
  static float abs(float a) { return std::fabs(a); }
  // tf.sign: -1, 0 or 1, NaN for NaN.
  static float sign(float a) { return a > 0 ? 1.0f : (a < 0 ? -1.0f : a); }
};

// The rules without a SIMD kernel (Adamax, Adadelta, Lion): one element at a time, with
// StepContext's scaling, clamping and decay first, as the SIMD loop does them.
void scalar_update(const kernel::OptimizerParams& p, std::int64_t n, float* w, const float* g,
                   float* const slot[3]) {
  const bool do_scale = p.grad_scale != 1, do_clip = p.clipvalue > 0, do_decay = p.decay != 0;
  const float scale = static_cast<float>(p.grad_scale), hi = static_cast<float>(p.clipvalue), lo = -hi,
              decay = static_cast<float>(p.decay);
  const kernel::RuleConstants<float> c(p);
  const int parts = static_cast<int>(std::clamp<std::int64_t>(n / (std::int64_t{1} << 15), 1, parallel_threads()));
  parallel_ranges(n, parts, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      float gi = g[i];
      if (do_scale) gi *= scale;
      if (do_clip) gi = std::isnan(gi) ? gi : std::min(std::max(gi, lo), hi);
      float wi = w[i];
      if (do_decay) wi -= wi * decay;
      float s0 = slot[0] ? slot[0][i] : 0.0f, s1 = slot[1] ? slot[1][i] : 0.0f, s2 = slot[2] ? slot[2][i] : 0.0f;
      kernel::apply_rule<ScalarMath>(p, c, wi, gi, s0, s1, s2);
      w[i] = wi;
      if (slot[0]) slot[0][i] = s0;
      if (slot[1]) slot[1][i] = s1;
      if (slot[2]) slot[2][i] = s2;
    }
  });
}

}  // namespace

void optimizer_update(const kernel::OptimizerParams& p, std::int64_t n, float* w, const float* g, float* const slot[3]) {
  bool need[3];
  kernel::slots_needed(p, need);
  float* const used[3] = {need[0] ? slot[0] : nullptr, need[1] ? slot[1] : nullptr, need[2] ? slot[2] : nullptr};
  if (!kernel::rule_has_simd_kernel(p.rule)) return scalar_update(p, n, w, g, used);
  simd().optimizer_update(p, n, w, g, used);
}

}  // namespace keel::cpu
