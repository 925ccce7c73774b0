// Keras 3's hinge, log-cosh, Poisson, cosine similarity, MSLE, MAPE, focal crossentropy, Dice
// and Tversky losses: the per-example functions against values worked by hand from Keras'
// formulas (keras/src/losses/losses.py), the classes' reductions, configs and names, float64
// gradient checks, edge cases and errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;
using keel_test::check_gradients;
using keel_test::f64;

namespace {

constexpr double kEps = 1e-7;  // keras.backend.epsilon()

void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).margin(tol).epsilon(0));
  }
}

double value(const Tensor& t) { return t.to_vector<double>().at(0); }

// Values in (0.1, 0.9), distinct: probabilities away from the clips.
Tensor probs(Shape s, double salt) {
  const Tensor w = keel_test::wavy(std::move(s), salt);
  return add(mul(w, scalar_like(w, 0.4)), scalar_like(w, 0.5));
}

}  // namespace

// ---- hinge family -------------------------------------------------------------------------------

TEST_CASE("hinge and squared_hinge convert 0/1 labels to -1/1", "[losses_keras3][hinge]") {
  // y = [[0, 1], [1, 0]] -> [[-1, 1], [1, -1]]; p = [[0.3, 0.8], [-0.5, 0.2]]
  //   1 - y p = [[1.3, 0.2], [1.5, 1.2]]: hinge = [0.75, 1.35];
  //   squared: [(1.69 + 0.04) / 2, (2.25 + 1.44) / 2] = [0.865, 1.845]
  const Tensor y = f64({0, 1, 1, 0}, {2, 2}), p = f64({0.3, 0.8, -0.5, 0.2}, {2, 2});
  check_values(losses::hinge(y, p), {0.75, 1.35});
  check_values(losses::squared_hinge(y, p), {0.865, 1.845});
  // Labels already -1/1 are used as they are: the same numbers.
  check_values(losses::hinge(f64({-1, 1, 1, -1}, {2, 2}), p), {0.75, 1.35});
  // A margin beyond 1 costs nothing: y = 1, p = 2 -> max(1 - 2, 0) = 0.
  check_values(losses::hinge(f64({1}, {1, 1}), f64({2}, {1, 1})), {0});
  // The class: the mean over the batch, (0.75 + 1.35) / 2 = 1.05, and integer labels work.
  CHECK(value(losses::Hinge()(constant(std::vector<std::int32_t>{0, 1, 1, 0}, Shape{2, 2}), p)) ==
        Approx(1.05));
  CHECK(value(losses::SquaredHinge()(y, p)) == Approx((0.865 + 1.845) / 2));
  // Labels [N] against predictions [N, 1]: brought to the same rank, as Keras.
  check_values(losses::hinge(f64({0, 1}, {2}), f64({0.3, 0.8}, {2, 1})), {1.3, 0.2});
  const Tensor yy = y;
  check_gradients([yy](const std::vector<Tensor>& in) { return losses::hinge(yy, in[0]); }, {p});
  check_gradients([yy](const std::vector<Tensor>& in) { return losses::squared_hinge(yy, in[0]); }, {p});
}

TEST_CASE("categorical_hinge is max(neg - pos + 1, 0)", "[losses_keras3][hinge]") {
  // y = [[0, 1, 0], [1, 0, 0]], p = [[0.2, 0.5, 0.3], [0.1, 0.6, 0.3]]
  //   row 0: pos = 0.5, neg = max(0.2, 0, 0.3) = 0.3 -> 0.8
  //   row 1: pos = 0.1, neg = max(0, 0.6, 0.3) = 0.6 -> 1.5
  const Tensor y = f64({0, 1, 0, 1, 0, 0}, {2, 3}), p = f64({0.2, 0.5, 0.3, 0.1, 0.6, 0.3}, {2, 3});
  check_values(losses::categorical_hinge(y, p), {0.8, 1.5});
  CHECK(value(losses::CategoricalHinge()(y, p)) == Approx(1.15));
  // A confident right answer: pos = 3, neg = 0.5 -> max(-1.5, 0) = 0.
  check_values(losses::categorical_hinge(f64({0, 1}, {1, 2}), f64({0.5, 3}, {1, 2})), {0});
  check_gradients([y](const std::vector<Tensor>& in) { return losses::categorical_hinge(y, in[0]); }, {p});
  CHECK_THROWS_AS(losses::categorical_hinge(zeros({2, 0}), zeros({2, 0})), ShapeError);
}

// ---- regression losses --------------------------------------------------------------------------

TEST_CASE("log_cosh is log(cosh(p - y)) averaged over the last axis", "[losses_keras3][log_cosh]") {
  // Keras' doc example: y = [[0, 1], [0, 0]], p = [[1, 1], [0, 0]]: x = [[1, 0], [0, 0]];
  //   log(cosh(1)) = log(1.5430806) = 0.4337808 -> [0.2168904, 0]; mean 0.1084452
  const Tensor y = f64({0, 1, 0, 0}, {2, 2}), p = f64({1, 1, 0, 0}, {2, 2});
  check_values(losses::log_cosh(y, p), {std::log(std::cosh(1.0)) / 2, 0});
  CHECK(value(losses::LogCosh()(y, p)) == Approx(0.1084452).epsilon(1e-6));
  // Large errors stay finite where cosh overflows: log cosh(1000) = 1000 - log 2.
  check_values(losses::log_cosh(f64({0}, {1, 1}), f64({1000}, {1, 1})), {1000 - std::log(2.0)}, 1e-9);
  const Tensor yw = keel_test::wavy({2, 3}, 0.1);
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::log_cosh(yw, in[0]); },
                  {keel_test::wavy({2, 3}, 1.7)});
}

TEST_CASE("poisson is p - y log(p + eps)", "[losses_keras3][poisson]") {
  // y = [[1, 2]], p = [[0.5, 2]]: [0.5 - log(0.5000001), 2 - 2 log(2.0000001)] = [1.1931470, 0.6137056],
  //   mean 0.9034263
  const Tensor y = f64({1, 2}, {1, 2}), p = f64({0.5, 2}, {1, 2});
  const double e0 = 0.5 - std::log(0.5 + kEps), e1 = 2 - 2 * std::log(2 + kEps);
  check_values(losses::poisson(y, p), {(e0 + e1) / 2});
  CHECK((e0 + e1) / 2 == Approx(0.9034263).epsilon(1e-6));
  CHECK(value(losses::Poisson()(y, p)) == Approx(0.9034263).epsilon(1e-6));
  const Tensor yw = probs({3, 2}, 0.4);
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::poisson(yw, in[0]); }, {probs({3, 2}, 2.1)});
}

TEST_CASE("mean_squared_logarithmic_error clamps at epsilon", "[losses_keras3][msle]") {
  // y = [[1, 0]], p = [[3, 0.5]]: (log 4 - log 2)^2 = (log 2)^2 = 0.4804530;
  //   (log 1.5 - log(1 + 1e-7))^2 = 0.1644019 (y = 0 is clamped to eps); mean 0.3224274
  const Tensor y = f64({1, 0}, {1, 2}), p = f64({3, 0.5}, {1, 2});
  const double a = std::pow(std::log(4.0) - std::log(2.0), 2), b = std::pow(std::log(1.5) - std::log(1 + kEps), 2);
  check_values(losses::mean_squared_logarithmic_error(y, p), {(a + b) / 2});
  CHECK((a + b) / 2 == Approx(0.3224274).epsilon(1e-6));
  // A negative prediction counts as eps: (log(1 + eps) - log 2)^2.
  check_values(losses::MeanSquaredLogarithmicError({.reduction = "none"})(f64({1}, {1, 1}), f64({-3}, {1, 1})),
               {std::pow(std::log(1 + kEps) - std::log(2.0), 2)});
  const Tensor yw = probs({2, 3}, 0.9);
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::mean_squared_logarithmic_error(yw, in[0]); },
                  {probs({2, 3}, 0.2)});
}

TEST_CASE("mean_absolute_percentage_error is 100 mean |(y - p) / y|", "[losses_keras3][mape]") {
  // y = [[2, -4]], p = [[1, -5]]: |1 / 2| = 0.5, |1 / 4| = 0.25 -> 100 * 0.375 = 37.5
  check_values(losses::mean_absolute_percentage_error(f64({2, -4}, {1, 2}), f64({1, -5}, {1, 2})), {37.5});
  // y = 0 divides by eps: 100 * 0.5 / 1e-7 = 5e8.
  check_values(losses::mean_absolute_percentage_error(f64({0}, {1, 1}), f64({0.5}, {1, 1})), {5e8}, 1e-3);
  CHECK(value(losses::MeanAbsolutePercentageError()(f64({2, -4, 1, 1}, {2, 2}), f64({1, -5, 1, 3}, {2, 2}))) ==
        Approx((37.5 + 100.0) / 2));
  const Tensor yw = keel_test::wavy({2, 3}, 0.5);
  check_gradients(
      [yw](const std::vector<Tensor>& in) { return losses::mean_absolute_percentage_error(yw, in[0]); },
      {keel_test::wavy({2, 3}, 2.5)}, 1e-7, 1e-5);
}

TEST_CASE("cosine_similarity is minus the cosine along the axis", "[losses_keras3][cosine]") {
  // Keras' doc example: y = [[0, 1], [1, 1], [1, 1]], p = [[1, 0], [1, 1], [-1, -1]] -> [0, -1, 1]
  const Tensor y = f64({0, 1, 1, 1, 1, 1}, {3, 2}), p = f64({1, 0, 1, 1, -1, -1}, {3, 2});
  check_values(losses::cosine_similarity(y, p), {0, -1, 1}, 1e-6);
  // The class with weights [1, 2, 0]: (0 - 2 + 0) / 3 (sum_over_batch_size counts all three).
  CHECK(value(losses::CosineSimilarity()(y, p, f64({1, 2, 0}, {3}))) == Approx(-2.0 / 3).epsilon(1e-6));
  // axis 0 (or -2): columns [0, 1, 1] . [1, 1, -1] / (sqrt 2 sqrt 3) = 0; [1, 1, 1] . [0, 1, -1] = 0.
  check_values(losses::cosine_similarity(y, p, 0), {0, 0}, 1e-6);
  check_values(losses::cosine_similarity(y, p, -2), {0, 0}, 1e-6);
  // y = [3, 4], p = [4, 3]: cos = 24 / 25.
  check_values(losses::cosine_similarity(f64({3, 4}, {1, 2}), f64({4, 3}, {1, 2})), {-0.96});
  // A zero vector gives 0, with a finite gradient.
  check_values(losses::cosine_similarity(f64({1, 2}, {1, 2}), f64({0, 0}, {1, 2})), {0});
  const Tensor yw = keel_test::wavy({3, 4}, 0.3);
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::cosine_similarity(yw, in[0]); },
                  {keel_test::wavy({3, 4}, 1.9)});
  check_gradients([](const std::vector<Tensor>& in) { return losses::cosine_similarity(in[0], in[1], 0); },
                  {keel_test::wavy({3, 2}, 0.7), keel_test::wavy({3, 2}, 2.2)});
  CHECK_THROWS_AS(losses::cosine_similarity(y, p, 2), ValueError);
}

// ---- focal crossentropies -----------------------------------------------------------------------

TEST_CASE("binary_focal_crossentropy down-weighs easy examples", "[losses_keras3][focal]") {
  // y = [[0, 1]], p = [[0.2, 0.6]], gamma 2:
  //   element 0: bce = -log 0.8 = 0.2231436, p_t = 0.8, (1 - p_t)^2 = 0.04 -> 0.0089257
  //   element 1: bce = -log 0.6 = 0.5108256, p_t = 0.6, (0.4)^2 = 0.16 -> 0.0817321
  //   mean 0.0453289
  const Tensor y = f64({0, 1}, {1, 2}), p = f64({0.2, 0.6}, {1, 2});
  const double f0 = 0.04 * -std::log(0.8), f1 = 0.16 * -std::log(0.6);
  check_values(losses::binary_focal_crossentropy(y, p), {(f0 + f1) / 2});
  CHECK((f0 + f1) / 2 == Approx(0.0453289).epsilon(1e-5));
  // Class balancing with alpha 0.25: weights 1 - alpha = 0.75 for y = 0 and 0.25 for y = 1.
  check_values(losses::binary_focal_crossentropy(y, p, true), {(0.75 * f0 + 0.25 * f1) / 2});
  // From logits: log(p / (1 - p)) gives the same.
  const Tensor logits = f64({std::log(0.2 / 0.8), std::log(0.6 / 0.4)}, {1, 2});
  check_values(losses::BinaryFocalCrossentropy({.from_logits = true, .reduction = "none"})(y, logits),
               {(f0 + f1) / 2});
  // gamma 0 is the binary crossentropy itself.
  check_values(losses::binary_focal_crossentropy(y, p, false, 0.25, 0.0), {(-std::log(0.8) - std::log(0.6)) / 2});
  // Label smoothing 0.2: y -> [0.1, 0.9]; p_t = [0.1*0.2 + 0.9*0.8, 0.9*0.6 + 0.1*0.4] = [0.74, 0.58];
  //   bce = [-(0.1 log 0.2 + 0.9 log 0.8), -(0.9 log 0.6 + 0.1 log 0.4)]
  const double b0 = -(0.1 * std::log(0.2) + 0.9 * std::log(0.8)), b1 = -(0.9 * std::log(0.6) + 0.1 * std::log(0.4));
  check_values(losses::binary_focal_crossentropy(y, p, false, 0.25, 2.0, false, 0.2),
               {(0.26 * 0.26 * b0 + 0.42 * 0.42 * b1) / 2});
  const Tensor yw = f64({0, 1, 1, 0, 1, 0}, {2, 3});
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::binary_focal_crossentropy(yw, in[0], true); },
                  {probs({2, 3}, 0.8)});
  check_gradients(
      [yw](const std::vector<Tensor>& in) {
        return losses::binary_focal_crossentropy(yw, in[0], false, 0.25, 2.0, true, 0.1);
      },
      {keel_test::wavy({2, 3}, 0.4)});
  CHECK_THROWS_AS(losses::BinaryFocalCrossentropy({.label_smoothing = 1.5}), ValueError);
}

TEST_CASE("categorical_focal_crossentropy weighs -y log q by alpha (1 - q)^gamma", "[losses_keras3][focal]") {
  // y = [[0, 1, 0]], p = [[0.1, 0.6, 0.3]]: 0.25 * 0.4^2 * -log 0.6 = 0.0204330
  const Tensor y = f64({0, 1, 0}, {1, 3});
  const double expected = 0.25 * 0.16 * -std::log(0.6);
  check_values(losses::categorical_focal_crossentropy(y, f64({0.1, 0.6, 0.3}, {1, 3})), {expected});
  CHECK(expected == Approx(0.0204330).epsilon(1e-5));
  // Unnormalised predictions are divided by their sum first: [0.2, 1.2, 0.6] / 2.
  check_values(losses::categorical_focal_crossentropy(y, f64({0.2, 1.2, 0.6}, {1, 3})), {expected});
  // From logits: log of the probabilities (softmax of log p is p).
  check_values(losses::CategoricalFocalCrossentropy({.from_logits = true, .reduction = "none"})(
                   y, f64({std::log(0.1), std::log(0.6), std::log(0.3)}, {1, 3})),
               {expected});
  // Label smoothing 0.3 over 3 classes: y -> [0.1, 0.8, 0.1].
  const double smoothed = 0.25 * (0.1 * 0.81 * -std::log(0.1) + 0.8 * 0.16 * -std::log(0.6) +
                                  0.1 * 0.49 * -std::log(0.3));
  check_values(losses::categorical_focal_crossentropy(y, f64({0.1, 0.6, 0.3}, {1, 3}), 0.25, 2.0, false, 0.3),
               {smoothed});
  // axis 0: the classes down the columns (a transpose of the same data gives the same loss).
  const Tensor yt = transpose(y), pt = transpose(f64({0.1, 0.6, 0.3}, {1, 3}));
  check_values(losses::categorical_focal_crossentropy(yt, pt, 0.25, 2.0, false, 0.0, 0), {expected});
  const Tensor yw = f64({0, 1, 0, 1, 0, 0}, {2, 3});
  check_gradients([yw](const std::vector<Tensor>& in) { return losses::categorical_focal_crossentropy(yw, in[0]); },
                  {probs({2, 3}, 0.6)});
  check_gradients(
      [yw](const std::vector<Tensor>& in) {
        return losses::categorical_focal_crossentropy(yw, in[0], 0.5, 1.5, true, 0.1);
      },
      {keel_test::wavy({2, 3}, 1.1)});
}

// ---- overlap losses -----------------------------------------------------------------------------

TEST_CASE("dice and tversky measure the overlap", "[losses_keras3][dice]") {
  // y = [[1, 0], [1, 1]], p = [[0.8, 0.2], [0.6, 0.4]]
  //   every axis: TP = 0.8 + 0.6 + 0.4 = 1.8, sum y = 3, sum p = 2: dice = 1 - 3.6 / 5 = 0.28
  //   axis 1: row 0: 1 - 1.6 / 2 = 0.2; row 1: 1 - 2 / 3 = 1/3
  const Tensor y = f64({1, 0, 1, 1}, {2, 2}), p = f64({0.8, 0.2, 0.6, 0.4}, {2, 2});
  check_values(losses::dice(y, p), {1 - 3.6 / (5 + kEps)});
  check_values(losses::dice(y, p, {1}), {1 - 1.6 / (2 + kEps), 1 - 2.0 / (3 + kEps)});
  check_values(losses::dice(y, p, {-1}), {0.2, 1.0 / 3});
  CHECK(value(losses::Dice({.axis = {1}})(y, p)) == Approx((0.2 + 1.0 / 3) / 2));
  CHECK(value(losses::Dice()(y, p)) == Approx(0.28));
  //   Tversky: FP = sum((1 - y) p) = 0.2, FN = sum(y (1 - p)) = 0.2 + 0.4 + 0.6 = 1.2
  //   alpha = beta = 0.5: 1 - 1.8 / (1.8 + 0.1 + 0.6) = 0.28 (Dice again)
  //   alpha 0.7, beta 0.3: 1 - 1.8 / (1.8 + 0.14 + 0.36) = 1 - 1.8 / 2.3 = 0.2173913
  check_values(losses::tversky(y, p), {0.28});
  check_values(losses::tversky(y, p, 0.7, 0.3), {1 - 1.8 / (2.3 + kEps)});
  CHECK(value(losses::Tversky({.alpha = 0.7, .beta = 0.3})(y, p)) == Approx(0.2173913).epsilon(1e-6));
  check_gradients([y](const std::vector<Tensor>& in) { return losses::dice(y, in[0]); }, {probs({2, 2}, 0.3)});
  check_gradients([y](const std::vector<Tensor>& in) { return losses::tversky(y, in[0], 0.7, 0.3, {1}); },
                  {probs({2, 2}, 1.3)});
  CHECK_THROWS_AS(losses::dice(y, p, {2}), ValueError);
}

// ---- reductions ---------------------------------------------------------------------------------

TEST_CASE("the reductions are Keras 3's", "[losses_keras3][reduction]") {
  // Per example (hinge above): [0.75, 1.35]; weights [1, 3]: weighted [0.75, 4.05], sum 4.8.
  const Tensor y = f64({0, 1, 1, 0}, {2, 2}), p = f64({0.3, 0.8, -0.5, 0.2}, {2, 2});
  const Tensor w = f64({1, 3}, {2});
  CHECK(value(losses::Hinge({.reduction = "sum"})(y, p, w)) == Approx(4.8));
  // sum_over_batch_size divides by the number of values (2), not by the weights' sum.
  CHECK(value(losses::Hinge({.reduction = "sum_over_batch_size"})(y, p, w)) == Approx(2.4));
  // Keras 3 has "mean": the same as sum_over_batch_size.
  CHECK(value(losses::Hinge({.reduction = "mean"})(y, p, w)) == Approx(2.4));
  CHECK(value(losses::Hinge({.reduction = "mean_with_sample_weight"})(y, p, w)) == Approx(4.8 / 4));
  check_values(losses::Hinge({.reduction = "none"})(y, p, w), {0.75, 4.05});
  CHECK_THROWS_AS(losses::Hinge({.reduction = "avg"}), ValueError);
  CHECK_THROWS_AS(losses::Tversky({.reduction = "auto"}), ValueError);
  // Gradients pass through the reduction.
  check_gradients([y](const std::vector<Tensor>& in) { return losses::SquaredHinge()(y, in[0], in[1]); },
                  {keel_test::wavy({2, 2}, 0.2), f64({0.5, 2}, {2})});
}

// ---- edge cases ---------------------------------------------------------------------------------

TEST_CASE("the new losses take empty, size-1 and strided inputs", "[losses_keras3][edge]") {
  // Empty batch: no per-example values.
  const Tensor e = zeros({0, 3}, DType::float64);
  CHECK(losses::hinge(e, e).shape() == Shape{0});
  CHECK(losses::log_cosh(e, e).shape() == Shape{0});
  CHECK(losses::categorical_focal_crossentropy(e, e).shape() == Shape{0});
  CHECK(losses::cosine_similarity(e, e).shape() == Shape{0});
  // One class: the normalised prediction is 1, clipped to 1 - eps: 0.25 eps^2 (-log(1 - eps)).
  check_values(losses::categorical_focal_crossentropy(f64({1}, {1, 1}), f64({0.3}, {1, 1})),
               {0.25 * kEps * kEps * -std::log(1 - kEps)}, 1e-20);
  // A transposed (non-contiguous) input gives the values of its contiguous copy.
  const Tensor y = f64({0, 1, 1, 0, 1, 0}, {3, 2}), p = keel_test::wavy({3, 2}, 0.9);
  const Tensor yt = transpose(y), pt = transpose(p);
  REQUIRE_FALSE(pt.is_contiguous());
  check_values(losses::squared_hinge(yt, pt), losses::squared_hinge(yt.contiguous(), pt.contiguous()).to_vector<double>());
  check_values(losses::poisson(yt, add(pt, scalar_like(pt, 2))),
               losses::poisson(yt.contiguous(), add(pt.contiguous(), scalar_like(pt, 2))).to_vector<double>());
  // A strided slice: every other row.
  const Tensor ps = strided_slice(keel_test::wavy({4, 2}, 0.1), {0, 0}, {4, 2}, {2, 1});
  check_values(losses::log_cosh(f64({0, 0, 0, 0}, {2, 2}), ps),
               losses::log_cosh(f64({0, 0, 0, 0}, {2, 2}), ps.contiguous()).to_vector<double>());
}

TEST_CASE("the new losses reject bad inputs", "[losses_keras3][errors]") {
  const Tensor a = zeros({2, 3}, DType::float64), b = zeros({2, 4}, DType::float64);
  CHECK_THROWS_AS(losses::hinge(a, b), ShapeError);
  CHECK_THROWS_AS(losses::Tversky()(a, b), ShapeError);
  CHECK_THROWS_AS(losses::poisson(a, constant(std::vector<std::int32_t>(6, 1), Shape{2, 3})), DTypeError);
  CHECK_THROWS_AS(losses::log_cosh(a, Tensor()), ValueError);
  CHECK_THROWS_AS(losses::categorical_focal_crossentropy(a, a, 0.25, 2.0, false, -0.1), ValueError);
  CHECK_THROWS_AS(losses::binary_focal_crossentropy(a, a, false, 0.25, 2.0, false, 0.0, 5), ValueError);
  CHECK_THROWS_AS(losses::hinge(constant(1.0, DType::float64), constant(1.0, DType::float64)), ShapeError);
  CHECK_THROWS_WITH(losses::hinge(a, b), Catch::Contains("hinge") && Catch::Contains("[2,3]"));
}

// ---- names and configs --------------------------------------------------------------------------

TEST_CASE("the new losses come by name and rebuild from their configs", "[losses_keras3][config]") {
  const std::vector<std::pair<const char*, const char*>> names = {
      {"hinge", "Hinge"},
      {"squared_hinge", "SquaredHinge"},
      {"categorical_hinge", "CategoricalHinge"},
      {"log_cosh", "LogCosh"},
      {"logcosh", "LogCosh"},
      {"poisson", "Poisson"},
      {"cosine_similarity", "CosineSimilarity"},
      {"msle", "MeanSquaredLogarithmicError"},
      {"mape", "MeanAbsolutePercentageError"},
      {"binary_focal_crossentropy", "BinaryFocalCrossentropy"},
      {"categorical_focal_crossentropy", "CategoricalFocalCrossentropy"},
      {"dice", "Dice"},
      {"tversky", "Tversky"}};
  const Tensor y = f64({0, 1, 0, 1, 0, 0}, {2, 3}), p = probs({2, 3}, 0.5);
  for (const auto& [n, cls] : names) {
    INFO(n);
    const auto loss = losses::get(n);
    CHECK(loss->class_name() == cls);
    const auto back = losses::from_config(cls, loss->get_config());
    CHECK(back->get_config() == loss->get_config());
    CHECK(value((*back)(y, p)) == Approx(value((*loss)(y, p))));
  }
  // Non-default options survive the round trip and change the value.
  losses::BinaryFocalCrossentropy bfc({.apply_class_balancing = true, .alpha = 0.4, .gamma = 1.5,
                                       .from_logits = true, .label_smoothing = 0.1, .reduction = "sum",
                                       .name = "bfc"});
  const auto cfg = bfc.get_config();
  CHECK(cfg["apply_class_balancing"] == true);
  CHECK(cfg["gamma"] == 1.5);
  CHECK(cfg["name"] == "bfc");
  const auto bfc2 = losses::from_config("BinaryFocalCrossentropy", cfg);
  CHECK(bfc2->get_config() == cfg);
  CHECK(value((*bfc2)(y, p)) == Approx(value(bfc(y, p))));
  losses::Tversky tv({.alpha = 0.9, .beta = 0.1, .axis = {1}});
  const auto tv2 = losses::from_config("Tversky", tv.get_config());
  check_values((*tv2)(y, p), {value(tv(y, p))});
  CHECK(tv.get_config()["axis"] == nlohmann::json::array({1}));
  CHECK(losses::Dice().get_config()["axis"].is_null());
  CHECK(losses::CosineSimilarity({.axis = 0}).get_config()["axis"] == 0);
  CHECK_THROWS_AS(losses::from_config("Tversky", {{"alpha", "big"}}), ValueError);
  CHECK_THROWS_AS(losses::get("hingee"), ValueError);
}

TEST_CASE("every option of the new losses is written and read back", "[losses_keras3][config]") {
  const std::vector<std::pair<const char*, nlohmann::json>> cases = {
      {"Hinge", {{"reduction", "sum"}}},
      {"SquaredHinge", {{"reduction", "sum"}}},
      {"CategoricalHinge", {{"reduction", "none"}}},
      {"LogCosh", {{"reduction", "mean"}}},
      {"Poisson", {{"reduction", "sum"}}},
      {"MeanSquaredLogarithmicError", {{"reduction", "sum"}}},
      {"MeanAbsolutePercentageError", {{"reduction", "sum"}}},
      {"CosineSimilarity", {{"reduction", "sum"}, {"axis", 1}}},
      {"BinaryFocalCrossentropy",
       {{"reduction", "sum"}, {"apply_class_balancing", true}, {"alpha", 0.4}, {"gamma", 1.5},
        {"from_logits", true}, {"label_smoothing", 0.1}, {"axis", 1}}},
      {"CategoricalFocalCrossentropy",
       {{"reduction", "sum"}, {"alpha", 0.4}, {"gamma", 1.5}, {"from_logits", true}, {"label_smoothing", 0.1},
        {"axis", 1}}},
      {"Dice", {{"reduction", "sum"}, {"axis", {1, 2}}}},
      {"Tversky", {{"reduction", "sum"}, {"alpha", 0.3}, {"beta", 0.7}, {"axis", {1}}}}};
  for (const auto& [cls, config0] : cases) {
    INFO(cls);
    nlohmann::json config = config0;
    config["name"] = "roundtrip";
    const auto written = losses::from_config(cls, config)->get_config();
    for (const auto& [key, v] : config.items()) {
      INFO("key " << key);
      CHECK(written.at(key) == v);
    }
    CHECK(losses::from_config(cls, written)->get_config() == written);
  }
}
