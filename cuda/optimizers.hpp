#pragma once
// Fused optimizer updates on CUDA: one kernel launch updates one variable and its slots, where
// the update written with ops launches a dozen small kernels. Plain C++17 with no CUDA header:
// included by src/optimizers/optimizers.cpp (C++20) and cuda/optimizers.cu (nvcc). Builds
// without CUDA get stubs that throw DeviceError (src/backend/cuda_unavailable.cpp).
//
// The arithmetic is the CPU's, operation for operation and in the same order (the fused float32
// loop and the op-based rule of src/optimizers/optimizers.cpp), with no fused multiply-adds, so
// a float32 GPU update rounds as the CPU's does.
#include <cstdint>

#include "keel/core/dtype.hpp"

namespace keel::cuda {

// Which rule, and so which slots the update reads and writes (slot[k] below, in the order of
// each optimizer's slot_specs()).
enum class OptimizerRule : std::uint8_t {
  sgd,           // no slot:   w -= lr g
  sgd_momentum,  // slot[0] m: m = momentum m - lr g; w += m   (nesterov: w += momentum m - lr g)
  adam,          // slot[0] m, slot[1] v, slot[2] v_hat when amsgrad
  rmsprop,       // slot[0] velocity, slot[1] momentum (when has_momentum), slot[2] mean gradient
                 // (when centered): unused slots are nullptr
  adagrad,       // slot[0] accumulator
  nadam,         // slot[0] m, slot[1] v
};

// The per-step numbers of one update, computed on the host in double exactly as the CPU path
// computes them (each is rounded to the variable's dtype once, on the device). Fields a rule
// does not use are ignored.
struct OptimizerParams {
  OptimizerRule rule = OptimizerRule::sgd;
  bool nesterov = false;      // sgd_momentum
  bool amsgrad = false;       // adam
  bool has_momentum = false;  // rmsprop
  bool centered = false;      // rmsprop

  // StepContext: g = clamp(g * grad_scale, -clipvalue, clipvalue); w -= w * decay; each step
  // skipped when it is the identity (grad_scale 1, clipvalue 0, decay 0), as on the CPU.
  double grad_scale = 1;
  double clipvalue = 0;
  double decay = 0;

  double lr = 0;             // sgd, sgd_momentum, rmsprop, adagrad, nadam
  double momentum = 0;       // sgd_momentum, rmsprop
  double epsilon = 0;        // adam, rmsprop, adagrad, nadam
  double one_minus_b1 = 0;   // adam, nadam: 1 - beta_1
  double one_minus_b2 = 0;   // adam, nadam: 1 - beta_2
  double alpha = 0;          // adam: lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
  double rho = 0;            // rmsprop
  double one_minus_rho = 0;  // rmsprop
  double cm = 0;             // nadam: u_{t+1} / (1 - U_{t+1}), the momentum's weight in m_hat
  double cg = 0;             // nadam: (1 - u_t) / (1 - U_t), the gradient's weight in m_hat
  double cv = 0;             // nadam: 1 - beta_2^t
};

// Updates n elements in place: the weight w, the slots slot[0..2] (nullptr where the rule has
// none), from the gradient g. All are contiguous arrays of `dtype` (float32 or float64, else
// DTypeError) on cuda:`device`, and none overlaps another. Queued on the device's stream.
void optimizer_update(DType dtype, const OptimizerParams& params, std::int64_t n, void* w,
                      const void* g, void* const slot[3], int device);

}  // namespace keel::cuda
