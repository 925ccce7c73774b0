// The cross-entropy metrics (Keras 3's keras/src/metrics/probabilistic_metrics.py): running means
// of the cross-entropy loss functions of keel/ops/nn.hpp, whose per-sample values Mean averages.
#include "keel/metrics/metric.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/losses/loss.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

namespace {

// Predictions on the host, half precision widened to float32 so that log keeps its precision
// (as the loss classes do).
Tensor prepared_pred(const Tensor& y_pred, const std::string& who) {
  Tensor p = util::host(y_pred, who, "y_pred");
  if (p.dtype() == DType::float16 || p.dtype() == DType::bfloat16) p = cast(p, DType::float32);
  return p;
}

// Labels brought to the predictions' rank across a trailing axis of 1 (labels [N] against
// predictions [N, 1], or [N, 1] against [N]), always on the labels' side, so that the loss
// keeps one value per sample: squeezing the predictions instead would average the whole batch
// into one value, counted as one sample.
std::pair<Tensor, Tensor> labels_aligned(const Tensor& y_true, const Tensor& y_pred, const std::string& who) {
  Tensor t = util::host(y_true, who, "y_true");
  const Tensor p = prepared_pred(y_pred, who);
  const auto last_is_one = [](const Tensor& x) { return x.rank() > 0 && x.shape()[x.rank() - 1] == 1; };
  if (t.rank() + 1 == p.rank() && last_is_one(p)) t = expand_dims(t, -1);
  else if (t.rank() == p.rank() + 1 && last_is_one(t)) t = squeeze(t, {-1});
  return {t, p};
}

double checked_smoothing(double s, const char* who) {
  if (!(s >= 0 && s <= 1)) throw ValueError(fmt::format("{}: label_smoothing must be in [0, 1], got {}", who, s));
  return s;
}

}  // namespace

// ---- BinaryCrossentropy ---------------------------------------------------------------------------

BinaryCrossentropy::BinaryCrossentropy(BinaryCrossentropyOptions o)
    : MeanMetricWrapper(
          [from_logits = o.from_logits, s = o.label_smoothing](const Tensor& t, const Tensor& p) {
            auto [tt, pp] = labels_aligned(t, p, "binary_crossentropy");
            return losses::binary_crossentropy(tt, pp, from_logits, s);
          },
          std::move(o.name), "down"),
      options_(o) {
  checked_smoothing(o.label_smoothing, "BinaryCrossentropy");
}

// ---- CategoricalCrossentropy ----------------------------------------------------------------------

CategoricalCrossentropy::CategoricalCrossentropy(CategoricalCrossentropyOptions o)
    : MeanMetricWrapper(
          [from_logits = o.from_logits, s = o.label_smoothing, axis = o.axis](const Tensor& t, const Tensor& p) {
            auto [tt, pp] = labels_aligned(t, p, "categorical_crossentropy");
            return losses::categorical_crossentropy(tt, pp, from_logits, s, axis);
          },
          std::move(o.name), "down"),
      options_(o) {
  checked_smoothing(o.label_smoothing, "CategoricalCrossentropy");
}

// ---- SparseCategoricalCrossentropy ----------------------------------------------------------------

namespace {

// Integer labels lose a trailing axis of 1 against predictions of the same rank ([N, 1] labels
// for [N, K] predictions), as the loss function does.
Tensor squeezed_labels(Tensor labels, const Tensor& pred) {
  if (labels.rank() == pred.rank() && labels.rank() > 0 && labels.shape()[labels.rank() - 1] == 1)
    labels = squeeze(labels, {-1});
  return labels;
}

// The weights of the entries that count: 1 (or the sample weight) where the label is not
// ignored, 0 where it is. A weight of lower rank applies to whole samples (it is broadcast from
// the first axis, as the losses' reduce_weighted_values does): per-sample weights [N] weigh
// every timestep of [N, T] labels.
Tensor valid_weights(const Tensor& valid, const Tensor& sample_weight, const std::string& who) {
  Tensor w = cast(valid, DType::float64);
  if (!sample_weight.defined()) return w;
  auto [m, sw] = losses::squeeze_or_expand_to_same_rank(w, util::host_as(sample_weight, DType::float64, who,
                                                                         "sample_weight"));
  while (sw.rank() < m.rank()) sw = expand_dims(sw, -1);
  return mul(m, sw);
}

}  // namespace

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(SparseCategoricalCrossentropyOptions o)
    : MeanMetricWrapper(
          [from_logits = o.from_logits, axis = o.axis](const Tensor& t, const Tensor& p) {
            // Integer labels have one axis fewer than the predictions; the loss function drops
            // a trailing axis of 1 itself.
            return losses::sparse_categorical_crossentropy(util::host(t, "sparse_categorical_crossentropy", "y_true"),
                                                           prepared_pred(p, "sparse_categorical_crossentropy"),
                                                           from_logits, axis);
          },
          std::move(o.name), "down"),
      options_(o) {}

void SparseCategoricalCrossentropy::update_state(const Tensor& y_true, const Tensor& y_pred,
                                                 const Tensor& sample_weight) {
  if (!options_.ignore_class) return MeanMetricWrapper::update_state(y_true, y_pred, sample_weight);
  autograd::NoRecordScope no_record;
  const std::string context =
      fmt::format("{} ({}): y_true {}, y_pred {}, sample_weight {}: ", name(), class_name(), util::shape_of(y_true),
                  util::shape_of(y_pred), util::shape_of(sample_weight));
  util::with_context(context, [&] {
    const Tensor p = prepared_pred(y_pred, name());
    const Tensor t = squeezed_labels(util::host(y_true, name(), "y_true"), p);
    const Tensor valid = not_equal(t, scalar_like(t, static_cast<double>(*options_.ignore_class)));
    // Ignored labels (often -1 or a padding id outside the classes) become class 0 so that the
    // loss function accepts them; their loss is replaced by 0 and their weight is 0.
    const Tensor labels = mul(t, cast(valid, t.dtype()));
    Tensor values = losses::sparse_categorical_crossentropy(labels, p, options_.from_logits, options_.axis);
    const Tensor valid_values = reshape(valid, values.shape());
    values = where(valid_values, values, zeros_like(values));
    accumulate(values, valid_weights(valid_values, sample_weight, name()));
  });
}

}  // namespace keel::metrics
