// Keras' loss classes over the per-example loss functions of src/ops/losses.cpp.
//
// Everything here is written with differentiable ops, so the reduced loss carries the gradient
// of the per-example values back to y_pred; only the mask bookkeeping (a count) is read on the
// host. The semantics follow keras/src/losses/loss.py (Keras 3): weights multiply the values,
// "sum_over_batch_size" divides the weighted sum by the number of values.
#include "keel/losses/loss.hpp"

#include <cmath>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "keel/layers/layer.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel::losses {

namespace {

constexpr const char* kReductions =
    "\"sum_over_batch_size\", \"sum\", \"mean\", \"mean_with_sample_weight\", \"none\"";

bool valid_reduction(const std::string& r) {
  return r == "sum_over_batch_size" || r == "sum" || r == "mean" || r == "mean_with_sample_weight" ||
         r == "none";
}

void check_reduction(const std::string& reduction, const std::string& who) {
  if (!valid_reduction(reduction))
    throw ValueError(fmt::format("{}: invalid reduction \"{}\"; expected one of {}", who, reduction, kReductions));
}

// A tensor brought next to `like`: same device (weights usually come from host data) and, when
// `dtype` is given, that dtype.
Tensor beside(const Tensor& t, const Tensor& like, DType dtype) {
  Tensor out = t.device() == like.device() ? t : t.to(like.device());
  return out.dtype() == dtype ? out : cast(out, dtype);
}

// Sum of `values` / `count`, or the sum itself when there is nothing to divide by (Keras'
// divide_no_nan: an empty batch gives 0, not NaN).
Tensor divide_no_nan(const Tensor& sum, double count) {
  if (count == 0) return sum;  // the sum of nothing is already 0
  return div(sum, scalar_like(sum, count));
}

// num / den where den != 0, else 0, with tensor ops only (no value read on the host, so that
// a traced training step computes it on every call); the gradient is 0 where den == 0.
Tensor divide_no_nan(const Tensor& num, const Tensor& den) {
  const Tensor zero = equal(den, scalar_like(den, 0));
  const Tensor safe = where(zero, scalar_like(den, 1), den);
  return where(zero, scalar_like(num, 0), div(num, safe));
}

Tensor reduce_values(const Tensor& values, const Tensor& sample_weight, const std::string& reduction) {
  // Keras returns scalars and empty vectors unreduced (there is nothing to reduce).
  if (reduction == "none" || values.rank() == 0 || (values.rank() == 1 && values.shape()[0] == 0))
    return values;
  const Tensor loss = reduce_sum(values);
  if (reduction == "sum") return loss;
  if (reduction == "mean_with_sample_weight" && sample_weight.defined()) {
    return divide_no_nan(loss, reduce_sum(sample_weight));
  }
  // "sum_over_batch_size" and "mean": the element count, whatever the weights.
  return divide_no_nan(loss, static_cast<double>(values.size()));
}

// Keras documents label_smoothing as a float in [0, 1] (1 makes every target uniform); other
// values, and NaN, would turn the targets into something that is not a distribution.
void check_label_smoothing(double smoothing, const char* who) {
  if (!(smoothing >= 0 && smoothing <= 1))
    throw ValueError(fmt::format("{}: label_smoothing must be in [0, 1], got {}", who, smoothing));
}

// Keras converts y_true to the loss dtype before call(): here y_pred's float dtype, so that a
// custom loss may write y_pred - y_true with integer labels. Losses that index with integer
// labels keep them (keeps_integer_labels).
Tensor labels_for(const Tensor& y_true, const Tensor& y_pred, bool keep_integer_labels) {
  if (keep_integer_labels || !is_floating(y_pred.dtype()) || y_true.dtype() == y_pred.dtype()) return y_true;
  return cast(y_true, y_pred.dtype());
}

// The Keras mask of y_pred as a bool tensor of the per-example values' rank, its axes the
// leading axes of `values` (a mask [batch, time] against values [batch, time]; a mask [batch]
// against values [batch, time] masks whole examples). ShapeError when it does not fit.
Tensor fit_mask(const Tensor& mask_in, const Tensor& values, const std::string& loss_name) {
  Tensor mask = mask_in.device() == values.device() ? mask_in : mask_in.to(values.device());
  if (mask.dtype() != DType::bool_) mask = not_equal(mask, scalar_like(mask, 0));
  mask = squeeze_or_expand_to_same_rank(values, mask).second;
  bool fits = mask.rank() <= values.rank();
  for (std::int64_t i = 0; fits && i < mask.rank(); ++i)
    fits = mask.shape()[i] == values.shape()[i] || mask.shape()[i] == 1;
  if (!fits)
    throw ShapeError(fmt::format("loss {}: the Keras mask of y_pred has shape {}, which does not cover the leading "
                                 "axes of the per-example loss values of shape {}",
                                 loss_name, mask_in.shape().to_string(), values.shape().to_string()));
  while (mask.rank() < values.rank()) mask = expand_dims(mask, -1);
  return mask;
}

// Keras' in_mask & out_mask: the mask of y_pred and the one call_with_mask returned (ignored
// labels), either of which may be undefined.
Tensor combine_masks(const Tensor& in_mask, const Tensor& out_mask, const Tensor& values, const std::string& name) {
  if (!in_mask.defined()) return out_mask;
  const Tensor fitted = fit_mask(in_mask, values, name);
  if (!out_mask.defined()) return fitted;
  const Tensor out_bool = out_mask.dtype() == DType::bool_ ? out_mask : not_equal(out_mask, scalar_like(out_mask, 0));
  return logical_and(fitted, out_bool);
}

template <class L>
std::shared_ptr<Loss> make() {
  return std::make_shared<L>();
}

}  // namespace

// ---- helpers ------------------------------------------------------------------------------------

std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(const Tensor& x1_in, const Tensor& x2_in,
                                                         bool expand_rank_1) {
  Tensor x1 = x1_in, x2 = x2_in;
  const auto r1 = x1.rank(), r2 = x2.rank();
  if (r1 == r2) return {x1, x2};
  if (r1 == r2 + 1 && x1.shape()[r1 - 1] == 1) {
    if (r2 == 1 && expand_rank_1)
      x2 = expand_dims(x2, -1);
    else
      x1 = squeeze(x1, {-1});
  }
  if (r2 == r1 + 1 && x2.shape()[r2 - 1] == 1) {
    if (r1 == 1 && expand_rank_1)
      x1 = expand_dims(x1, -1);
    else
      x2 = squeeze(x2, {-1});
  }
  return {x1, x2};
}

Tensor reduce_weighted_values(const Tensor& values_in, const Tensor& sample_weight,
                              const std::string& reduction, const Tensor& mask_in) {
  check_reduction(reduction, "reduce_weighted_values");
  if (!values_in.defined()) throw ValueError("reduce_weighted_values: the loss values are undefined");
  // Keras reduces in its float dtype; integer or bool values (a custom loss counting errors)
  // become float32.
  const Tensor values0 = is_floating(values_in.dtype()) ? values_in : cast(values_in, DType::float32);
  const DType dtype = values0.dtype();

  Tensor weights;
  if (sample_weight.defined()) weights = beside(sample_weight, values0, dtype);
  if (mask_in.defined()) {
    Tensor mask = beside(mask_in, values0, dtype);
    if (reduction == "sum_over_batch_size" || reduction == "mean") {
      // Valid entries weigh total / valid and the others 0, so that the sum over all entries
      // divided by `total` (what this reduction does) is the sum over valid entries / valid.
      // Keras counts the unmasked entries, not their weights: weights only multiply.
      const double total = static_cast<double>(mask.size());
      mask = mul(mask, divide_no_nan(scalar_like(mask, total), reduce_sum(mask)));
    }
    if (weights.defined()) {
      auto [m, w] = squeeze_or_expand_to_same_rank(mask, weights);
      // Per-sample weights [N] against a mask [N, T]: weigh whole examples, as for the values.
      while (w.rank() > 0 && w.rank() < m.rank()) w = expand_dims(w, -1);
      while (m.rank() > 0 && m.rank() < w.rank()) m = expand_dims(m, -1);
      weights = mul(w, m);
    } else {
      weights = mask;
    }
  }

  Tensor values = values0;
  if (weights.defined()) {
    auto [v, w] = squeeze_or_expand_to_same_rank(values0, weights);
    // Per-sample weights [N] against per-element values [N, T, ...]: weigh whole examples (the
    // weights broadcast from the first axis, as tf.keras' broadcast_weights did) instead of
    // NumPy's alignment from the last axis, which would weigh time steps or fail.
    while (w.rank() > 0 && w.rank() < v.rank()) w = expand_dims(w, -1);
    values = mul(v, w);
    weights = w;
  }
  return reduce_values(values, weights, reduction);
}

// ---- Loss ---------------------------------------------------------------------------------------

Loss::Loss(std::string name, std::string reduction) : name_(std::move(name)), reduction_(std::move(reduction)) {
  check_reduction(reduction_, name_.empty() ? std::string("Loss") : name_);
}

const std::string& Loss::name() const {
  // Keras' auto_name, lazily: the class name is not known yet in the constructor.
  if (name_.empty()) name_ = layers::unique_name(class_name());
  return name_;
}

std::pair<Tensor, Tensor> Loss::call_with_mask(const Tensor& y_true, const Tensor& y_pred) const {
  return {call(y_true, y_pred), Tensor()};
}

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const {
  if (!y_true.defined() || !y_pred.defined())
    throw ValueError(fmt::format("loss {}: y_true and y_pred must both be defined", name()));
  const Tensor in_mask = layers::get_mask(y_pred);  // read first: a cast gives a tensor without it
  Tensor pred = y_pred;
  // Keras computes losses in float32 under a mixed-precision policy: half-precision
  // predictions are widened first, so that log and exp of probabilities keep their precision.
  if (pred.dtype() == DType::float16 || pred.dtype() == DType::bfloat16) pred = cast(pred, DType::float32);
  const Tensor labels = labels_for(y_true, pred, keeps_integer_labels());
  auto [values, out_mask] = call_with_mask(labels, pred);
  if (!values.defined()) throw ValueError(fmt::format("loss {}: call() returned an undefined tensor", name()));
  const Tensor mask = combine_masks(in_mask, out_mask, values, name());
  return reduce_weighted_values(values, sample_weight, reduction_, mask);
}

nlohmann::json Loss::get_config() const { return {{"name", name()}, {"reduction", reduction_}}; }

// ---- LossFunctionWrapper --------------------------------------------------------------------------

LossFunctionWrapper::LossFunctionWrapper(Fn fn, LossFunctionWrapperOptions options)
    : Loss(std::move(options.name), std::move(options.reduction)), fn_(std::move(fn)) {
  if (!fn_) throw ValueError("LossFunctionWrapper: the loss function is empty");
}

Tensor LossFunctionWrapper::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return fn_(t, p);
}

// ---- built-in losses ------------------------------------------------------------------------------
// Each brings y_true and y_pred to the same rank first, as Keras' LossFunctionWrapper.call does
// for every built-in loss (labels [N] against predictions [N, 1]).

MeanSquaredError::MeanSquaredError(MeanSquaredErrorOptions o) : Loss(std::move(o.name), std::move(o.reduction)) {}
Tensor MeanSquaredError::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return mean_squared_error(t, p);
}

MeanAbsoluteError::MeanAbsoluteError(MeanAbsoluteErrorOptions o) : Loss(std::move(o.name), std::move(o.reduction)) {}
Tensor MeanAbsoluteError::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return mean_absolute_error(t, p);
}

Huber::Huber(HuberOptions o) : Loss(o.name, o.reduction), options_(std::move(o)) {
  // Checked here too, so that a bad delta fails when the loss is made, not at the first batch.
  if (!std::isfinite(options_.delta) || options_.delta < 0)
    throw ValueError(fmt::format("Huber: delta must be finite and >= 0, got {}", options_.delta));
}
Tensor Huber::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return huber(t, p, options_.delta);
}

BinaryCrossentropy::BinaryCrossentropy(BinaryCrossentropyOptions o)
    : Loss(o.name, o.reduction), options_(std::move(o)) {
  check_label_smoothing(options_.label_smoothing, "BinaryCrossentropy");
}
Tensor BinaryCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return binary_crossentropy(t, p, options_.from_logits, options_.label_smoothing, options_.axis);
}

CategoricalCrossentropy::CategoricalCrossentropy(CategoricalCrossentropyOptions o)
    : Loss(o.name, o.reduction), options_(std::move(o)) {
  check_label_smoothing(options_.label_smoothing, "CategoricalCrossentropy");
}
Tensor CategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return categorical_crossentropy(t, p, options_.from_logits, options_.label_smoothing, options_.axis);
}

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(SparseCategoricalCrossentropyOptions o)
    : Loss(o.name, o.reduction), options_(std::move(o)) {}

Tensor SparseCategoricalCrossentropy::call(const Tensor& y_true, const Tensor& y_pred) const {
  return call_with_mask(y_true, y_pred).first;
}

std::pair<Tensor, Tensor> SparseCategoricalCrossentropy::call_with_mask(const Tensor& y_true,
                                                                        const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  if (!options_.ignore_class) return {sparse_categorical_crossentropy(t, p, options_.from_logits), Tensor()};
  const Tensor valid = not_equal(t, scalar_like(t, static_cast<double>(*options_.ignore_class)));
  // Ignored labels (often -1 or a padding id outside the classes) become class 0 so that the
  // per-example function accepts them; their loss is replaced by 0 below. Unlike Keras, the
  // prediction rows are left as they are: zeroing them would put 0/0 into the probability path,
  // and a NaN there would leak into the gradient even through the `where`.
  const Tensor labels = mul(t, cast(valid, t.dtype()));
  Tensor res = sparse_categorical_crossentropy(labels, p, options_.from_logits);
  const Tensor valid_res = reshape(valid, res.shape());
  res = where(valid_res, res, zeros_like(res));
  return {res, valid_res};
}


KLDivergence::KLDivergence(KLDivergenceOptions o) : Loss(std::move(o.name), std::move(o.reduction)) {}
Tensor KLDivergence::call(const Tensor& y_true, const Tensor& y_pred) const {
  auto [t, p] = squeeze_or_expand_to_same_rank(y_true, y_pred);
  return kl_divergence(t, p);
}

// ---- by name ------------------------------------------------------------------------------------

std::shared_ptr<Loss> get(const std::string& identifier) {
  using Make = std::shared_ptr<Loss> (*)();
  // Keras' names and aliases (keras.losses.get), and the class names.
  static const std::map<std::string, Make> table = {
      {"mse", &make<MeanSquaredError>},
      {"MSE", &make<MeanSquaredError>},
      {"mean_squared_error", &make<MeanSquaredError>},
      {"MeanSquaredError", &make<MeanSquaredError>},
      {"mae", &make<MeanAbsoluteError>},
      {"MAE", &make<MeanAbsoluteError>},
      {"mean_absolute_error", &make<MeanAbsoluteError>},
      {"MeanAbsoluteError", &make<MeanAbsoluteError>},
      {"huber", &make<Huber>},
      {"huber_loss", &make<Huber>},
      {"Huber", &make<Huber>},
      {"binary_crossentropy", &make<BinaryCrossentropy>},
      {"BinaryCrossentropy", &make<BinaryCrossentropy>},
      {"categorical_crossentropy",
       &make<CategoricalCrossentropy>},
      {"CategoricalCrossentropy",
       &make<CategoricalCrossentropy>},
      {"sparse_categorical_crossentropy",
       &make<SparseCategoricalCrossentropy>},
      {"SparseCategoricalCrossentropy",
       &make<SparseCategoricalCrossentropy>},
      {"kl_divergence", &make<KLDivergence>},
      {"kld", &make<KLDivergence>},
      {"KLD", &make<KLDivergence>},
      {"kullback_leibler_divergence", &make<KLDivergence>},
      {"KLDivergence", &make<KLDivergence>},
      {"hinge", &make<Hinge>},
      {"Hinge", &make<Hinge>},
      {"squared_hinge", &make<SquaredHinge>},
      {"SquaredHinge", &make<SquaredHinge>},
      {"categorical_hinge", &make<CategoricalHinge>},
      {"CategoricalHinge", &make<CategoricalHinge>},
      {"log_cosh", &make<LogCosh>},
      {"logcosh", &make<LogCosh>},
      {"LogCosh", &make<LogCosh>},
      {"poisson", &make<Poisson>},
      {"Poisson", &make<Poisson>},
      {"cosine_similarity", &make<CosineSimilarity>},
      {"CosineSimilarity", &make<CosineSimilarity>},
      {"msle", &make<MeanSquaredLogarithmicError>},
      {"MSLE", &make<MeanSquaredLogarithmicError>},
      {"mean_squared_logarithmic_error", &make<MeanSquaredLogarithmicError>},
      {"MeanSquaredLogarithmicError", &make<MeanSquaredLogarithmicError>},
      {"mape", &make<MeanAbsolutePercentageError>},
      {"MAPE", &make<MeanAbsolutePercentageError>},
      {"mean_absolute_percentage_error", &make<MeanAbsolutePercentageError>},
      {"MeanAbsolutePercentageError", &make<MeanAbsolutePercentageError>},
      {"binary_focal_crossentropy", &make<BinaryFocalCrossentropy>},
      {"BinaryFocalCrossentropy", &make<BinaryFocalCrossentropy>},
      {"categorical_focal_crossentropy", &make<CategoricalFocalCrossentropy>},
      {"CategoricalFocalCrossentropy", &make<CategoricalFocalCrossentropy>},
      {"dice", &make<Dice>},
      {"Dice", &make<Dice>},
      {"tversky", &make<Tversky>},
      {"Tversky", &make<Tversky>},
  };
  const auto it = table.find(identifier);
  if (it == table.end())
    throw ValueError(fmt::format(
        "losses::get: unknown loss \"{}\"; known names: mse, mae, huber, binary_crossentropy, "
        "categorical_crossentropy, sparse_categorical_crossentropy, kl_divergence (kld), hinge, squared_hinge, "
        "categorical_hinge, log_cosh, poisson, cosine_similarity, msle, mape, binary_focal_crossentropy, "
        "categorical_focal_crossentropy, dice, tversky, or a class name such as MeanSquaredError",
        identifier));
  return it->second();
}

// ---- LossRef --------------------------------------------------------------------------------------

LossRef::LossRef(const char* name) {
  if (name != nullptr) ptr_ = losses::get(name);
}

LossRef::LossRef(const std::string& name) : ptr_(losses::get(name)) {}

std::shared_ptr<Loss> LossRef::wrap(LossFunctionWrapper::Fn fn, std::string name) {
  return std::make_shared<LossFunctionWrapper>(std::move(fn), LossFunctionWrapperOptions{.name = std::move(name)});
}

Loss& LossRef::operator*() const {
  if (!ptr_) throw ValueError("LossRef: no loss was given");
  return *ptr_;
}

Tensor LossRef::operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) const {
  return (**this)(y_true, y_pred, sample_weight);
}

}  // namespace keel::losses
