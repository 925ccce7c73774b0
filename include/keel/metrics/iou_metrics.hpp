#pragma once
// Keras 3's intersection-over-union metrics (keras/src/metrics/iou_metrics.py): a weighted
// confusion matrix [true class][predicted class] accumulated over the updates, and per class
//   IoU_c = TP_c / (TP_c + FP_c + FN_c) = cm[c][c] / (row_c + column_c - cm[c][c]).
// The result is the mean over the target classes whose denominator is non-zero (> 1e-9), in
// Keras' form sum(TP / (den + 1e-7)) / (valid + 1e-7). Included by keel/metrics/metric.hpp.
//
//   metrics::MeanIoU miou({.num_classes = 3});
//   miou.update_state(labels, predicted_classes);
//
// Labels and predictions are class ids (truncated to integers, as Keras' int dtype) unless
// sparse_y_true / sparse_y_pred is false, when the argmax over `axis` is taken first; both are
// flattened and must have the same number of elements. Entries whose label or prediction is
// outside [0, num_classes), or whose label is ignore_class, are left out. Sample weights are
// flattened and broadcast to the entries. Keras 3 keeps the matrix in an int dtype (truncating
// float weights, with a warning); keel keeps doubles, so fractional weights count as given (the
// numbers of Keras' own docstring examples).
#include <optional>
#include <string>
#include <vector>

#include "keel/metrics/metric.hpp"

namespace keel::metrics {

struct IoUOptions {
  std::optional<int> num_classes = std::nullopt;  // required, >= 1
  std::vector<int> target_class_ids = {};         // required, each in [0, num_classes)
  std::string name = "io_u";
  std::optional<int> ignore_class = std::nullopt;
  bool sparse_y_true = true;
  bool sparse_y_pred = true;
  int axis = -1;  // the class axis of dense labels / predictions
};
class IoU : public Metric {
 public:
  explicit IoU(IoUOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  double result() const override;
  void reset_state() override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "IoU"; }
  int num_classes() const { return num_classes_; }
  const std::vector<int>& target_class_ids() const { return target_class_ids_; }
  // [true class][predicted class], num_classes() * num_classes() values.
  const std::vector<double>& total_confusion_matrix() const { return total_cm_; }

 protected:
  struct Setup {
    std::optional<int> num_classes;
    std::vector<int> target_class_ids;
    std::optional<int> ignore_class;
    bool sparse_y_true, sparse_y_pred;
    int axis;
  };
  IoU(std::string name, const char* cls, Setup setup);
  // The update of two tensors of class ids (after any argmax): the bounds mask and the counting.
  void add_classes(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight);

 private:
  IoUOptions options_;  // as given to IoU itself: what its get_config writes
  int num_classes_;
  std::vector<int> target_class_ids_;
  std::optional<int> ignore_class_;
  bool sparse_y_true_, sparse_y_pred_;
  int axis_;
  std::vector<double> total_cm_;
};

struct BinaryIoUOptions {
  std::vector<int> target_class_ids = {0, 1};  // among {0, 1}
  double threshold = 0.5;                       // y_pred >= threshold is class 1
  std::string name = "binary_io_u";
};
class BinaryIoU : public IoU {
 public:
  explicit BinaryIoU(BinaryIoUOptions options = {});
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override;
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "BinaryIoU"; }
  double threshold() const { return options_.threshold; }

 private:
  BinaryIoUOptions options_;
};

struct MeanIoUOptions {
  std::optional<int> num_classes = std::nullopt;  // required; every class is a target
  std::string name = "mean_io_u";
  std::optional<int> ignore_class = std::nullopt;
  bool sparse_y_true = true;
  bool sparse_y_pred = true;
  int axis = -1;
};
class MeanIoU : public IoU {
 public:
  explicit MeanIoU(MeanIoUOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "MeanIoU"; }

 protected:
  MeanIoU(std::string name, const char* cls, Setup setup);

 private:
  MeanIoUOptions options_;
};

struct OneHotIoUOptions {
  std::optional<int> num_classes = std::nullopt;  // required
  std::vector<int> target_class_ids = {};         // required
  std::string name = "one_hot_io_u";
  std::optional<int> ignore_class = std::nullopt;
  bool sparse_y_pred = false;  // labels are always one-hot
  int axis = -1;
};
class OneHotIoU : public IoU {
 public:
  explicit OneHotIoU(OneHotIoUOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "OneHotIoU"; }

 private:
  OneHotIoUOptions options_;
};

struct OneHotMeanIoUOptions {
  std::optional<int> num_classes = std::nullopt;  // required
  std::string name = "one_hot_mean_io_u";
  std::optional<int> ignore_class = std::nullopt;
  bool sparse_y_pred = false;
  int axis = -1;
};
class OneHotMeanIoU : public MeanIoU {
 public:
  explicit OneHotMeanIoU(OneHotMeanIoUOptions options = {});
  nlohmann::json get_config() const override;
  std::string class_name() const override { return "OneHotMeanIoU"; }

 private:
  OneHotMeanIoUOptions options_;
};

}  // namespace keel::metrics
