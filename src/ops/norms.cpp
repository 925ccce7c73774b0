// Norm-based rescaling as TensorFlow writes it (tf.math.l2_normalize, tf.clip_by_norm,
// tf.linalg.global_norm, tf.clip_by_global_norm), composed of differentiable ops so that the
// gradients are TensorFlow's too (including clip_by_norm's safe square root at zero).
#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/contraction.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel {

namespace {

void check_float(const Tensor& x, const char* op) {
  detail::check_defined(x, op);
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: needs a floating-point tensor, got {} of shape {}", op, name(x.dtype()),
                                 x.shape().to_string()));
}

}  // namespace

Tensor l2_normalize(const Tensor& x, std::vector<int> axes, double epsilon) {
  check_float(x, "l2_normalize");
  const Tensor square_sum = reduce_sum(square(x), std::move(axes), true);
  return mul(x, rsqrt(maximum(square_sum, epsilon)));
}

Tensor clip_by_norm(const Tensor& x, double clip_norm, std::vector<int> axes) {
  check_float(x, "clip_by_norm");
  if (!(clip_norm > 0))
    throw ValueError(fmt::format("clip_by_norm: clip_norm must be positive, got {}", clip_norm));
  const Tensor l2sum = reduce_sum(square(x), std::move(axes), true);
  // sqrt(0)'s gradient is infinite: take the root of 1 where the sum is 0 (TensorFlow's trick),
  // which leaves the value 0 and the gradient finite.
  const Tensor positive = greater(l2sum, zeros_like(l2sum));
  const Tensor l2norm = where(positive, sqrt(where(positive, l2sum, ones_like(l2sum))), l2sum);
  return div(mul(x, scalar_like(x, clip_norm)), maximum(l2norm, clip_norm));
}

Tensor global_norm(const std::vector<Tensor>& tensors) {
  Tensor total;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    check_float(t, "global_norm");
    Tensor s = reduce_sum(square(t));
    if (total.defined()) s = add(total, cast(s, total.dtype()));
    total = s;
  }
  if (!total.defined()) throw ValueError("global_norm: needs at least one defined tensor");
  return sqrt(total);
}

ClippedTensors clip_by_global_norm(const std::vector<Tensor>& tensors, double clip_norm) {
  if (!(clip_norm > 0))
    throw ValueError(fmt::format("clip_by_global_norm: clip_norm must be positive, got {}", clip_norm));
  ClippedTensors out;
  out.global_norm = global_norm(tensors);
  const Tensor& norm = out.global_norm;
  // clip_norm * min(1 / norm, 1 / clip_norm), plus (norm - norm): NaN when the norm is not finite.
  const Tensor scale = add(mul(scalar_like(norm, clip_norm), minimum(div(ones_like(norm), norm), 1.0 / clip_norm)),
                           sub(norm, norm));
  for (const Tensor& t : tensors) out.tensors.push_back(t.defined() ? mul(t, cast(scale, t.dtype())) : Tensor());
  return out;
}

}  // namespace keel
