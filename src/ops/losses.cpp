// Embedding lookup, the fused cross-entropies and the per-example Keras losses.
//
// The three cross-entropies with logits are fused ops where the device has their kernels
// (backend/fused.hpp; src/cpu/cross_entropy.cpp): a numerically stable forward (the log-sum-exp
// shifted by the row max, so exp never overflows and nothing cancels to Inf - Inf) recorded as
// ONE node with the closed-form gradient, written with differentiable ops (softmax, sigmoid) so
// that an outer tape can differentiate the gradient again.
//
// The losses:: functions are composites, following Keras 3's definitions line by line; their
// gradients come from the ops they are made of.
#include "keel/ops/nn.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/recorder.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

void check_same_shape(const Tensor& labels, const Tensor& logits, const char* op, const char* a,
                      const char* b) {
  if (labels.shape() != logits.shape())
    throw ShapeError(fmt::format("{}: {} and {} must have the same shape, got {} and {}", op, a, b,
                                 labels.shape().to_string(), logits.shape().to_string()));
}

void check_index_dtype(const Tensor& t, const char* op, const char* what) {
  detail::check_defined(t, op, what);
  if (t.dtype() != DType::int32 && t.dtype() != DType::int64)
    throw DTypeError(fmt::format("{}: {} must be int32 or int64, got {} {}", op, what, name(t.dtype()),
                                 t.shape().to_string()));
}

// Class ids must lie in [0, classes): ValueError naming the label, where it is, and the count.
void check_labels(const std::vector<std::int64_t>& ids, std::int64_t classes, const char* op) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= classes)
      throw ValueError(fmt::format("{}: label {} at position {} is outside [0, {}) (the number of classes is {})",
                                   op, ids[i], i, classes, classes));
}

// Moves `axis` to the end (the others keep their order), as a contiguous tensor.
Tensor axis_last(const Tensor& x, int axis) {
  if (axis == x.rank() - 1) return x.contiguous();
  std::vector<int> perm;
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  autograd::NoRecordScope no_record;  // a step of the forward, not an op of its own
  return transpose(x, perm).contiguous();
}

}  // namespace

// ---- embeddings ------------------------------------------------------------------------------------

Tensor embedding_lookup(const Tensor& params, const Tensor& ids) {
  constexpr const char* op = "embedding_lookup";
  detail::check_defined(params, op);
  check_index_dtype(ids, op, "ids");
  if (params.rank() < 1)
    throw ShapeError(fmt::format("embedding_lookup: params must have rank >= 1, got shape {}",
                                 params.shape().to_string()));
  const std::int64_t rows = params.shape()[0];
  // A host step: a traced function checks the ids of every call, as eager does.
  backend::host_step("CheckIds", {&ids}, [rows, pshape = params.shape()](const Tensor* t) {
    const std::vector<std::int64_t> v = backend::read_indices(t[0], "embedding_lookup");
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] < 0 || v[i] >= rows)
        throw ValueError(fmt::format("embedding_lookup: id {} at position {} is outside [0, {}) (params {})", v[i],
                                     i, rows, pshape.to_string()));
  });
  // gather's gradient scatters with unsorted_segment_sum, which adds up repeated ids.
  return gather(params, ids, 0);
}

// ---- fused cross-entropies ------------------------------------------------------------------------

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits, int axis) {
  constexpr const char* op = "softmax_cross_entropy_with_logits";
  detail::check_float(logits, op, "logits");
  detail::check_float(labels, op, "labels");
  detail::check_same_dtype(labels, logits, op);
  check_same_shape(labels, logits, op, "labels", "logits");
  detail::check_same_device(labels, logits, op);
  if (!backend::has_fused(backend::Fused::softmax_cross_entropy, logits.device())) {
    // Composite where there is no fused kernel (the GPU): logsumexp(x) - sum(z * x), stable
    // through reduce_logsumexp's shift.
    return sub(reduce_logsumexp(logits, {axis}), reduce_sum(mul(labels, logits), {axis}));
  }
  const int a = detail::normalize_axis(axis, logits.rank(), op);

  // loss = sum_j labels_j * (lse - logits_j) per row, rows along `axis`.
  const Tensor lg = axis_last(logits, a);
  const Tensor lb = axis_last(labels, a);
  std::vector<std::int64_t> out_dims(lg.shape().dims().begin(), lg.shape().dims().end() - 1);
  Tensor loss = detail::empty_tensor(Shape(out_dims), logits.dtype(), logits.device());
  backend::softmax_cross_entropy(lb, lg, loss);

  if (autograd::recording())
    autograd::record(op, {labels, logits}, {loss}, [labels, logits, a](const Grads& g, const Needs& n) {
      const Tensor ge = expand_dims(g[0], a);
      Grads out(2);
      // d/dlogits = softmax(logits) * sum(labels) - labels (softmax - labels for labels that
      // sum to one); d/dlabels = -log_softmax(logits).
      if (n[1] && !autograd::recording() && a == logits.rank() - 1) {
        // Without an outer tape (which must see how it depends on the inputs) and along the
        // last axis: the same bits in one fused pass.
        out[1] = detail::empty_tensor(logits.shape(), logits.dtype(), logits.device());
        backend::softmax_cross_entropy_backward(labels.contiguous(), logits.contiguous(), g[0].contiguous(), out[1]);
      } else if (n[1]) {
        out[1] = mul(ge, sub(mul(softmax(logits, a), reduce_sum(labels, {a}, true)), labels));
      }
      if (n[0]) out[0] = neg(mul(ge, log_softmax(logits, a)));
      return out;
    }, {labels, logits});
  return loss;
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* op = "sparse_softmax_cross_entropy_with_logits";
  detail::check_float(logits, op, "logits");
  check_index_dtype(labels, op, "labels");
  detail::check_same_device(labels, logits, op);
  if (!backend::has_fused(backend::Fused::sparse_softmax_cross_entropy, logits.device()))
    // On the host (through the differentiable Tensor::to, so the gradient reaches the GPU logits).
    return sparse_softmax_cross_entropy_with_logits(labels.to(Device::cpu()), logits.to(Device::cpu()))
        .to(logits.device());
  if (logits.rank() < 1)
    throw ShapeError(fmt::format("{}: logits must have rank >= 1 (a class axis), got shape {}", op,
                                 logits.shape().to_string()));
  const std::vector<std::int64_t> class_dims(logits.shape().dims().begin(), logits.shape().dims().end() - 1);
  if (labels.shape() != Shape(class_dims))
    throw ShapeError(fmt::format("{}: labels must have logits' shape without the last axis: labels {}, logits {}",
                                 op, labels.shape().to_string(), logits.shape().to_string()));
  const std::int64_t k = logits.shape()[logits.rank() - 1];
  backend::host_step("CheckLabels", {&labels}, [k, op](const Tensor* t) { check_labels(backend::read_indices(t[0], op), k, op); });

  Tensor loss = detail::empty_tensor(labels.shape(), logits.dtype(), logits.device());
  backend::sparse_softmax_cross_entropy(labels.contiguous(), logits.contiguous(), loss);

  if (autograd::recording())
    autograd::record(op, {labels, logits}, {loss}, [labels, logits, k](const Grads& g, const Needs& n) {
      if (!n[1]) return Grads{Tensor(), Tensor()};
      // d/dlogits = softmax(logits) - one_hot(labels); labels are integers: no gradient. Without
      // an outer tape, the same bits in one fused pass.
      if (!autograd::recording()) {
        Tensor dx = detail::empty_tensor(logits.shape(), logits.dtype(), logits.device());
        backend::softmax_cross_entropy_backward(labels.contiguous(), logits.contiguous(), g[0].contiguous(), dx);
        return Grads{Tensor(), dx};
      }
      const Tensor target = one_hot(labels, static_cast<int>(k), 1, 0, logits.dtype());
      return Grads{Tensor(), mul(expand_dims(g[0], -1), sub(softmax(logits, -1), target))};
    }, {logits});
  return loss;
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  constexpr const char* op = "sigmoid_cross_entropy_with_logits";
  detail::check_float(logits, op, "logits");
  detail::check_float(labels, op, "labels");
  detail::check_same_dtype(labels, logits, op);
  detail::check_same_device(labels, logits, op);
  check_same_shape(labels, logits, op, "labels", "logits");
  if (!backend::has_fused(backend::Fused::sigmoid_cross_entropy, logits.device())) {
    // Composite where there is no fused kernel (the GPU), TensorFlow's stable form:
    // max(x, 0) - x z + log1p(exp(-|x|)).
    const Tensor zero = scalar_like(logits, 0.0);
    return add(sub(maximum(logits, zero), mul(logits, labels)), log1p(exp(neg(abs(logits)))));
  }

  Tensor loss = detail::empty_tensor(logits.shape(), logits.dtype(), logits.device());
  backend::sigmoid_cross_entropy(labels.contiguous(), logits.contiguous(), loss);

  if (autograd::recording())
    autograd::record(op, {labels, logits}, {loss}, [labels, logits](const Grads& g, const Needs& n) {
      Grads out(2);
      if (n[1]) out[1] = mul(g[0], sub(sigmoid(logits), labels));  // sigmoid(x) - z
      if (n[0]) out[0] = neg(mul(g[0], logits));                    // -x
      return out;
    }, {labels, logits});
  return loss;
}

// ---- per-example losses (Keras 3) ------------------------------------------------------------------

namespace losses {

namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

Tensor c(const Tensor& like, double v) { return scalar_like(like, v); }

// y_pred must be floating point; y_true is converted to its dtype, as Keras'
// convert_to_tensor(y_true, dtype=y_pred.dtype).
Tensor true_as_pred(const Tensor& y_true, const Tensor& y_pred, const char* op) {
  detail::check_float(y_pred, op, "y_pred");
  detail::check_defined(y_true, op);
  return cast(y_true, y_pred.dtype());
}

// Keras' squeeze_or_expand_to_same_rank: when the ranks differ by one and the larger has a last
// axis of 1, that axis is squeezed (or, if the smaller is rank 1, one is added to it).
void same_rank(Tensor& a, Tensor& b) {
  auto fix = [](Tensor& big, Tensor& small) {
    if (big.rank() != small.rank() + 1 || big.shape()[big.rank() - 1] != 1) return;
    if (small.rank() == 1)
      small = expand_dims(small, -1);
    else
      big = squeeze(big, {-1});
  };
  if (a.rank() == b.rank()) return;
  fix(a, b);
  fix(b, a);
}

void require_same_shape(const Tensor& y_true, const Tensor& y_pred, const char* op) {
  check_same_shape(y_true, y_pred, op, "y_true", "y_pred");
}

}  // namespace

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("mean_squared_error", [&] {
    Tensor t = true_as_pred(y_true, y_pred, "mean_squared_error"), p = y_pred;
    same_rank(t, p);
    return reduce_mean(square(sub(t, p)), {-1});
  });
}

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("mean_absolute_error", [&] {
    Tensor t = true_as_pred(y_true, y_pred, "mean_absolute_error"), p = y_pred;
    same_rank(t, p);
    return reduce_mean(abs(sub(t, p)), {-1});
  });
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta) {
  if (!std::isfinite(delta) || delta < 0)
    throw ValueError(fmt::format("huber: delta must be finite and >= 0, got {}", delta));
  return detail::in_op("huber", [&] {
    Tensor t = true_as_pred(y_true, y_pred, "huber"), p = y_pred;
    same_rank(t, p);
    const Tensor error = sub(p, t);
    const Tensor abs_error = abs(error);
    // 0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2 (the two meet with equal slope).
    const Tensor quadratic = mul(c(error, 0.5), square(error));
    const Tensor linear = sub(mul(c(error, delta), abs_error), c(error, 0.5 * delta * delta));
    return reduce_mean(where(less_equal(abs_error, c(abs_error, delta)), quadratic, linear), {-1});
  });
}

Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits,
                                       int axis) {
  constexpr const char* op = "sparse_categorical_crossentropy";
  detail::check_float(y_pred, op, "y_pred");
  detail::check_defined(y_true, op);
  if (y_pred.rank() < 1)
    throw ShapeError(fmt::format("{}: y_pred must have rank >= 1, got shape {}", op, y_pred.shape().to_string()));
  if (detail::normalize_axis(axis, y_pred.rank(), op) != y_pred.rank() - 1)
    throw ValueError(fmt::format("{}: only axis = -1 is supported, got axis {}", op, axis));
  // Keras casts the labels to int64 (a float label 2.0 is class 2) and drops a trailing axis of 1.
  Tensor labels = y_true.dtype() == DType::int32 || y_true.dtype() == DType::int64 ? y_true : cast(y_true, DType::int64);
  if (labels.rank() == y_pred.rank() && labels.rank() > 0 && labels.shape()[labels.rank() - 1] == 1)
    labels = squeeze(labels, {-1});
  if (from_logits) return sparse_softmax_cross_entropy_with_logits(labels, y_pred);

  const std::vector<std::int64_t> class_dims(y_pred.shape().dims().begin(), y_pred.shape().dims().end() - 1);
  if (labels.shape() != Shape(class_dims))
    throw ShapeError(fmt::format("{}: y_true must have y_pred's shape without the last axis: y_true {}, y_pred {}",
                                 op, y_true.shape().to_string(), y_pred.shape().to_string()));
  const std::int64_t k = y_pred.shape()[y_pred.rank() - 1];
  backend::host_step("CheckLabels", {&labels}, [k, op](const Tensor* t) { check_labels(backend::read_indices(t[0], op), k, op); });
  // Probabilities, as Keras 3 (jax, torch and numpy backends): normalised by their sum,
  // clipped to [eps, 1 - eps], then -log p[label].
  Tensor prob = div(y_pred, reduce_sum(y_pred, {-1}, true));
  prob = clip_by_value(prob, kEpsilon, 1 - kEpsilon);
  const Tensor target = one_hot(labels, static_cast<int>(k), 1, 0, y_pred.dtype());
  return neg(reduce_sum(mul(target, log(prob)), {-1}));
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits,
                                double label_smoothing, int axis) {
  constexpr const char* op = "categorical_crossentropy";
  Tensor t = true_as_pred(y_true, y_pred, op);
  require_same_shape(t, y_pred, op);
  if (y_pred.rank() < 1)
    throw ShapeError(fmt::format("{}: y_true and y_pred must have rank >= 1, got shape {}", op,
                                 y_pred.shape().to_string()));
  const int a = detail::normalize_axis(axis, y_pred.rank(), op);
  if (label_smoothing != 0) {
    // The classes lie along `axis` (current Keras; older versions counted the last axis).
    const auto classes = static_cast<double>(t.shape()[a]);
    t = add(mul(t, c(t, 1 - label_smoothing)), c(t, label_smoothing / classes));
  }
  if (from_logits) return softmax_cross_entropy_with_logits(t, y_pred, a);
  Tensor prob = div(y_pred, reduce_sum(y_pred, {a}, true));  // each row sums to one
  prob = clip_by_value(prob, kEpsilon, 1 - kEpsilon);
  return neg(reduce_sum(mul(t, log(prob)), {a}));
}

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits,
                           double label_smoothing, int axis) {
  constexpr const char* op = "binary_crossentropy";
  Tensor t = true_as_pred(y_true, y_pred, op);
  require_same_shape(t, y_pred, op);
  if (label_smoothing != 0)  // towards 0.5
    t = add(mul(t, c(t, 1 - label_smoothing)), c(t, 0.5 * label_smoothing));
  Tensor per_element;
  if (from_logits) {
    per_element = sigmoid_cross_entropy_with_logits(t, y_pred);
  } else {
    const Tensor prob = clip_by_value(y_pred, kEpsilon, 1 - kEpsilon);
    // -(y log p + (1 - y) log(1 - p))
    per_element = neg(add(mul(t, log(prob)), mul(sub(c(t, 1), t), log(sub(c(prob, 1), prob)))));
  }
  return reduce_mean(per_element, {axis});
}

Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred) {
  const Tensor t = clip_by_value(true_as_pred(y_true, y_pred, "kl_divergence"), kEpsilon, 1);
  const Tensor p = clip_by_value(y_pred, kEpsilon, 1);
  return reduce_sum(mul(t, log(div(t, p))), {-1});
}

}  // namespace losses

}  // namespace keel
