// Precision and Recall with a list of thresholds (one result per threshold), and AUC's
// multi_label, num_labels and label_weights (keel/metrics/metric.hpp), each against confusion
// matrices and curves worked out by hand in the comments, following Keras 3's
// confusion_metrics.py and metrics_utils.update_confusion_matrix_variables.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

using namespace keel;
using keel_test::f32;
using Catch::Contains;

namespace {

// Approximate equality of two vectors of doubles.
void check_all(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]));
}

// The two batches of Precision's and Recall's tests:
//   labels      1    1    1    0    | 0    0    1    0
//   predictions 0.9  0.6  0.4  0.7  | 0.2  0.1  0.8  0.55
const std::vector<float> kLabels1 = {1, 1, 1, 0}, kPreds1 = {0.9f, 0.6f, 0.4f, 0.7f};
const std::vector<float> kLabels2 = {0, 0, 1, 0}, kPreds2 = {0.2f, 0.1f, 0.8f, 0.55f};

template <class M>
void update_both(M& m) {
  m.update_state(f32(kLabels1), f32(kPreds1));
  m.update_state(f32(kLabels2), f32(kPreds2));
}

}  // namespace

// ---- Precision / Recall with several thresholds -------------------------------------------------------

TEST_CASE("Precision and Recall give one result per threshold of a list", "[metrics][precision][recall]") {
  // Over both batches (4 positive labels: 0.9, 0.6, 0.4, 0.8; 4 negative: 0.7, 0.2, 0.1, 0.55):
  //   0.3: predicted 0.9 0.6 0.4 0.8 (TP) 0.7 0.55 (FP)  -> TP 4 FP 2 FN 0 -> P 4/6, R 1
  //   0.5: predicted 0.9 0.6 0.8 (TP) 0.7 0.55 (FP)      -> TP 3 FP 2 FN 1 -> P 3/5, R 3/4
  //   0.7: predicted 0.9 0.8 (TP); 0.7 is not > 0.7      -> TP 2 FP 0 FN 2 -> P 1,   R 1/2
  metrics::Precision precision({.thresholds = {0.3, 0.5, 0.7}});
  metrics::Recall recall({.thresholds = std::vector<double>{0.3, 0.5, 0.7}});
  update_both(precision);
  update_both(recall);
  check_all(precision.results(), {4.0 / 6.0, 0.6, 1.0});
  check_all(recall.results(), {1.0, 0.75, 0.5});
  CHECK(precision.thresholds() == std::vector<double>{0.3, 0.5, 0.7});
  // One number is not defined for three thresholds: result() says to read results().
  CHECK_THROWS_AS(precision.result(), ValueError);
  CHECK_THROWS_WITH(precision.result(), Contains("results()") && Contains("3 thresholds"));
  CHECK_THROWS_AS(recall.result(), ValueError);
  CHECK_THROWS_AS(recall.true_positives(), ValueError);
  // After reset every threshold starts again from 0 (divide_no_nan: 0, not NaN).
  precision.reset_state();
  check_all(precision.results(), {0, 0, 0});

  // Thresholds are kept in the order given: {0.7, 0.3} -> P {1, 4/6}.
  metrics::Precision reversed({.thresholds = {0.7, 0.3}});
  update_both(reversed);
  check_all(reversed.results(), {1.0, 4.0 / 6.0});

  // A list of one still has a single result; the single-threshold API is unchanged.
  metrics::Precision one({.thresholds = {0.5}});
  metrics::Precision scalar({.thresholds = 0.5});
  update_both(one);
  update_both(scalar);
  CHECK(one.result() == Approx(0.6));
  CHECK(scalar.result() == Approx(0.6));
  CHECK(scalar.true_positives() == 3.0);
  CHECK(scalar.false_positives() == 2.0);
  check_all(scalar.results(), {0.6});

  // Weights apply at every threshold: first batch with weights [1, 2, 3, 4]:
  //   0.3: TP 0.9 (1) 0.6 (2) 0.4 (3) = 6, FP 0.7 (4) -> P 6/10, R 6/6
  //   0.5: TP 1 + 2 = 3, FP 4, FN 3               -> P 3/7,  R 3/6
  metrics::Precision wp({.thresholds = {0.3, 0.5}});
  metrics::Recall wr({.thresholds = {0.3, 0.5}});
  wp.update_state(f32(kLabels1), f32(kPreds1), f32({1, 2, 3, 4}));
  wr.update_state(f32(kLabels1), f32(kPreds1), f32({1, 2, 3, 4}));
  check_all(wp.results(), {0.6, 3.0 / 7.0});
  check_all(wr.results(), {1.0, 0.5});
}

TEST_CASE("Precision with evenly spaced thresholds takes Keras' bucketed path", "[metrics][precision]") {
  // {0, 0.5, 1} is evenly spaced: Keras buckets each prediction at ceil(p * 2) - 1 (p clipped to
  // [0, 1]) and counts it above the thresholds up to its bucket.
  //   0:   all eight are > 0 -> TP 4, FP 4 -> P 0.5, R 1
  //   0.5: as above          -> P 0.6, R 0.75
  //   1:   none              -> P 0 (no prediction positive), R 0
  metrics::Precision p({.thresholds = {0.0, 0.5, 1.0}});
  metrics::Recall r({.thresholds = {0.0, 0.5, 1.0}});
  update_both(p);
  update_both(r);
  check_all(p.results(), {0.5, 0.6, 0.0});
  check_all(r.results(), {1.0, 0.75, 0.0});
  // The bucketed path clips: a prediction of 1.5 counts as 1, which is not above threshold 1.
  // The uneven {0, 0.4, 1} compares directly, and 1.5 > 1 is a true positive there.
  metrics::Precision even({.thresholds = {0.0, 0.5, 1.0}});
  metrics::Precision uneven({.thresholds = {0.0, 0.4, 1.0}});
  even.update_state(f32({1}), f32({1.5f}));
  uneven.update_state(f32({1}), f32({1.5f}));
  check_all(even.results(), {1, 1, 0});
  check_all(uneven.results(), {1, 1, 1});
}

TEST_CASE("Precision and Recall thresholds are validated and configured as Keras", "[metrics][precision][config]") {
  CHECK_THROWS_AS(metrics::Precision({.thresholds = {0.3, 1.2}}), ValueError);
  CHECK_THROWS_WITH(metrics::Recall({.thresholds = {-0.1}}), Contains("[0, 1]"));
  CHECK_THROWS_AS(metrics::Precision({.thresholds = std::vector<double>{}}), ValueError);
  // get_config reports what was given: a list, a float, or null (Keras' init_thresholds).
  const nlohmann::json list = metrics::Precision({.thresholds = {0.3, 0.5, 0.7}}).get_config();
  CHECK(list.at("thresholds") == std::vector<double>{0.3, 0.5, 0.7});
  const nlohmann::json one_list = metrics::Recall({.thresholds = {0.5}}).get_config();
  CHECK(one_list.at("thresholds").is_array());
  CHECK(one_list.at("thresholds") == std::vector<double>{0.5});
  const nlohmann::json scalar = metrics::Recall({.thresholds = 0.25, .top_k = 2}).get_config();
  CHECK(scalar.at("thresholds").is_number());
  CHECK(scalar.at("thresholds") == 0.25);
  CHECK(scalar.at("top_k") == 2);
  CHECK(metrics::Precision().get_config().at("thresholds").is_null());
  // The applied thresholds: 0.5 by default, Keras' NEG_INF with top_k and none given.
  CHECK(metrics::Precision().thresholds() == std::vector<double>{0.5});
  CHECK(metrics::Precision({.top_k = 1}).thresholds()[0] == Approx(-1e10));

  // from_config restores a list as a list and a float as a float.
  const auto rebuilt = metrics::from_config("Precision", list);
  auto* p = dynamic_cast<metrics::Precision*>(rebuilt.get());
  REQUIRE(p != nullptr);
  CHECK(p->thresholds() == std::vector<double>{0.3, 0.5, 0.7});
  CHECK(p->get_config() == list);
  CHECK(metrics::from_config("Recall", scalar)->get_config() == scalar);
  CHECK(metrics::from_config("Recall", one_list)->get_config() == one_list);
  CHECK_THROWS_WITH(metrics::from_config("Precision", {{"thresholds", "high"}}), Contains("thresholds"));
}

// ---- AUC: multi_label, num_labels, label_weights ---------------------------------------------------------

namespace {

// Two labels over four samples; num_thresholds = 3 gives the grid [-eps, 0.5, 1 + eps].
//   label 0: labels [0, 0, 1, 1], predictions [0, 0.5, 0.3, 0.9]  (Keras' documented example)
//   label 1: labels [1, 1, 1, 0], predictions [0.8, 0.2, 0.6, 0.4]
const std::vector<float> kTwoLabels = {0, 1, 0, 1, 1, 1, 1, 0};
const std::vector<float> kTwoPreds = {0, 0.8f, 0.5f, 0.2f, 0.3f, 0.6f, 0.9f, 0.4f};
Tensor two_labels() { return f32(kTwoLabels, {4, 2}); }
Tensor two_preds() { return f32(kTwoPreds, {4, 2}); }

// Per label, ROC over [-eps, 0.5, 1 + eps]:
//   label 0: -eps TP 2 FP 2 (1, 1); 0.5: 0.9 -> TP 1 FP 0 (0, 1/2); 1+eps (0, 0)
//            area = (1 - 0)(1 + 1/2)/2 + 0 = 3/4
//   label 1: -eps TP 3 FP 1 (1, 1); 0.5: 0.8 0.6 -> TP 2 FP 0 (0, 2/3); 1+eps (0, 0)
//            area = (1 - 0)(1 + 2/3)/2 = 5/6
constexpr double kArea0 = 0.75, kArea1 = 5.0 / 6.0;

}  // namespace

TEST_CASE("AUC multi_label keeps one curve per label and averages their areas", "[metrics][auc]") {
  metrics::AUC auc({.num_thresholds = 3, .multi_label = true});
  CHECK(auc.num_labels() == 0);  // sized at the first update
  CHECK(auc.result() == 0.0);
  auc.update_state(two_labels(), two_preds());
  CHECK(auc.num_labels() == 2);
  // Counts laid out [threshold][label]: TP (label 0, label 1) = (2, 3), (1, 2), (0, 0).
  CHECK(auc.true_positives() == std::vector<double>{2, 3, 1, 2, 0, 0});
  CHECK(auc.false_positives() == std::vector<double>{2, 1, 0, 0, 0, 0});
  CHECK(auc.false_negatives() == std::vector<double>{0, 0, 1, 1, 2, 3});
  CHECK(auc.true_negatives() == std::vector<double>{0, 0, 2, 1, 2, 1});
  CHECK(auc.result() == Approx((kArea0 + kArea1) / 2));  // 19/24

  // label_weights [1, 3] average the areas: (3/4 + 3 * 5/6) / 4 = 13/16.
  metrics::AUC weighted({.num_thresholds = 3, .multi_label = true, .label_weights = {1, 3}});
  weighted.update_state(two_labels(), two_preds());
  CHECK(weighted.result() == Approx((kArea0 + 3 * kArea1) / 4));

  // Per-sample weights [1, 1, 1, 0] drop the last row of both labels:
  //   label 0: labels [0, 0, 1], predictions [0, 0.5, 0.3]: -eps (1, 1); 0.5: nothing above
  //            (0, 0) -> area 1 * (1 + 0)/2 = 1/2
  //   label 1: labels [1, 1, 1]: no negatives, so the FPR is 0 (divide_no_nan) at every
  //            threshold -> area 0
  metrics::AUC masked({.num_thresholds = 3, .multi_label = true});
  masked.update_state(two_labels(), two_preds(), f32({1, 1, 1, 0}));
  CHECK(masked.result() == Approx(0.25));

  // reset_state keeps the labels it was built for, as Keras' built variables.
  auc.reset_state();
  CHECK(auc.num_labels() == 2);
  CHECK(auc.true_positives() == std::vector<double>(6, 0.0));
}

TEST_CASE("AUC multi_label with explicit thresholds and the PR curve", "[metrics][auc]") {
  // Uneven thresholds {0.35, 0.7}: the grid [-eps, 0.35, 0.7, 1 + eps], compared directly.
  //   label 0: -eps (1, 1); 0.35: 0.5 (neg) 0.9 (pos) -> (1/2, 1/2); 0.7: 0.9 -> (0, 1/2); (0, 0)
  //            area = (1/2)(1 + 1/2)/2 + (1/2)(1/2 + 1/2)/2 + 0 = 3/8 + 1/4 = 5/8
  //   label 1: -eps (1, 1); 0.35: 0.8 0.6 (pos) 0.4 (neg) -> (1, 2/3); 0.7: 0.8 -> (0, 1/3); (0, 0)
  //            area = 0 + (1 - 0)(2/3 + 1/3)/2 + 0 = 1/2
  metrics::AUC uneven({.thresholds = {0.35, 0.7}, .multi_label = true});
  uneven.update_state(two_labels(), two_preds());
  CHECK(uneven.result() == Approx((5.0 / 8.0 + 0.5) / 2));

  // PR interpolation per label (num_thresholds 3):
  //   label 0: TP [2, 1, 0], FP [2, 0, 0], FN [0, 1, 2] -> (1 + (2/3) log 4) / 6 + 1/2 (as the
  //            single-label test derives it)
  //   label 1: TP [3, 2, 0], FP [1, 0, 0], FN [0, 1, 3]
  //            0 -> 1: dTP 1, P 4 -> 2, slope 1/2, intercept 2 - 1 = 1, ratio 2:
  //                    (1/2)(1 + log 2) / (TP_1 + FN_1 = 3)
  //            1 -> 2: dTP 2, P 2 -> 0, slope 1, intercept 0, ratio 1 (P_2 = 0): 2 / 3
  const double pr0 = (1 + (2.0 / 3.0) * std::log(4.0)) / 6.0 + 0.5;
  const double pr1 = 0.5 * (1 + std::log(2.0)) / 3.0 + 2.0 / 3.0;
  metrics::AUC pr({.num_thresholds = 3, .curve = "PR", .multi_label = true, .num_labels = 2});
  pr.update_state(two_labels(), two_preds());
  CHECK(pr.result() == Approx((pr0 + pr1) / 2));
}

TEST_CASE("AUC label_weights weight the flattened points when multi_label is false", "[metrics][auc]") {
  // Flattened, unweighted: 5 positives (0.8, 0.2, 0.3, 0.6, 0.9), 3 negatives (0, 0.5, 0.4).
  //   -eps (1, 1); 0.5: 0.8 0.6 0.9 (pos), no negative -> (0, 3/5); (0, 0)
  //   area = (1 + 3/5)/2 = 4/5
  metrics::AUC flat({.num_thresholds = 3});
  flat.update_state(two_labels(), two_preds());
  CHECK(flat.result() == Approx(0.8));
  // label_weights [1, 3]: elements of column 1 weigh 3.
  //   positives: col 0: 0.3, 0.9 (1 each); col 1: 0.8, 0.2, 0.6 (3 each) -> 11
  //   negatives: col 0: 0, 0.5 (1 each); col 1: 0.4 (3)               -> 5
  //   0.5: TP 0.9 (1) + 0.8 (3) + 0.6 (3) = 7, FP 0 -> (0, 7/11)
  //   area = (1 + 7/11)/2 = 9/11
  metrics::AUC weighted({.num_thresholds = 3, .label_weights = {1, 3}});
  weighted.update_state(two_labels(), two_preds());
  CHECK(weighted.true_positives() == std::vector<double>{11, 7, 0});
  CHECK(weighted.true_negatives() == std::vector<double>{0, 5, 5});
  CHECK(weighted.result() == Approx(9.0 / 11.0));
  // With per-sample weights too, each point weighs both: weights [1, 1, 1, 0] drop row 3.
  //   positives: 0.8 (3), 0.2 (3), 0.3 (1), 0.6 (3) -> 10; negatives: 0 (1), 0.5 (1) -> 2
  //   0.5: TP 0.8 + 0.6 = 6 -> (0, 6/10); area = (1 + 0.6)/2 = 0.8
  metrics::AUC both({.num_thresholds = 3, .label_weights = {1, 3}});
  both.update_state(two_labels(), two_preds(), f32({1, 1, 1, 0}));
  CHECK(both.result() == Approx(0.8));
}

TEST_CASE("AUC multi-label options are validated with clear errors", "[metrics][auc][errors]") {
  // Keras: num_labels only with multi_label.
  CHECK_THROWS_WITH(metrics::AUC({.num_labels = 2}), Contains("num_labels is needed only when multi_label"));
  CHECK_THROWS_AS(metrics::AUC({.multi_label = true, .num_labels = 0}), ValueError);
  CHECK_THROWS_AS(metrics::AUC({.label_weights = {1, -1}}), ValueError);
  CHECK_THROWS_AS(metrics::AUC({.multi_label = true, .num_labels = 2, .label_weights = {1, 2, 3}}), ValueError);
  // num_labels sizes the counts at construction.
  metrics::AUC built({.num_thresholds = 3, .multi_label = true, .num_labels = 2});
  CHECK(built.num_labels() == 2);
  CHECK(built.true_positives().size() == 6);
  // ... and y_pred must then have two labels.
  CHECK_THROWS_AS(built.update_state(f32({0, 1, 0}, {1, 3}), f32({0.1f, 0.2f, 0.3f}, {1, 3})), ShapeError);
  CHECK_THROWS_WITH(built.update_state(f32({0, 1, 0}, {1, 3}), f32({0.1f, 0.2f, 0.3f}, {1, 3})),
                    Contains("keeps 2 labels") && Contains("[1,3]"));
  // multi_label needs y_pred of rank 2.
  metrics::AUC rank({.multi_label = true});
  CHECK_THROWS_WITH(rank.update_state(f32({0, 1}), f32({0.1f, 0.7f})), Contains("rank 2") && Contains("[2]"));
  // Flattened label weights need one weight per column of y_pred.
  metrics::AUC columns({.label_weights = {1, 2, 3}});
  CHECK_THROWS_AS(columns.update_state(two_labels(), two_preds()), ShapeError);
  // Labels and predictions of different shapes name the metric and both shapes.
  metrics::AUC shapes({.multi_label = true});
  CHECK_THROWS_WITH(shapes.update_state(f32({0, 1, 1}, {1, 3}), two_preds()),
                    Contains("auc") && Contains("[1,3]") && Contains("[4,2]"));
}

TEST_CASE("AUC configs report multi_label, num_labels and label_weights and round-trip", "[metrics][auc][config]") {
  const metrics::AUC auc({.num_thresholds = 3, .multi_label = true, .num_labels = 2, .label_weights = {1, 3}});
  const nlohmann::json c = auc.get_config();
  CHECK(c.at("multi_label") == true);
  CHECK(c.at("num_labels") == 2);
  CHECK(c.at("label_weights") == std::vector<double>{1, 3});
  const nlohmann::json plain = metrics::AUC().get_config();
  CHECK(plain.at("multi_label") == false);
  CHECK(plain.at("num_labels").is_null());
  CHECK(plain.at("label_weights").is_null());
  // from_config rebuilds the same metric: the same config and the same area.
  const auto rebuilt = metrics::from_config("AUC", c);
  CHECK(rebuilt->get_config() == c);
  rebuilt->update_state(two_labels(), two_preds());
  CHECK(rebuilt->result() == Approx((kArea0 + 3 * kArea1) / 4));
}

TEST_CASE("fit logs one entry per threshold of a Precision given a list", "[metrics][training]") {
  // y = [1, 0, 1, 0]; a Dense(1) with kernel 0 and bias 0 followed by a fixed "sigmoid" predicts
  // 0.5 for every sample: at threshold 0.3 all four are positive (precision 2/4 = 0.5), at 0.7
  // none is (precision 0 by Keras' divide_no_nan).
  models::Sequential model{layers::InputLayer({1}),
                           layers::Dense(1, {.activation = "sigmoid", .kernel_initializer = "zeros", .bias_initializer = "zeros"})};
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "binary_crossentropy",
                 .metrics = {metrics::Precision({.thresholds = {0.3, 0.7}})}});
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {4, 1}), y = constant({1.f, 0.f, 1.f, 0.f}, {4, 1});
  const auto h = model.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  REQUIRE(h.history.count("precision_0"));
  CHECK(h.history.at("precision_0")[0] == Approx(0.5));
  CHECK(h.history.at("precision_1")[0] == Approx(0.0));
  CHECK_FALSE(h.history.count("precision"));
}
