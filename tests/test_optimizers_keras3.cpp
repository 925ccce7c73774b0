// Adamax, Adadelta, Ftrl, Lion, Lamb and Adafactor (Keras 3's update rules), and the base's
// gradient_accumulation_steps: two steps worked by hand for each optimizer, the fused float32
// kernels against the float64 op path, configs, errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "optimizer_fixtures.hpp"

using namespace keel;
using namespace keel::optimizers;
using keel_test::check_close;
using keel_test::vec;

namespace {

using Make = std::function<std::shared_ptr<Optimizer>()>;

// The common example: w = [1, -2], then g1 = [0.5, -1], then g2 = [0.25, 2]; w is checked after
// each step, for a float32 weight (the fused CPU kernel where there is one) and a float64 weight
// (the same rule with ops).
void check_two_steps(const Make& make, const std::vector<double>& w1, const std::vector<double>& w2,
                     double eps = 1e-6) {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO("dtype " << name(dtype));
    auto opt = make();
    Variable w(vec({1, -2}, dtype), "w");
    opt->apply_gradients({{vec({0.5, -1}, dtype), &w}});
    INFO("after step 1");
    check_close(w.value(), w1, eps);
    CHECK(opt->iterations() == 1);
    opt->apply_gradients({{vec({0.25, 2}, dtype), &w}});
    INFO("after step 2");
    check_close(w.value(), w2, eps);
    CHECK(opt->iterations() == 2);
  }
}

// Five steps of the same optimizer on a float32 weight of 37 elements (SIMD batches and a tail)
// and on its float64 copy: the fused kernel and the op path must agree.
void check_float32_matches_float64(const Make& make) {
  std::vector<double> w0(37), gs(37);
  for (std::size_t i = 0; i < w0.size(); ++i) {
    w0[i] = std::sin(0.7 * double(i) + 0.2);
    gs[i] = std::cos(1.3 * double(i) + 0.1);
  }
  auto o32 = make(), o64 = make();
  Variable a(vec(w0, DType::float32), "a"), b(vec(w0, DType::float64), "b");
  for (int step = 0; step < 5; ++step) {
    std::vector<double> g(gs.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = gs[i] * (1.0 - 0.3 * step) + 0.05 * step;
    o32->apply_gradients({{vec(g, DType::float32), &a}});
    o64->apply_gradients({{vec(g, DType::float64), &b}});
  }
  check_close(a.value(), b.value().to_vector<double>(), 1e-5);
}

}  // namespace

// ---- Adamax -------------------------------------------------------------------------------------

TEST_CASE("Adamax steps with the infinity norm as Keras 3", "[adamax]") {
  // lr 0.1, beta_1 0.9, beta_2 0.999, eps 1e-7:
  //   m += (g - m) * 0.1;  u = max(0.999 u, |g|);  w -= 0.1 m / ((1 - 0.9^t)(u + eps))
  // element 0, step 1: m = 0.05, u = 0.5, w = 1 - 0.005 / (0.1 * 0.5000001) = 0.90000002
  // step 2 (g = 0.25): m = 0.05 + 0.2 * 0.1 = 0.07, u = max(0.4995, 0.25) = 0.4995,
  //   w = 0.90000002 - 0.007 / (0.19 * 0.4995001) = 0.90000002 - 0.07375796 = 0.82624207
  // element 1, step 1: m = -0.1, u = 1, w = -2 + 0.01 / (0.1 * 1.0000001) = -1.9000001
  // step 2 (g = 2): m = -0.1 + 2.1 * 0.1 = 0.11, u = max(0.999, 2) = 2,
  //   w = -1.9000001 - 0.011 / (0.19 * 2.0000001) = -1.9000001 - 0.02894737 = -1.92894746
  const double e = 1e-7;
  const double a1 = 1 - 0.1 * 0.05 / (0.1 * (0.5 + e)), b1 = -2 + 0.1 * 0.1 / (0.1 * (1 + e));
  const double a2 = a1 - 0.1 * 0.07 / (0.19 * (0.4995 + e)), b2 = b1 - 0.1 * 0.11 / (0.19 * (2 + e));
  CHECK(a2 == Approx(0.82624207).epsilon(1e-7));
  check_two_steps([] { return std::make_shared<Adamax>(0.1); }, {a1, b1}, {a2, b2});
  check_float32_matches_float64([] { return std::make_shared<Adamax>(0.05); });
  CHECK(Adamax().options().beta_2 == 0.999);
}

// ---- Adadelta -----------------------------------------------------------------------------------

TEST_CASE("Adadelta scales each step by the running RMS of the past updates", "[adadelta]") {
  // lr 1, rho 0.95, eps 1e-7: a = 0.95 a + 0.05 g^2;  d = sqrt(D + eps) g / sqrt(a + eps);
  //   D = 0.95 D + 0.05 d^2;  w -= lr d
  // element 0, step 1: a = 0.0125, d = sqrt(1e-7) * 0.5 / sqrt(0.0125001) = 1.41420e-3,
  //   D = 0.05 * d^2 = 1.0e-7, w = 1 - 1.41421e-3 = 0.99858579
  const double e = 1e-7;
  auto one = [e](double w, std::vector<double> gs) {
    double a = 0, D = 0;
    for (double g : gs) {
      a = 0.95 * a + 0.05 * g * g;
      const double d = std::sqrt(D + e) * g / std::sqrt(a + e);
      D = 0.95 * D + 0.05 * d * d;
      w -= 1.0 * d;
    }
    return w;
  };
  CHECK(one(1, {0.5}) == Approx(0.99858579).epsilon(1e-7));
  check_two_steps([] { return std::make_shared<Adadelta>(1.0); }, {one(1, {0.5}), one(-2, {-1})},
                  {one(1, {0.5, 0.25}), one(-2, {-1, 2})});
  check_float32_matches_float64([] { return std::make_shared<Adadelta>(1.0, AdadeltaOptions{.rho = 0.9}); });
}

// ---- Lion ---------------------------------------------------------------------------------------

TEST_CASE("Lion steps by the sign of the interpolated momentum", "[lion]") {
  // lr 0.1, beta_1 0.9, beta_2 0.99: w -= 0.1 sign(0.9 m + 0.1 g);  m = 0.99 m + 0.01 g
  // element 0: step 1: sign(0.05) = 1, w = 0.9, m = 0.005;
  //   step 2: sign(0.0045 + 0.025) = 1, w = 0.8
  // element 1: step 1: sign(-0.1) = -1, w = -1.9, m = -0.01;
  //   step 2: sign(-0.009 + 0.2) = 1, w = -2.0
  check_two_steps([] { return std::make_shared<Lion>(0.1); }, {0.9, -1.9}, {0.8, -2.0});
  check_float32_matches_float64([] { return std::make_shared<Lion>(0.01); });
  // A zero interpolation has sign 0: the weight stays.
  Lion lion(0.1);
  Variable w(vec({3}, DType::float32), "w");
  lion.apply_gradients({{vec({0}, DType::float32), &w}});
  check_close(w.value(), {3});
  CHECK_THROWS_AS(Lion(0.1, {.beta_1 = 0.0}), ValueError);
  CHECK_THROWS_AS(Lion(0.1, {.beta_1 = 1.5}), ValueError);
}

// ---- Ftrl ---------------------------------------------------------------------------------------

TEST_CASE("Ftrl follows the regularized leader as Keras 3 writes it", "[ftrl]") {
  // lr 0.1, p = -learning_rate_power = 0.5, n0 = 0.1, l1 = 0.001, l2 = 0.01, shrinkage 0.02:
  //   n' = n + g^2;  z += g + 2 * 0.02 w - (n'^0.5 - n^0.5) / 0.1 * w;
  //   w = (clip(z, -l1, l1) - z) / (n'^0.5 / 0.1 + 2 l2);  n = n'
  // element 0, step 1: n' = 0.35, z = 0.5 + 0.04 - (0.5916080 - 0.3162278) / 0.1 = -2.2138020,
  //   w = 2.2128020 / 5.9360798 = 0.37277163
  auto one = [](double w, std::vector<double> gs) {
    double n = 0.1, z = 0;
    for (double g : gs) {
      const double n2 = n + g * g;
      z += g + 2 * 0.02 * w - (std::sqrt(n2) - std::sqrt(n)) / 0.1 * w;
      w = (std::clamp(z, -0.001, 0.001) - z) / (std::sqrt(n2) / 0.1 + 2 * 0.01);
      n = n2;
    }
    return w;
  };
  CHECK(one(1, {0.5}) == Approx(0.37277163).epsilon(1e-6));
  const FtrlOptions o{.l1_regularization_strength = 0.001,
                      .l2_regularization_strength = 0.01,
                      .l2_shrinkage_regularization_strength = 0.02};
  check_two_steps([o] { return std::make_shared<Ftrl>(0.1, o); }, {one(1, {0.5}), one(-2, {-1})},
                  {one(1, {0.5, 0.25}), one(-2, {-1, 2})});
  // beta adds beta / (2 lr) to l2: with l1 = 0 the first step is w = (0 - z) / (n'^0.5 / lr + beta / lr).
  Ftrl beta_opt(0.1, {.beta = 0.5});
  Variable w(vec({1}, DType::float64), "w");
  beta_opt.apply_gradients({{vec({0.5}, DType::float64), &w}});
  const double z = 0.5 - (std::sqrt(0.35) - std::sqrt(0.1)) / 0.1;
  check_close(w.value(), {-z / (std::sqrt(0.35) / 0.1 + 2 * (0.5 / 0.2))});
  CHECK_THROWS_AS(Ftrl(0.1, {.learning_rate_power = 0.5}), ValueError);
  CHECK_THROWS_AS(Ftrl(0.1, {.initial_accumulator_value = -1}), ValueError);
  CHECK_THROWS_AS(Ftrl(0.1, {.l1_regularization_strength = -1}), ValueError);
}

// ---- Lamb ---------------------------------------------------------------------------------------

TEST_CASE("Lamb scales Adam's update by the trust ratio ||w|| / ||update||", "[lamb]") {
  // lr 0.1, beta_1 0.9, beta_2 0.999, eps 1e-7. Step 1 with w = [3, 4], g = [0.5, -0.2]:
  //   m = 0.1 g, v = 0.001 g^2, so m_hat = g, sqrt(v_hat) = |g|: update = g / (|g| + eps)
  //   = [0.9999998, -0.9999995], ||update|| = 1.4142131, ||w|| = 5, ratio = 3.5355349,
  //   w = [3 - 0.35355342, 4 + 0.35355332] = [2.64644658, 4.35355332]
  const double e = 1e-7;
  const double u0 = 0.5 / (0.5 + e), u1 = -0.2 / (0.2 + e);
  const double ratio = 5.0 / std::sqrt(u0 * u0 + u1 * u1);
  const std::vector<double> w1{3 - 0.1 * ratio * u0, 4 - 0.1 * ratio * u1};
  CHECK(w1[0] == Approx(2.64644658).epsilon(1e-7));
  // Step 2, g = [0.1, 0.3]: m = 0.9 m + 0.1 g, v = 0.999 v + 0.001 g^2, bias corrections
  // 1 - 0.9^2 = 0.19 and 1 - 0.999^2 = 0.001999, the ratio from the new w.
  const double m0 = 0.9 * 0.05 + 0.1 * 0.1, m1 = 0.9 * -0.02 + 0.1 * 0.3;
  const double v0 = 0.999 * 0.00025 + 0.001 * 0.01, v1 = 0.999 * 0.00004 + 0.001 * 0.09;
  const double p0 = (m0 / 0.19) / (std::sqrt(v0 / 0.001999) + e), p1 = (m1 / 0.19) / (std::sqrt(v1 / 0.001999) + e);
  const double r2 = std::hypot(w1[0], w1[1]) / std::hypot(p0, p1);
  const std::vector<double> w2{w1[0] - 0.1 * r2 * p0, w1[1] - 0.1 * r2 * p1};
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(name(dtype));
    Lamb opt(0.1);
    Variable w(vec({3, 4}, dtype), "w");
    opt.apply_gradients({{vec({0.5, -0.2}, dtype), &w}});
    check_close(w.value(), w1, 1e-5);
    opt.apply_gradients({{vec({0.1, 0.3}, dtype), &w}});
    check_close(w.value(), w2, 1e-5);
  }
  // A zero weight has ratio 1: the plain Adam-like update.
  Lamb zero_opt(0.1);
  Variable z(vec({0, 0}, DType::float64), "z");
  zero_opt.apply_gradients({{vec({0.5, -0.2}, DType::float64), &z}});
  check_close(z.value(), {-0.1 * u0, -0.1 * u1});
}

// ---- Adafactor ----------------------------------------------------------------------------------

namespace {

// Keras' Adafactor on a 2 x 2 weight (factored moments), in double: the reference the test
// writes out, step by step, for lr 0.01 with relative_step (min(lr, 1/sqrt(t)) = lr here).
std::vector<double> adafactor_2x2(std::vector<double> w, const std::vector<std::vector<double>>& grads) {
  double r[2] = {0, 0}, c[2] = {0, 0};
  for (std::size_t step = 0; step < grads.size(); ++step) {
    const double t = double(step + 1);
    const auto& g = grads[step];
    const double rho = std::min(0.01, 1 / std::sqrt(t));
    const double rms_w = std::sqrt((w[0] * w[0] + w[1] * w[1] + w[2] * w[2] + w[3] * w[3]) / 4);
    const double alpha = std::max(1e-3, rms_w) * rho;
    double G[4];
    for (int i = 0; i < 4; ++i) G[i] = g[i] * g[i] + 1e-30;
    const double b = 1 - std::pow(t, -0.8);  // 0 on the first step
    r[0] = b * r[0] + (1 - b) * (G[0] + G[1]) / 2;  // mean over the last axis (rows)
    r[1] = b * r[1] + (1 - b) * (G[2] + G[3]) / 2;
    c[0] = b * c[0] + (1 - b) * (G[0] + G[2]) / 2;  // mean over the first axis (columns)
    c[1] = b * c[1] + (1 - b) * (G[1] + G[3]) / 2;
    const double rm = (r[0] + r[1]) / 2;
    const double v[4] = {r[0] / rm * c[0], r[0] / rm * c[1], r[1] / rm * c[0], r[1] / rm * c[1]};
    double u[4], sq = 0;
    for (int i = 0; i < 4; ++i) {
      u[i] = g[i] / std::sqrt(v[i]);
      sq += u[i] * u[i];
    }
    const double scale = std::max(1.0, std::sqrt(sq / 4) / 1.0);
    for (int i = 0; i < 4; ++i) w[i] -= alpha * u[i] / scale;
  }
  return w;
}

}  // namespace

TEST_CASE("Adafactor keeps factored second moments for matrices", "[adafactor]") {
  // Step 1, w = [[1, 2], [3, 4]], g = [[0.1, 0.2], [0.3, 0.4]]: rms(w) = sqrt(7.5) = 2.7386128,
  //   alpha = 0.027386128; beta_2_t = 1 - 1^-0.8 = 0, so r = mean(g^2, -1) = [0.025, 0.125],
  //   c = mean(g^2, -2) = [0.05, 0.1]; v = (r / 0.075) c = [[1/60, 1/30], [1/12, 1/6]];
  //   u = g / sqrt(v) = [[0.7745967, 1.0954451], [1.0392305, 0.9797959]], rms(u) = 0.9797959 < 1;
  //   w = w - alpha u: w[0][0] = 1 - 0.0212132 = 0.9787868
  const auto w1 = adafactor_2x2({1, 2, 3, 4}, {{0.1, 0.2, 0.3, 0.4}});
  CHECK(w1[0] == Approx(0.9787868).epsilon(1e-6));
  const auto w2 = adafactor_2x2({1, 2, 3, 4}, {{0.1, 0.2, 0.3, 0.4}, {-0.2, 0.1, 0.5, 0.05}});
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(name(dtype));
    Adafactor opt(0.01);
    Variable w(constant(std::vector<double>{1, 2, 3, 4}, Shape{2, 2}).astype(dtype), "w");
    opt.apply_gradients({{constant(std::vector<double>{0.1, 0.2, 0.3, 0.4}, Shape{2, 2}).astype(dtype), &w}});
    check_close(w.value(), w1, 1e-6);
    opt.apply_gradients({{constant(std::vector<double>{-0.2, 0.1, 0.5, 0.05}, Shape{2, 2}).astype(dtype), &w}});
    check_close(w.value(), w2, 1e-6);
    // The factored slots have the reduced shapes; the velocity the weight's.
    REQUIRE(opt.get_slot(w, "r") != nullptr);
    CHECK(opt.get_slot(w, "r")->shape() == Shape{2});
    CHECK(opt.get_slot(w, "c")->shape() == Shape{2});
    CHECK(opt.get_slot(w, "velocity")->shape() == Shape{2, 2});
  }
}

TEST_CASE("Adafactor on a vector keeps the full second moment", "[adafactor]") {
  // w = [1, -2], g = [0.5, -1]: rms(w) = sqrt(2.5) = 1.5811388, alpha = 0.015811388;
  //   v = g^2 (beta_2_t = 0), u = g / |g| = [1, -1], rms(u) = 1 -> no clipping;
  //   w = [1 - 0.0158114, -2 + 0.0158114]
  Adafactor opt(0.01);
  Variable w(vec({1, -2}, DType::float64), "w");
  opt.apply_gradients({{vec({0.5, -1}, DType::float64), &w}});
  const double alpha = std::sqrt(2.5) * 0.01;
  check_close(w.value(), {1 - alpha, -2 + alpha}, 1e-9);
  CHECK(opt.get_slot(w, "r")->shape() == Shape{});
  // clip_threshold 0.5: rms(u) = 1 > 0.5, so u is halved.
  Adafactor clipped(0.01, {.clip_threshold = 0.5});
  Variable w2(vec({1, -2}, DType::float64), "w2");
  clipped.apply_gradients({{vec({0.5, -1}, DType::float64), &w2}});
  check_close(w2.value(), {1 - alpha / 2, -2 + alpha / 2}, 1e-9);
  // relative_step caps a constant learning rate at 1 / sqrt(t): lr 5 acts as 1 on step 1.
  Adafactor big(5.0);
  Variable w3(vec({1, -2}, DType::float64), "w3");
  big.apply_gradients({{vec({0.5, -1}, DType::float64), &w3}});
  check_close(w3.value(), {1 - std::sqrt(2.5), -2 + std::sqrt(2.5)}, 1e-9);
  CHECK_THROWS_AS(Adafactor(0.01, {.clip_threshold = 0}), ValueError);
}

// ---- gradient accumulation ----------------------------------------------------------------------

TEST_CASE("gradient_accumulation_steps updates every N calls with the mean gradient", "[accumulation]") {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO(name(dtype));
    // Adam with N = 2 on g1, g2 equals one Adam step on (g1 + g2) / 2 = [0.375, 0.5].
    Adam acc(0.1, {.gradient_accumulation_steps = 2});
    Adam plain(0.1);
    Variable a(vec({1, -2}, dtype), "a"), b(vec({1, -2}, dtype), "b");
    acc.apply_gradients({{vec({0.5, -1}, dtype), &a}});
    check_close(a.value(), {1, -2});  // no update yet
    CHECK(acc.iterations() == 0);
    REQUIRE(acc.get_slot(a, "gradient_accumulator") != nullptr);
    check_close(acc.get_slot(a, "gradient_accumulator")->value(), {0.5, -1});
    acc.apply_gradients({{vec({0.25, 2}, dtype), &a}});
    CHECK(acc.iterations() == 1);
    check_close(acc.get_slot(a, "gradient_accumulator")->value(), {0, 0});  // cleared
    plain.apply_gradients({{vec({0.375, 0.5}, dtype), &b}});
    check_close(a.value(), b.value().to_vector<double>());
    // Adam's first step moves each weight by lr (sign of the mean gradient).
    check_close(a.value(), {0.9, -2.1}, 1e-5);
    // The second window uses the bias corrections of update 2, as the plain optimizer's step 2.
    acc.apply_gradients({{vec({1, 1}, dtype), &a}});
    acc.apply_gradients({{vec({-0.5, 3}, dtype), &a}});
    plain.apply_gradients({{vec({0.25, 2}, dtype), &b}});
    check_close(a.value(), b.value().to_vector<double>());
    CHECK(acc.iterations() == 2);
  }
}

TEST_CASE("gradient accumulation: schedules see the calls, clipping the mean, loss scale first",
          "[accumulation]") {
  // SGD, N = 2, lr = 0.1 * 0.5^calls (ExponentialDecay, decay_steps 1): the update happens on
  // call 2, when calls = 1, so lr = 0.05 (Keras' schedule reads the real iterations):
  //   w = 1 - 0.05 * (0.5 + 0.25) / 2 = 0.98125
  SGD sgd(schedules::ExponentialDecay(0.1, 1, 0.5), {.gradient_accumulation_steps = 2});
  Variable w(vec({1}, DType::float64), "w");
  sgd.apply_gradients({{vec({0.5}, DType::float64), &w}});
  CHECK(sgd.learning_rate() == Approx(0.05));
  sgd.apply_gradients({{vec({0.25}, DType::float64), &w}});
  check_close(w.value(), {0.98125}, 1e-12);

  // clipnorm 0.1 clips the mean gradient [0.3, 0.4] (norm 0.5) to [0.06, 0.08], not each call's.
  SGD clip(1.0, {.clipnorm = 0.1, .gradient_accumulation_steps = 2});
  Variable v(vec({0, 0}, DType::float64), "v");
  clip.apply_gradients({{vec({0.6, 0.0}, DType::float64), &v}});
  clip.apply_gradients({{vec({0.0, 0.8}, DType::float64), &v}});
  check_close(v.value(), {-0.06, -0.08}, 1e-12);

  // loss_scale_factor 4: the gradients are unscaled before they are summed: mean(2, 6) / 4 = 1.
  SGD scaled(0.1, {.loss_scale_factor = 4.0, .gradient_accumulation_steps = 2});
  Variable s(vec({1}, DType::float64), "s");
  scaled.apply_gradients({{vec({2}, DType::float64), &s}});
  check_close(scaled.get_slot(s, "gradient_accumulator")->value(), {0.5});
  scaled.apply_gradients({{vec({6}, DType::float64), &s}});
  check_close(s.value(), {0.9}, 1e-7);  // lr is kept in float32, as Keras

  // The accumulators are state: listed by variables().
  bool listed = false;
  for (const auto& [n, var] : scaled.variables()) listed |= n == "s/gradient_accumulator";
  CHECK(listed);
  CHECK_THROWS_AS(SGD(0.1, {.gradient_accumulation_steps = 1}), ValueError);
  CHECK_THROWS_AS(Adam(0.1, {.gradient_accumulation_steps = 0}), ValueError);
}

TEST_CASE("gradient accumulation works with the fused rules of the new optimizers", "[accumulation]") {
  // Lion with N = 3 on three gradients equals Lion on their mean.
  Lion acc(0.1, {.gradient_accumulation_steps = 3});
  Lion plain(0.1);
  Variable a(vec({1, -2, 0.5}, DType::float32), "a"), b(vec({1, -2, 0.5}, DType::float32), "b");
  acc.apply_gradients({{vec({0.3, -0.1, 0.2}, DType::float32), &a}});
  acc.apply_gradients({{vec({-0.9, 0.4, 0.1}, DType::float32), &a}});
  acc.apply_gradients({{vec({0.3, -0.6, -0.6}, DType::float32), &a}});
  // mean = [-0.1, -0.1, -0.1]: one Lion step moves each weight up by lr.
  plain.apply_gradients({{vec({-0.1, -0.1, -0.1}, DType::float32), &b}});
  check_close(a.value(), b.value().to_vector<double>());
  check_close(a.value(), {1.1, -1.9, 0.6});
}

// ---- names and configs --------------------------------------------------------------------------

TEST_CASE("the new optimizers come by name and survive a config round trip", "[config]") {
  for (const char* n : {"adamax", "Adadelta", "FTRL", "lion", "lamb", "adafactor"}) {
    INFO(n);
    auto opt = get(n);
    REQUIRE(opt != nullptr);
    const auto back = deserialize(serialize(*opt));
    CHECK(back->class_name() == opt->class_name());
    auto cfg = back->get_config();
    auto orig = opt->get_config();
    cfg.erase("name");
    orig.erase("name");
    CHECK(cfg == orig);
    CHECK(cfg.contains("gradient_accumulation_steps"));
    CHECK(cfg["gradient_accumulation_steps"].is_null());
  }
  Ftrl ftrl(0.05, {.learning_rate_power = -0.25, .l1_regularization_strength = 0.3, .beta = 0.2,
                   .clipvalue = 1.0, .gradient_accumulation_steps = 4});
  const auto cfg = ftrl.get_config();
  CHECK(cfg["learning_rate_power"] == -0.25);
  CHECK(cfg["l1_regularization_strength"] == 0.3);
  CHECK(cfg["gradient_accumulation_steps"] == 4);
  const auto back = from_config("Ftrl", cfg);
  CHECK(back->get_config() == cfg);
  CHECK(back->common_options().gradient_accumulation_steps == 4);
  Adafactor ada(0.01, {.beta_2_decay = -0.5, .relative_step = false});
  CHECK(from_config("Adafactor", ada.get_config())->get_config() == ada.get_config());
  CHECK(from_config("Lion", Lion(0.3, {.beta_2 = 0.5}).get_config())->get_config()["beta_2"] == 0.5);
  CHECK_THROWS_AS(get("adamaxx"), ValueError);
}

TEST_CASE("every option of the new optimizers is written and read back", "[config]") {
  // Each variant sets every option away from its default (with each clip option in turn).
  const nlohmann::json common = {{"learning_rate", 0.5},       {"weight_decay", 0.1},
                                 {"use_ema", true},            {"ema_momentum", 0.9},
                                 {"ema_overwrite_frequency", 5}, {"loss_scale_factor", 2.0},
                                 {"gradient_accumulation_steps", 3}};
  const std::vector<std::pair<const char*, nlohmann::json>> own = {
      {"adamax", {{"beta_1", 0.8}, {"beta_2", 0.99}, {"epsilon", 1e-5}}},
      {"adadelta", {{"rho", 0.8}, {"epsilon", 1e-5}}},
      {"ftrl",
       {{"learning_rate_power", -0.25}, {"initial_accumulator_value", 0.5}, {"l1_regularization_strength", 0.1},
        {"l2_regularization_strength", 0.2}, {"l2_shrinkage_regularization_strength", 0.3}, {"beta", 0.4}}},
      {"lion", {{"beta_1", 0.8}, {"beta_2", 0.9}}},
      {"lamb", {{"beta_1", 0.8}, {"beta_2", 0.99}, {"epsilon", 1e-5}}},
      {"adafactor",
       {{"beta_2_decay", -0.5}, {"epsilon_1", 1e-20}, {"epsilon_2", 1e-2}, {"clip_threshold", 2.0},
        {"relative_step", false}}}};
  for (const auto& [cls, fields] : own) {
    for (const char* clip : {"clipnorm", "clipvalue", "global_clipnorm"}) {
      INFO(cls << " with " << clip);
      nlohmann::json config = common;
      config.update(fields);
      config[clip] = 1.5;
      const auto written = from_config(cls, config)->get_config();
      for (const auto& [key, v] : config.items()) {
        INFO("key " << key);
        CHECK(written.at(key) == v);
      }
      CHECK(from_config(cls, written)->get_config() == written);
    }
  }
}
