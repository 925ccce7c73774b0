// The Keras metrics (keel/metrics/metric.hpp): each metric's result over two update_state calls
// against numbers computed by hand in the test (several are Keras' documented examples),
// reset_state, sample weights, BinaryAccuracy on bool and integer predictions, errors that name
// the metric and its shapes, Precision/Recall on a known confusion matrix (thresholds, top_k,
// class_id), AUC on small examples worked through Keras' threshold grid and interpolation rule,
// "accuracy" resolved for each loss, MetricRef from names, objects and lambdas, and a custom
// Metric subclass.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

using namespace keel;
using keel_test::f32;
using keel_test::i64;
using Catch::Contains;

// ---- Mean and MeanMetricWrapper ---------------------------------------------------------------------

TEST_CASE("Mean averages values over updates, weighted by sample_weight", "[metrics][mean]") {
  metrics::Mean m;
  CHECK(m.result() == 0.0);  // nothing seen yet: 0, not NaN
  // update 1: [1, 3, 5, 7] -> total 16, count 4
  m.update_state(f32({1, 3, 5, 7}));
  CHECK(m.result() == Approx(4.0));
  // update 2: [10, 20] with weights [1, 3] -> total += 10 + 60, count += 4 -> 86 / 8
  m.update_state(f32({10, 20}), f32({1, 3}));
  CHECK(m.total() == Approx(86.0));
  CHECK(m.count() == Approx(8.0));
  CHECK(m.result() == Approx(10.75));
  m.reset_state();
  CHECK(m.result() == 0.0);
  // Keras' documented example: [1, 3, 5, 7] with weights [1, 1, 0, 0] -> 4 / 2
  m.update_state(f32({1, 3, 5, 7}), f32({1, 1, 0, 0}));
  CHECK(m.result() == Approx(2.0));
  // Values [N, 2] are averaged per sample first: [[1, 2], [3, 5]] -> 1.5 and 4, two samples.
  metrics::Mean per_sample({.name = "per_sample"});
  per_sample.update_state(f32({1, 2, 3, 5}, {2, 2}));
  CHECK(per_sample.result() == Approx(2.75));
  CHECK(per_sample.count() == Approx(2.0));
  // A scalar counts as one sample.
  per_sample.update_state(constant(8.0));
  CHECK(per_sample.result() == Approx((1.5 + 4 + 8) / 3));
  CHECK(per_sample.name() == "per_sample");
}

TEST_CASE("Mean rejects the (y_true, y_pred) form", "[metrics][mean][errors]") {
  metrics::Mean m;
  metrics::Metric& base = m;
  CHECK_THROWS_WITH(base.update_state(f32({1}), f32({1}), Tensor()), Contains("MeanMetricWrapper"));
}

TEST_CASE("MeanMetricWrapper keeps a running mean of a per-example function", "[metrics][mean]") {
  // fn = |y_pred - y_true| elementwise; [N, 2] values are averaged per sample.
  metrics::MeanMetricWrapper m([](const Tensor& t, const Tensor& p) { return abs(p - t); }, {.name = "abs_err"});
  // update 1: y_true [[0, 0]], y_pred [[1, 3]] -> sample mean 2
  m.update_state(f32({0, 0}, {1, 2}), f32({1, 3}, {1, 2}));
  // update 2: two samples [[1, 1], [0, 0]] vs [[1, 2], [4, 0]] -> 0.5 and 2, weights [2, 1]
  m.update_state(f32({1, 1, 0, 0}, {2, 2}), f32({1, 2, 4, 0}, {2, 2}), f32({2, 1}));
  // total 2 + 2 * 0.5 + 1 * 2 = 5, count 1 + 3 = 4
  CHECK(m.result() == Approx(1.25));
  CHECK(m.name() == "abs_err");
}

// ---- accuracies ---------------------------------------------------------------------------------------

TEST_CASE("Accuracy counts exact matches over two updates", "[metrics][accuracy]") {
  metrics::Accuracy m;
  // Keras' example: [[1], [2], [3], [4]] vs [[0], [2], [3], [4]] -> 3 of 4
  m.update_state(f32({1, 2, 3, 4}, {4, 1}), f32({0, 2, 3, 4}, {4, 1}));
  CHECK(m.result() == Approx(0.75));
  // update 2: [[1], [1]] vs [[1], [0]] -> 1 of 2; together 4 of 6
  m.update_state(f32({1, 1}, {2, 1}), f32({1, 0}, {2, 1}));
  CHECK(m.result() == Approx(4.0 / 6.0));
  m.reset_state();
  // With weights [1, 1, 0, 0]: the first two count, one matches -> 0.5
  m.update_state(f32({1, 2, 3, 4}, {4, 1}), f32({0, 2, 3, 4}, {4, 1}), f32({1, 1, 0, 0}));
  CHECK(m.result() == Approx(0.5));
  CHECK(m.name() == "accuracy");
  CHECK(m.direction() == "up");
}

TEST_CASE("BinaryAccuracy thresholds predictions", "[metrics][accuracy]") {
  metrics::BinaryAccuracy m;
  // Keras' example: [[1], [1], [0], [0]] vs [[0.98], [1], [0], [0.6]] -> 0.6 > 0.5 is wrong: 3 of 4
  m.update_state(f32({1, 1, 0, 0}, {4, 1}), f32({0.98f, 1, 0, 0.6f}, {4, 1}));
  CHECK(m.result() == Approx(0.75));
  // update 2: [1, 0] vs [0.3, 0.2] (rank 1) -> 1 of 2; together 4 of 6
  m.update_state(f32({1, 0}), f32({0.3f, 0.2f}));
  CHECK(m.result() == Approx(4.0 / 6.0));
  m.reset_state();
  m.update_state(f32({1, 1, 0, 0}, {4, 1}), f32({0.98f, 1, 0, 0.6f}, {4, 1}), f32({1, 0, 0, 1}));
  CHECK(m.result() == Approx(0.5));  // samples 0 (right) and 3 (wrong)
  // threshold 0.7: 0.6 is now a 0 -> all four right
  metrics::BinaryAccuracy strict({.threshold = 0.7});
  strict.update_state(f32({1, 1, 0, 0}, {4, 1}), f32({0.98f, 1, 0, 0.6f}, {4, 1}));
  CHECK(strict.result() == Approx(1.0));
  // Multi-label rows are averaged per sample: [[1, 0, 1]] vs [[0.9, 0.6, 0.2]] -> 1/3
  metrics::BinaryAccuracy multi;
  multi.update_state(f32({1, 0, 1}, {1, 3}), f32({0.9f, 0.6f, 0.2f}, {1, 3}));
  CHECK(multi.result() == Approx(1.0 / 3.0));
  CHECK_THROWS_AS(metrics::BinaryAccuracy({.threshold = 1.0}), ValueError);
}

TEST_CASE("BinaryAccuracy compares bool and integer predictions in float, as Keras 3", "[metrics][accuracy]") {
  // Keras 3 compares y_pred > threshold with type promotion: a bool prediction is 1.0 or 0.0
  // against 0.5. (Casting 0.5 to bool gives true, and true > true is false: every prediction
  // would read as 0, scoring only the false labels.)
  const Tensor labels = constant({true, false, true, true, false, false, true, false}, {2, 4});
  // bool against bool, the same values: every element matches -> 1 (not 3/8 + 1/8 per row)
  metrics::BinaryAccuracy same;
  same.update_state(labels, labels);
  CHECK(same.result() == Approx(1.0));
  CHECK(metrics::binary_accuracy(labels, labels).to_vector<float>() == std::vector<float>(8, 1.0f));
  // bool predictions against float labels; row 0 [1, 0, 1, 1] vs [T, F, F, T]: 3 of 4 right;
  // row 1 [0, 0, 1, 0] vs [F, T, T, F]: 3 of 4 -> per-sample means 0.75, 0.75 -> 0.75
  metrics::BinaryAccuracy mixed;
  mixed.update_state(f32({1, 0, 1, 1, 0, 0, 1, 0}, {2, 4}),
                     constant({true, false, false, true, false, true, true, false}, {2, 4}));
  CHECK(mixed.result() == Approx(0.75));
  // update 2, weighted: bool labels [T, F] vs bool predictions [T, T], weights [3, 1]: only the
  // first (weight 3) is right. Total 0.75 + 0.75 + 3, count 2 + 4 -> 4.5 / 6
  mixed.update_state(constant({true, false}, {2}), constant({true, true}, {2}), f32({3, 1}));
  CHECK(mixed.result() == Approx(4.5 / 6.0));
  // Integer predictions: 2 > 0.5 and 1 > 0.5 are 1, 0 is 0: [1, 0, 1, 0] vs [1, 0, 1, 1] -> 3 of 4
  metrics::BinaryAccuracy ints;
  ints.update_state(f32({1, 0, 1, 1}), i64({1, 0, 2, 0}, {4}));
  CHECK(ints.result() == Approx(0.75));
  // float64 predictions are compared in float64: 0.5 + 1e-10 > 0.5 (in float32 both are 0.5)
  metrics::BinaryAccuracy f64;
  f64.update_state(f32({1}), constant(std::vector<double>{0.5 + 1e-10}, {1}));
  CHECK(f64.result() == Approx(1.0));
}

TEST_CASE("mean metrics name themselves and the shapes when an op rejects their input", "[metrics][errors]") {
  metrics::BinaryAccuracy acc;
  CHECK_THROWS_AS(acc.update_state(f32({1, 0, 1, 1}), f32({0.5f, 0.2f, 0.9f})), ShapeError);
  CHECK_THROWS_WITH(acc.update_state(f32({1, 0, 1, 1}), f32({0.5f, 0.2f, 0.9f})),
                    Contains("binary_accuracy (BinaryAccuracy): y_true [4], y_pred [3]"));
  metrics::Mean mean;
  CHECK_THROWS_AS(mean.update_state(f32({1, 2, 3}), f32({1, 2})), ShapeError);
  CHECK_THROWS_WITH(mean.update_state(f32({1, 2, 3}), f32({1, 2})),
                    Contains("mean (Mean): values [3], sample_weight [2]"));
  CHECK(mean.result() == 0.0);  // nothing was added
}

TEST_CASE("CategoricalAccuracy compares the argmax of one-hot labels and predictions", "[metrics][accuracy]") {
  metrics::CategoricalAccuracy m;
  // Keras' example: labels 2 and 1; argmax of predictions 1 and 1 -> 1 of 2
  const Tensor y_true = f32({0, 0, 1, 0, 1, 0}, {2, 3});
  const Tensor y_pred = f32({0.1f, 0.9f, 0.8f, 0.05f, 0.95f, 0}, {2, 3});
  m.update_state(y_true, y_pred);
  CHECK(m.result() == Approx(0.5));
  // update 2: label 0, argmax 2 -> wrong; together 1 of 3
  m.update_state(f32({1, 0, 0}, {1, 3}), f32({0.2f, 0.3f, 0.5f}, {1, 3}));
  CHECK(m.result() == Approx(1.0 / 3.0));
  m.reset_state();
  m.update_state(y_true, y_pred, f32({0.7f, 0.3f}));  // only the second (weight 0.3) is right
  CHECK(m.result() == Approx(0.3));
}

TEST_CASE("SparseCategoricalAccuracy compares integer labels with the argmax", "[metrics][accuracy]") {
  metrics::SparseCategoricalAccuracy m;
  // Keras' example: labels [[2], [1]], argmax 1 and 1 -> 1 of 2
  const Tensor y_pred = f32({0.1f, 0.6f, 0.3f, 0.05f, 0.95f, 0}, {2, 3});
  m.update_state(f32({2, 1}, {2, 1}), y_pred);
  CHECK(m.result() == Approx(0.5));
  // update 2: int64 labels [0, 1, 2], argmax [0, 0, 2] -> 2 of 3; together 3 of 5
  m.update_state(i64({0, 1, 2}, {3}), f32({0.5f, 0.3f, 0.2f, 0.6f, 0.3f, 0.1f, 0.1f, 0.2f, 0.7f}, {3, 3}));
  CHECK(m.result() == Approx(0.6));
  m.reset_state();
  m.update_state(f32({2, 1}, {2, 1}), y_pred, f32({0.7f, 0.3f}));
  CHECK(m.result() == Approx(0.3));
}

TEST_CASE("TopKCategoricalAccuracy counts labels among the k largest predictions", "[metrics][accuracy]") {
  const Tensor y_true = f32({0, 0, 1, 0, 1, 0}, {2, 3});
  const Tensor y_pred = f32({0.1f, 0.9f, 0.8f, 0.05f, 0.95f, 0}, {2, 3});
  // k = 1 (Keras' example): label 2 is second in row 0, label 1 first in row 1 -> 0.5
  metrics::TopKCategoricalAccuracy k1({.k = 1});
  k1.update_state(y_true, y_pred);
  CHECK(k1.result() == Approx(0.5));
  // update 2: label 0 with predictions [0.5, 0.5, 0.5]: nothing is larger, so a tie is in -> 2 of 3
  k1.update_state(f32({1, 0, 0}, {1, 3}), f32({0.5f, 0.5f, 0.5f}, {1, 3}));
  CHECK(k1.result() == Approx(2.0 / 3.0));
  k1.reset_state();
  k1.update_state(y_true, y_pred, f32({0.7f, 0.3f}));
  CHECK(k1.result() == Approx(0.3));
  // k = 2: both labels are in the top two
  metrics::TopKCategoricalAccuracy k2({.k = 2});
  k2.update_state(y_true, y_pred);
  CHECK(k2.result() == Approx(1.0));
  CHECK(metrics::TopKCategoricalAccuracy().k() == 5);
  // The sparse form with labels [2, 1] (Keras' example): 0.5
  metrics::SparseTopKCategoricalAccuracy sparse({.k = 1});
  sparse.update_state(i64({2, 1}, {2}), y_pred);
  CHECK(sparse.result() == Approx(0.5));
}

// ---- regression metrics ----------------------------------------------------------------------------

TEST_CASE("MeanSquaredError and MeanAbsoluteError metrics average per-example errors", "[metrics][regression]") {
  metrics::MeanSquaredError mse;
  // Keras' example: [[0, 1], [0, 0]] vs [[1, 1], [0, 0]] -> per example 0.5 and 0 -> 0.25
  mse.update_state(f32({0, 1, 0, 0}, {2, 2}), f32({1, 1, 0, 0}, {2, 2}));
  CHECK(mse.result() == Approx(0.25));
  // update 2: [[1, 1]] vs [[3, 1]] -> (4 + 0) / 2 = 2; together (0.5 + 0 + 2) / 3
  mse.update_state(f32({1, 1}, {1, 2}), f32({3, 1}, {1, 2}));
  CHECK(mse.result() == Approx(2.5 / 3.0));
  mse.reset_state();
  mse.update_state(f32({0, 1, 0, 0}, {2, 2}), f32({1, 1, 0, 0}, {2, 2}), f32({1, 0}));
  CHECK(mse.result() == Approx(0.5));
  CHECK(mse.direction() == "down");

  metrics::MeanAbsoluteError mae;
  // [[0, 1], [0, 0]] vs [[1, 1], [0, 0]] -> 0.5 and 0; then [[1, 1]] vs [[3, 1]] -> 1
  mae.update_state(f32({0, 1, 0, 0}, {2, 2}), f32({1, 1, 0, 0}, {2, 2}));
  mae.update_state(f32({1, 1}, {1, 2}), f32({3, 1}, {1, 2}));
  CHECK(mae.result() == Approx(1.5 / 3.0));
  CHECK(mae.name() == "mean_absolute_error");
}

// ---- Precision / Recall -------------------------------------------------------------------------------

TEST_CASE("Precision and Recall on a known confusion matrix over two updates", "[metrics][precision][recall]") {
  // labels      1    1    1    0    | 0    0    1    0
  // predictions 0.9  0.6  0.4  0.7  | 0.2  0.1  0.8  0.55
  // at 0.5:     TP   TP   FN   FP   | TN   TN   TP   FP      -> TP 3, FP 2, FN 1, TN 2
  // precision 3 / 5 = 0.6, recall 3 / 4 = 0.75
  const Tensor t1 = f32({1, 1, 1, 0}), p1 = f32({0.9f, 0.6f, 0.4f, 0.7f});
  const Tensor t2 = f32({0, 0, 1, 0}), p2 = f32({0.2f, 0.1f, 0.8f, 0.55f});
  metrics::Precision precision;
  metrics::Recall recall;
  precision.update_state(t1, p1);
  recall.update_state(t1, p1);
  CHECK(precision.result() == Approx(2.0 / 3.0));  // first batch: TP 2, FP 1
  CHECK(recall.result() == Approx(2.0 / 3.0));     // TP 2, FN 1
  precision.update_state(t2, p2);
  recall.update_state(t2, p2);
  CHECK(precision.true_positives() == 3.0);
  CHECK(precision.false_positives() == 2.0);
  CHECK(recall.false_negatives() == 1.0);
  CHECK(precision.result() == Approx(0.6));
  CHECK(recall.result() == Approx(0.75));
  precision.reset_state();
  recall.reset_state();
  CHECK(precision.result() == 0.0);
  CHECK(recall.result() == 0.0);

  // threshold 0.65 on all eight: positives 0.9 (TP), 0.7 (FP), 0.8 (TP) -> precision 2/3, recall 2/4
  metrics::Precision p65({.thresholds = 0.65});
  metrics::Recall r65({.thresholds = 0.65});
  for (auto* m : std::vector<metrics::Metric*>{&p65, &r65}) {
    m->update_state(t1, p1);
    m->update_state(t2, p2);
  }
  CHECK(p65.result() == Approx(2.0 / 3.0));
  CHECK(r65.result() == Approx(0.5));

  // weights [1, 2, 3, 4] on the first batch: TP 0.9 (1) + 0.6 (2) = 3, FP 0.7 (4), FN 0.4 (3)
  // -> precision 3 / 7, recall 3 / 6
  precision.update_state(t1, p1, f32({1, 2, 3, 4}));
  recall.update_state(t1, p1, f32({1, 2, 3, 4}));
  CHECK(precision.result() == Approx(3.0 / 7.0));
  CHECK(recall.result() == Approx(0.5));
}

TEST_CASE("Precision and Recall with top_k and class_id", "[metrics][precision][recall]") {
  // top_k = 2 with predictions all equal (Keras' example): ties keep the lower indices 0 and 1,
  // whose labels are 0 -> two false positives, precision 0.
  metrics::Precision top2({.top_k = 2});
  top2.update_state(f32({0, 0, 1, 1}, {1, 4}), f32({1, 1, 1, 1}, {1, 4}));
  CHECK(top2.result() == 0.0);
  // top_k = 1 on rows [0.2, 0.9, 0.3] (label 1) and [0.8, 0.1, 0.6] (label 2): one TP, one FP;
  // recall: the second row's label is not in its top 1 -> 1 of 2.
  metrics::Precision top1({.top_k = 1});
  metrics::Recall rtop1({.top_k = 1});
  const Tensor labels = f32({0, 1, 0, 0, 0, 1}, {2, 3});
  const Tensor preds = f32({0.2f, 0.9f, 0.3f, 0.8f, 0.1f, 0.6f}, {2, 3});
  top1.update_state(labels, preds);
  rtop1.update_state(labels, preds);
  CHECK(top1.result() == Approx(0.5));
  CHECK(rtop1.result() == Approx(0.5));

  // class_id: one-hot labels [[0, 1], [1, 0], [0, 1]], predictions [[0.2, 0.8], [0.6, 0.4], [0.7, 0.3]]
  //   class 1: predictions [0.8, 0.4, 0.3], labels [1, 0, 1] -> TP 1, FP 0, FN 1
  //   class 0: predictions [0.2, 0.6, 0.7], labels [0, 1, 0] -> TP 1, FP 1, FN 0
  const Tensor y = f32({0, 1, 1, 0, 0, 1}, {3, 2});
  const Tensor p = f32({0.2f, 0.8f, 0.6f, 0.4f, 0.7f, 0.3f}, {3, 2});
  metrics::Precision p1({.class_id = 1}), p0({.class_id = 0});
  metrics::Recall r1({.class_id = 1}), r0({.class_id = 0});
  for (auto* m : std::vector<metrics::Metric*>{&p1, &p0, &r1, &r0}) m->update_state(y, p);
  CHECK(p1.result() == Approx(1.0));
  CHECK(r1.result() == Approx(0.5));
  CHECK(p0.result() == Approx(0.5));
  CHECK(r0.result() == Approx(1.0));
  // Per-sample weights [N] apply to every class of the row: weights [1, 1, 3] for class 1
  // -> TP 1, FN 3 -> recall 1/4.
  metrics::Recall rw({.class_id = 1});
  rw.update_state(y, p, f32({1, 1, 3}));
  CHECK(rw.result() == Approx(0.25));

  CHECK_THROWS_AS(metrics::Precision({.thresholds = 1.5}), ValueError);
  metrics::Precision bad_class({.class_id = 5});
  CHECK_THROWS_AS(bad_class.update_state(y, p), ValueError);
}

// ---- AUC ----------------------------------------------------------------------------------------------

TEST_CASE("AUC ROC with three thresholds follows Keras' trapezoidal rule", "[metrics][auc]") {
  // num_thresholds 3: thresholds [-eps, 0.5, 1 + eps]; labels [0, 0, 1, 1], predictions
  // [0, 0.5, 0.3, 0.9] (Keras' documented example, 0.75):
  //   -eps:  all positive          TP 2 FP 2 FN 0 TN 0  -> (FPR, TPR) = (1, 1)
  //   0.5:   only 0.9 > 0.5        TP 1 FP 0 FN 1 TN 2  -> (0, 0.5)
  //   1+eps: none                  TP 0 FP 0 FN 2 TN 2  -> (0, 0)
  //   area = (1 - 0) (1 + 0.5) / 2 + (0 - 0) (0.5 + 0) / 2 = 0.75
  metrics::AUC auc({.num_thresholds = 3});
  auc.update_state(f32({0, 0, 1, 1}), f32({0, 0.5f, 0.3f, 0.9f}));
  CHECK(auc.true_positives() == std::vector<double>{2, 1, 0});
  CHECK(auc.false_positives() == std::vector<double>{2, 0, 0});
  CHECK(auc.false_negatives() == std::vector<double>{0, 1, 2});
  CHECK(auc.true_negatives() == std::vector<double>{0, 2, 2});
  CHECK(auc.result() == Approx(0.75));
  // update 2: labels [1, 0], predictions [0.6, 0.4]. Now 3 positives, 3 negatives:
  //   -eps: (1, 1);  0.5: 0.9 and 0.6 -> TP 2, FP 0 -> (0, 2/3);  1+eps: (0, 0)
  //   area = 1 * (1 + 2/3) / 2 = 5/6
  auc.update_state(f32({1, 0}), f32({0.6f, 0.4f}));
  CHECK(auc.result() == Approx(5.0 / 6.0));
  auc.reset_state();
  CHECK(auc.result() == 0.0);
  CHECK(auc.true_positives() == std::vector<double>{0, 0, 0});
  // Weights [1, 1, 1, 3]: -eps: TP 4, FP 2 -> (1, 1); 0.5: TP 3 -> (0, 3/4); area 1 * 1.75 / 2
  auc.update_state(f32({0, 0, 1, 1}), f32({0, 0.5f, 0.3f, 0.9f}), f32({1, 1, 1, 3}));
  CHECK(auc.result() == Approx(0.875));
}

TEST_CASE("AUC interpolates linearly between coarse thresholds", "[metrics][auc]") {
  // A perfect ranking that the grid cannot see: labels [0, 1], predictions [0.2, 0.4], both
  // below the middle threshold 0.5: points (1, 1), (0, 0), (0, 0) -> one trapezoid of area 0.5.
  metrics::AUC coarse({.num_thresholds = 3});
  coarse.update_state(f32({0, 1}), f32({0.2f, 0.4f}));
  CHECK(coarse.result() == Approx(0.5));
  // The default grid of 200 separates them: area 1.
  metrics::AUC fine;
  fine.update_state(f32({0, 1}), f32({0.2f, 0.4f}));
  CHECK(fine.result() == Approx(1.0));
}

TEST_CASE("AUC with the default 200 thresholds", "[metrics][auc]") {
  metrics::AUC auc;
  CHECK(auc.num_thresholds() == 200);
  const auto& th = auc.thresholds();
  REQUIRE(th.size() == 200);
  CHECK(th[0] == Approx(-1e-7).margin(1e-12));
  CHECK(th[1] == Approx(1.0 / 199.0));
  CHECK(th[198] == Approx(198.0 / 199.0));
  CHECK(th[199] == Approx(1 + 1e-7));
  // A perfect classifier: labels [0, 0, 1, 1], predictions [0.1, 0.2, 0.8, 0.9]: the FPR falls
  // from 1 to 0 while the TPR is still 1 -> area 1.
  auc.update_state(f32({0, 0, 1, 1}), f32({0.1f, 0.2f, 0.8f, 0.9f}));
  CHECK(auc.result() == Approx(1.0));
  // The classic example labels [0, 0, 1, 1], predictions [0.1, 0.4, 0.35, 0.8]: every value in its
  // own bucket, so the points are the exact ROC corners (1,1) (0.5,1) (0.5,0.5) (0,0.5) (0,0):
  // 0.5 * 1 + 0 + 0.5 * 0.5 + 0 = 0.75
  metrics::AUC classic;
  classic.update_state(f32({0, 0, 1, 1}), f32({0.1f, 0.4f, 0.35f, 0.8f}));
  CHECK(classic.result() == Approx(0.75));
  // Constant predictions lie on the diagonal: 0.5. Inverted ranking: 0.
  metrics::AUC constant_pred;
  constant_pred.update_state(f32({0, 1, 0, 1}), f32({0.5f, 0.5f, 0.5f, 0.5f}));
  CHECK(constant_pred.result() == Approx(0.5));
  metrics::AUC inverted;
  inverted.update_state(f32({1, 1, 0, 0}), f32({0.1f, 0.2f, 0.8f, 0.9f}));
  CHECK(inverted.result() == Approx(0.0).margin(1e-12));
  // Predictions outside [0, 1] are clipped (Keras' bucketed update): 1.5 acts as 1, -2 as 0.
  metrics::AUC clipped;
  clipped.update_state(f32({0, 1}), f32({-2.0f, 1.5f}));
  CHECK(clipped.result() == Approx(1.0));
}

TEST_CASE("AUC PR interpolation and the minoring and majoring sums", "[metrics][auc]") {
  // The three-threshold example: TP [2, 1, 0], FP [2, 0, 0], FN [0, 1, 2].
  // PR interpolation, interval 0 -> 1: dTP = 1, P = TP + FP: 4 -> 1, dP = 3, slope = 1/3,
  //   intercept = TP_1 - slope P_1 = 2/3, ratio P_0 / P_1 = 4:
  //   slope (dTP + intercept log 4) / (TP_1 + FN_1) = (1 + (2/3) log 4) / 3 / 2
  // interval 1 -> 2: dTP = 1, P: 1 -> 0, slope 1, intercept 0, ratio 1 (P_2 = 0):
  //   1 * (1 + 0) / (TP_2 + FN_2) = 1 / 2
  const Tensor labels = f32({0, 0, 1, 1}), preds = f32({0, 0.5f, 0.3f, 0.9f});
  metrics::AUC pr({.num_thresholds = 3, .curve = "PR"});
  pr.update_state(labels, preds);
  CHECK(pr.result() == Approx((1 + (2.0 / 3.0) * std::log(4.0)) / 6.0 + 0.5));
  // ROC points x = [1, 0, 0], y = [1, 0.5, 0]:
  //   minoring: (1 - 0) min(1, 0.5) = 0.5;  majoring: (1 - 0) max(1, 0.5) = 1
  metrics::AUC minoring({.num_thresholds = 3, .summation_method = "minoring"});
  metrics::AUC majoring({.num_thresholds = 3, .summation_method = "majoring"});
  minoring.update_state(labels, preds);
  majoring.update_state(labels, preds);
  CHECK(minoring.result() == Approx(0.5));
  CHECK(majoring.result() == Approx(1.0));
  // PR with majoring: x = recall [1, 0.5, 0], y = precision [0.5, 1, 0]:
  //   (1 - 0.5) max(0.5, 1) + (0.5 - 0) max(1, 0) = 0.5 + 0.5 = 1
  metrics::AUC pr_major({.num_thresholds = 3, .curve = "PR", .summation_method = "majoring"});
  pr_major.update_state(labels, preds);
  CHECK(pr_major.result() == Approx(1.0));
  CHECK_THROWS_AS(metrics::AUC({.curve = "DET"}), ValueError);
  CHECK_THROWS_AS(metrics::AUC({.summation_method = "simpson"}), ValueError);
  CHECK_THROWS_AS(metrics::AUC({.num_thresholds = 1}), ValueError);
}

TEST_CASE("AUC with explicit thresholds and from_logits", "[metrics][auc]") {
  const Tensor labels = f32({0, 0, 1, 1}), preds = f32({0, 0.5f, 0.3f, 0.9f});
  // Explicit {0.5} is the evenly spaced three-point grid again: 0.75.
  metrics::AUC even({.thresholds = {0.5}});
  even.update_state(labels, preds);
  CHECK(even.num_thresholds() == 3);
  CHECK(even.result() == Approx(0.75));
  // Uneven {0.3, 0.6}: thresholds [-eps, 0.3, 0.6, 1 + eps]
  //   -eps: (FPR, TPR) = (1, 1);  0.3: 0.5 (neg) and 0.9 (pos) are above, 0.3 is not -> (0.5, 0.5)
  //   0.6: 0.9 -> (0, 0.5);  1+eps: (0, 0)
  //   area = 0.5 (1 + 0.5) / 2 + 0.5 (0.5 + 0.5) / 2 + 0 = 0.375 + 0.25 = 0.625
  metrics::AUC uneven({.thresholds = {0.6, 0.3}});
  uneven.update_state(labels, preds);
  CHECK(uneven.result() == Approx(0.625));
  const nlohmann::json config = uneven.get_config();
  CHECK(config.at("thresholds") == std::vector<double>{0.3, 0.6});
  CHECK(config.at("curve") == "ROC");
  // from_logits: logits [0.2, 3] -> sigmoid 0.55 and 0.95, both above 0.5: points (1,1), (1,1),
  // (0,0) -> 0.5. Read as probabilities instead, 0.2 is below 0.5 and 3 clips to 1: area 1.
  metrics::AUC logits({.num_thresholds = 3, .from_logits = true});
  metrics::AUC probs({.num_thresholds = 3});
  logits.update_state(f32({0, 1}), f32({0.2f, 3.0f}));
  probs.update_state(f32({0, 1}), f32({0.2f, 3.0f}));
  CHECK(logits.result() == Approx(0.5));
  CHECK(probs.result() == Approx(1.0));
}

// ---- names, resolution and MetricRef -----------------------------------------------------------------

TEST_CASE("accuracy resolves to the accuracy that suits the loss", "[metrics][resolve]") {
  auto sparse = metrics::get("accuracy", "sparse_categorical_crossentropy");
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(sparse.get()) != nullptr);
  CHECK(sparse->name() == "accuracy");
  CHECK(dynamic_cast<metrics::CategoricalAccuracy*>(metrics::get("accuracy", "categorical_crossentropy").get()) !=
        nullptr);
  CHECK(dynamic_cast<metrics::BinaryAccuracy*>(metrics::get("accuracy", "binary_crossentropy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::Accuracy*>(metrics::get("accuracy", "mse").get()) != nullptr);
  CHECK(dynamic_cast<metrics::Accuracy*>(metrics::get("accuracy").get()) != nullptr);
  // "acc" keeps its own name in History.
  auto acc = metrics::resolve_accuracy("sparse_categorical_crossentropy", "acc");
  CHECK(acc->name() == "acc");
  CHECK(metrics::get("acc", "binary_crossentropy")->name() == "acc");
  // From a loss object: its class decides, whatever its name.
  const losses::SparseCategoricalCrossentropy renamed({.from_logits = true, .name = "my_loss"});
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(metrics::resolve_accuracy(renamed).get()) != nullptr);
  CHECK(dynamic_cast<metrics::BinaryAccuracy*>(metrics::resolve_accuracy(losses::BinaryCrossentropy()).get()) !=
        nullptr);
  // Keras 3's shape rule: [N] labels against [N, 10] -> sparse; [N, 1] outputs -> binary;
  // [N, 10] against [N, 10] -> categorical.
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(
            metrics::resolve_accuracy(Shape{8}, Shape{8, 10}).get()) != nullptr);
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(
            metrics::resolve_accuracy(Shape{8, 1}, Shape{8, 10}).get()) != nullptr);
  CHECK(dynamic_cast<metrics::BinaryAccuracy*>(metrics::resolve_accuracy(Shape{8, 1}, Shape{8, 1}).get()) !=
        nullptr);
  CHECK(dynamic_cast<metrics::CategoricalAccuracy*>(metrics::resolve_accuracy(Shape{8, 10}, Shape{8, 10}).get()) !=
        nullptr);
}

TEST_CASE("metrics resolve by name under the name they were asked for", "[metrics][resolve]") {
  CHECK(dynamic_cast<metrics::BinaryAccuracy*>(metrics::get("binary_accuracy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::CategoricalAccuracy*>(metrics::get("categorical_accuracy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(metrics::get("sparse_categorical_accuracy").get()) !=
        nullptr);
  CHECK(dynamic_cast<metrics::TopKCategoricalAccuracy*>(metrics::get("top_k_categorical_accuracy").get()) !=
        nullptr);
  CHECK(dynamic_cast<metrics::Precision*>(metrics::get("precision").get()) != nullptr);
  CHECK(dynamic_cast<metrics::Recall*>(metrics::get("recall").get()) != nullptr);
  CHECK(dynamic_cast<metrics::AUC*>(metrics::get("auc").get()) != nullptr);
  auto mse = metrics::get("mse");
  CHECK(dynamic_cast<metrics::MeanSquaredError*>(mse.get()) != nullptr);
  CHECK(mse->name() == "mse");
  CHECK(metrics::get("mean_squared_error")->name() == "mean_squared_error");
  CHECK(dynamic_cast<metrics::MeanAbsoluteError*>(metrics::get("mae").get()) != nullptr);
  CHECK(metrics::get("AUC")->name() == "AUC");
  // A loss name as a metric: the running mean of that loss. Labels [1, 2] with predictions
  // [[0.05, 0.95, 0], [0.1, 0.8, 0.1]] -> (-log 0.95 - log 0.1) / 2.
  auto scce = metrics::get("sparse_categorical_crossentropy");
  scce->update_state(i64({1, 2}, {2}), f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3}));
  CHECK(scce->result() == Approx((-std::log(0.95) - std::log(0.1)) / 2).epsilon(1e-6));
  CHECK(scce->direction() == "down");
  CHECK_THROWS_WITH(metrics::get("f1_scores"), Contains("unknown metric \"f1_scores\""));
}

TEST_CASE("MetricRef holds names, objects, shared_ptrs and lambdas", "[metrics][metric_ref]") {
  const std::vector<metrics::MetricRef> refs = {
      "accuracy", metrics::AUC({.num_thresholds = 3}), std::make_shared<metrics::Precision>(),
      [](const Tensor& t, const Tensor& p) { return abs(p - t); }};
  CHECK(refs[0].is_name());
  CHECK(refs[0].name() == "accuracy");
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(refs[0].get("sparse_categorical_crossentropy").get()) !=
        nullptr);
  CHECK(dynamic_cast<metrics::SparseCategoricalAccuracy*>(
            refs[0].get(losses::SparseCategoricalCrossentropy({.from_logits = true})).get()) != nullptr);
  CHECK(refs[1].name() == "auc");
  CHECK(refs[1].get() == refs[1].get());  // an object is itself each time
  CHECK(dynamic_cast<metrics::Precision*>(refs[2].get().get()) != nullptr);
  CHECK(refs[3].name() == "mean_metric_wrapper");
  // A shared_ptr shares state with the caller.
  auto precision = std::make_shared<metrics::Precision>();
  const metrics::MetricRef shared = precision;
  shared.get()->update_state(f32({1, 0}), f32({0.9f, 0.8f}));
  CHECK(precision->result() == Approx(0.5));
  // A lambda becomes a running mean: |p - t| over [1, 0] vs [0.5, 1] -> 0.5 and 1 -> 0.75.
  const metrics::MetricRef fn([](const Tensor& t, const Tensor& p) { return abs(p - t); }, "abs_error");
  auto m = fn.get();
  m->update_state(f32({1, 0}), f32({0.5f, 1.0f}));
  CHECK(m->result() == Approx(0.75));
  CHECK(m->name() == "abs_error");
}

TEST_CASE("metrics do not record onto an active GradientTape", "[metrics][tape]") {
  Variable w(constant(std::vector<float>{0.5f, 2.0f}, {2}), "w");
  GradientTape tape;
  const Tensor pred = sigmoid(w.value());
  metrics::AUC auc;
  metrics::BinaryAccuracy acc;
  auc.update_state(f32({0, 1}), pred);
  acc.update_state(f32({0, 1}), pred);
  const Tensor loss = reduce_sum(pred);
  const auto g = tape.gradient(loss, w).to_vector<double>();
  // d sigmoid = s (1 - s)
  const double s0 = 1 / (1 + std::exp(-0.5)), s1 = 1 / (1 + std::exp(-2.0));
  CHECK(g[0] == Approx(s0 * (1 - s0)));
  CHECK(g[1] == Approx(s1 * (1 - s1)));
  CHECK(acc.result() == Approx(0.5));  // 0.62 > 0.5 is wrong for label 0, 0.88 right
}

namespace {

// A custom metric: the largest absolute error seen, weighted examples with weight 0 ignored.
class MaxAbsoluteError : public metrics::Metric {
 public:
  MaxAbsoluteError() : Metric("max_abs_error") {}
  void update_state(const Tensor& y_true, const Tensor& y_pred, const Tensor& sample_weight = {}) override {
    const auto t = y_true.to_vector<double>(), p = y_pred.to_vector<double>();
    const auto w = sample_weight.defined() ? sample_weight.to_vector<double>() : std::vector<double>(t.size(), 1.0);
    for (std::size_t i = 0; i < t.size(); ++i)
      if (w[i] != 0) max_ = std::max(max_, std::abs(p[i] - t[i]));
  }
  double result() const override { return max_; }
  void reset_state() override { max_ = 0; }

 private:
  double max_ = 0;
};

}  // namespace

TEST_CASE("a custom Metric subclass accumulates over updates", "[metrics][custom]") {
  auto custom = std::make_shared<MaxAbsoluteError>();
  const metrics::MetricRef ref = custom;
  CHECK(ref.name() == "max_abs_error");
  auto m = ref.get();
  m->update_state(f32({0, 1}), f32({0.5f, 3.0f}));               // errors 0.5, 2
  m->update_state(f32({0, 0}), f32({10.0f, 1.0f}), f32({0, 1}));  // 10 has weight 0; error 1
  CHECK(custom->result() == Approx(2.0));
  m->reset_state();
  CHECK(custom->result() == 0.0);
}

TEST_CASE("metric configs name their arguments as Keras does", "[metrics][config]") {
  const nlohmann::json p = metrics::Precision({.thresholds = 0.3, .class_id = 2}).get_config();
  CHECK(p.at("name") == "precision");
  CHECK(p.at("thresholds") == 0.3);
  CHECK(p.at("top_k").is_null());
  CHECK(p.at("class_id") == 2);
  const nlohmann::json a = metrics::AUC().get_config();
  CHECK(a.at("num_thresholds") == 200);
  CHECK(a.at("summation_method") == "interpolation");
  CHECK_FALSE(a.contains("thresholds"));
  CHECK(metrics::BinaryAccuracy({.threshold = 0.3}).get_config().at("threshold") == 0.3);
  CHECK(metrics::TopKCategoricalAccuracy({.k = 3}).get_config().at("k") == 3);
  CHECK(metrics::Accuracy().get_config().at("dtype") == "float32");
  CHECK(metrics::AUC().class_name() == "AUC");
}
