// Fused optimizer updates (cuda/optimizers.hpp): one grid-stride kernel per dtype that reads each
// element of the gradient, weight and slots once and writes the weight and slots back, with the
// rule chosen by a switch (uniform across the grid, so it costs a few instructions and keeps the
// number of template instances to two).
//
// Every product, quotient, sum and square root goes through the _rn intrinsics: nvcc would
// otherwise contract a * b + c into a fused multiply-add, which rounds once where the CPU rounds
// twice, and a float32 update would drift from the CPU's by an ulp here and there. The order of
// the operations is the CPU's (one rule for both: core/optimizer_rules.hpp), so float32 and float64 updates
// give the CPU's bits for finite data.
//
// maximum and minimum propagate NaN as the ops do (tf.maximum): a NaN gradient stays NaN through
// clipvalue rather than becoming a finite bound.
#include <cstdint>
#include <string>

#include "cuda/optimizers.hpp"
#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda {

namespace {

// ---- arithmetic without contraction --------------------------------------------------------------

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float root(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double root(double a) { return __dsqrt_rn(a); }

template <class T>
__device__ __forceinline__ T nan_max(T u, T v) {
  return u != u ? u : (v != v ? v : (u >= v ? u : v));
}
template <class T>
__device__ __forceinline__ T nan_min(T u, T v) {
  return u != u ? u : (v != v ? v : (u <= v ? u : v));
}

// ---- the kernel -----------------------------------------------------------------------------------

// StepContext's numbers rounded to T once, as the CPU rounds them to float (or keeps them
// double) before its loop; the rule's own constants are kernel::RuleConstants.
template <class T>
struct Constants {
  T scale, lo, hi, decay;
  bool do_scale, do_clip, do_decay;

  __device__ explicit Constants(const OptimizerParams& p)
      : scale(static_cast<T>(p.grad_scale)),
        lo(-static_cast<T>(p.clipvalue)),
        hi(static_cast<T>(p.clipvalue)),
        decay(static_cast<T>(p.decay)),
        // The CPU tests these in double on the unrounded values.
        do_scale(p.grad_scale != 1),
        do_clip(p.clipvalue > 0),
        do_decay(p.decay != 0) {}
};

// The rules' arithmetic (core/optimizer_rules.hpp), rounded as the CPU rounds: no contraction.
struct RoundedMath {
  template <class T> __device__ static T add(T a, T b) { return keel::cuda::add(a, b); }
  template <class T> __device__ static T sub(T a, T b) { return keel::cuda::sub(a, b); }
  template <class T> __device__ static T mul(T a, T b) { return keel::cuda::mul(a, b); }
  template <class T> __device__ static T div(T a, T b) { return keel::cuda::div(a, b); }
  template <class T> __device__ static T root(T a) { return keel::cuda::root(a); }
  template <class T> __device__ static T max(T a, T b) { return nan_max(a, b); }
  template <class T> __device__ static T abs(T a) { return a < T(0) ? -a : a; }  // NaN stays NaN
  // tf.sign: -1, 0 or 1, NaN for NaN.
  template <class T> __device__ static T sign(T a) { return a > T(0) ? T(1) : (a < T(0) ? T(-1) : a); }
};

template <class T>
__global__ void optimizer_kernel(OptimizerParams p, std::int64_t n, T* __restrict__ w, const T* __restrict__ grad,
                                 T* __restrict__ s0, T* __restrict__ s1, T* __restrict__ s2) {
  const Constants<T> c(p);
  const kernel::RuleConstants<T> rule(p);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    // StepContext first: the gradient scaled and clamped, the weight decayed (prepare_gradient).
    T g = grad[i];
    if (c.do_scale) g = mul(g, c.scale);
    if (c.do_clip) g = nan_min(nan_max(g, c.lo), c.hi);
    T wi = w[i];
    if (c.do_decay) wi = sub(wi, mul(wi, c.decay));

    T m0 = s0 ? s0[i] : T(0), m1 = s1 ? s1[i] : T(0), m2 = s2 ? s2[i] : T(0);
    kernel::apply_rule<RoundedMath>(p, rule, wi, g, m0, m1, m2);
    if (s0) s0[i] = m0;
    if (s1) s1[i] = m1;
    if (s2) s2[i] = m2;
    w[i] = wi;
  }
}

// ---- host side ------------------------------------------------------------------------------------

const char* rule_name(const OptimizerParams& p) {
  switch (p.rule) {
    case OptimizerRule::sgd: return "SGD update";
    case OptimizerRule::sgd_momentum: return p.nesterov ? "SGD (nesterov) update" : "SGD (momentum) update";
    case OptimizerRule::adam: return p.amsgrad ? "Adam (amsgrad) update" : "Adam update";
    case OptimizerRule::rmsprop: return "RMSprop update";
    case OptimizerRule::adagrad: return "Adagrad update";
    case OptimizerRule::nadam: return "Nadam update";
    case OptimizerRule::adamax: return "Adamax update";
    case OptimizerRule::adadelta: return "Adadelta update";
    case OptimizerRule::lion: return "Lion update";
  }
  return "optimizer update";
}

template <class T>
void launch(const OptimizerParams& p, std::int64_t n, void* w, const void* g, void* const slot[3], int device) {
  optimizer_kernel<T><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
      p, n, static_cast<T*>(w), static_cast<const T*>(g), static_cast<T*>(slot[0]), static_cast<T*>(slot[1]),
      static_cast<T*>(slot[2]));
}

}  // namespace

void optimizer_update(DType dtype, const OptimizerParams& params, std::int64_t n, void* w, const void* g,
                      void* const slot[3], int device) {
  const char* what = rule_name(params);
  if (dtype != DType::float32 && dtype != DType::float64)
    throw DTypeError(std::string(what) + ": unsupported dtype " + std::string(name(dtype)) +
                     " on cuda:" + std::to_string(device) + " (expected float32 or float64)");
  if (n < 0) throw ValueError(std::string(what) + ": negative element count " + std::to_string(n));
  if (n == 0) return;
  bool need[3];
  kernel::slots_needed(params, need);
  if (w == nullptr || g == nullptr)
    throw ValueError(std::string(what) + ": null weight or gradient on cuda:" + std::to_string(device));
  for (int k = 0; k < 3; ++k)
    if (need[k] && slot[k] == nullptr)
      throw ValueError(std::string(what) + ": slot " + std::to_string(k) + " is missing on cuda:" +
                       std::to_string(device));
  // Slots the rule does not use are passed as null so that a stray read faults loudly.
  void* const used[3] = {need[0] ? slot[0] : nullptr, need[1] ? slot[1] : nullptr, need[2] ? slot[2] : nullptr};
  use_device(device);
  if (dtype == DType::float32) launch<float>(params, n, w, g, used, device);
  else launch<double>(params, n, w, g, used, device);
  check_launch(what, device);
}

}  // namespace keel::cuda
