// Sampling ops built on the uniform draws: categorical (Gumbel-max) and shuffle. Both draw
// from the current random stream (the global generator or a GeneratorScope's), so a seed gives
// the same samples on every device and thread count.
#include <algorithm>
#include <numeric>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel::random {

Tensor categorical(const Tensor& logits, std::int64_t num_samples, DType dtype) {
  detail::check_defined(logits, "random.categorical");
  if (logits.rank() != 2)
    throw ShapeError(fmt::format("random.categorical: logits must be [batch, classes], got shape {}",
                                 logits.shape().to_string()));
  if (!is_floating(logits.dtype()))
    throw DTypeError(fmt::format("random.categorical: logits must be floating point, got {}", name(logits.dtype())));
  if (dtype != DType::int64 && dtype != DType::int32)
    throw DTypeError(fmt::format("random.categorical: dtype must be int64 or int32, got {}", name(dtype)));
  if (num_samples < 0)
    throw ValueError(fmt::format("random.categorical: num_samples must be >= 0, got {}", num_samples));
  const std::int64_t batch = logits.shape()[0], classes = logits.shape()[1];
  if (classes == 0 && batch > 0 && num_samples > 0)
    throw ValueError("random.categorical: logits have no classes to draw from");
  if (batch == 0 || num_samples == 0 || classes == 0) return zeros({batch, num_samples}, dtype);
  // argmax_c(logit_c + G_c) with G = -log(-log U) standard Gumbel is a draw from softmax(logits).
  // Computed in float64 so that float32 rounding of U near 1 does not bias the tail.
  const Tensor u = uniform({batch, num_samples, classes}, 0, 1, DType::float64);
  const Tensor gumbel = neg(log(neg(log(u))));
  const Tensor scores = add(expand_dims(cast(stop_gradient(logits), DType::float64), 1), gumbel);
  return cast(argmax(scores, -1), dtype);
}

Tensor shuffle(const Tensor& x) {
  detail::check_defined(x, "random.shuffle");
  if (x.rank() == 0 || x.shape()[0] <= 1) return x;  // one order only
  const std::int64_t n = x.shape()[0];
  // The permutation sorts n uniform keys (ties, which have probability ~n^2 / 2^53, keep the
  // lower index first).
  const std::vector<double> keys = uniform({n}, 0, 1, DType::float64).to_vector<double>();
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) {
    return keys[static_cast<std::size_t>(a)] < keys[static_cast<std::size_t>(b)];
  });
  return gather(x, constant(perm));
}

}  // namespace keel::random
