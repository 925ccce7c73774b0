// The loss classes over src/losses/keras3_functions.cpp (Keras 3's LossFunctionWrapper
// subclasses): each constructor checks its options so that a bad one fails when the loss is
// made, and call() forwards to the per-example function.
#include "keel/losses/loss.hpp"

#include <cmath>

#include <fmt/core.h>

namespace keel::losses {

namespace {

void check_unit(double v, const char* who, const char* what) {
  if (!(v >= 0 && v <= 1)) throw ValueError(fmt::format("{}: `{}` must be in [0, 1], got {}", who, what, v));
}

void check_finite(double v, const char* who, const char* what) {
  if (!std::isfinite(v)) throw ValueError(fmt::format("{}: `{}` must be finite, got {}", who, what, v));
}

}  // namespace

#define KEEL_PLAIN_LOSS_IMPL(Cls, fn)                                                 \
  Cls::Cls(Cls##Options o) : Loss(std::move(o.name), std::move(o.reduction)) {}       \
  Tensor Cls::call(const Tensor& y_true, const Tensor& y_pred) const { return fn(y_true, y_pred); }
KEEL_PLAIN_LOSS_IMPL(Hinge, hinge)
KEEL_PLAIN_LOSS_IMPL(SquaredHinge, squared_hinge)
KEEL_PLAIN_LOSS_IMPL(CategoricalHinge, categorical_hinge)
KEEL_PLAIN_LOSS_IMPL(LogCosh, log_cosh)
KEEL_PLAIN_LOSS_IMPL(Poisson, poisson)
KEEL_PLAIN_LOSS_IMPL(MeanSquaredLogarithmicError, mean_squared_logarithmic_error)
KEEL_PLAIN_LOSS_IMPL(MeanAbsolutePercentageError, mean_absolute_percentage_error)
#undef KEEL_PLAIN_LOSS_IMPL

CosineSimilarity::CosineSimilarity(CosineSimilarityOptions o) : Loss(o.name, o.reduction), options_(std::move(o)) {}
Tensor CosineSimilarity::call(const Tensor& y_true, const Tensor& y_pred) const {
  return cosine_similarity(y_true, y_pred, options_.axis);
}

BinaryFocalCrossentropy::BinaryFocalCrossentropy(BinaryFocalCrossentropyOptions o)
    : Loss(o.name, o.reduction), options_(std::move(o)) {
  check_unit(options_.label_smoothing, "BinaryFocalCrossentropy", "label_smoothing");
  check_finite(options_.alpha, "BinaryFocalCrossentropy", "alpha");
  check_finite(options_.gamma, "BinaryFocalCrossentropy", "gamma");
}
Tensor BinaryFocalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  const auto& o = options_;
  return binary_focal_crossentropy(y_true, y_pred, o.apply_class_balancing, o.alpha, o.gamma, o.from_logits,
                                   o.label_smoothing, o.axis);
}

CategoricalFocalCrossentropy::CategoricalFocalCrossentropy(CategoricalFocalCrossentropyOptions o)
    : Loss(o.name, o.reduction), options_(std::move(o)) {
  check_unit(options_.label_smoothing, "CategoricalFocalCrossentropy", "label_smoothing");
  check_finite(options_.alpha, "CategoricalFocalCrossentropy", "alpha");
  check_finite(options_.gamma, "CategoricalFocalCrossentropy", "gamma");
}
Tensor CategoricalFocalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  const auto& o = options_;
  return categorical_focal_crossentropy(y_true, y_pred, o.alpha, o.gamma, o.from_logits, o.label_smoothing, o.axis);
}

Dice::Dice(DiceOptions o) : Loss(o.name, o.reduction), options_(std::move(o)) {}
Tensor Dice::call(const Tensor& y_true, const Tensor& y_pred) const { return dice(y_true, y_pred, options_.axis); }

Tversky::Tversky(TverskyOptions o) : Loss(o.name, o.reduction), options_(std::move(o)) {
  check_finite(options_.alpha, "Tversky", "alpha");
  check_finite(options_.beta, "Tversky", "beta");
}
Tensor Tversky::call(const Tensor& y_true, const Tensor& y_pred) const {
  return tversky(y_true, y_pred, options_.alpha, options_.beta, options_.axis);
}

}  // namespace keel::losses
