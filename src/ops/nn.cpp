// softmax and log_softmax: forward from primitives (shifted by the max, so exp never
// overflows), over the last axis as one fused kernel of the same steps, recorded as one node
// each with the compact closed-form gradient.
#include "keel/ops/nn.hpp"

#include "autograd/record.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {
// x minus its max along `axis`, taken as it is, as TensorFlow's Softmax kernel shifts: a row
// with a NaN, a +inf or only -inf values becomes NaN (NaN - m, inf - inf), so softmax and
// log_softmax give NaN for the whole row, as tf.nn.softmax does. (reduce_logsumexp is
// different: TensorFlow defines it with a shift of 0 when the max is not finite.)
Tensor shifted(const Tensor& x, int axis) { return sub(x, reduce_max(x, {axis}, true)); }

// Over the last axis, on a device with the fused kernel, the same steps run a row at a time
// (backend::softmax); elsewhere the composite.
bool by_rows(const Tensor& x, int axis) {
  return axis == x.rank() - 1 && backend::has_fused(backend::Fused::softmax, x.device());
}
Tensor softmax_rows(const Tensor& x, bool log) {
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device(), log ? "log_softmax" : "softmax");
  backend::softmax(x.contiguous(), y, log);
  return y;
}
// The gradient the same way, where no tape records it (a recording tape needs the composite's ops).
bool grad_by_rows(const Tensor& y, const Tensor& g, int axis) {
  return !autograd::recording() && g.dtype() == y.dtype() && by_rows(y, axis);
}
Tensor softmax_rows_grad(const Tensor& y, const Tensor& g, bool log) {
  Tensor dx = detail::empty_tensor(y.shape(), y.dtype(), y.device(), log ? "log_softmax" : "softmax");
  backend::softmax_backward(y, g.contiguous(), dx, log);
  return dx;
}
}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  // Half-precision shim (until the kernel takes float16/bfloat16): float32 inside, rounded once.
  if (x.defined() && is_half(x.dtype())) return cast(softmax(cast(x, DType::float32), axis), x.dtype());
  detail::check_float(x, "softmax");
  const int a = detail::normalize_axis(axis, x.rank(), "softmax");
  if (x.size() == 0) return x;  // TensorFlow: an empty input gives an empty output
  Tensor y;
  detail::in_op("softmax", [&] {
    autograd::NoRecordScope no_record;
    if (by_rows(x, a)) {
      y = softmax_rows(x, false);
      return;
    }
    const Tensor e = exp(shifted(x, a));
    y = div(e, reduce_sum(e, {a}, true));
  });
  if (autograd::recording())
    autograd::record("softmax", {x}, {y}, [y, a](const Grads& g, const Needs&) {
      // dx = y * (g - sum(g * y))
      if (grad_by_rows(y, g[0], a)) return Grads{softmax_rows_grad(y, g[0], false)};
      return Grads{mul(y, sub(g[0], reduce_sum(mul(g[0], y), {a}, true)))};
    }, {y});
  return y;
}

Tensor log_softmax(const Tensor& x, int axis) {
  // Half-precision shim (until the kernel takes float16/bfloat16): float32 inside, rounded once.
  if (x.defined() && is_half(x.dtype())) return cast(log_softmax(cast(x, DType::float32), axis), x.dtype());
  detail::check_float(x, "log_softmax");
  const int a = detail::normalize_axis(axis, x.rank(), "log_softmax");
  if (x.size() == 0) return x;
  Tensor y;
  detail::in_op("log_softmax", [&] {
    autograd::NoRecordScope no_record;
    if (by_rows(x, a)) {
      y = softmax_rows(x, true);
      return;
    }
    const Tensor s = shifted(x, a);
    y = sub(s, log(reduce_sum(exp(s), {a}, true)));
  });
  if (autograd::recording())
    autograd::record("log_softmax", {x}, {y}, [y, a](const Grads& g, const Needs&) {
      // dx = g - softmax(x) * sum(g)
      if (grad_by_rows(y, g[0], a)) return Grads{softmax_rows_grad(y, g[0], true)};
      return Grads{sub(g[0], mul(exp(y), reduce_sum(g[0], {a}, true)))};
    }, {y});
  return y;
}

}  // namespace keel
