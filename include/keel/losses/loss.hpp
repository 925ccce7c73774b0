#pragma once
// Keras loss classes (keras.losses.Loss and its subclasses): a per-example loss, optionally
// weighted per sample, reduced to what the optimiser minimises. The per-example functions live
// in keel/ops/nn.hpp (losses::mean_squared_error, ...); these classes add what Keras' classes
// add: the reduction, sample weights, a name and a config.
//
//   losses::SparseCategoricalCrossentropy loss({.from_logits = true});
//   Tensor value = loss(labels, logits);                 // a scalar: sum / number of elements
//   Tensor each = losses::MeanSquaredError({.reduction = "none"})(y, p);   // per example
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "keel/core/tensor.hpp"

namespace keel::losses {

// The base of every loss; subclass it and implement call() for a custom loss.
//
// operator() is Keras' Loss.__call__: integer or bool labels become y_pred's float dtype (Keras
// converts y_true to the loss dtype before call(); see keeps_integer_labels), values =
// call(y_true, y_pred) per example, times sample_weight when given, then reduced by `reduction`:
//   "sum_over_batch_size" (the default; "mean" is the same): sum of the weighted values / their
//                          number of elements (Keras 3 divides by the element count, not by the
//                          sum of the weights, so zero weights still count in the denominator);
//   "sum":                 sum of the weighted values;
//   "mean_with_sample_weight": sum of the weighted values / sum of the weights;
//   "none":                the weighted per-example values.
// A Keras mask riding on y_pred (layers::with_mask, e.g. from Embedding(mask_zero)) leaves the
// masked entries out, as Keras' apply_mask does: the mask (of the per-example values' leading
// axes, typically [batch, time]) multiplies the sample weights, and "sum_over_batch_size" then
// divides by the number of unmasked entries instead of all of them (a fully masked batch gives 0).
// The result is differentiable (it is made of ops), so a GradientTape sees through it.
class Loss {
 public:
  // An empty name gives Keras' auto_name: the snake-case class name, made unique with a counter
  // shared with the layers ("loss", "loss_1", ...; a subclass overriding class_name() "MyLoss"
  // gets "my_loss"). The built-in losses have fixed default names, as in Keras.
  explicit Loss(std::string name = "", std::string reduction = "sum_over_batch_size");
  virtual ~Loss() = default;

  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) const;
  // The unreduced loss: one value per example (Keras reduces the last axis in most losses).
  virtual Tensor call(const Tensor& y_true, const Tensor& y_pred) const = 0;

  const std::string& name() const;
  void set_name(std::string name) { name_ = std::move(name); }
  const std::string& reduction() const { return reduction_; }
  // Keras' {"name": ..., "reduction": ...} plus each subclass's own arguments.
  virtual nlohmann::json get_config() const;
  virtual std::string class_name() const { return "Loss"; }

 protected:
  // call() and, optionally, a mask of the examples that count (true = counts; undefined = all).
  // Masked-out examples weigh 0, and "sum_over_batch_size" divides by the number that count
  // (Keras' apply_mask). Overridden by losses that ignore some labels.
  virtual std::pair<Tensor, Tensor> call_with_mask(const Tensor& y_true, const Tensor& y_pred) const;
  // Whether integer labels reach call() as they are (true) or as y_pred's float dtype (false, the
  // default, as Keras converts y_true). Sparse losses that index with the labels say true.
  virtual bool keeps_integer_labels() const { return false; }

 private:
  mutable std::string name_;  // filled in by name() when left empty
  std::string reduction_;
};

// Wraps a function (y_true, y_pred) -> per-example values as a Loss (a custom loss lambda).
struct LossFunctionWrapperOptions {
  std::string reduction = "sum_over_batch_size";
  std::string name;  // empty: Keras' auto_name, "loss_function_wrapper", "loss_function_wrapper_1", ...
};
class LossFunctionWrapper : public Loss {
 public:
  using Fn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;
  explicit LossFunctionWrapper(Fn fn, LossFunctionWrapperOptions options = {});
  // As Keras: y_true and y_pred are first brought to the same rank (a trailing axis of 1 is
  // squeezed or added), then passed to the function.
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "LossFunctionWrapper"; }

 private:
  Fn fn_;
};

// ---- the built-in losses (options in the order of Keras' keyword arguments, Keras' defaults) ----

struct MeanSquaredErrorOptions {
  std::string reduction = "sum_over_batch_size";
  std::string name = "mean_squared_error";
};
class MeanSquaredError : public Loss {
 public:
  explicit MeanSquaredError(MeanSquaredErrorOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "MeanSquaredError"; }
};

struct MeanAbsoluteErrorOptions {
  std::string reduction = "sum_over_batch_size";
  std::string name = "mean_absolute_error";
};
class MeanAbsoluteError : public Loss {
 public:
  explicit MeanAbsoluteError(MeanAbsoluteErrorOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "MeanAbsoluteError"; }
};

struct HuberOptions {
  double delta = 1.0;
  std::string reduction = "sum_over_batch_size";
  std::string name = "huber_loss";
};
class Huber : public Loss {
 public:
  explicit Huber(HuberOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Huber"; }
  double delta() const { return options_.delta; }

 private:
  HuberOptions options_;
};

struct BinaryCrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]; labels move towards 0.5: y (1 - s) + s / 2
  int axis = -1;
  std::string reduction = "sum_over_batch_size";
  std::string name = "binary_crossentropy";
};
class BinaryCrossentropy : public Loss {
 public:
  explicit BinaryCrossentropy(BinaryCrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "BinaryCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  double label_smoothing() const { return options_.label_smoothing; }
  int axis() const { return options_.axis; }

 private:
  BinaryCrossentropyOptions options_;
};

struct CategoricalCrossentropyOptions {
  bool from_logits = false;
  // In [0, 1]; one-hot labels become y (1 - s) + s / num_classes, the classes counted along
  // `axis` (y_pred.shape[axis], as current Keras does).
  double label_smoothing = 0.0;
  int axis = -1;
  std::string reduction = "sum_over_batch_size";
  std::string name = "categorical_crossentropy";
};
class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(CategoricalCrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CategoricalCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  double label_smoothing() const { return options_.label_smoothing; }
  int axis() const { return options_.axis; }

 private:
  CategoricalCrossentropyOptions options_;
};

struct SparseCategoricalCrossentropyOptions {
  bool from_logits = false;
  // A label value to leave out (e.g. padding): its examples get loss 0 and are not counted by
  // "sum_over_batch_size".
  std::optional<std::int64_t> ignore_class = std::nullopt;
  std::string reduction = "sum_over_batch_size";
  std::string name = "sparse_categorical_crossentropy";
};
class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(SparseCategoricalCrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "SparseCategoricalCrossentropy"; }
  bool from_logits() const { return options_.from_logits; }
  const std::optional<std::int64_t>& ignore_class() const { return options_.ignore_class; }

 protected:
  std::pair<Tensor, Tensor> call_with_mask(const Tensor& y_true, const Tensor& y_pred) const override;
  bool keeps_integer_labels() const override { return true; }  // class indices

 private:
  SparseCategoricalCrossentropyOptions options_;
};

struct KLDivergenceOptions {
  std::string reduction = "sum_over_batch_size";
  std::string name = "kl_divergence";
};
class KLDivergence : public Loss {
 public:
  explicit KLDivergence(KLDivergenceOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string class_name() const override { return "KLDivergence"; }
};

// ---- more Keras 3 losses -------------------------------------------------------------------------
// Per-example functions (keras.losses.hinge, ...; the formulas in src/losses/keras3_functions.cpp)
// and their classes. epsilon below is keras.backend.epsilon() = 1e-7.

// mean(max(1 - y p, 0), -1); labels that are all 0 or 1 become -1 / 1 first.
Tensor hinge(const Tensor& y_true, const Tensor& y_pred);
// mean(max(1 - y p, 0)^2, -1); labels as for hinge.
Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred);
// max(max((1 - y) p, -1) - sum(y p, -1) + 1, 0).
Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred);
// mean(x + softplus(-2x) - log 2, -1) with x = p - y (log cosh x, without overflow).
Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred);
// mean(p - y log(p + epsilon), -1).
Tensor poisson(const Tensor& y_true, const Tensor& y_pred);
// -sum(l2_normalize(y) l2_normalize(p), axis), each normalised as x / max(||x||, epsilon).
Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis = -1);
// mean((log(max(p, epsilon) + 1) - log(max(y, epsilon) + 1))^2, -1).
Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred);
// 100 mean(|(y - p) / max(|y|, epsilon)|, -1).
Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred);
// mean((1 - p_t)^gamma bce, axis), p_t = y p + (1 - y)(1 - p), bce the binary crossentropy of the
// (smoothed: y (1 - s) + s / 2) labels; apply_class_balancing weighs by y alpha + (1 - y)(1 - alpha).
Tensor binary_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool apply_class_balancing = false,
                                 double alpha = 0.25, double gamma = 2.0, bool from_logits = false,
                                 double label_smoothing = 0.0, int axis = -1);
// sum(alpha (1 - q)^gamma (-y log q), axis), q = p / sum(p) clipped to [epsilon, 1 - epsilon]
// (softmax first from logits; smoothed labels y (1 - s) + s / classes).
Tensor categorical_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred, double alpha = 0.25,
                                      double gamma = 2.0, bool from_logits = false, double label_smoothing = 0.0,
                                      int axis = -1);
// 1 - 2 sum(y p) / (sum(y) + sum(p) + epsilon), summed over `axes` (empty: every axis, a scalar).
Tensor dice(const Tensor& y_true, const Tensor& y_pred, std::vector<int> axes = {});
// 1 - TP / (TP + alpha FP + beta FN + epsilon) with TP = sum(y p), FP = sum((1 - y) p),
// FN = sum(y (1 - p)) over `axes` (empty: every axis).
Tensor tversky(const Tensor& y_true, const Tensor& y_pred, double alpha = 0.5, double beta = 0.5,
               std::vector<int> axes = {});

// The classes whose options are the base's only (reduction, name): Keras' default names.
#define KEEL_PLAIN_LOSS(Cls, default_name)                                    \
  struct Cls##Options {                                                       \
    std::string reduction = "sum_over_batch_size";                            \
    std::string name = default_name;                                          \
  };                                                                          \
  class Cls : public Loss {                                                   \
   public:                                                                    \
    explicit Cls(Cls##Options options = {});                                  \
    Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;   \
    std::string class_name() const override { return #Cls; }                  \
  };
KEEL_PLAIN_LOSS(Hinge, "hinge")
KEEL_PLAIN_LOSS(SquaredHinge, "squared_hinge")
KEEL_PLAIN_LOSS(CategoricalHinge, "categorical_hinge")
KEEL_PLAIN_LOSS(LogCosh, "log_cosh")
KEEL_PLAIN_LOSS(Poisson, "poisson")
KEEL_PLAIN_LOSS(MeanSquaredLogarithmicError, "mean_squared_logarithmic_error")
KEEL_PLAIN_LOSS(MeanAbsolutePercentageError, "mean_absolute_percentage_error")
#undef KEEL_PLAIN_LOSS

struct CosineSimilarityOptions {
  int axis = -1;
  std::string reduction = "sum_over_batch_size";
  std::string name = "cosine_similarity";
};
class CosineSimilarity : public Loss {
 public:
  explicit CosineSimilarity(CosineSimilarityOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CosineSimilarity"; }

 private:
  CosineSimilarityOptions options_;
};

struct BinaryFocalCrossentropyOptions {
  bool apply_class_balancing = false;
  double alpha = 0.25;
  double gamma = 2.0;
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]
  int axis = -1;
  std::string reduction = "sum_over_batch_size";
  std::string name = "binary_focal_crossentropy";
};
class BinaryFocalCrossentropy : public Loss {
 public:
  explicit BinaryFocalCrossentropy(BinaryFocalCrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "BinaryFocalCrossentropy"; }
  const BinaryFocalCrossentropyOptions& options() const { return options_; }

 private:
  BinaryFocalCrossentropyOptions options_;
};

struct CategoricalFocalCrossentropyOptions {
  double alpha = 0.25;
  double gamma = 2.0;
  bool from_logits = false;
  double label_smoothing = 0.0;  // in [0, 1]
  int axis = -1;
  std::string reduction = "sum_over_batch_size";
  std::string name = "categorical_focal_crossentropy";
};
class CategoricalFocalCrossentropy : public Loss {
 public:
  explicit CategoricalFocalCrossentropy(CategoricalFocalCrossentropyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "CategoricalFocalCrossentropy"; }
  const CategoricalFocalCrossentropyOptions& options() const { return options_; }

 private:
  CategoricalFocalCrossentropyOptions options_;
};

// Keras' Dice(reduction, name, axis): axis None (an empty list, the default) reduces every axis.
struct DiceOptions {
  std::string reduction = "sum_over_batch_size";
  std::string name = "dice";
  std::vector<int> axis = {};
};
class Dice : public Loss {
 public:
  explicit Dice(DiceOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Dice"; }

 private:
  DiceOptions options_;
};

struct TverskyOptions {
  double alpha = 0.5;
  double beta = 0.5;
  std::string reduction = "sum_over_batch_size";
  std::string name = "tversky";
  std::vector<int> axis = {};  // empty: every axis
};
class Tversky : public Loss {
 public:
  explicit Tversky(TverskyOptions options = {});
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "Tversky"; }

 private:
  TverskyOptions options_;
};

// ---- by name ------------------------------------------------------------------------------------

// A new loss object for a Keras name: "mse"/"mean_squared_error", "mae"/"mean_absolute_error",
// "huber"/"huber_loss", "binary_crossentropy", "categorical_crossentropy",
// "sparse_categorical_crossentropy", "kld"/"kl_divergence"/"kullback_leibler_divergence",
// "hinge", "squared_hinge", "categorical_hinge", "log_cosh"/"logcosh", "poisson",
// "cosine_similarity", "msle"/"mean_squared_logarithmic_error", "mape"/
// "mean_absolute_percentage_error", "binary_focal_crossentropy", "categorical_focal_crossentropy",
// "dice", "tversky", or a class name ("MeanSquaredError", ...). ValueError for any other name.
std::shared_ptr<Loss> get(const std::string& identifier);

// A built-in loss rebuilt from its class_name() and get_config() (Keras' Loss.from_config): each
// key the config lacks keeps its default. ValueError for a class not registered (a
// LossFunctionWrapper of a function, a custom class) and for a value of the wrong type.
std::shared_ptr<Loss> from_config(const std::string& class_name, const nlohmann::json& config);
// The loss classes from_config rebuilds, by class name.
std::vector<std::string> registered_losses();

// What compile() takes as its loss: a name, any Loss object (copied), a shared_ptr to one
// (shared), or a function (y_true, y_pred) -> per-example values (wrapped as a
// LossFunctionWrapper with the default reduction and, unless named, an auto name). Default-constructed: no loss.
class LossRef {
 public:
  LossRef() = default;
  LossRef(const char* name);         // NOLINT: implicit, so that .loss = "mse" reads like Keras
  LossRef(const std::string& name);  // NOLINT
  template <class L, std::enable_if_t<std::is_base_of_v<Loss, std::decay_t<L>>, int> = 0>
  LossRef(L&& loss)  // NOLINT
      : ptr_(std::make_shared<std::decay_t<L>>(std::forward<L>(loss))) {}
  template <class L, std::enable_if_t<std::is_base_of_v<Loss, L>, int> = 0>
  LossRef(std::shared_ptr<L> loss) : ptr_(std::move(loss)) {}  // NOLINT
  template <class F,
            std::enable_if_t<!std::is_base_of_v<Loss, std::decay_t<F>> &&
                                 !std::is_convertible_v<F, std::string> &&
                                 std::is_invocable_r_v<Tensor, std::decay_t<F>&, const Tensor&, const Tensor&>,
                             int> = 0>
  LossRef(F&& fn, std::string name = "")  // NOLINT
      : ptr_(wrap(LossFunctionWrapper::Fn(std::forward<F>(fn)), std::move(name))) {}

  bool defined() const { return ptr_ != nullptr; }
  explicit operator bool() const { return defined(); }
  const std::shared_ptr<Loss>& get() const { return ptr_; }
  Loss& operator*() const;
  Loss* operator->() const { return &**this; }
  // The loss (ValueError when there is none).
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) const;
  // The loss' name, "" when there is none.
  std::string name() const { return ptr_ ? ptr_->name() : std::string(); }

 private:
  static std::shared_ptr<Loss> wrap(LossFunctionWrapper::Fn fn, std::string name);
  std::shared_ptr<Loss> ptr_;
};

// ---- helpers shared with the metrics (Keras' keras.losses.loss module functions) -----------------

// Keras' squeeze_or_expand_to_same_rank: when the ranks differ by exactly one and the larger has a
// trailing axis of 1, that axis is squeezed, or (when the smaller has rank 1 and expand_rank_1)
// one is added to the smaller. Otherwise both are returned unchanged.
std::pair<Tensor, Tensor> squeeze_or_expand_to_same_rank(const Tensor& x1, const Tensor& x2,
                                                         bool expand_rank_1 = true);

// Keras' reduce_weighted_values: weights (cast to the values' dtype, brought to their rank) times
// values, then the reduction above. `mask` (bool or 0/1, optional) marks the values that count:
// as Keras' apply_mask, it multiplies the weights and, for "sum_over_batch_size" / "mean", is
// scaled by (mask elements / unmasked elements) first (0 when nothing is unmasked), so the
// result is the weighted sum over the unmasked values / their count.
// A weight (or mask) of lower rank than the values applies to whole examples (it is broadcast
// from the first axis, as tf.keras did), so per-sample weights [N] work with per-timestep losses
// [N, T]; a weight [N] and a mask [N, T] combine the same way.
Tensor reduce_weighted_values(const Tensor& values, const Tensor& sample_weight = {},
                              const std::string& reduction = "sum_over_batch_size",
                              const Tensor& mask = {});

}  // namespace keel::losses
