// Keras 3's per-example losses beyond the basic ones of src/ops/losses.cpp: hinge family,
// log-cosh, Poisson, cosine similarity, MSLE, MAPE, the focal crossentropies, Dice and Tversky.
//
// Each is composed of differentiable ops, so its gradient is the ops' (TensorFlow's, as Keras on
// TensorFlow differentiates the same expressions); the formulas are Keras 3's
// (keras/src/losses/losses.py), written beside each function. y_pred must be floating point;
// y_true is cast to its dtype (Keras' convert_to_tensor(y_true, dtype=y_pred.dtype)).
#include "keel/losses/loss.hpp"

#include <cmath>
#include <string>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "keel/ops/contraction.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel::losses {

namespace {

constexpr double kBackendEpsilon = 1e-7;  // keras.backend.epsilon()

// y_true as y_pred's dtype, both brought to the same rank (squeeze_or_expand_to_same_rank), and
// then required to have the same shape: Keras would broadcast [N, 1] against [N], which turns
// a per-example loss into an N x N one, a silent wrong answer.
std::pair<Tensor, Tensor> prepare(const Tensor& y_true, const Tensor& y_pred, const char* op) {
  detail::check_defined(y_true, op, "y_true");
  detail::check_defined(y_pred, op, "y_pred");
  detail::check_float(y_pred, op, "y_pred");
  auto [t, p] = squeeze_or_expand_to_same_rank(cast(y_true, y_pred.dtype()), y_pred);
  if (t.shape() != p.shape())
    throw ShapeError(fmt::format("{}: y_true and y_pred must have the same shape, got {} and {}", op,
                                 y_true.shape().to_string(), y_pred.shape().to_string()));
  return {t, p};
}

// One axis of x, checked (a rank-0 input has none to reduce: Keras would fail as well).
int one_axis(const Tensor& x, int axis, const char* op) {
  if (x.rank() == 0) throw ShapeError(fmt::format("{}: expected inputs of rank >= 1, got a scalar", op));
  return detail::normalize_axis(axis, x.rank(), op);
}

// Keras' convert_binary_labels_to_hinge: labels that are all 0 or 1 become -1 / 1 (2y - 1);
// any other labels (already -1 / 1) stay. Decided over the whole tensor, as Keras' ops.cond.
Tensor hinge_labels(const Tensor& t) {
  if (t.size() == 0) return t;
  const bool binary =
      reduce_all(logical_or(equal(t, scalar_like(t, 0)), equal(t, scalar_like(t, 1)))).item<bool>();
  return binary ? sub(mul(t, scalar_like(t, 2)), scalar_like(t, 1)) : t;
}

void check_range(double v, double lo, double hi, const char* op, const char* what) {
  if (!(v >= lo && v <= hi))
    throw ValueError(fmt::format("{}: `{}` must be in [{}, {}], got {}", op, what, lo, hi, v));
}

}  // namespace

Tensor hinge(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("hinge", [&] {
    auto [t, p] = prepare(y_true, y_pred, "hinge");
    one_axis(p, -1, "hinge");
    // mean(maximum(1 - y p, 0), axis=-1)
    return reduce_mean(maximum(sub(scalar_like(p, 1), mul(hinge_labels(t), p)), 0.0), {-1});
  });
}

Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("squared_hinge", [&] {
    auto [t, p] = prepare(y_true, y_pred, "squared_hinge");
    one_axis(p, -1, "squared_hinge");
    // mean(square(maximum(1 - y p, 0)), axis=-1)
    return reduce_mean(square(maximum(sub(scalar_like(p, 1), mul(hinge_labels(t), p)), 0.0)), {-1});
  });
}

Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("categorical_hinge", [&] {
    auto [t, p] = prepare(y_true, y_pred, "categorical_hinge");
    one_axis(p, -1, "categorical_hinge");
    if (p.shape()[p.rank() - 1] == 0)
      throw ShapeError(fmt::format("categorical_hinge: the class axis of y_pred {} is empty (max of nothing)",
                                   p.shape().to_string()));
    // pos = sum(y p, -1); neg = max((1 - y) p, -1); max(neg - pos + 1, 0)
    const Tensor pos = reduce_sum(mul(t, p), {-1});
    const Tensor neg = reduce_max(mul(sub(scalar_like(t, 1), t), p), {-1});
    return maximum(add(sub(neg, pos), scalar_like(pos, 1)), 0.0);
  });
}

Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("log_cosh", [&] {
    auto [t, p] = prepare(y_true, y_pred, "log_cosh");
    one_axis(p, -1, "log_cosh");
    // log(cosh(x)) = x + softplus(-2x) - log(2), x = p - y: finite where cosh overflows.
    const Tensor x = sub(p, t);
    return reduce_mean(sub(add(x, softplus(mul(x, scalar_like(x, -2)))), scalar_like(x, std::log(2.0))), {-1});
  });
}

Tensor poisson(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("poisson", [&] {
    auto [t, p] = prepare(y_true, y_pred, "poisson");
    one_axis(p, -1, "poisson");
    // mean(p - y log(p + epsilon), axis=-1)
    return reduce_mean(sub(p, mul(t, log(add(p, scalar_like(p, kBackendEpsilon))))), {-1});
  });
}

Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis) {
  return detail::in_op("cosine_similarity", [&] {
    auto [t, p] = prepare(y_true, y_pred, "cosine_similarity");
    const int a = one_axis(p, axis, "cosine_similarity");
    // Keras' normalize: x * rsqrt(max(sum(x^2), epsilon^2)), i.e. tf.math.l2_normalize with
    // epsilon^2, so a zero vector gives 0 (and a finite gradient).
    const Tensor pn = l2_normalize(p, {a}, kBackendEpsilon * kBackendEpsilon);
    const Tensor tn = l2_normalize(t, {a}, kBackendEpsilon * kBackendEpsilon);
    return neg(reduce_sum(mul(tn, pn), {a}));
  });
}

Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("mean_squared_logarithmic_error", [&] {
    auto [t, p] = prepare(y_true, y_pred, "mean_squared_logarithmic_error");
    one_axis(p, -1, "mean_squared_logarithmic_error");
    // mean(square(log(max(p, eps) + 1) - log(max(y, eps) + 1)), axis=-1)
    const Tensor first = log(add(maximum(p, kBackendEpsilon), scalar_like(p, 1)));
    const Tensor second = log(add(maximum(t, kBackendEpsilon), scalar_like(t, 1)));
    return reduce_mean(square(sub(first, second)), {-1});
  });
}

Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred) {
  return detail::in_op("mean_absolute_percentage_error", [&] {
    auto [t, p] = prepare(y_true, y_pred, "mean_absolute_percentage_error");
    one_axis(p, -1, "mean_absolute_percentage_error");
    // 100 * mean(abs((y - p) / max(abs(y), eps)), axis=-1)
    const Tensor diff = abs(div(sub(t, p), maximum(abs(t), kBackendEpsilon)));
    return mul(reduce_mean(diff, {-1}), scalar_like(p, 100));
  });
}

Tensor binary_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool apply_class_balancing,
                                 double alpha, double gamma, bool from_logits, double label_smoothing, int axis) {
  constexpr const char* op = "binary_focal_crossentropy";
  return detail::in_op(op, [&] {
    check_range(label_smoothing, 0, 1, op, "label_smoothing");
    auto [t, p] = prepare(y_true, y_pred, op);
    const int a = one_axis(p, axis, op);
    if (label_smoothing != 0)  // y (1 - s) + 0.5 s
      t = add(mul(t, scalar_like(t, 1 - label_smoothing)), scalar_like(t, 0.5 * label_smoothing));
    if (from_logits) p = sigmoid(p);
    // bce = ops.binary_crossentropy(y, p, from_logits=False): p clipped to [eps, 1 - eps],
    // -(y log p + (1 - y) log(1 - p)).
    const Tensor pc = clip_by_value(p, kBackendEpsilon, 1 - kBackendEpsilon);
    const Tensor one = scalar_like(t, 1);
    const Tensor bce = neg(add(mul(t, log(pc)), mul(sub(one, t), log(sub(one, pc)))));
    // p_t = y p + (1 - y)(1 - p) (the unclipped p, as Keras); focal factor (1 - p_t)^gamma.
    const Tensor p_t = add(mul(t, p), mul(sub(one, t), sub(one, p)));
    Tensor focal = mul(pow(sub(one, p_t), gamma), bce);
    if (apply_class_balancing)  // y alpha + (1 - y)(1 - alpha)
      focal = mul(add(mul(t, scalar_like(t, alpha)), mul(sub(one, t), scalar_like(t, 1 - alpha))), focal);
    return reduce_mean(focal, {a});
  });
}

Tensor categorical_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred, double alpha, double gamma,
                                      bool from_logits, double label_smoothing, int axis) {
  constexpr const char* op = "categorical_focal_crossentropy";
  return detail::in_op(op, [&] {
    check_range(label_smoothing, 0, 1, op, "label_smoothing");
    auto [t, p] = prepare(y_true, y_pred, op);
    const int a = one_axis(p, axis, op);
    if (label_smoothing != 0) {  // y (1 - s) + s / num_classes
      const double classes = static_cast<double>(p.shape()[a]);
      t = add(mul(t, scalar_like(t, 1 - label_smoothing)), scalar_like(t, label_smoothing / classes));
    }
    if (from_logits) p = softmax(p, a);
    // q = p / sum(p, axis), clipped to [eps, 1 - eps]; sum(alpha (1 - q)^gamma (-y log q), axis)
    const Tensor q = clip_by_value(div(p, reduce_sum(p, {a}, true)), kBackendEpsilon, 1 - kBackendEpsilon);
    const Tensor cce = neg(mul(t, log(q)));
    const Tensor weighting = mul(pow(sub(scalar_like(q, 1), q), gamma), scalar_like(q, alpha));
    return reduce_sum(mul(weighting, cce), {a});
  });
}

Tensor dice(const Tensor& y_true, const Tensor& y_pred, std::vector<int> axes) {
  return detail::in_op("dice", [&] {
    auto [t, p] = prepare(y_true, y_pred, "dice");
    const std::vector<int> ax = detail::normalize_axes(axes, p.rank(), "dice");
    // 1 - 2 sum(y p) / (sum(y) + sum(p) + eps)
    const Tensor inter = reduce_sum(mul(t, p), ax);
    const Tensor denom = add(add(reduce_sum(t, ax), reduce_sum(p, ax)), scalar_like(p, kBackendEpsilon));
    return sub(scalar_like(inter, 1), div(mul(inter, scalar_like(inter, 2)), denom));
  });
}

Tensor tversky(const Tensor& y_true, const Tensor& y_pred, double alpha, double beta, std::vector<int> axes) {
  return detail::in_op("tversky", [&] {
    auto [t, p] = prepare(y_true, y_pred, "tversky");
    const std::vector<int> ax = detail::normalize_axes(axes, p.rank(), "tversky");
    // TP = sum(p y), FP = sum((1 - y) p), FN = sum(y (1 - p));
    // 1 - TP / (TP + alpha FP + beta FN + eps)
    const Tensor one = scalar_like(t, 1);
    const Tensor tp = reduce_sum(mul(p, t), ax);
    const Tensor fp = reduce_sum(mul(sub(one, t), p), ax);
    const Tensor fn = reduce_sum(mul(t, sub(one, p)), ax);
    const Tensor denom = add(add(add(tp, mul(fp, scalar_like(fp, alpha))), mul(fn, scalar_like(fn, beta))), scalar_like(tp, kBackendEpsilon));
    return sub(scalar_like(tp, 1), div(tp, denom));
  });
}

}  // namespace keel::losses
