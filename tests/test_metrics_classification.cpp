// Keras 3's F-scores and threshold-count metrics (keel/metrics/classification_metrics.hpp):
// F1Score / FBetaScore with each average, a threshold or the row maximum, and sample weights;
// TruePositives .. FalseNegatives at one or several thresholds; PrecisionAtRecall,
// RecallAtPrecision, SensitivityAtSpecificity and SpecificityAtSensitivity on Keras' 200-point
// grid. Numbers are worked by hand from Keras' formulas beside each check.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <vector>

using namespace keel;
using keel_test::f32;

namespace {

void check_round_trip(const metrics::Metric& m) {
  const nlohmann::json c = m.get_config();
  const auto rebuilt = metrics::from_config(m.class_name(), c);
  CHECK(rebuilt->class_name() == m.class_name());
  CHECK(rebuilt->get_config() == c);
}

// Keras' F1Score example.
Tensor f_true() { return f32({1, 1, 1, 1, 0, 0, 1, 1, 0}, {3, 3}); }
Tensor f_pred() { return f32({0.2f, 0.6f, 0.7f, 0.2f, 0.6f, 0.6f, 0.6f, 0.8f, 0.0f}, {3, 3}); }

}  // namespace

TEST_CASE("F1Score per class, micro, macro and weighted", "[metrics][fscore]") {
  // Threshold 0.5: predicted [[0, 1, 1], [0, 1, 1], [1, 1, 0]].
  // class 0: y [1, 1, 1], pred [0, 0, 1]: TP 1, FP 0, FN 2; P 1, R 1/3; F 2 (1/3) / (4/3) = 0.5
  // class 1: y [1, 0, 1], pred [1, 1, 1]: TP 2, FP 1, FN 0; P 2/3, R 1; F = 0.8
  // class 2: y [1, 0, 0], pred [1, 1, 0]: TP 1, FP 1, FN 0; P 1/2, R 1; F = 2/3
  metrics::F1Score f1({.threshold = 0.5});
  CHECK(f1.name() == "f1_score");
  f1.update_state(f_true(), f_pred());
  const auto per_class = f1.results();
  REQUIRE(per_class.size() == 3);
  CHECK(per_class[0] == Approx(0.5));
  CHECK(per_class[1] == Approx(0.8));
  CHECK(per_class[2] == Approx(2.0 / 3));
  CHECK_THROWS_AS(f1.result(), ValueError);  // three numbers: read results()

  metrics::F1Score macro({.average = "macro", .threshold = 0.5});
  macro.update_state(f_true(), f_pred());
  CHECK(macro.result() == Approx((0.5 + 0.8 + 2.0 / 3) / 3));
  // micro: TP 4, FP 2, FN 2 over all classes: P = R = 2/3, F = 2/3.
  metrics::F1Score micro({.average = "micro", .threshold = 0.5});
  micro.update_state(f_true(), f_pred());
  CHECK(micro.result() == Approx(2.0 / 3));
  // weighted by the true counts [3, 2, 1]: (0.5 * 3 + 0.8 * 2 + 2/3) / 6.
  metrics::F1Score weighted({.average = "weighted", .threshold = 0.5});
  weighted.update_state(f_true(), f_pred());
  CHECK(weighted.result() == Approx((1.5 + 1.6 + 2.0 / 3) / 6));

  // Two updates (rows 0-1, then row 2) accumulate to the same counts; reset starts again.
  metrics::F1Score split({.average = "macro", .threshold = 0.5});
  split.update_state(f32({1, 1, 1, 1, 0, 0}, {2, 3}), f32({0.2f, 0.6f, 0.7f, 0.2f, 0.6f, 0.6f}, {2, 3}));
  split.update_state(f32({1, 1, 0}, {1, 3}), f32({0.6f, 0.8f, 0.0f}, {1, 3}));
  CHECK(split.result() == Approx(macro.result()));
  split.reset_state();
  CHECK(split.result() == Approx(0.0));
}

TEST_CASE("F1Score without a threshold marks each row's maximum; sample weights", "[metrics][fscore]") {
  // Row maxima: row 0 0.7 -> [0, 0, 1]; row 1 0.6 twice -> [0, 1, 1]; row 2 0.8 -> [0, 1, 0].
  // class 0: TP 0 -> F 0; class 1: y [1, 0, 1], pred [0, 1, 1]: TP 1, FP 1, FN 1 -> F 0.5;
  // class 2: y [1, 0, 0], pred [1, 1, 0]: TP 1, FP 1 -> F 2/3.
  metrics::F1Score f1;
  f1.update_state(f_true(), f_pred());
  const auto r = f1.results();
  CHECK(r[0] == Approx(0.0).margin(1e-6));
  CHECK(r[1] == Approx(0.5));
  CHECK(r[2] == Approx(2.0 / 3));
  // A row of zeros predicts nothing (not every class): counts stay as they were.
  f1.update_state(f32({0, 0, 1}, {1, 3}), f32({0, 0, 0}, {1, 3}));
  CHECK(f1.results()[2] < r[2]);  // one more false negative for class 2: 2 * 0.5 * 0.5 / 1 = 0.5
  CHECK(f1.results()[2] == Approx(0.5));

  // Per-sample weights [1, 0, 1] leave row 1 out (threshold 0.5):
  // class 0: y [1, 1], pred [0, 1]: P 1, R 1/2 -> 2/3; class 1: y [1, 1], pred [1, 1] -> 1;
  // class 2: y [1, 0], pred [1, 0] -> 1.
  metrics::F1Score w({.threshold = 0.5});
  w.update_state(f_true(), f_pred(), f32({1, 0, 1}));
  CHECK(w.results()[0] == Approx(2.0 / 3));
  CHECK(w.results()[1] == Approx(1.0));
  CHECK(w.results()[2] == Approx(1.0));
  // A transposed (non-contiguous) y_pred reads by its logical layout.
  metrics::F1Score t({.threshold = 0.5});
  t.update_state(f_true(), transpose(transpose(f_pred())));
  CHECK(t.results()[1] == Approx(0.8));
}

TEST_CASE("FBetaScore weighs recall beta times", "[metrics][fscore]") {
  // beta 2: F = 5 P R / (4 P + R): class 0 (P 1, R 1/3): (5/3) / (13/3) = 5/13;
  // class 1 (P 2/3, R 1): (10/3) / (11/3) = 10/11; class 2 (P 1/2, R 1): 2.5 / 3.
  metrics::FBetaScore f({.average = "macro", .beta = 2.0, .threshold = 0.5});
  CHECK(f.name() == "fbeta_score");
  f.update_state(f_true(), f_pred());
  CHECK(f.result() == Approx((5.0 / 13 + 10.0 / 11 + 2.5 / 3) / 3));
  check_round_trip(f);
  // F1Score's config has no beta, FBetaScore's has.
  CHECK(f.get_config().at("beta") == 2.0);
  CHECK_FALSE(metrics::F1Score().get_config().contains("beta"));
  check_round_trip(metrics::F1Score({.average = "weighted", .threshold = 0.3}));
}

TEST_CASE("F-scores reject bad arguments and shapes", "[metrics][fscore][errors]") {
  CHECK_THROWS_AS(metrics::FBetaScore({.average = "mean"}), ValueError);
  CHECK_THROWS_AS(metrics::FBetaScore({.beta = 0.0}), ValueError);
  CHECK_THROWS_AS(metrics::F1Score({.threshold = 0.0}), ValueError);
  CHECK_THROWS_AS(metrics::F1Score({.threshold = 1.5}), ValueError);
  metrics::F1Score f;
  CHECK_THROWS_AS(f.update_state(f32({1, 0}), f32({0.3f, 0.2f})), ShapeError);  // rank 1
  CHECK_THROWS_AS(f.update_state(f32({1, 0}, {1, 2}), f32({0.3f, 0.2f, 0.1f}, {1, 3})), ShapeError);
  f.update_state(f_true(), f_pred());
  CHECK_THROWS_AS(f.update_state(f32({1, 0}, {1, 2}), f32({0.3f, 0.2f}, {1, 2})), ShapeError);  // 2 classes now
  CHECK_THROWS_AS(f.update_state(f_true(), f_pred(), f32({1, 2})), ShapeError);
}

TEST_CASE("TruePositives .. FalseNegatives count at each threshold", "[metrics][confusion]") {
  // y = [0, 1, 0, 1, 1], p = [0.2, 0.7, 0.6, 0.3, 0.9]. At 0.5 the positives are [0, 1, 1, 0, 1]:
  // TP 2 (1, 4), FP 1 (2), TN 1 (0), FN 1 (3).
  const Tensor y = f32({0, 1, 0, 1, 1}), p = f32({0.2f, 0.7f, 0.6f, 0.3f, 0.9f});
  metrics::TruePositives tp;
  metrics::FalsePositives fp;
  metrics::TrueNegatives tn;
  metrics::FalseNegatives fn;
  for (metrics::Metric* m : std::vector<metrics::Metric*>{&tp, &fp, &tn, &fn}) m->update_state(y, p);
  CHECK(tp.result() == 2);
  CHECK(fp.result() == 1);
  CHECK(tn.result() == 1);
  CHECK(fn.result() == 1);
  // A second update adds: the same batch weighted [1, 2, 3, 4, 5]: TP 2 + 5, FP 3, TN 1, FN 4.
  for (metrics::Metric* m : std::vector<metrics::Metric*>{&tp, &fp, &tn, &fn}) m->update_state(y, p, f32({1, 2, 3, 4, 5}));
  CHECK(tp.result() == 2 + 7);
  CHECK(fp.result() == 1 + 3);
  CHECK(tn.result() == 1 + 1);
  CHECK(fn.result() == 1 + 4);
  tp.reset_state();
  CHECK(tp.result() == 0);

  // A list {0.25, 0.65}: at 0.25 positives [0, 1, 1, 1, 1] (TP 3, FN 0), at 0.65 [0, 1, 0, 0, 1]
  // (TP 2, FN 1).
  metrics::TruePositives tps({.thresholds = {0.25, 0.65}});
  metrics::FalseNegatives fns({.thresholds = {0.25, 0.65}});
  tps.update_state(y, p);
  fns.update_state(y, p);
  CHECK(tps.results() == std::vector<double>{3, 2});
  CHECK(fns.results() == std::vector<double>{0, 1});
  CHECK_THROWS_AS(tps.result(), ValueError);
  // Evenly spaced {0, 0.5, 1} takes Keras' bucketed path: p > 0 for all (TP 3), > 0.5 (TP 2), > 1 none.
  metrics::TruePositives even({.thresholds = {0.0, 0.5, 1.0}});
  even.update_state(y, p);
  CHECK(even.results() == std::vector<double>{3, 2, 0});
  // Configs: a number stays a number, a list a list.
  CHECK(metrics::TruePositives({.thresholds = 0.3}).get_config().at("thresholds") == 0.3);
  CHECK(tps.get_config().at("thresholds") == std::vector<double>{0.25, 0.65});
  check_round_trip(tps);
  check_round_trip(metrics::FalsePositives({.thresholds = 0.7}));
  CHECK_THROWS_AS(metrics::TrueNegatives({.thresholds = 1.5}), ValueError);
  CHECK_THROWS_AS(tp.update_state(f32({1, 0}), f32({0.3f, 0.2f, 0.1f})), ShapeError);
}

namespace {

// y = [0, 0, 1, 1], p = [0.1, 0.4, 0.35, 0.8]. Against a threshold t (positive when p > t):
//   t < 0.1:         TP 2, FP 2, TN 0, FN 0  recall 1,   specificity 0,   precision 1/2
//   0.1 <= t < 0.35: TP 2, FP 1, TN 1, FN 0  recall 1,   specificity 1/2, precision 2/3
//   0.35 <= t < 0.4: TP 1, FP 1, TN 1, FN 1  recall 1/2, specificity 1/2, precision 1/2
//   0.4 <= t < 0.8:  TP 1, FP 0, TN 2, FN 1  recall 1/2, specificity 1,   precision 1
//   t >= 0.8:        TP 0, FP 0, TN 2, FN 2  recall 0,   specificity 1,   precision 0 (no_nan)
// Keras' 200-point grid 0, 1/199, ..., 1 has points in each range (no prediction sits on one).
Tensor r_true() { return f32({0, 0, 1, 1}); }
Tensor r_pred() { return f32({0.1f, 0.4f, 0.35f, 0.8f}); }

template <class M, class O>
double at(O options) {
  M m(options);
  m.update_state(r_true(), r_pred());
  return m.result();
}

}  // namespace

TEST_CASE("PrecisionAtRecall, RecallAtPrecision and the sensitivity/specificity pair", "[metrics][at]") {
  // Largest precision where recall >= 0.8: ranges 1-2, max(1/2, 2/3); recall >= 0.5: ranges 1-4, 1.
  CHECK(at<metrics::PrecisionAtRecall>(metrics::PrecisionAtRecallOptions{.recall = 0.8}) == Approx(2.0 / 3));
  CHECK(at<metrics::PrecisionAtRecall>(metrics::PrecisionAtRecallOptions{.recall = 0.5}) == Approx(1.0));
  // Largest recall where precision >= 0.9: range 4, 1/2; precision >= 0.6: ranges 2 and 4, 1.
  CHECK(at<metrics::RecallAtPrecision>(metrics::RecallAtPrecisionOptions{.precision = 0.9}) == Approx(0.5));
  CHECK(at<metrics::RecallAtPrecision>(metrics::RecallAtPrecisionOptions{.precision = 0.6}) == Approx(1.0));
  // Largest sensitivity where specificity >= 0.5: ranges 2-5, 1; >= 0.8: ranges 4-5, 1/2.
  CHECK(at<metrics::SensitivityAtSpecificity>(metrics::SensitivityAtSpecificityOptions{.specificity = 0.5}) ==
        Approx(1.0));
  CHECK(at<metrics::SensitivityAtSpecificity>(metrics::SensitivityAtSpecificityOptions{.specificity = 0.8}) ==
        Approx(0.5));
  // Largest specificity where sensitivity >= 0.8: ranges 1-2, 1/2; >= 0.4: ranges 1-4, 1.
  CHECK(at<metrics::SpecificityAtSensitivity>(metrics::SpecificityAtSensitivityOptions{.sensitivity = 0.8}) ==
        Approx(0.5));
  CHECK(at<metrics::SpecificityAtSensitivity>(metrics::SpecificityAtSensitivityOptions{.sensitivity = 0.4}) ==
        Approx(1.0));

  metrics::PrecisionAtRecall m({.recall = 0.8});
  CHECK(m.name() == "precision_at_recall");
  CHECK(m.thresholds().size() == 200);
  CHECK(m.thresholds().front() == 0.0);
  CHECK(m.thresholds().back() == 1.0);
  // Two halves accumulate to the whole; reset empties the counts (precision 0 everywhere).
  m.update_state(f32({0, 0}), f32({0.1f, 0.4f}));
  m.update_state(f32({1, 1}), f32({0.35f, 0.8f}));
  CHECK(m.result() == Approx(2.0 / 3));
  m.reset_state();
  CHECK(m.result() == 0.0);
  // Weights [1, 1, 1, 0] drop the 0.8 positive: y = [0, 0, 1], p = [0.1, 0.4, 0.35]; recall 1 holds
  // for t < 0.35, where precision is 1/3 (t < 0.1) or 1/2: the result is 1/2.
  metrics::PrecisionAtRecall w({.recall = 1.0});
  w.update_state(r_true(), r_pred(), f32({1, 1, 1, 0}));
  CHECK(w.result() == Approx(0.5));
  // No feasible threshold: labels all positive make every specificity 0/0 = 0 < 0.5: result 0.
  metrics::SensitivityAtSpecificity none({.specificity = 0.5});
  none.update_state(f32({1, 1}), f32({0.3f, 0.6f}));
  CHECK(none.result() == 0.0);
  // One threshold, 0.5: only 0.8 is positive: recall 1/2, precision 1.
  CHECK(at<metrics::PrecisionAtRecall>(metrics::PrecisionAtRecallOptions{.recall = 0.5, .num_thresholds = 1}) ==
        Approx(1.0));
  CHECK(at<metrics::PrecisionAtRecall>(metrics::PrecisionAtRecallOptions{.recall = 0.8, .num_thresholds = 1}) == 0.0);
}

TEST_CASE("rate-at-rate metrics: class_id, configs and errors", "[metrics][at][errors]") {
  // Class 1 of one-hot rows is the example above; class 0 is its complement.
  const Tensor y = f32({1, 0, 1, 0, 0, 1, 0, 1}, {4, 2});
  const Tensor p = f32({0.9f, 0.1f, 0.6f, 0.4f, 0.65f, 0.35f, 0.2f, 0.8f}, {4, 2});
  metrics::PrecisionAtRecall m({.recall = 0.8, .class_id = 1});
  m.update_state(y, p);
  CHECK(m.result() == Approx(2.0 / 3));
  CHECK(m.get_config().at("recall") == 0.8);
  CHECK(m.get_config().at("class_id") == 1);
  CHECK(m.get_config().at("num_thresholds") == 200);
  check_round_trip(m);
  check_round_trip(metrics::RecallAtPrecision({.precision = 0.7, .num_thresholds = 50}));
  check_round_trip(metrics::SensitivityAtSpecificity({.specificity = 0.3}));
  check_round_trip(metrics::SpecificityAtSensitivity({.sensitivity = 0.6, .class_id = 2}));

  CHECK_THROWS_AS(metrics::PrecisionAtRecall(), ValueError);  // recall is required
  CHECK_THROWS_AS(metrics::PrecisionAtRecall({.recall = 1.5}), ValueError);
  CHECK_THROWS_AS(metrics::RecallAtPrecision({.precision = -0.1}), ValueError);
  CHECK_THROWS_AS(metrics::SensitivityAtSpecificity({.specificity = 0.5, .num_thresholds = 0}), ValueError);
  CHECK_THROWS_AS(metrics::SpecificityAtSensitivity({.sensitivity = 0.5, .class_id = -1}), ValueError);
  metrics::PrecisionAtRecall bad({.recall = 0.5, .class_id = 3});
  CHECK_THROWS_AS(bad.update_state(y, p), ValueError);  // class 3 of 2
  CHECK_THROWS_AS(metrics::get("precision_at_recall"), ValueError);  // needs its recall
}

TEST_CASE("classification metrics resolve by Keras' names", "[metrics][resolve]") {
  for (const char* name : {"f1_score", "fbeta_score", "true_positives", "false_positives", "true_negatives",
                           "false_negatives", "F1Score", "TruePositives"}) {
    INFO(name);
    const auto m = metrics::get(name);
    CHECK(m->name() == name);
    check_round_trip(*m);
  }
}

TEST_CASE("fit logs an F1 score and true positives", "[metrics][training]") {
  // A zero Dense(1) with a sigmoid predicts 0.5 for every sample; y = [1, 0, 1, 0].
  // F1 micro at threshold 0.4: all positive, TP 2, FP 2, FN 0: P 1/2, R 1, F = 2/3.
  // TruePositives at 0.4: 2.
  models::Sequential model{
      layers::InputLayer({1}),
      layers::Dense(1, {.activation = "sigmoid", .kernel_initializer = "zeros", .bias_initializer = "zeros"})};
  model.compile({.optimizer = optimizers::SGD(0.0),
                 .loss = "binary_crossentropy",
                 .metrics = {metrics::F1Score({.average = "micro", .threshold = 0.4}),
                             metrics::TruePositives({.thresholds = 0.4})}});
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {4, 1}), y = constant({1.f, 0.f, 1.f, 0.f}, {4, 1});
  const auto h = model.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  REQUIRE(h.history.count("f1_score"));
  CHECK(h.history.at("f1_score")[0] == Approx(2.0 / 3));
  REQUIRE(h.history.count("true_positives"));
  CHECK(h.history.at("true_positives")[0] == Approx(2.0));
}
