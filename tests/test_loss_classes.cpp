// The Keras loss classes (keel/losses/loss.hpp): every class against values derived by hand in
// the test (each derivation written next to its numbers, several of them Keras' documented
// examples), the reductions "sum_over_batch_size" / "sum" / "none" / "mean_with_sample_weight",
// sample weights of every rank, from_logits, label smoothing, Huber's delta, ignore_class,
// gradients through the reduced loss, and LossRef built from names, objects and lambdas.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "auto_name.hpp"
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <memory>
#include <vector>

using namespace keel;
using keel_test::is_auto_name;
using Catch::Contains;

namespace {

constexpr DType f64 = DType::float64;
constexpr double kEps = 1e-7;  // Keras' epsilon, the clip of probabilities

Tensor t64(std::vector<double> v, Shape s) { return constant(v, std::move(s), f64); }

void check_close(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(tol).margin(tol));
  }
}

double scalar(const Tensor& t) {
  REQUIRE(t.rank() == 0);
  return t.item<double>();
}

// log-sum-exp of the logits [1, 2, 3] (used by the softmax cross-entropies below):
// log(e + e^2 + e^3) = 3 + log(1 + e^-1 + e^-2).
const double kLse123 = 3.0 + std::log(1.0 + std::exp(-1.0) + std::exp(-2.0));

Tensor bools(std::vector<bool> v, Shape s) {
  std::vector<std::uint8_t> bytes(v.begin(), v.end());
  return cast(constant(std::vector<double>(bytes.begin(), bytes.end()), std::move(s), f64), DType::bool_);
}

}  // namespace

// ---- reductions and sample weights -----------------------------------------------------------------

TEST_CASE("MeanSquaredError reduces per-example values by each reduction", "[loss_classes][mse]") {
  // y_true [[0, 1], [2, 2]], y_pred [[1, 1], [0, 5]]
  // per example (mean over the last axis): row 0 ((1-0)^2 + 0) / 2 = 0.5,
  //                                        row 1 ((0-2)^2 + (5-2)^2) / 2 = 13 / 2 = 6.5
  const Tensor y_true = t64({0, 1, 2, 2}, {2, 2});
  const Tensor y_pred = t64({1, 1, 0, 5}, {2, 2});
  // sum_over_batch_size: (0.5 + 6.5) / 2 values = 3.5
  CHECK(scalar(losses::MeanSquaredError()(y_true, y_pred)) == Approx(3.5));
  CHECK(scalar(losses::MeanSquaredError({.reduction = "sum"})(y_true, y_pred)) == Approx(7.0));
  const Tensor none = losses::MeanSquaredError({.reduction = "none"})(y_true, y_pred);
  CHECK(none.shape() == Shape{2});
  check_close(none, {0.5, 6.5});
  // "mean" is Keras' alias of sum_over_batch_size.
  CHECK(scalar(losses::MeanSquaredError({.reduction = "mean"})(y_true, y_pred)) == Approx(3.5));
  CHECK(losses::MeanSquaredError().call(y_true, y_pred).shape() == Shape{2});
}

TEST_CASE("sample_weight multiplies per-example losses and sum_over_batch_size divides by the count",
          "[loss_classes][sample_weight]") {
  const Tensor y_true = t64({0, 1, 2, 2}, {2, 2});
  const Tensor y_pred = t64({1, 1, 0, 5}, {2, 2});  // per example [0.5, 6.5] (see above)
  const losses::MeanSquaredError mse;
  // weights [0.5, 2]: [0.25, 13] -> sum 13.25, over 2 values 6.625
  const Tensor w = t64({0.5, 2}, {2});
  CHECK(scalar(mse(y_true, y_pred, w)) == Approx(6.625));
  CHECK(scalar(losses::MeanSquaredError({.reduction = "sum"})(y_true, y_pred, w)) == Approx(13.25));
  check_close(losses::MeanSquaredError({.reduction = "none"})(y_true, y_pred, w), {0.25, 13.0});
  // Weights shaped [N, 1] lose their trailing axis; a scalar weight scales everything: 2 * 3.5.
  CHECK(scalar(mse(y_true, y_pred, t64({0.5, 2}, {2, 1}))) == Approx(6.625));
  CHECK(scalar(mse(y_true, y_pred, constant(2.0, f64))) == Approx(7.0));
  // A zero weight still counts in the denominator (Keras 3): [0.5, 0] -> 0.5 / 2 = 0.25 ...
  const Tensor w10 = t64({1, 0}, {2});
  CHECK(scalar(mse(y_true, y_pred, w10)) == Approx(0.25));
  // ... while "mean_with_sample_weight" divides by the sum of the weights: 0.5 / 1.
  CHECK(scalar(losses::MeanSquaredError({.reduction = "mean_with_sample_weight"})(y_true, y_pred, w10)) ==
        Approx(0.5));
  // Weights given as float32 (or int) are cast to the values' dtype.
  CHECK(scalar(mse(y_true, y_pred, constant(std::vector<float>{0.5f, 2.0f}, {2}))) == Approx(6.625));
  // Keras' documented example: y_true [[0, 1], [0, 0]], y_pred [[1, 1], [1, 0]] gives [0.5, 0.5];
  // weights [0.7, 0.3]: (0.35 + 0.15) / 2 = 0.25.
  CHECK(scalar(mse(t64({0, 1, 0, 0}, {2, 2}), t64({1, 1, 1, 0}, {2, 2}), t64({0.7, 0.3}, {2}))) == Approx(0.25));
}

TEST_CASE("per-sample weights apply to whole examples of per-timestep losses", "[loss_classes][sample_weight]") {
  // y_pred [2, 3, 2] against zeros: per (sample, step) MSE over the last axis:
  // sample 0: [1, 4, 9], sample 1: [25, 25, 25]. Weights [1, 0] keep sample 0's three steps:
  // (1 + 4 + 9) / 6 values = 14 / 6.
  const Tensor y_pred = t64({1, 1, 2, 2, 3, 3, 5, 5, 5, 5, 5, 5}, {2, 3, 2});
  const Tensor y_true = zeros({2, 3, 2}, f64);
  CHECK(scalar(losses::MeanSquaredError()(y_true, y_pred, t64({1, 0}, {2}))) == Approx(14.0 / 6.0));
  check_close(losses::MeanSquaredError({.reduction = "none"})(y_true, y_pred, t64({1, 0}, {2})),
              {1, 4, 9, 0, 0, 0});
}

TEST_CASE("labels of shape [N] meet predictions of shape [N, 1]", "[loss_classes][shapes]") {
  // y_true [N] is expanded to [N, 1] (Keras' squeeze_or_expand_to_same_rank), not broadcast to
  // [N, N]: per example (1-0)^2 = 1 and (3-1)^2 = 4, mean 2.5.
  const Tensor y_true = t64({0, 1}, {2});
  const Tensor y_pred = t64({1, 3}, {2, 1});
  CHECK(scalar(losses::MeanSquaredError()(y_true, y_pred)) == Approx(2.5));
  check_close(losses::MeanSquaredError({.reduction = "none"})(y_true, y_pred), {1, 4});
}

TEST_CASE("an invalid reduction is a ValueError when the loss is made", "[loss_classes][errors]") {
  CHECK_THROWS_AS(losses::MeanSquaredError({.reduction = "average"}), ValueError);
  CHECK_THROWS_WITH(losses::BinaryCrossentropy({.reduction = "mean_sum"}), Contains("sum_over_batch_size"));
  CHECK_THROWS_AS(losses::MeanSquaredError()(Tensor(), t64({1}, {1})), ValueError);
}

// ---- each loss class --------------------------------------------------------------------------------

TEST_CASE("MeanAbsoluteError against hand-derived values", "[loss_classes][mae]") {
  // y_true [[0, 1], [2, 2]], y_pred [[1, 1], [0, 5]]: row 0 (1 + 0) / 2 = 0.5, row 1 (2 + 3) / 2 = 2.5
  const Tensor y_true = t64({0, 1, 2, 2}, {2, 2});
  const Tensor y_pred = t64({1, 1, 0, 5}, {2, 2});
  CHECK(scalar(losses::MeanAbsoluteError()(y_true, y_pred)) == Approx(1.5));
  CHECK(scalar(losses::MeanAbsoluteError({.reduction = "sum"})(y_true, y_pred)) == Approx(3.0));
  // weights [2, 1]: (1 + 2.5) / 2 = 1.75
  CHECK(scalar(losses::MeanAbsoluteError()(y_true, y_pred, t64({2, 1}, {2}))) == Approx(1.75));
  CHECK(losses::MeanAbsoluteError().name() == "mean_absolute_error");
}

TEST_CASE("Huber is quadratic within delta and linear beyond it", "[loss_classes][huber]") {
  // errors e = y_pred - y_true: [[0.5, 2], [-3, 1]]
  // delta 1: |e| <= 1 -> e^2 / 2; else delta |e| - delta^2 / 2
  //   row 0: 0.125, 2 - 0.5 = 1.5          -> mean 0.8125
  //   row 1: 3 - 0.5 = 2.5, 0.5            -> mean 1.5      -> (0.8125 + 1.5) / 2 = 1.15625
  // delta 2:
  //   row 0: 0.125, 4 / 2 = 2              -> mean 1.0625
  //   row 1: 2 * 3 - 4 / 2 = 4, 0.5        -> mean 2.25     -> (1.0625 + 2.25) / 2 = 1.65625
  const Tensor y_true = zeros({2, 2}, f64);
  const Tensor y_pred = t64({0.5, 2, -3, 1}, {2, 2});
  CHECK(scalar(losses::Huber()(y_true, y_pred)) == Approx(1.15625));
  CHECK(scalar(losses::Huber({.delta = 2.0})(y_true, y_pred)) == Approx(1.65625));
  check_close(losses::Huber({.delta = 2.0, .reduction = "none"})(y_true, y_pred), {1.0625, 2.25});
  // Keras' documented example: errors [0.6, -0.6, 0.4, 0.6] -> 0.18, 0.18 | 0.08, 0.18 -> 0.155
  CHECK(scalar(losses::Huber()(t64({0, 1, 0, 0}, {2, 2}), t64({0.6, 0.4, 0.4, 0.6}, {2, 2}))) == Approx(0.155));
  CHECK(losses::Huber().name() == "huber_loss");
  CHECK_THROWS_AS(losses::Huber({.delta = -1.0}), ValueError);
}

TEST_CASE("BinaryCrossentropy on probabilities, logits and smoothed labels", "[loss_classes][bce]") {
  // Keras' documented example: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]]
  //   row 0: -log(1 - 0.6), -log(0.4)          -> mean -(log 0.4 + log 0.4) / 2
  //   row 1: -log(1 - 0.4), -log(1 - 0.6)      -> mean -(log 0.6 + log 0.4) / 2
  // sum_over_batch_size: the mean of the two = 0.8149...
  const Tensor y_true = t64({0, 1, 0, 0}, {2, 2});
  const Tensor y_pred = t64({0.6, 0.4, 0.4, 0.6}, {2, 2});
  const double row0 = -(std::log(0.4) + std::log(0.4)) / 2, row1 = -(std::log(0.6) + std::log(0.4)) / 2;
  CHECK(scalar(losses::BinaryCrossentropy()(y_true, y_pred)) == Approx((row0 + row1) / 2));
  CHECK(scalar(losses::BinaryCrossentropy()(y_true, y_pred)) == Approx(0.815).margin(5e-4));
  check_close(losses::BinaryCrossentropy({.reduction = "none"})(y_true, y_pred), {row0, row1});

  // from_logits: labels [[1, 0]], logits [[0, 2]]; per element max(x, 0) - x z + log(1 + e^-|x|):
  //   x = 0, z = 1: log 2;   x = 2, z = 0: 2 + log(1 + e^-2)         -> mean of the two
  const double logit_loss = (std::log(2.0) + 2.0 + std::log1p(std::exp(-2.0))) / 2;
  CHECK(scalar(losses::BinaryCrossentropy({.from_logits = true})(t64({1, 0}, {1, 2}), t64({0, 2}, {1, 2}))) ==
        Approx(logit_loss));

  // label_smoothing 0.2: labels move towards 0.5: 1 -> 0.9, 0 -> 0.1. y_true [[1, 0]],
  // y_pred [[0.6, 0.4]]: both elements -(0.9 log 0.6 + 0.1 log 0.4).
  const double smoothed = -(0.9 * std::log(0.6) + 0.1 * std::log(0.4));
  CHECK(scalar(losses::BinaryCrossentropy({.label_smoothing = 0.2})(t64({1, 0}, {1, 2}), t64({0.6, 0.4}, {1, 2}))) ==
        Approx(smoothed));
  // Integer labels are cast to the predictions' dtype.
  CHECK(scalar(losses::BinaryCrossentropy()(constant(std::vector<std::int64_t>{0, 1, 0, 0}, {2, 2}), y_pred)) ==
        Approx((row0 + row1) / 2));
}

TEST_CASE("CategoricalCrossentropy on probabilities, logits and smoothed labels", "[loss_classes][cce]") {
  // Keras' documented example: y_true [[0, 1, 0], [0, 0, 1]], y_pred [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]
  //   row 0: -log 0.95, row 1: -log 0.1 -> mean 1.1769...
  const Tensor y_true = t64({0, 1, 0, 0, 0, 1}, {2, 3});
  const Tensor y_pred = t64({0.05, 0.95, 0, 0.1, 0.8, 0.1}, {2, 3});
  const double a = -std::log(0.95), b = -std::log(0.1);
  CHECK(scalar(losses::CategoricalCrossentropy()(y_true, y_pred)) == Approx((a + b) / 2));
  CHECK(scalar(losses::CategoricalCrossentropy()(y_true, y_pred)) == Approx(1.177).margin(5e-4));
  // weights [0.3, 0.7]: (0.3 a + 0.7 b) / 2 = 0.8136 (Keras' documented 0.814)
  CHECK(scalar(losses::CategoricalCrossentropy()(y_true, y_pred, t64({0.3, 0.7}, {2}))) ==
        Approx((0.3 * a + 0.7 * b) / 2));
  CHECK(scalar(losses::CategoricalCrossentropy({.reduction = "sum"})(y_true, y_pred)) == Approx(a + b));
  check_close(losses::CategoricalCrossentropy({.reduction = "none"})(y_true, y_pred), {a, b}, 1e-10);

  // from_logits: logits [1, 2, 3], label class 2: -log softmax_2 = lse - 3
  const Tensor logits = t64({1, 2, 3}, {1, 3});
  CHECK(scalar(losses::CategoricalCrossentropy({.from_logits = true})(t64({0, 0, 1}, {1, 3}), logits)) ==
        Approx(kLse123 - 3));
  // label_smoothing 0.3 over 3 classes: y (1 - 0.3) + 0.3 / 3 -> [0.1, 0.1, 0.8]; the labels sum
  // to one, so the loss is lse - (0.1 * 1 + 0.1 * 2 + 0.8 * 3) = lse - 2.7.
  CHECK(scalar(losses::CategoricalCrossentropy({.from_logits = true, .label_smoothing = 0.3})(
            t64({0, 0, 1}, {1, 3}), logits)) == Approx(kLse123 - 2.7));
}

TEST_CASE("SparseCategoricalCrossentropy on probabilities and logits", "[loss_classes][scce]") {
  // The categorical example with integer labels [1, 2]: -log 0.95, -log 0.1.
  const Tensor y_pred = t64({0.05, 0.95, 0, 0.1, 0.8, 0.1}, {2, 3});
  const double a = -std::log(0.95), b = -std::log(0.1);
  const Tensor labels = constant(std::vector<std::int64_t>{1, 2}, {2});
  CHECK(scalar(losses::SparseCategoricalCrossentropy()(labels, y_pred)) == Approx((a + b) / 2));
  // Labels [N, 1] and float labels give the same.
  CHECK(scalar(losses::SparseCategoricalCrossentropy()(constant(std::vector<std::int64_t>{1, 2}, {2, 1}), y_pred)) ==
        Approx((a + b) / 2));
  CHECK(scalar(losses::SparseCategoricalCrossentropy()(t64({1, 2}, {2}), y_pred)) == Approx((a + b) / 2));
  // from_logits: two rows of logits [1, 2, 3], labels [2, 0]: lse - 3 and lse - 1.
  const Tensor logits = t64({1, 2, 3, 1, 2, 3}, {2, 3});
  const Tensor l20 = constant(std::vector<std::int64_t>{2, 0}, {2});
  CHECK(scalar(losses::SparseCategoricalCrossentropy({.from_logits = true})(l20, logits)) ==
        Approx(((kLse123 - 3) + (kLse123 - 1)) / 2));
  check_close(losses::SparseCategoricalCrossentropy({.from_logits = true, .reduction = "none"})(l20, logits),
              {kLse123 - 3, kLse123 - 1});
}

TEST_CASE("SparseCategoricalCrossentropy ignore_class leaves those examples out", "[loss_classes][scce]") {
  // Three rows of logits [1, 2, 3], labels [2, -1, 0], ignore_class -1:
  //   per example [lse - 3, 0, lse - 1]; sum_over_batch_size divides by the 2 that count.
  const Tensor logits = t64({1, 2, 3, 1, 2, 3, 1, 2, 3}, {3, 3});
  const Tensor labels = constant(std::vector<std::int64_t>{2, -1, 0}, {3});
  const double a = kLse123 - 3, b = kLse123 - 1;
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true, .ignore_class = -1});
  CHECK(scalar(loss(labels, logits)) == Approx((a + b) / 2));
  CHECK(scalar(losses::SparseCategoricalCrossentropy({.from_logits = true, .ignore_class = -1, .reduction = "sum"})(
            labels, logits)) == Approx(a + b));
  check_close(
      losses::SparseCategoricalCrossentropy({.from_logits = true, .ignore_class = -1, .reduction = "none"})(labels,
                                                                                                          logits),
      {a, 0, b});
  // With weights [2, 5, 1]: (2 a + 1 b) over the 2 valid examples.
  CHECK(scalar(loss(labels, logits, t64({2, 5, 1}, {3}))) == Approx((2 * a + b) / 2));
  // The ignored example gets no gradient, the others their usual softmax - one_hot.
  GradientTape tape;
  tape.watch(logits);
  const Tensor value = loss(labels, logits);
  const auto g = tape.gradient(value, logits).to_vector<double>();
  for (int j = 3; j < 6; ++j) CHECK(g[static_cast<std::size_t>(j)] == 0.0);
  CHECK(std::isfinite(g[0]));
}

TEST_CASE("KLDivergence against hand-derived values", "[loss_classes][kld]") {
  // y_true [[0.5, 0.5]], y_pred [[0.25, 0.75]]: 0.5 log(0.5 / 0.25) + 0.5 log(0.5 / 0.75) = 0.5 log(4/3)
  CHECK(scalar(losses::KLDivergence()(t64({0.5, 0.5}, {1, 2}), t64({0.25, 0.75}, {1, 2}))) ==
        Approx(0.5 * std::log(4.0 / 3.0)));
  // Keras' documented example: y_true [[0, 1], [0, 0]], y_pred [[0.6, 0.4], [0.4, 0.6]]; y_true is
  // clipped to [eps, 1]: row 0 eps log(eps / 0.6) + log(1 / 0.4), row 1 eps log(eps / 0.4) +
  // eps log(eps / 0.6); the mean is 0.458.
  const double row0 = kEps * std::log(kEps / 0.6) + std::log(1 / 0.4);
  const double row1 = kEps * std::log(kEps / 0.4) + kEps * std::log(kEps / 0.6);
  const Tensor y_true = t64({0, 1, 0, 0}, {2, 2});
  const Tensor y_pred = t64({0.6, 0.4, 0.4, 0.6}, {2, 2});
  CHECK(scalar(losses::KLDivergence()(y_true, y_pred)) == Approx((row0 + row1) / 2).epsilon(1e-9));
  CHECK(scalar(losses::KLDivergence()(y_true, y_pred)) == Approx(0.458).margin(5e-4));
  CHECK(scalar(losses::KLDivergence({.reduction = "sum"})(y_true, y_pred)) == Approx(row0 + row1).epsilon(1e-9));
}

TEST_CASE("the reduced loss is differentiable with respect to the predictions", "[loss_classes][grad]") {
  // MSE of [[1, 2]] against p: ((p0 - 1)^2 + (p1 - 2)^2) / 2 over 1 example;
  // d/dp = (p - y) -> at p = 0: [-1, -2]. With weight 3 and reduction sum: 3 (p - y) -> [-3, -6].
  const Tensor y = t64({1, 2}, {1, 2});
  Variable p(zeros({1, 2}, f64), "p");
  {
    GradientTape tape;
    const Tensor loss = losses::MeanSquaredError()(y, p);
    check_close(tape.gradient(loss, p), {-1, -2});
  }
  {
    GradientTape tape;
    const Tensor loss = losses::MeanSquaredError({.reduction = "sum"})(y, p, t64({3}, {1}));
    check_close(tape.gradient(loss, p), {-3, -6});
  }
}

TEST_CASE("half-precision predictions are reduced in float32", "[loss_classes][dtype]") {
  const Tensor y_true = constant(std::vector<float>{0, 1}, {1, 2});
  const Tensor y_pred = cast(constant(std::vector<float>{0.5f, 0.5f}, {1, 2}), DType::float16);
  const Tensor loss = losses::MeanSquaredError()(y_true, y_pred);
  CHECK(loss.dtype() == DType::float32);
  CHECK(loss.item<double>() == Approx(0.25));  // (0.25 + 0.25) / 2
}

TEST_CASE("loss classes report Keras' names and configs", "[loss_classes][config]") {
  const auto bce = losses::BinaryCrossentropy({.from_logits = true, .label_smoothing = 0.1});
  const nlohmann::json c = bce.get_config();
  CHECK(c.at("name") == "binary_crossentropy");
  CHECK(c.at("reduction") == "sum_over_batch_size");
  CHECK(c.at("from_logits") == true);
  CHECK(c.at("label_smoothing") == 0.1);
  CHECK(c.at("axis") == -1);
  CHECK(bce.class_name() == "BinaryCrossentropy");
  CHECK(losses::Huber({.delta = 2.5}).get_config().at("delta") == 2.5);
  const nlohmann::json s = losses::SparseCategoricalCrossentropy({.ignore_class = 0}).get_config();
  CHECK(s.at("ignore_class") == 0);
  CHECK(losses::SparseCategoricalCrossentropy().get_config().at("ignore_class").is_null());
  CHECK(losses::MeanSquaredError({.name = "my_mse"}).name() == "my_mse");
  CHECK(losses::KLDivergence().name() == "kl_divergence");
  CHECK(losses::CategoricalCrossentropy().name() == "categorical_crossentropy");
}

// ---- custom losses and LossRef ----------------------------------------------------------------------

namespace {

// A custom loss: the per-example sum of absolute errors (not the mean).
class SumAbsoluteError : public losses::Loss {
 public:
  explicit SumAbsoluteError(std::string reduction = "sum_over_batch_size") : Loss("sum_abs", std::move(reduction)) {}
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override {
    return reduce_sum(abs(y_pred - y_true), {-1});
  }
};

}  // namespace

TEST_CASE("a Loss subclass gets the reductions and sample weights of the base class", "[loss_classes][custom]") {
  // y_true [[0, 1], [2, 2]], y_pred [[1, 1], [0, 5]]: per example 1 and 5.
  const Tensor y_true = t64({0, 1, 2, 2}, {2, 2});
  const Tensor y_pred = t64({1, 1, 0, 5}, {2, 2});
  CHECK(scalar(SumAbsoluteError()(y_true, y_pred)) == Approx(3.0));
  CHECK(scalar(SumAbsoluteError("sum")(y_true, y_pred, t64({2, 1}, {2}))) == Approx(7.0));  // 2 + 5
}

TEST_CASE("LossRef resolves Keras loss names", "[loss_classes][loss_ref]") {
  CHECK(dynamic_cast<losses::MeanSquaredError*>(losses::LossRef("mse").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::MeanSquaredError*>(losses::LossRef("mean_squared_error").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::MeanAbsoluteError*>(losses::LossRef("mae").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::Huber*>(losses::LossRef("huber").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::BinaryCrossentropy*>(losses::LossRef("binary_crossentropy").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::CategoricalCrossentropy*>(losses::LossRef("categorical_crossentropy").get().get()) !=
        nullptr);
  CHECK(dynamic_cast<losses::SparseCategoricalCrossentropy*>(
            losses::LossRef(std::string("sparse_categorical_crossentropy")).get().get()) != nullptr);
  CHECK(dynamic_cast<losses::KLDivergence*>(losses::LossRef("kl_divergence").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::KLDivergence*>(losses::LossRef("kld").get().get()) != nullptr);
  CHECK(dynamic_cast<losses::MeanSquaredError*>(losses::get("MeanSquaredError").get()) != nullptr);
  CHECK_THROWS_AS(losses::LossRef("mean_squared_errors"), ValueError);
  CHECK_THROWS_WITH(losses::get("hinge_loss"), Contains("unknown loss \"hinge_loss\""));
  // A named loss computes like the class: the MSE example above, 3.5.
  CHECK(scalar(losses::LossRef("mse")(t64({0, 1, 2, 2}, {2, 2}), t64({1, 1, 0, 5}, {2, 2}))) == Approx(3.5));
}

TEST_CASE("LossRef holds loss objects and shared_ptrs", "[loss_classes][loss_ref]") {
  const Tensor y_true = zeros({2, 2}, f64);
  const Tensor y_pred = t64({0.5, 2, -3, 1}, {2, 2});  // the Huber example: delta 2 -> 1.65625
  const losses::LossRef from_temporary = losses::Huber({.delta = 2.0});
  CHECK(scalar(from_temporary(y_true, y_pred)) == Approx(1.65625));
  CHECK(from_temporary.name() == "huber_loss");
  losses::Huber lvalue({.delta = 2.0, .reduction = "sum"});
  const losses::LossRef copied = lvalue;  // a copy: the caller's object may go away
  CHECK(scalar(copied(y_true, y_pred)) == Approx(3.3125));
  CHECK(copied.get().get() != &lvalue);
  auto shared = std::make_shared<losses::MeanAbsoluteError>();
  const losses::LossRef held = shared;
  CHECK(held.get() == shared);
  CHECK(held->name() == "mean_absolute_error");
  const losses::LossRef none;
  CHECK_FALSE(none.defined());
  CHECK(none.name().empty());
  CHECK_THROWS_AS(none(y_true, y_pred), ValueError);
}

TEST_CASE("LossRef wraps a lambda as a custom loss with the default reduction", "[loss_classes][loss_ref]") {
  // A per-example cube of the error: rows [[1, 2]] and [[0, 1]] against zeros: (1 + 8) / 2 = 4.5 and 0.5.
  const losses::LossRef custom = [](const Tensor& y_true, const Tensor& y_pred) {
    return reduce_mean(pow(abs(y_pred - y_true), 3.0), {-1});
  };
  const Tensor y_true = zeros({2, 2}, f64);
  const Tensor y_pred = t64({1, 2, 0, 1}, {2, 2});
  CHECK(scalar(custom(y_true, y_pred)) == Approx(2.5));                       // (4.5 + 0.5) / 2
  CHECK(scalar(custom(y_true, y_pred, t64({0, 2}, {2}))) == Approx(0.5));     // (0 + 1) / 2
  CHECK(is_auto_name(custom.name(), "loss_function_wrapper"));
  CHECK(custom->class_name() == "LossFunctionWrapper");
  const losses::LossRef named(
      [](const Tensor& t, const Tensor& p) { return losses::mean_squared_error(t, p); }, "my_mse");
  CHECK(named.name() == "my_mse");
  // A plain function works too.
  const losses::LossRef fn = &losses::mean_absolute_error;
  CHECK(scalar(fn(y_true, y_pred)) == Approx(1.0));  // (1.5 + 0.5) / 2
}

// ---- Keras masks on y_pred ------------------------------------------------------------------------

namespace {

// The per-timestep example: y_true zeros [2, 3, 1], y_pred [[1, 2, 3], [4, 5, 6]] as [2, 3, 1],
// so MeanSquaredError's per-step values (the mean over the last axis of 1) are the squares
// [[1, 4, 9], [16, 25, 36]]. The mask [[T, T, F], [T, F, F]] keeps 1, 4 and 16: 3 of 6 steps.
Tensor steps_true() { return zeros({2, 3, 1}, f64); }
Tensor steps_pred() { return t64({1, 2, 3, 4, 5, 6}, {2, 3, 1}); }
Tensor steps_mask() { return bools({true, true, false, true, false, false}, {2, 3}); }

}  // namespace

TEST_CASE("a Keras mask on y_pred leaves the masked steps out of every reduction", "[loss_classes][mask]") {
  const Tensor y_pred = layers::with_mask(steps_pred(), steps_mask());
  // sum_over_batch_size (Keras' apply_mask: the mask weighs total / valid = 6 / 3 = 2, the
  // weighted sum is divided by total = 6): (1 + 4 + 16) * 2 / 6 = 21 / 3 = 7, the mean of the
  // unmasked steps, not 21 / 6.
  CHECK(scalar(losses::MeanSquaredError()(steps_true(), y_pred)) == Approx(7.0));
  CHECK(scalar(losses::MeanSquaredError({.reduction = "mean"})(steps_true(), y_pred)) == Approx(7.0));
  // sum: the mask multiplies unscaled: 1 + 4 + 16 = 21.
  CHECK(scalar(losses::MeanSquaredError({.reduction = "sum"})(steps_true(), y_pred)) == Approx(21.0));
  // none: the per-step values times the mask.
  check_close(losses::MeanSquaredError({.reduction = "none"})(steps_true(), y_pred), {1, 4, 0, 16, 0, 0});
  // mean_with_sample_weight: the mask is the weight: 21 / (1 + 1 + 1) = 7.
  CHECK(scalar(losses::MeanSquaredError({.reduction = "mean_with_sample_weight"})(steps_true(), y_pred)) ==
        Approx(7.0));
  // Without the mask: (1 + 4 + 9 + 16 + 25 + 36) / 6 = 91 / 6.
  CHECK(scalar(losses::MeanSquaredError()(steps_true(), steps_pred())) == Approx(91.0 / 6));
}

TEST_CASE("a mask multiplies an explicit sample_weight and the count stays the unmasked entries",
          "[loss_classes][mask][sample_weight]") {
  const Tensor y_pred = layers::with_mask(steps_pred(), steps_mask());
  // Keras: sample_weight *= mask * total / valid. Per-sample weights [2, 1] (applied to whole
  // examples): weights [[2, 2, 0], [1, 0, 0]] * 2; sum(values * weights) / 6 =
  // (2 * 1 + 2 * 4 + 1 * 16) * 2 / 6 = 26 / 3: the weighted sum over the 3 unmasked steps / 3
  // (the weights are not counted, as ever in sum_over_batch_size).
  CHECK(scalar(losses::MeanSquaredError()(steps_true(), y_pred, t64({2, 1}, {2}))) == Approx(26.0 / 3));
  // Per-step weights [2, 3]: [[1, 0.5, 7], [3, 9, 9]] -> (1 * 1 + 0.5 * 4 + 3 * 16) / 3 = 51 / 3 = 17.
  CHECK(scalar(losses::MeanSquaredError()(steps_true(), y_pred, t64({1, 0.5, 7, 3, 9, 9}, {2, 3}))) ==
        Approx(17.0));
  // sum: 26, without the total / valid factor.
  CHECK(scalar(losses::MeanSquaredError({.reduction = "sum"})(steps_true(), y_pred, t64({2, 1}, {2}))) ==
        Approx(26.0));
}

TEST_CASE("a fully masked batch gives a loss of 0, not NaN, and no gradient", "[loss_classes][mask]") {
  const Tensor nothing = bools({false, false, false, false, false, false}, {2, 3});
  Tensor p = steps_pred();
  GradientTape tape;
  tape.watch(p);
  const Tensor loss = losses::MeanSquaredError()(steps_true(), layers::with_mask(p, nothing));
  CHECK(scalar(loss) == 0.0);  // Keras' divide_no_nan(total, valid = 0) = 0 weighs everything 0
  check_close(tape.gradient(loss, p), {0, 0, 0, 0, 0, 0});
}

TEST_CASE("gradients flow through a masked loss to the unmasked predictions only", "[loss_classes][mask][grad]") {
  // loss = (p00^2 + p01^2 + p10^2) / 3 (the 3 unmasked steps, y_true 0): d/dp = 2 p / 3 there,
  // 0 elsewhere: [2/3, 4/3, 0, 8/3, 0, 0].
  Tensor p = steps_pred();
  GradientTape tape;
  tape.watch(p);
  const Tensor loss = losses::MeanSquaredError()(steps_true(), layers::with_mask(p, steps_mask()));
  check_close(tape.gradient(loss, p), {2.0 / 3, 4.0 / 3, 0, 8.0 / 3, 0, 0});
}

TEST_CASE("a per-example mask on y_pred [N, classes] hides whole examples", "[loss_classes][mask]") {
  // MSE on y_true zeros [2, 3], y_pred [[1, 2, 3], [4, 5, 6]]: per example (1 + 4 + 9) / 3 = 14/3
  // and (16 + 25 + 36) / 3 = 77/3. A mask [T, F] keeps the first: 14/3 / 1.
  const Tensor y_pred = layers::with_mask(t64({1, 2, 3, 4, 5, 6}, {2, 3}), bools({true, false}, {2}));
  CHECK(scalar(losses::MeanSquaredError()(zeros({2, 3}, f64), y_pred)) == Approx(14.0 / 3));
  // A mask that covers more axes than the per-example values is a ShapeError naming the loss.
  const Tensor bad = layers::with_mask(t64({1, 2, 3, 4, 5, 6}, {2, 3}), steps_mask());
  CHECK_THROWS_AS(losses::MeanSquaredError()(zeros({2, 3}, f64), bad), ShapeError);
  CHECK_THROWS_WITH(losses::MeanSquaredError()(zeros({2, 3}, f64), bad),
                    Contains("mean_squared_error") && Contains("[2,3]") && Contains("shape [2]"));
}

TEST_CASE("a y_pred mask and ignore_class combine (Keras' in_mask & out_mask)", "[loss_classes][mask][scce]") {
  // Probabilities [1, 3, 2]: steps [0.8, 0.2], [0.5, 0.5], [0.25, 0.75]; int32 labels [0, 1, -1]
  // with ignore_class -1 (step 2 out); the mask [T, F, T] takes step 1 out. Only step 0 counts:
  // -log 0.8 / 1.
  const Tensor probs = constant(std::vector<float>{0.8f, 0.2f, 0.5f, 0.5f, 0.25f, 0.75f}, Shape{1, 3, 2});
  const Tensor labels = constant(std::vector<std::int32_t>{0, 1, -1}, Shape{1, 3});
  const Tensor y_pred = layers::with_mask(probs, bools({true, false, true}, {1, 3}));
  const losses::SparseCategoricalCrossentropy loss({.ignore_class = -1});
  CHECK(scalar(loss(labels, y_pred)) == Approx(-std::log(0.8)).epsilon(1e-6));
  // Without the mask: steps 0 and 1: (-log 0.8 - log 0.5) / 2.
  CHECK(scalar(loss(labels, probs)) == Approx((-std::log(0.8) - std::log(0.5)) / 2).epsilon(1e-6));
}

// ---- label dtypes -----------------------------------------------------------------------------------

namespace {

// A custom loss that subtracts the labels from the predictions, as Keras users write it.
class SignedError : public losses::Loss {
 public:
  explicit SignedError(std::string reduction = "sum_over_batch_size") : Loss("signed_error", std::move(reduction)) {}
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override { return y_pred - y_true; }
};

// A custom loss that wants its integer labels: it records the dtype it was given.
class LabelDTypeProbe : public losses::Loss {
 public:
  mutable DType seen = DType::float32;
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override {
    seen = y_true.dtype();
    return reduce_sum(y_pred, {-1});
  }

 protected:
  bool keeps_integer_labels() const override { return true; }
};

}  // namespace

TEST_CASE("integer and bool labels reach call() as y_pred's float dtype", "[loss_classes][dtype]") {
  // Keras converts y_true to the loss dtype before call(). int32 [1, 2, 3] against float32
  // [1.5, 2.5, 4]: y_pred - y_true = [0.5, 0.5, 1], mean 2 / 3.
  const Tensor labels = constant(std::vector<std::int32_t>{1, 2, 3}, Shape{3});
  const Tensor pred = constant(std::vector<float>{1.5f, 2.5f, 4.0f}, Shape{3});
  const Tensor none = SignedError("none")(labels, pred);
  CHECK(none.dtype() == DType::float32);
  check_close(none, {0.5, 0.5, 1.0}, 1e-6);
  CHECK(scalar(SignedError()(labels, pred)) == Approx(2.0 / 3));
  // int64 labels and float64 predictions: float64 values.
  const Tensor l64 = constant(std::vector<std::int64_t>{1, 0}, Shape{2});
  const Tensor d = SignedError("none")(l64, t64({0.25, 0.75}, {2}));
  CHECK(d.dtype() == f64);
  check_close(d, {-0.75, 0.75});
  // bool labels [T, F] against [0.25, 0.75]: [-0.75, 0.75].
  check_close(SignedError("none")(bools({true, false}, {2}), t64({0.25, 0.75}, {2})), {-0.75, 0.75});
  // float64 labels against float32 predictions become float32 too (Keras casts both to its dtype).
  CHECK(SignedError("none")(t64({1, 2, 3}, {3}), pred).dtype() == DType::float32);
  // The built-in classes take them too: BinaryCrossentropy on one example [1, 2], int32 labels
  // [1, 0] and probabilities [0.8, 0.4]: the mean over the last axis of -(y log p + (1 - y) log(1 - p))
  // = -(log 0.8 + log 0.6) / 2.
  const Tensor bl = constant(std::vector<std::int32_t>{1, 0}, Shape{1, 2});
  const Tensor bp = constant(std::vector<float>{0.8f, 0.4f}, Shape{1, 2});
  CHECK(scalar(losses::BinaryCrossentropy()(bl, bp)) == Approx(-(std::log(0.8) + std::log(0.6)) / 2).epsilon(1e-6));
}

TEST_CASE("sparse categorical crossentropy keeps its integer labels", "[loss_classes][dtype][scce]") {
  // int64 labels [1, 0] over probabilities [[0.25, 0.75], [0.5, 0.5]]: (-log 0.75 - log 0.5) / 2.
  const Tensor labels = constant(std::vector<std::int64_t>{1, 0}, Shape{2});
  const Tensor probs = t64({0.25, 0.75, 0.5, 0.5}, {2, 2});
  CHECK(scalar(losses::SparseCategoricalCrossentropy()(labels, probs)) ==
        Approx((-std::log(0.75) - std::log(0.5)) / 2));
  // A custom loss may ask for the same (keeps_integer_labels).
  LabelDTypeProbe probe;
  probe(labels, probs);
  CHECK(probe.seen == DType::int64);
}

// ---- label smoothing --------------------------------------------------------------------------------

TEST_CASE("CategoricalCrossentropy label smoothing counts the classes along `axis`", "[loss_classes][cce]") {
  // axis = 0 on [3, 2]: each column is one example over 3 classes (current Keras counts
  // y_pred.shape[axis] = 3 classes; keel used the last axis, 2).
  //   y_true columns: [1, 0, 0] and [0, 1, 0]; y_pred columns: [0.5, 0.3, 0.2] and [0.25, 0.5, 0.25]
  //   (each sums to 1, so the normalisation changes nothing).
  // label_smoothing 0.3: y * 0.7 + 0.3 / 3 -> [0.8, 0.1, 0.1] and [0.1, 0.8, 0.1].
  //   column 0: -(0.8 log 0.5 + 0.1 log 0.3 + 0.1 log 0.2)
  //   column 1: -(0.1 log 0.25 + 0.8 log 0.5 + 0.1 log 0.25)
  const Tensor y_true = t64({1, 0, 0, 1, 0, 0}, {3, 2});
  const Tensor y_pred = t64({0.5, 0.25, 0.3, 0.5, 0.2, 0.25}, {3, 2});
  const double c0 = -(0.8 * std::log(0.5) + 0.1 * std::log(0.3) + 0.1 * std::log(0.2));
  const double c1 = -(0.1 * std::log(0.25) + 0.8 * std::log(0.5) + 0.1 * std::log(0.25));
  const losses::CategoricalCrossentropy by_columns({.label_smoothing = 0.3, .axis = 0, .reduction = "none"});
  check_close(by_columns(y_true, y_pred), {c0, c1}, 1e-12);
  // sum_over_batch_size: (c0 + c1) / 2.
  CHECK(scalar(losses::CategoricalCrossentropy({.label_smoothing = 0.3, .axis = 0})(y_true, y_pred)) ==
        Approx((c0 + c1) / 2));
  // label_smoothing 1: uniform targets 1/3: column 0 -(log 0.5 + log 0.3 + log 0.2) / 3.
  const losses::CategoricalCrossentropy uniform({.label_smoothing = 1.0, .axis = 0, .reduction = "none"});
  CHECK(uniform(y_true, y_pred).to_vector<double>()[0] ==
        Approx(-(std::log(0.5) + std::log(0.3) + std::log(0.2)) / 3));

  // axis = 1 (the last axis) on the transposed data [2, 3]: rows are the examples; the same numbers.
  const Tensor t_rows = t64({1, 0, 0, 0, 1, 0}, {2, 3});
  const Tensor p_rows = t64({0.5, 0.3, 0.2, 0.25, 0.5, 0.25}, {2, 3});
  check_close(losses::CategoricalCrossentropy({.label_smoothing = 0.3, .axis = 1, .reduction = "none"})(t_rows, p_rows),
              {c0, c1}, 1e-12);
  // From logits along axis 0: logits log(p) give the same probabilities after the softmax.
  const Tensor logits = log(y_pred);
  check_close(losses::CategoricalCrossentropy(
                  {.from_logits = true, .label_smoothing = 0.3, .axis = 0, .reduction = "none"})(y_true, logits),
              {c0, c1}, 1e-12);
  CHECK_THROWS_AS(losses::CategoricalCrossentropy({.label_smoothing = 0.3, .axis = 2})(y_true, y_pred), ValueError);
}

TEST_CASE("label_smoothing outside [0, 1] is a ValueError naming the class and the value", "[loss_classes][errors]") {
  CHECK_THROWS_AS(losses::BinaryCrossentropy({.label_smoothing = -0.1}), ValueError);
  CHECK_THROWS_WITH(losses::BinaryCrossentropy({.label_smoothing = 1.5}),
                    Contains("BinaryCrossentropy") && Contains("1.5"));
  CHECK_THROWS_WITH(losses::CategoricalCrossentropy({.label_smoothing = -0.25}),
                    Contains("CategoricalCrossentropy") && Contains("-0.25"));
  CHECK_THROWS_AS(losses::CategoricalCrossentropy({.label_smoothing = std::nan("")}), ValueError);
  // Keras' documented range [0, 1] includes both ends.
  CHECK_NOTHROW(losses::BinaryCrossentropy({.label_smoothing = 0.0}));
  CHECK_NOTHROW(losses::BinaryCrossentropy({.label_smoothing = 1.0}));
  CHECK_NOTHROW(losses::CategoricalCrossentropy({.label_smoothing = 1.0}));
}

// ---- default names --------------------------------------------------------------------------------

namespace {

class MyLoss : public losses::Loss {
 public:
  Tensor call(const Tensor& y_true, const Tensor& y_pred) const override { return y_pred - y_true; }
  std::string class_name() const override { return "MyLoss"; }
};

}  // namespace

TEST_CASE("loss names follow Keras 3: fixed names for built-ins, auto names otherwise", "[loss_classes][names]") {
  // Keras' built-in loss classes default to their function's name (name="mean_squared_error",
  // "huber_loss", ...), with no counter: two MSEs are both "mean_squared_error".
  CHECK(losses::MeanSquaredError().name() == "mean_squared_error");
  CHECK(losses::MeanSquaredError().name() == "mean_squared_error");
  CHECK(losses::MeanAbsoluteError().name() == "mean_absolute_error");
  CHECK(losses::Huber().name() == "huber_loss");
  CHECK(losses::BinaryCrossentropy().name() == "binary_crossentropy");
  CHECK(losses::CategoricalCrossentropy().name() == "categorical_crossentropy");
  CHECK(losses::SparseCategoricalCrossentropy().name() == "sparse_categorical_crossentropy");
  CHECK(losses::KLDivergence().name() == "kl_divergence");
  // LossFunctionWrapper and Loss default to name=None: auto_name(class name), with the counter.
  const auto fn = [](const Tensor& t, const Tensor& p) { return p - t; };
  const std::string w1 = losses::LossFunctionWrapper(fn).name();
  const std::string w2 = losses::LossFunctionWrapper(fn).name();
  CHECK(is_auto_name(w1, "loss_function_wrapper"));
  CHECK(is_auto_name(w2, "loss_function_wrapper"));
  CHECK(w1 != w2);
  CHECK(is_auto_name(MyLoss().name(), "my_loss"));
  CHECK(MyLoss().get_config().at("name").get<std::string>().rfind("my_loss", 0) == 0);
  CHECK(losses::LossFunctionWrapper(fn, {.name = "mine"}).name() == "mine");
}
