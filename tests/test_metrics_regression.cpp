// Keras 3's regression, hinge and reduction metrics (keel/metrics/regression_metrics.hpp):
// RootMeanSquaredError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError,
// CosineSimilarity, LogCoshError, R2Score, Hinge / SquaredHinge / CategoricalHinge, Sum and a
// MeanMetricWrapper of a custom function. Each against numbers worked by hand from Keras'
// formulas (several are Keras' documented examples), with sample weights, two updates,
// reset_state, a non-contiguous input, errors, names, config round trips and a fit History.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <cmath>
#include <vector>

using namespace keel;
using keel_test::f32;

namespace {

// The same metric rebuilt from its config reports the same config.
void check_round_trip(const metrics::Metric& m) {
  const nlohmann::json c = m.get_config();
  const auto rebuilt = metrics::from_config(m.class_name(), c);
  CHECK(rebuilt->class_name() == m.class_name());
  CHECK(rebuilt->get_config() == c);
}

}  // namespace

TEST_CASE("RootMeanSquaredError is the root of the running mean of squared errors", "[metrics][regression]") {
  // Keras' example: per-sample mean squared errors [(1 + 0) / 2, 0] = [0.5, 0]; mean 0.25; root 0.5.
  metrics::RootMeanSquaredError m;
  CHECK(m.name() == "root_mean_squared_error");
  CHECK(m.direction() == "down");
  const Tensor y = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 0, 0}, {2, 2});
  m.update_state(y, p);
  CHECK(m.result() == Approx(0.5));
  // A second update [[2, 2]] vs [[0, 0]]: one more sample with mean squared error 4:
  // total 0.5 + 0 + 4 = 4.5 over 3 samples, sqrt(1.5) (the root of the running mean, not the
  // mean of the batches' roots (0.5 + 2) / 2).
  m.update_state(f32({2, 2}, {1, 2}), f32({0, 0}, {1, 2}));
  CHECK(m.result() == Approx(std::sqrt(1.5)));
  m.reset_state();
  CHECK(m.result() == 0.0);
  // Weights [1, 0]: only the first sample, sqrt(0.5) = 0.70710677 (Keras' example).
  m.update_state(y, p, f32({1, 0}));
  CHECK(m.result() == Approx(std::sqrt(0.5)));
  // An empty batch changes nothing.
  m.update_state(f32({}, {0, 2}), f32({}, {0, 2}));
  CHECK(m.result() == Approx(std::sqrt(0.5)));
}

TEST_CASE("MeanAbsolutePercentageError and MeanSquaredLogarithmicError", "[metrics][regression]") {
  // MAPE = 100 mean(|y - p| / max(|y|, 1e-7)): row 0 (|1-2|/1 + 0) / 2 = 0.5 -> 50,
  // row 1 (|4-2|/4 + 0) / 2 = 0.25 -> 25; mean 37.5; with weights [1, 3]: (50 + 75) / 4 = 31.25.
  const Tensor y = f32({1, 2, 4, 5}, {2, 2}), p = f32({2, 2, 2, 5}, {2, 2});
  metrics::MeanAbsolutePercentageError mape;
  mape.update_state(y, p);
  CHECK(mape.result() == Approx(37.5));
  mape.reset_state();
  mape.update_state(y, p, f32({1, 3}));
  CHECK(mape.result() == Approx(31.25));
  // A zero label divides by 1e-7: |0 - 1| / 1e-7 * 100 = 1e9.
  CHECK(metrics::mean_absolute_percentage_error(f32({0}, {1, 1}), f32({1}, {1, 1})).item<float>() ==
        Approx(1e9).epsilon(1e-5));

  // MSLE = mean((log(max(p, eps) + 1) - log(max(y, eps) + 1))^2): y = [0, 1], p = [1, 1]:
  // ((log 2 - log(1 + 1e-7))^2 + 0) / 2.
  metrics::MeanSquaredLogarithmicError msle;
  msle.update_state(f32({0, 1}, {1, 2}), f32({1, 1}, {1, 2}));
  const double d = std::log(2.0) - std::log1p(1e-7);
  CHECK(msle.result() == Approx(d * d / 2));
  // A second sample with equal values adds 0: the mean halves.
  msle.update_state(f32({3, 3}, {1, 2}), f32({3, 3}, {1, 2}));
  CHECK(msle.result() == Approx(d * d / 4));
  // Negative predictions are clipped at 1e-7 before the log: p = -5 reads as 1e-7, like y = 0.
  CHECK(metrics::mean_squared_logarithmic_error(f32({0}, {1, 1}), f32({-5}, {1, 1})).item<float>() == Approx(0.0));
}

TEST_CASE("CosineSimilarity averages the cosine of each sample's vectors", "[metrics][regression]") {
  // Keras' example with axis 1: l2-normalised y = [[0, 1], [1/sqrt2, 1/sqrt2]],
  // p = [[1, 0], [1/sqrt2, 1/sqrt2]]; per-sample sums [0, 1]; mean 0.5; weights [0.3, 0.7]: 0.7.
  // p is a transposed (non-contiguous) view of [[1, 1], [0, 1]].
  const Tensor y = f32({0, 1, 1, 1}, {2, 2});
  const Tensor p = transpose(f32({1, 1, 0, 1}, {2, 2}));
  metrics::CosineSimilarity m({.axis = 1});
  CHECK(m.direction() == "up");
  m.update_state(y, p);
  CHECK(m.result() == Approx(0.5));
  m.reset_state();
  m.update_state(y, p, f32({0.3f, 0.7f}));
  CHECK(m.result() == Approx(0.7));
  // Opposite vectors give -1; a zero vector gives 0 (its norm is clamped, not divided by).
  const Tensor c = metrics::cosine_similarity(f32({1, 1, 0, 0}, {2, 2}), f32({-1, -1, 3, 4}, {2, 2}));
  CHECK(c.to_vector<float>()[0] == Approx(-1.0));
  CHECK(c.to_vector<float>()[1] == Approx(0.0));
  // The axis is part of the config (Keras drops it; keel keeps it so a rebuilt metric agrees).
  CHECK(m.get_config().at("axis") == 1);
  check_round_trip(m);
}

TEST_CASE("LogCoshError follows Keras' documented values", "[metrics][regression]") {
  // errors row 0 [1, 0]: (log cosh 1 + 0) / 2 = 0.2168904; row 1: 0; mean 0.10844523.
  metrics::LogCoshError m;
  CHECK(m.name() == "logcosh");
  const Tensor y = f32({0, 1, 0, 0}, {2, 2}), p = f32({1, 1, 0, 0}, {2, 2});
  m.update_state(y, p);
  CHECK(m.result() == Approx(std::log(std::cosh(1.0)) / 4));
  m.reset_state();
  m.update_state(y, p, f32({1, 0}));
  CHECK(m.result() == Approx(std::log(std::cosh(1.0)) / 2));
  // Large errors do not overflow: log cosh(100) = 100 - log 2.
  CHECK(metrics::log_cosh(f32({0}, {1, 1}), f32({100}, {1, 1})).item<float>() == Approx(100 - std::log(2.0)));
}

TEST_CASE("Hinge, SquaredHinge and CategoricalHinge metrics", "[metrics][hinge]") {
  // 0/1 labels become -1/1: y = [[-1, 1], [1, -1]], p = [[0.6, 0.4], [0.2, -0.5]].
  // hinge: row 0 (max(1 + 0.6, 0) + max(1 - 0.4, 0)) / 2 = (1.6 + 0.6) / 2 = 1.1,
  //        row 1 (max(1 - 0.2, 0) + max(1 - 0.5, 0)) / 2 = (0.8 + 0.5) / 2 = 0.65; mean 0.875.
  // squared: row 0 (2.56 + 0.36) / 2 = 1.46, row 1 (0.64 + 0.25) / 2 = 0.445; mean 0.9525.
  const Tensor y = f32({0, 1, 1, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.2f, -0.5f}, {2, 2});
  metrics::Hinge h;
  metrics::SquaredHinge sh;
  h.update_state(y, p);
  sh.update_state(y, p);
  CHECK(h.result() == Approx(0.875));
  CHECK(sh.result() == Approx(0.9525));
  // Weights [0, 1] keep row 1 only.
  h.reset_state();
  h.update_state(y, p, f32({0, 1}));
  CHECK(h.result() == Approx(0.65));
  // Labels already -1/1 are kept: (max(1 - (-1)(0.5), 0) + max(1 - 2, 0)) / 2 = 0.75.
  CHECK(metrics::hinge(f32({-1, 1}, {1, 2}), f32({0.5f, 2}, {1, 2})).item<float>() == Approx(0.75));

  // categorical: row 0 pos = 0.4, neg = max(1 * 0.6, 0 * 0.4) = 0.6 -> 0.6 - 0.4 + 1 = 1.2;
  // row 1 (p = [0.2, 0.5]) pos = 0.2, neg = 0.5 -> 1.3; mean 1.25.
  metrics::CategoricalHinge ch;
  ch.update_state(y, f32({0.6f, 0.4f, 0.2f, 0.5f}, {2, 2}));
  CHECK(ch.result() == Approx(1.25));
  CHECK(ch.direction() == "down");
}

TEST_CASE("R2Score: the coefficient of determination and its aggregations", "[metrics][r2]") {
  // Keras' example: y = [1, 4, 3], p = [2, 4, 4]: mean 8/3; SS_tot = 26 - 8 * 8/3 = 14/3;
  // SS_res = 1 + 0 + 1 = 2; R2 = 1 - 2 / (14/3) = 4/7 = 0.5714.
  const Tensor y = f32({1, 4, 3}, {3, 1}), p = f32({2, 4, 4}, {3, 1});
  metrics::R2Score m;
  CHECK(m.name() == "r2_score");
  m.update_state(y, p);
  CHECK(m.result() == Approx(4.0 / 7));
  // The same rows over two updates accumulate to the same score.
  metrics::R2Score split;
  split.update_state(f32({1, 4}, {2, 1}), f32({2, 4}, {2, 1}));
  split.update_state(f32({3}, {1, 1}), f32({4}, {1, 1}));
  CHECK(split.result() == Approx(4.0 / 7));
  // Weights [1, 1, 0]: y = [1, 4], p = [2, 4]: mean 2.5, SS_tot = 17 - 5 * 2.5 = 4.5, SS_res = 1:
  // 1 - 1 / 4.5 = 0.7778.
  m.reset_state();
  m.update_state(y, p, f32({1, 1, 0}));
  CHECK(m.result() == Approx(1 - 1 / 4.5));
  CHECK(m.num_samples() == 2.0);

  // Two outputs: output 0 as above (4/7, SS_tot 14/3); output 1 y = [2, 6, 4], p = [2, 5, 4]:
  // mean 4, SS_tot = 8, SS_res = 1, R2 = 7/8.
  const Tensor y2 = f32({1, 2, 4, 6, 3, 4}, {3, 2}), p2 = f32({2, 2, 4, 5, 4, 4}, {3, 2});
  metrics::R2Score uniform;
  uniform.update_state(y2, p2);
  CHECK(uniform.result() == Approx((4.0 / 7 + 7.0 / 8) / 2));
  // variance weighted: (14/3 * 4/7 + 8 * 7/8) / (14/3 + 8) = (8/3 + 7) / (38/3) = 29/38.
  metrics::R2Score weighted({.class_aggregation = "variance_weighted_average"});
  weighted.update_state(y2, p2);
  CHECK(weighted.result() == Approx(29.0 / 38));
  // No aggregation: one score per output; result() has no single number.
  metrics::R2Score none({.class_aggregation = std::nullopt});
  none.update_state(y2, p2);
  REQUIRE(none.results().size() == 2);
  CHECK(none.results()[0] == Approx(4.0 / 7));
  CHECK(none.results()[1] == Approx(7.0 / 8));
  CHECK_THROWS_AS(none.result(), ValueError);
  check_round_trip(none);
  CHECK(metrics::from_config("R2Score", none.get_config())->results().size() == 1);  // fresh: not built

  // Adjusted R2, n = 3 samples, p = 1 regressor: 1 - (1 - 4/7)(3 - 1) / (3 - 1 - 1) = 1/7;
  // p = 2 = n - 1 falls back to the plain score.
  metrics::R2Score adjusted({.num_regressors = 1});
  adjusted.update_state(y, p);
  CHECK(adjusted.result() == Approx(1.0 / 7));
  metrics::R2Score fallback({.num_regressors = 2});
  fallback.update_state(y, p);
  CHECK(fallback.result() == Approx(4.0 / 7));
  check_round_trip(adjusted);
}

TEST_CASE("R2Score rejects bad arguments and shapes", "[metrics][r2][errors]") {
  CHECK_THROWS_AS(metrics::R2Score({.class_aggregation = "median"}), ValueError);
  CHECK_THROWS_AS(metrics::R2Score({.num_regressors = -1}), ValueError);
  metrics::R2Score m;
  CHECK_THROWS_AS(m.update_state(f32({1, 2, 3}), f32({1, 2, 3})), ShapeError);  // rank 1
  m.update_state(f32({1, 2, 3, 4}, {2, 2}), f32({1, 2, 3, 4}, {2, 2}));
  CHECK_THROWS_AS(m.update_state(f32({1, 2, 3}, {1, 3}), f32({1, 2, 3}, {1, 3})), ShapeError);  // 3 outputs now
  CHECK_THROWS_AS(m.update_state(f32({1, 2, 3, 4}, {2, 2}), f32({1, 2, 3, 4}, {2, 2}), f32({1, 2, 3})), ShapeError);
}

TEST_CASE("Sum adds weighted values", "[metrics][sum]") {
  metrics::Sum s;
  CHECK(s.name() == "sum");
  s.update_state(f32({1, 2, 3}));
  CHECK(s.result() == Approx(6));
  s.update_state(f32({1, 2, 3}), f32({1, 0, 2}));  // 1 + 0 + 6 = 7 more
  CHECK(s.result() == Approx(13));
  s.reset_state();
  // Values [[1, 2], [3, 4]] with per-sample weights [1, 2]: each row is summed first,
  // 3 * 1 + 7 * 2 = 17.
  s.update_state(f32({1, 2, 3, 4}, {2, 2}), f32({1, 2}));
  CHECK(s.result() == Approx(17));
  CHECK_THROWS_AS(s.update_state(f32({1}), f32({1}), f32({1})), ValueError);
  check_round_trip(s);
}

TEST_CASE("MeanMetricWrapper averages a custom per-example function", "[metrics][mean]") {
  // The largest absolute error of each row: row 0 max(1, 0) = 1, row 1 max(0, 3) = 3; mean 2;
  // with weights [3, 1]: (3 + 3) / 4 = 1.5.
  metrics::MeanMetricWrapper m(
      [](const Tensor& t, const Tensor& p) { return reduce_max(abs(sub(t, p)), {-1}); }, {.name = "max_error"});
  const Tensor y = f32({0, 1, 2, 2}, {2, 2}), p = f32({1, 1, 2, 5}, {2, 2});
  m.update_state(y, p);
  CHECK(m.result() == Approx(2));
  m.reset_state();
  m.update_state(y, p, f32({3, 1}));
  CHECK(m.result() == Approx(1.5));
  CHECK(m.name() == "max_error");
}

TEST_CASE("regression metrics resolve by Keras' names and round-trip their configs", "[metrics][resolve]") {
  const std::vector<std::pair<std::string, std::string>> names = {
      {"rmse", "RootMeanSquaredError"},
      {"root_mean_squared_error", "RootMeanSquaredError"},
      {"mape", "MeanAbsolutePercentageError"},
      {"MAPE", "MeanAbsolutePercentageError"},
      {"msle", "MeanSquaredLogarithmicError"},
      {"mean_squared_logarithmic_error", "MeanSquaredLogarithmicError"},
      {"cosine_similarity", "CosineSimilarity"},
      {"logcosh", "LogCoshError"},
      {"log_cosh_error", "LogCoshError"},
      {"r2_score", "R2Score"},
      {"hinge", "Hinge"},
      {"squared_hinge", "SquaredHinge"},
      {"categorical_hinge", "CategoricalHinge"},
      {"Sum", "Sum"},
  };
  for (const auto& [name, cls] : names) {
    INFO(name);
    const auto m = metrics::get(name);
    CHECK(m->class_name() == cls);
    CHECK(m->name() == name);
    check_round_trip(*m);
  }
  CHECK_THROWS_AS(metrics::from_config("R2Score", {{"num_regressors", "two"}}), ValueError);
}

TEST_CASE("fit logs RMSE and R2 in its History", "[metrics][training]") {
  // Dense(1) with zero kernel and bias and a zero learning rate predicts 0 for every sample.
  // y = [1, 2, 3, 4]: RMSE = sqrt((1 + 4 + 9 + 16) / 4) = sqrt(7.5); R2: mean 2.5,
  // SS_tot = 30 - 4 * 6.25 = 5, SS_res = 30: 1 - 30 / 5 = -5.
  models::Sequential model{layers::InputLayer({1}),
                           layers::Dense(1, {.kernel_initializer = "zeros", .bias_initializer = "zeros"})};
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse", .metrics = {"rmse", metrics::R2Score()}});
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {4, 1}), y = constant({1.f, 2.f, 3.f, 4.f}, {4, 1});
  const auto h = model.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  REQUIRE(h.history.count("rmse"));
  CHECK(h.history.at("rmse")[0] == Approx(std::sqrt(7.5)));
  REQUIRE(h.history.count("r2_score"));
  CHECK(h.history.at("r2_score")[0] == Approx(-5.0));
}
