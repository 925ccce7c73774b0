#pragma once
// The one device test of the backend layer, and the CPU's float32 route for the half types.
#include <initializer_list>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::backend {

inline bool on_cuda(const Tensor& t) { return t.device().is_cuda(); }

// A CPU operand in float32: t itself unless it is float16 or bfloat16 (then a widened contiguous
// copy; every half value is exact in float32).
Tensor widened(const Tensor& t);

// Runs `kernel(inputs..., out)` on the CPU with the half operands widened to float32 and a half
// output computed in float32 and rounded into `out` once, as a GPU kernel rounds its result.
// `kernel` takes the (possibly widened) inputs as a std::vector<Tensor> and the output.
template <class K>
void via_float32(std::initializer_list<const Tensor*> inputs, const Tensor& out, K&& kernel);

// The widened output: out itself, or a float32 tensor of its shape that round_into copies back.
Tensor widened_output(const Tensor& out);
void round_into(const Tensor& computed, const Tensor& out);

template <class K>
void via_float32(std::initializer_list<const Tensor*> inputs, const Tensor& out, K&& kernel) {
  std::vector<Tensor> wide;
  wide.reserve(inputs.size());
  for (const Tensor* t : inputs) wide.push_back(t->defined() ? widened(*t) : Tensor());
  const Tensor o = widened_output(out);
  kernel(wide, o);
  round_into(o, out);
}

}  // namespace keel::backend
