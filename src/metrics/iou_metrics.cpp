// Keras 3's IoU metrics (keras/src/metrics/iou_metrics.py): a weighted confusion matrix of class
// ids accumulated on the host (doubles), and the mean IoU of the target classes read from it.
#include <cmath>
#include <numeric>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "autograd/record.hpp"
#include "keel/metrics/metric.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/reduce.hpp"
#include "metrics/metric_util.hpp"

namespace keel::metrics {

namespace {

int checked_num_classes(const char* cls, const std::optional<int>& num_classes) {
  if (!num_classes) throw ValueError(fmt::format("{}: the argument num_classes is required", cls));
  if (*num_classes < 1) throw ValueError(fmt::format("{}: num_classes must be >= 1, got {}", cls, *num_classes));
  return *num_classes;
}

std::vector<int> checked_targets(const char* cls, const std::vector<int>& ids, int num_classes) {
  if (ids.empty()) throw ValueError(fmt::format("{}: target_class_ids must name at least one class", cls));
  for (const int id : ids)
    if (id < 0 || id >= num_classes)
      throw ValueError(fmt::format("{}: target class id {} is out of range, which is [0, {})", cls, id, num_classes));
  return ids;
}

std::vector<int> all_classes(const std::optional<int>& num_classes) {
  std::vector<int> ids(num_classes && *num_classes > 0 ? static_cast<std::size_t>(*num_classes) : 0);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

std::string iou_context(const Metric& m, const Tensor& t, const Tensor& p, const Tensor& w) {
  return fmt::format("{} ({}): y_true {}, y_pred {}, sample_weight {}: ", m.name(), m.class_name(), util::shape_of(t),
                     util::shape_of(p), util::shape_of(w));
}

}  // namespace

// ---- IoU ----------------------------------------------------------------------------------------------

IoU::IoU(std::string name, const char* cls, Setup s)
    : Metric(std::move(name)),
      num_classes_(checked_num_classes(cls, s.num_classes)),
      target_class_ids_(checked_targets(cls, s.target_class_ids, num_classes_)),
      ignore_class_(s.ignore_class),
      sparse_y_true_(s.sparse_y_true),
      sparse_y_pred_(s.sparse_y_pred),
      axis_(s.axis) {
  // num_classes^2 doubles: a size that cannot be allocated is a ValueError, not a crash.
  if (static_cast<std::uint64_t>(num_classes_) * static_cast<std::uint64_t>(num_classes_) > (1ULL << 32))
    throw ValueError(fmt::format("{}: num_classes = {} needs a confusion matrix too large to keep", cls, num_classes_));
  reset_state();
  set_direction("up");
}

IoU::IoU(IoUOptions o)
    : IoU(o.name, "IoU",
          Setup{o.num_classes, o.target_class_ids, o.ignore_class, o.sparse_y_true, o.sparse_y_pred, o.axis}) {
  options_ = std::move(o);
}

void IoU::reset_state() {
  total_cm_.assign(static_cast<std::size_t>(num_classes_) * static_cast<std::size_t>(num_classes_), 0.0);
}

void IoU::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  util::with_context(iou_context(*this, y_true, y_pred, sample_weight), [&] {
    Tensor t = util::host(y_true, name(), "y_true");
    Tensor p = util::host(y_pred, name(), "y_pred");
    // Dense labels / predictions: the most likely class along `axis`.
    if (!sparse_y_true_) t = argmax(t, axis_);
    if (!sparse_y_pred_) p = argmax(p, axis_);
    add_classes(t, p, sample_weight);
  });
}

void IoU::add_classes(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  const auto t = util::host_as(y_true, DType::float64, name(), "y_true").to_vector<double>();
  const auto p = util::host_as(y_pred, DType::float64, name(), "y_pred").to_vector<double>();
  if (t.size() != p.size())
    throw ShapeError(fmt::format("y_true and y_pred hold different numbers of class ids: {} and {}", t.size(),
                                 p.size()));
  std::vector<double> w;
  if (sample_weight.defined()) {
    w = util::host_as(sample_weight, DType::float64, name(), "sample_weight").to_vector<double>();
    if (w.size() != t.size() && w.size() != 1)
      throw ShapeError(fmt::format("sample_weight of {} values does not broadcast to {} class ids", w.size(),
                                   t.size()));
  }
  const auto n = static_cast<double>(num_classes_);
  for (std::size_t i = 0; i < t.size(); ++i) {
    // Class ids truncate toward zero, as Keras' cast to int; ids outside [0, num_classes) and
    // the ignored class are left out (NaN fails both tests).
    const double tc = std::trunc(t[i]), pc = std::trunc(p[i]);
    if (!(tc >= 0 && tc < n && pc >= 0 && pc < n)) continue;
    if (ignore_class_ && tc == static_cast<double>(*ignore_class_)) continue;
    const double weight = w.empty() ? 1.0 : w[w.size() == 1 ? 0 : i];
    total_cm_[static_cast<std::size_t>(tc) * static_cast<std::size_t>(num_classes_) + static_cast<std::size_t>(pc)] +=
        weight;
  }
}

double IoU::result() const {
  const auto k = static_cast<std::size_t>(num_classes_);
  double iou_sum = 0, valid = 0;
  for (const int id : target_class_ids_) {
    const auto c = static_cast<std::size_t>(id);
    double predicted = 0, actual = 0;  // Keras' sum_over_row (axis 0) and sum_over_col (axis 1)
    for (std::size_t j = 0; j < k; ++j) {
      predicted += total_cm_[j * k + c];
      actual += total_cm_[c * k + j];
    }
    const double tp = total_cm_[c * k + c];
    const double denominator = predicted + actual - tp;
    if (denominator > 1e-9) {
      valid += 1;
      iou_sum += tp / (denominator + util::kEpsilon);
    }
  }
  return iou_sum / (valid + util::kEpsilon);
}

// ---- BinaryIoU ------------------------------------------------------------------------------------------

BinaryIoU::BinaryIoU(BinaryIoUOptions o)
    : IoU(o.name, "BinaryIoU", Setup{2, o.target_class_ids, std::nullopt, true, true, -1}), options_(std::move(o)) {}

void BinaryIoU::update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight) {
  autograd::NoRecordScope no_record;
  util::with_context(iou_context(*this, y_true, y_pred, sample_weight), [&] {
    // Class 1 where y_pred >= threshold, compared in float32 as Keras.
    const Tensor p = util::host_as(y_pred, DType::float32, name(), "y_pred");
    const float threshold = static_cast<float>(options_.threshold);
    std::vector<float> classes = p.to_vector<float>();
    for (float& v : classes) v = v >= threshold ? 1.0f : 0.0f;
    add_classes(y_true, constant(classes, p.shape()), sample_weight);
  });
}

// ---- MeanIoU, OneHotIoU, OneHotMeanIoU ---------------------------------------------------------------

MeanIoU::MeanIoU(std::string name, const char* cls, Setup setup) : IoU(std::move(name), cls, std::move(setup)) {}

MeanIoU::MeanIoU(MeanIoUOptions o)
    : MeanIoU(o.name, "MeanIoU",
              Setup{o.num_classes, all_classes(o.num_classes), o.ignore_class, o.sparse_y_true, o.sparse_y_pred,
                    o.axis}) {
  options_ = std::move(o);
}

OneHotIoU::OneHotIoU(OneHotIoUOptions o)
    : IoU(o.name, "OneHotIoU", Setup{o.num_classes, o.target_class_ids, o.ignore_class, false, o.sparse_y_pred, o.axis}),
      options_(std::move(o)) {}

OneHotMeanIoU::OneHotMeanIoU(OneHotMeanIoUOptions o)
    : MeanIoU(o.name, "OneHotMeanIoU",
              Setup{o.num_classes, all_classes(o.num_classes), o.ignore_class, false, o.sparse_y_pred, o.axis}),
      options_(std::move(o)) {}

}  // namespace keel::metrics
