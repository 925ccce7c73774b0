// softmax and log_softmax: forward from primitives (shifted by the max, so exp never
// overflows), recorded as one node each with the compact closed-form gradient.
#include "keel/ops/nn.hpp"

#include "autograd/record.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {
Tensor shifted(const Tensor& x, int axis) {
  Tensor m = reduce_max(x, {axis}, true);
  m = where(is_finite(m), m, zeros_like(m));
  return sub(x, m);
}
}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  detail::check_float(x, "softmax");
  const int a = detail::normalize_axis(axis, x.rank(), "softmax");
  Tensor y;
  {
    autograd::NoRecordScope no_record;
    const Tensor e = exp(shifted(x, a));
    y = div(e, reduce_sum(e, {a}, true));
  }
  if (autograd::recording())
    autograd::record("softmax", {x}, {y}, [y, a](const Grads& g, const Needs&) {
      // dx = y * (g - sum(g * y))
      return Grads{mul(y, sub(g[0], reduce_sum(mul(g[0], y), {a}, true)))};
    }, {y});
  return y;
}

Tensor log_softmax(const Tensor& x, int axis) {
  detail::check_float(x, "log_softmax");
  const int a = detail::normalize_axis(axis, x.rank(), "log_softmax");
  Tensor y;
  {
    autograd::NoRecordScope no_record;
    const Tensor s = shifted(x, a);
    y = sub(s, log(reduce_sum(exp(s), {a}, true)));
  }
  if (autograd::recording())
    autograd::record("log_softmax", {x}, {y}, [y, a](const Grads& g, const Needs&) {
      // dx = g - softmax(x) * sum(g)
      return Grads{sub(g[0], mul(exp(y), reduce_sum(g[0], {a}, true)))};
    }, {y});
  return y;
}

}  // namespace keel
