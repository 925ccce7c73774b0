// Keras 3's IoU metrics (keel/metrics/iou_metrics.hpp): IoU, MeanIoU, BinaryIoU, OneHotIoU and
// OneHotMeanIoU against confusion matrices worked by hand (Keras' documented examples among
// them), with sample weights, ignore_class, out-of-range ids, two updates, reset_state, a
// non-contiguous input, errors, configs and names.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <vector>

using namespace keel;
using keel_test::f32;
using keel_test::i64;

namespace {

void check_round_trip(const metrics::Metric& m) {
  const nlohmann::json c = m.get_config();
  const auto rebuilt = metrics::from_config(m.class_name(), c);
  CHECK(rebuilt->class_name() == m.class_name());
  CHECK(rebuilt->get_config() == c);
}

}  // namespace

TEST_CASE("MeanIoU and IoU on Keras' examples", "[metrics][iou]") {
  // y = [0, 0, 1, 1], p = [0, 1, 0, 1]: cm = [[1, 1], [1, 1]]; each class TP 1 / (2 + 2 - 1) = 1/3.
  const Tensor y = i64({0, 0, 1, 1}, {4}), p = i64({0, 1, 0, 1}, {4});
  metrics::MeanIoU m({.num_classes = 2});
  CHECK(m.name() == "mean_io_u");
  CHECK(m.direction() == "up");
  m.update_state(y, p);
  CHECK(m.result() == Approx(1.0 / 3));
  // Weights [0.3, 0.3, 0.3, 0.1]: cm = [[0.3, 0.3], [0.3, 0.1]]; class 0: 0.3 / (0.6 + 0.6 - 0.3),
  // class 1: 0.1 / (0.4 + 0.4 - 0.1); mean (1/3 + 1/7) / 2 = 0.238095.
  m.reset_state();
  m.update_state(y, p, f32({0.3f, 0.3f, 0.3f, 0.1f}));
  CHECK(m.result() == Approx((1.0 / 3 + 1.0 / 7) / 2));
  CHECK(m.total_confusion_matrix()[1] == Approx(0.3));  // cm[0][1]: label 0 predicted 1
  // IoU of class 0 only, and of both classes in one list.
  metrics::IoU iou0({.num_classes = 2, .target_class_ids = {0}});
  iou0.update_state(y, p, f32({0.3f, 0.3f, 0.3f, 0.1f}));
  CHECK(iou0.result() == Approx(1.0 / 3));
  CHECK(iou0.name() == "io_u");
  // Two updates add their matrices: the same batch twice keeps every ratio.
  metrics::MeanIoU twice({.num_classes = 2});
  twice.update_state(y, p);
  twice.update_state(y, p);
  CHECK(twice.result() == Approx(1.0 / 3));
  CHECK(twice.total_confusion_matrix() == std::vector<double>{2, 2, 2, 2});
  twice.reset_state();
  CHECK(twice.result() == 0.0);  // no class has a denominator: 0 / (0 + eps)
}

TEST_CASE("IoU leaves out ignore_class, ids out of range and classes never seen", "[metrics][iou]") {
  // num_classes 3, ignore_class 2: the entry labelled 2 is dropped; cm (0,0) 1, (0,1) 1, (1,1) 1.
  // class 0: 1 / (1 + 2 - 1) = 1/2; class 1: 1 / (2 + 1 - 1) = 1/2; class 2 has no entries and
  // is not averaged in: (1/2 + 1/2) / 2.
  metrics::MeanIoU m({.num_classes = 3, .ignore_class = 2});
  m.update_state(i64({0, 0, 1, 2}, {4}), i64({0, 1, 1, 0}, {4}));
  CHECK(m.result() == Approx(0.5));
  // A void label -1 as ignore_class, a label 5 and a prediction -3 outside [0, 2): only the first
  // entry counts, cm (0,0) = 1: class 0 IoU 1, class 1 not seen.
  metrics::MeanIoU v({.num_classes = 2, .ignore_class = -1});
  v.update_state(i64({0, -1, 5, 1}, {4}), i64({0, 1, 1, -3}, {4}));
  CHECK(v.result() == Approx(1.0));
  // Float ids truncate as Keras' int cast: 1.7 is class 1.
  metrics::MeanIoU f({.num_classes = 2});
  f.update_state(f32({0, 1.7f}), f32({0.2f, 1.0f}));
  CHECK(f.result() == Approx(1.0));
  // Rank-2 labels and weights are flattened: [[0, 1], [1, 1]] vs [[0, 1], [0, 1]] with weights
  // [[1, 1], [0, 1]]: cm (0,0) 1, (1,1) 2, (1,0) 0: both classes IoU 1.
  metrics::MeanIoU r({.num_classes = 2});
  r.update_state(i64({0, 1, 1, 1}, {2, 2}), i64({0, 1, 0, 1}, {2, 2}), f32({1, 1, 0, 1}, {2, 2}));
  CHECK(r.result() == Approx(1.0));
}

TEST_CASE("BinaryIoU thresholds predictions at >= threshold", "[metrics][iou]") {
  // Keras' example: threshold 0.3 turns p = [0.1, 0.2, 0.4, 0.7] into [0, 0, 1, 1]; with y =
  // [0, 1, 0, 1] cm = [[1, 1], [1, 1]]: 1/3. Weights [0.2, 0.3, 0.4, 0.1]: cm = [[0.2, 0.4],
  // [0.3, 0.1]]; class 0: 0.2 / (0.5 + 0.6 - 0.2) = 2/9, class 1: 0.1 / (0.5 + 0.4 - 0.1) = 1/8;
  // mean 0.173611.
  const Tensor y = f32({0, 1, 0, 1}), p = f32({0.1f, 0.2f, 0.4f, 0.7f});
  metrics::BinaryIoU m({.target_class_ids = {0, 1}, .threshold = 0.3});
  m.update_state(y, p);
  CHECK(m.result() == Approx(1.0 / 3));
  m.reset_state();
  m.update_state(y, p, f32({0.2f, 0.3f, 0.4f, 0.1f}));
  CHECK(m.result() == Approx((2.0 / 9 + 1.0 / 8) / 2));
  // A prediction equal to the threshold is class 1 (>=): p = 0.5 at the default 0.5.
  metrics::BinaryIoU one({.target_class_ids = {1}});
  one.update_state(f32({1}), f32({0.5f}));
  CHECK(one.result() == Approx(1.0));
  CHECK(metrics::BinaryIoU().name() == "binary_io_u");
  CHECK(metrics::get("binary_io_u")->class_name() == "BinaryIoU");
  check_round_trip(m);
}

TEST_CASE("OneHotIoU and OneHotMeanIoU take the argmax of one-hot inputs", "[metrics][iou]") {
  // Keras' example: label ids [2, 0, 1, 0], predicted ids [2, 2, 0, 2], weights [0.1, 0.2, 0.3, 0.4]:
  // cm[0][2] = 0.6, cm[1][0] = 0.3, cm[2][2] = 0.1. class 0: TP 0 (den 0.3 + 0.6); class 1: TP 0
  // (den 0.3); class 2: 0.1 / (0.7 + 0.1 - 0.1) = 1/7.
  const Tensor y = f32({0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0}, {4, 3});
  // The predictions as a transposed (non-contiguous) view of their [3, 4] transpose.
  const Tensor p = transpose(f32({0.2f, 0.1f, 0.5f, 0.1f, 0.3f, 0.2f, 0.3f, 0.4f, 0.5f, 0.7f, 0.1f, 0.5f}, {3, 4}));
  const Tensor w = f32({0.1f, 0.2f, 0.3f, 0.4f});
  metrics::OneHotIoU iou({.num_classes = 3, .target_class_ids = {0, 2}});
  iou.update_state(y, p, w);
  CHECK(iou.result() == Approx((0 + 1.0 / 7) / 2));
  metrics::OneHotMeanIoU mean({.num_classes = 3});
  mean.update_state(y, p, w);
  CHECK(mean.result() == Approx((0 + 0 + 1.0 / 7) / 3));
  CHECK(mean.name() == "one_hot_mean_io_u");
  // Sparse predictions with one-hot labels: ids [2, 2, 0, 2] given directly.
  metrics::OneHotMeanIoU sparse_pred({.num_classes = 3, .sparse_y_pred = true});
  sparse_pred.update_state(y, i64({2, 2, 0, 2}, {4}), w);
  CHECK(sparse_pred.result() == Approx(mean.result()));
  check_round_trip(iou);
  check_round_trip(mean);
}

TEST_CASE("IoU metrics reject bad arguments and inputs", "[metrics][iou][errors]") {
  CHECK_THROWS_AS(metrics::MeanIoU(), ValueError);                     // num_classes is required
  CHECK_THROWS_AS(metrics::MeanIoU({.num_classes = 0}), ValueError);
  CHECK_THROWS_AS(metrics::IoU({.num_classes = 2}), ValueError);       // no target class
  CHECK_THROWS_AS(metrics::IoU({.num_classes = 2, .target_class_ids = {2}}), ValueError);
  CHECK_THROWS_AS(metrics::BinaryIoU({.target_class_ids = {0, 3}}), ValueError);
  CHECK_THROWS_AS(metrics::get("mean_io_u"), ValueError);              // needs num_classes
  metrics::MeanIoU m({.num_classes = 2});
  CHECK_THROWS_AS(m.update_state(i64({0, 1, 1}, {3}), i64({0, 1}, {2})), ShapeError);
  CHECK_THROWS_AS(m.update_state(i64({0, 1}, {2}), i64({0, 1}, {2}), f32({1, 1, 1})), ShapeError);
  metrics::OneHotMeanIoU oh({.num_classes = 2, .axis = 3});
  CHECK_THROWS(oh.update_state(f32({1, 0}, {1, 2}), f32({1, 0}, {1, 2})));  // axis 3 of a rank-2 input
}

TEST_CASE("IoU configs carry Keras' fields and round-trip", "[metrics][iou][config]") {
  const metrics::IoU iou({.num_classes = 4,
                          .target_class_ids = {1, 3},
                          .name = "seg",
                          .ignore_class = 0,
                          .sparse_y_true = false,
                          .sparse_y_pred = false,
                          .axis = 1});
  const nlohmann::json c = iou.get_config();
  CHECK(c.at("name") == "seg");
  CHECK(c.at("num_classes") == 4);
  CHECK(c.at("target_class_ids") == std::vector<int>{1, 3});
  CHECK(c.at("ignore_class") == 0);
  CHECK(c.at("sparse_y_true") == false);
  CHECK(c.at("axis") == 1);
  check_round_trip(iou);
  check_round_trip(metrics::MeanIoU({.num_classes = 3, .ignore_class = 1, .sparse_y_pred = false}));
  const auto plain = metrics::MeanIoU({.num_classes = 3}).get_config();
  CHECK(plain.at("ignore_class").is_null());
  CHECK_FALSE(plain.contains("target_class_ids"));  // MeanIoU's config has no targets, as Keras'
}
