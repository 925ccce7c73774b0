#pragma once
// Keras 3's optimizer update rules, written once. Each rule is a template on the arithmetic M
// (add, sub, mul, div, root, max; abs and sign for adamax and lion), the value type V and the
// constant type S, and is instantiated
//   * for the CPU's fused float32 loop on SIMD batches (src/cpu/optimizer.cpp; a scalar loop
//     for the rules rule_has_simd_kernel says the SIMD table lacks),
//   * for the CUDA kernel on one element, with rounding intrinsics (cuda/optimizers.cu),
//   * for keel Tensors, the fallback for every other case (src/optimizers/optimizers.cpp).
// So every path computes the same operations in the same order. Plain C++17 with no
// dependencies: nvcc reads it too.
//
// The rule sees the gradient after StepContext's scaling, clamping and weight decay (each path
// applies those first) and updates the weight w and the slots s0, s1, s2 (OptimizerParams says
// which a rule uses: unused ones are not touched).
#include <cstdint>

#if defined(__CUDACC__)
#define KEEL_HOST_DEVICE __host__ __device__
#else
#define KEEL_HOST_DEVICE
#endif

namespace keel::kernel {

// Which rule, and so which slots the update reads and writes (in the order of each optimizer's
// slot_specs(), but for RMSprop, whose optional slots have fixed places here).
enum class OptimizerRule : std::uint8_t {
  sgd,           // no slot:   w -= lr g
  sgd_momentum,  // s0 m: m = momentum m - lr g; w += m   (nesterov: w += momentum m - lr g)
  adam,          // s0 m, s1 v, s2 v_hat when amsgrad
  rmsprop,       // s0 velocity, s1 momentum (when has_momentum), s2 mean gradient (when centered)
  adagrad,       // s0 accumulator
  nadam,         // s0 m, s1 v
  adamax,        // s0 m, s1 u (the infinity norm)
  adadelta,      // s0 accumulated_grad, s1 accumulated_delta_var
  lion,          // s0 m
};

// The rules after nadam need M::abs and M::sign, which the CPU's SIMD loop does not provide:
// cpu::optimizer_update runs them through its scalar loop.
KEEL_HOST_DEVICE constexpr bool rule_has_simd_kernel(OptimizerRule r) {
  return r == OptimizerRule::sgd || r == OptimizerRule::sgd_momentum || r == OptimizerRule::adam ||
         r == OptimizerRule::rmsprop || r == OptimizerRule::adagrad || r == OptimizerRule::nadam;
}

// The per-step numbers of one update, computed on the host in double (each path rounds them to
// its dtype once). Fields a rule does not use are ignored.
struct OptimizerParams {
  OptimizerRule rule = OptimizerRule::sgd;
  bool nesterov = false;      // sgd_momentum
  bool amsgrad = false;       // adam
  bool has_momentum = false;  // rmsprop
  bool centered = false;      // rmsprop

  // StepContext: g = clamp(g * grad_scale, -clipvalue, clipvalue); w -= w * decay; each step
  // skipped when it is the identity (grad_scale 1, clipvalue 0, decay 0).
  double grad_scale = 1;
  double clipvalue = 0;
  double decay = 0;

  double lr = 0;             // sgd, sgd_momentum, rmsprop, adagrad, nadam, adamax, adadelta, lion
  double momentum = 0;       // sgd_momentum, rmsprop
  double epsilon = 0;        // adam, rmsprop, adagrad, nadam, adamax, adadelta
  double one_minus_b1 = 0;   // adam, nadam, adamax, lion: 1 - beta_1
  double one_minus_b2 = 0;   // adam, nadam, lion: 1 - beta_2
  double b1 = 0;             // lion: beta_1
  double b2 = 0;             // adamax, lion: beta_2
  double alpha = 0;          // adam: lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
  double rho = 0;            // rmsprop, adadelta
  double one_minus_rho = 0;  // rmsprop, adadelta
  double cm = 0;             // nadam: u_{t+1} / (1 - U_{t+1}), the momentum's weight in m_hat
  double cg = 0;             // nadam: (1 - u_t) / (1 - U_t), the gradient's weight in m_hat
  double cv = 0;             // nadam: 1 - beta_2^t; adamax: 1 - beta_1^t
};

// Which of s0, s1, s2 the rule of p reads and writes.
KEEL_HOST_DEVICE inline void slots_needed(const OptimizerParams& p, bool need[3]) {
  need[0] = need[1] = need[2] = false;
  switch (p.rule) {
    case OptimizerRule::sgd: break;
    case OptimizerRule::sgd_momentum:
    case OptimizerRule::adagrad: need[0] = true; break;
    case OptimizerRule::adam:
      need[0] = need[1] = true;
      need[2] = p.amsgrad;
      break;
    case OptimizerRule::rmsprop:
      need[0] = true;
      need[1] = p.has_momentum;
      need[2] = p.centered;
      break;
    case OptimizerRule::nadam:
    case OptimizerRule::adamax:
    case OptimizerRule::adadelta: need[0] = need[1] = true; break;
    case OptimizerRule::lion: need[0] = true; break;
  }
}

// The hyper-parameters as the rule's constants: each rounded to Scalar once (float for the
// float32 loop, the variable's dtype on a GPU, double for the tensor rule, whose ops round
// them to the tensor's dtype), then made an S (a SIMD batch, or Scalar itself).
template <class S, class Scalar = S>
struct RuleConstants {
  S lr, momentum, eps, c1, c2, alpha, rho, crho, cm, cg, cv, b1, b2;
  KEEL_HOST_DEVICE explicit RuleConstants(const OptimizerParams& p)
      : lr(S(static_cast<Scalar>(p.lr))),
        momentum(S(static_cast<Scalar>(p.momentum))),
        eps(S(static_cast<Scalar>(p.epsilon))),
        c1(S(static_cast<Scalar>(p.one_minus_b1))),
        c2(S(static_cast<Scalar>(p.one_minus_b2))),
        alpha(S(static_cast<Scalar>(p.alpha))),
        rho(S(static_cast<Scalar>(p.rho))),
        crho(S(static_cast<Scalar>(p.one_minus_rho))),
        cm(S(static_cast<Scalar>(p.cm))),
        cg(S(static_cast<Scalar>(p.cg))),
        cv(S(static_cast<Scalar>(p.cv))),
        b1(S(static_cast<Scalar>(p.b1))),
        b2(S(static_cast<Scalar>(p.b2))) {}
};

// One update of rule R, with c a RuleConstants. The grouping of every expression is part of the rule: the CPU, the GPU
// and the tensor path round at the same places.
template <OptimizerRule R, class M, class V, class C>
KEEL_HOST_DEVICE inline void apply_rule(const OptimizerParams& p, const C& c, V& w, const V& g,
                                        V& s0, V& s1, V& s2) {
  if constexpr (R == OptimizerRule::sgd) {
    w = M::sub(w, M::mul(g, c.lr));
  } else if constexpr (R == OptimizerRule::sgd_momentum) {
    s0 = M::sub(M::mul(s0, c.momentum), M::mul(g, c.lr));
    w = p.nesterov ? M::add(w, M::sub(M::mul(s0, c.momentum), M::mul(g, c.lr))) : M::add(w, s0);
  } else if constexpr (R == OptimizerRule::adam) {
    s0 = M::add(s0, M::mul(M::sub(g, s0), c.c1));
    s1 = M::add(s1, M::mul(M::sub(M::mul(g, g), s1), c.c2));
    if (p.amsgrad) {
      s2 = M::max(s2, s1);
      w = M::sub(w, M::div(M::mul(s0, c.alpha), M::add(M::root(s2), c.eps)));
    } else {
      w = M::sub(w, M::div(M::mul(s0, c.alpha), M::add(M::root(s1), c.eps)));
    }
  } else if constexpr (R == OptimizerRule::rmsprop) {
    s0 = M::add(M::mul(c.rho, s0), M::mul(c.crho, M::mul(g, g)));
    V denom;
    if (p.centered) {
      s2 = M::add(M::mul(c.rho, s2), M::mul(c.crho, g));
      denom = M::add(M::sub(s0, M::mul(s2, s2)), c.eps);
    } else {
      denom = M::add(s0, c.eps);
    }
    const V increment = M::div(M::mul(c.lr, g), M::root(denom));
    if (p.has_momentum) {
      s1 = M::add(M::mul(c.momentum, s1), increment);
      w = M::sub(w, s1);
    } else {
      w = M::sub(w, increment);
    }
  } else if constexpr (R == OptimizerRule::adagrad) {
    s0 = M::add(s0, M::mul(g, g));
    w = M::sub(w, M::div(M::mul(c.lr, g), M::root(M::add(s0, c.eps))));
  } else if constexpr (R == OptimizerRule::nadam) {
    s0 = M::add(s0, M::mul(M::sub(g, s0), c.c1));
    s1 = M::add(s1, M::mul(M::sub(M::mul(g, g), s1), c.c2));
    const V m_hat = M::add(M::mul(c.cm, s0), M::mul(c.cg, g));
    const V v_hat = M::div(s1, c.cv);
    w = M::sub(w, M::div(M::mul(m_hat, c.lr), M::add(M::root(v_hat), c.eps)));
  } else if constexpr (R == OptimizerRule::adamax) {
    // m += (g - m)(1 - b1); u = max(b2 u, |g|); w -= (lr m) / ((1 - b1^t)(u + eps))
    s0 = M::add(s0, M::mul(M::sub(g, s0), c.c1));
    s1 = M::max(M::mul(c.b2, s1), M::abs(g));
    w = M::sub(w, M::div(M::mul(c.lr, s0), M::mul(c.cv, M::add(s1, c.eps))));
  } else if constexpr (R == OptimizerRule::adadelta) {
    // a = rho a + (1 - rho) g^2; d = sqrt(D + eps) g / sqrt(a + eps) (Keras' delta_var is -d);
    // D = rho D + (1 - rho) d^2; w -= lr d
    s0 = M::add(M::mul(c.rho, s0), M::mul(c.crho, M::mul(g, g)));
    const V d = M::div(M::mul(M::root(M::add(s1, c.eps)), g), M::root(M::add(s0, c.eps)));
    s1 = M::add(M::mul(c.rho, s1), M::mul(c.crho, M::mul(d, d)));
    w = M::sub(w, M::mul(c.lr, d));
  } else if constexpr (R == OptimizerRule::lion) {
    // w -= lr sign(m b1 + g (1 - b1)); m = m b2 + g (1 - b2)
    w = M::sub(w, M::mul(c.lr, M::sign(M::add(M::mul(s0, c.b1), M::mul(g, c.c1)))));
    s0 = M::add(M::mul(s0, c.b2), M::mul(g, c.c2));
  }
}

// apply_rule for the rule p.rule names.
template <class M, class V, class C>
KEEL_HOST_DEVICE inline void apply_rule(const OptimizerParams& p, const C& c, V& w, const V& g,
                                        V& s0, V& s1, V& s2) {
  switch (p.rule) {
    case OptimizerRule::sgd: return apply_rule<OptimizerRule::sgd, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::sgd_momentum: return apply_rule<OptimizerRule::sgd_momentum, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::adam: return apply_rule<OptimizerRule::adam, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::rmsprop: return apply_rule<OptimizerRule::rmsprop, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::adagrad: return apply_rule<OptimizerRule::adagrad, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::nadam: return apply_rule<OptimizerRule::nadam, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::adamax: return apply_rule<OptimizerRule::adamax, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::adadelta: return apply_rule<OptimizerRule::adadelta, M>(p, c, w, g, s0, s1, s2);
    case OptimizerRule::lion: return apply_rule<OptimizerRule::lion, M>(p, c, w, g, s0, s1, s2);
  }
}

}  // namespace keel::kernel
