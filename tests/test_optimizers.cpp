// Optimizers: every update rule (and its variants) against a two-step example derived by hand
// from Keras 3's formulas, in float32 (the fused CPU loops) and float64 (the rule written with
// ops); clipping, weight decay, loss scaling, EMA; learning rates from schedules; convergence on
// a quadratic; the state visible for saving (configs, names and bad arguments: test_optimizer_options.cpp).
//
// The common example: w0 = [1, -2], gradient g1 = [0.5, -1] at step 1, g2 = [0.25, 2] at step 2.
// Learning rates are 0.1 unless said otherwise; Keras keeps a constant learning rate in float32
// (0.1 -> 0.10000000149), an error of 1e-9 here.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "auto_name.hpp"
#include "optimizer_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace keel;
using keel_test::check_close;
using keel_test::is_auto_name;
using keel_test::vec;
using namespace keel::optimizers;

namespace {

using Make = std::function<std::shared_ptr<Optimizer>()>;

// Runs the common example on a fresh optimizer from `make`, once with a float32 weight and once
// with a float64 weight, and checks w after each step.
void check_two_steps(const Make& make, const std::vector<double>& w1, const std::vector<double>& w2) {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO("dtype " << name(dtype));
    auto opt = make();
    Variable w(vec({1, -2}, dtype), "w");
    opt->apply_gradients({{vec({0.5, -1}, dtype), &w}});
    INFO("after step 1");
    check_close(w.value(), w1);
    CHECK(opt->iterations() == 1);
    opt->apply_gradients({{vec({0.25, 2}, dtype), &w}});
    INFO("after step 2");
    check_close(w.value(), w2);
    CHECK(opt->iterations() == 2);
  }
}

}  // namespace

// ---- SGD ----------------------------------------------------------------------------------------

TEST_CASE("SGD without momentum steps w -= lr * g", "[sgd]") {
  // w1 = [1 - 0.1 * 0.5, -2 + 0.1 * 1] = [0.95, -1.9]
  // w2 = [0.95 - 0.1 * 0.25, -1.9 - 0.1 * 2] = [0.925, -2.1]
  check_two_steps([] { return std::make_shared<SGD>(0.1); }, {0.95, -1.9}, {0.925, -2.1});
}

TEST_CASE("SGD with momentum keeps m = momentum * m - lr * g and adds it", "[sgd]") {
  // m1 = -0.1 * g1 = [-0.05, 0.1];                     w1 = w0 + m1 = [0.95, -1.9]
  // m2 = 0.9 * m1 - 0.1 * g2 = [-0.045 - 0.025, 0.09 - 0.2] = [-0.07, -0.11]; w2 = [0.88, -2.01]
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.momentum = 0.9}); }, {0.95, -1.9},
                  {0.88, -2.01});
}

TEST_CASE("SGD with Nesterov momentum adds momentum * m - lr * g", "[sgd]") {
  // m1 = [-0.05, 0.1];  w1 = w0 + 0.9 m1 - 0.1 g1 = [1 - 0.045 - 0.05, -2 + 0.09 + 0.1] = [0.905, -1.81]
  // m2 = [-0.07, -0.11]; w2 = w1 + 0.9 m2 - 0.1 g2 = [0.905 - 0.063 - 0.025, -1.81 - 0.099 - 0.2]
  //                                              = [0.817, -2.109]
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.momentum = 0.9, .nesterov = true}); },
                  {0.905, -1.81}, {0.817, -2.109});
}

// ---- Adam / AdamW -------------------------------------------------------------------------------

TEST_CASE("Adam uses bias-corrected moments with epsilon outside the square root", "[adam]") {
  // Step 1: m = 0.1 g1 = [0.05, -0.1], v = 0.001 g1^2 = [0.00025, 0.001],
  //   alpha = 0.1 * sqrt(1 - 0.999) / (1 - 0.9) = 0.0316227766;
  //   w1[0] = 1 - alpha * 0.05 / (sqrt(0.00025) + 1e-7) = 1 - 0.0999993675 = 0.900000632452
  //   w1[1] = -2 + alpha * 0.1 / (sqrt(0.001) + 1e-7) = -1.90000031623
  // Step 2: m[0] = 0.9 * 0.05 + 0.1 * 0.25 = 0.07, v[0] = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225,
  //   alpha = 0.1 * sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.0235316725;
  //   w2[0] = 0.900000632452 - alpha * 0.07 / (sqrt(0.00031225) + 1e-7) = 0.806783196099
  //   (the same for element 1, with m = -0.09 + 0.2 = 0.11, v = 0.000999 + 0.004) = -1.93661061715
  check_two_steps([] { return std::make_shared<Adam>(0.1); }, {0.900000632452, -1.90000031623},
                  {0.806783196099, -1.93661061715});
}

TEST_CASE("Adam with amsgrad divides by the running maximum of v", "[adam]") {
  // beta_2 = 0.5 so that v falls for element 0: v1 = 0.5 * 0.25 = 0.125, v2 = 0.5 * 0.125 + 0.5 * 0.0625
  // = 0.09375 < v_hat = 0.125. Step 1 is plain Adam (v_hat = v):
  //   alpha1 = 0.1 sqrt(0.5) / 0.1 = 0.70710678, w1[0] = 1 - alpha1 * 0.05 / (sqrt(0.125) + 1e-7) = 0.900000028284
  // Step 2: alpha2 = 0.1 sqrt(1 - 0.25) / (1 - 0.81) = 0.45580284, m2[0] = 0.07;
  //   amsgrad: w2[0] = w1[0] - alpha2 * 0.07 / (sqrt(0.125) + 1e-7)   = 0.809755694865
  //   plain Adam would use sqrt(0.09375) and give 0.795794852458.
  //   Element 1: v2 = 0.25 + 2 = 2.25 > 0.5, so v_hat = v and both give -1.93342555381.
  check_two_steps([] { return std::make_shared<Adam>(0.1, AdamOptions{.beta_2 = 0.5, .amsgrad = true}); },
                  {0.900000028284, -1.90000001414}, {0.809755694865, -1.93342555381});
  check_two_steps([] { return std::make_shared<Adam>(0.1, AdamOptions{.beta_2 = 0.5}); },
                  {0.900000028284, -1.90000001414}, {0.795794852458, -1.93342555381});
}

TEST_CASE("AdamW decays the weight by w * weight_decay * lr before the Adam step", "[adam]") {
  // weight_decay = 0.1, lr = 0.1: each step first w -= 0.01 w, then the Adam step of the Adam test.
  //   w1 = [0.99 - 0.0999993675, -1.98 + 0.0999996838] = [0.890000632452, -1.88000031623]
  //   w2[0] = 0.99 * 0.890000632452 - 0.0935774, w2[1] = 0.99 * -1.88000031623 - 0.0366103
  //        = [0.787883189774, -1.89781061399]
  check_two_steps([] { return std::make_shared<AdamW>(0.1, AdamWOptions{.weight_decay = 0.1}); },
                  {0.890000632452, -1.88000031623}, {0.787883189774, -1.89781061399});
  // Keras 3's Adam takes the same decoupled weight_decay.
  check_two_steps([] { return std::make_shared<Adam>(0.1, AdamOptions{.weight_decay = 0.1}); },
                  {0.890000632452, -1.88000031623}, {0.787883189774, -1.89781061399});
}

TEST_CASE("AdamW defaults to weight_decay 0.004", "[adam]") {
  AdamW opt;
  CHECK(opt.common_options().weight_decay.value() == 0.004);
  CHECK(opt.learning_rate() == Approx(0.001).epsilon(1e-7));
  CHECK(is_auto_name(opt.name(), "adam_w"));  // Keras 3.15's auto_name("AdamW")
  CHECK(opt.class_name() == "AdamW");
}

// ---- RMSprop ------------------------------------------------------------------------------------

TEST_CASE("RMSprop divides by sqrt(v + epsilon)", "[rmsprop]") {
  // v1 = 0.1 g1^2 = [0.025, 0.1]; w1 = w0 - 0.1 g1 / sqrt(v1 + 1e-7) = [0.683772866437, -1.6837723921]
  // v2 = 0.9 v1 + 0.1 g2^2 = [0.02875, 0.49]; w2 = w1 - 0.1 g2 / sqrt(v2 + 1e-7)
  //    = [0.683772866437 - 0.14744, -1.6837723921 - 0.285714] = [0.536331166702, -1.96948664866]
  check_two_steps([] { return std::make_shared<RMSprop>(0.1); }, {0.683772866437, -1.6837723921},
                  {0.536331166702, -1.96948664866});
}

TEST_CASE("RMSprop with momentum accumulates the increments", "[rmsprop]") {
  // momentum = 0.5: mom1 = inc1 (as above) so w1 is the same;
  // mom2 = 0.5 mom1 + inc2 = 0.5 [0.316227, -0.316228] + [0.147441, 0.285714];
  // w2 = w1 - mom2 = [0.37821759992, -1.81137284471]
  check_two_steps([] { return std::make_shared<RMSprop>(0.1, RMSpropOptions{.momentum = 0.5}); },
                  {0.683772866437, -1.6837723921}, {0.37821759992, -1.81137284471});
}

TEST_CASE("RMSprop centered subtracts the squared mean gradient", "[rmsprop]") {
  // a1 = 0.1 g1 = [0.05, -0.1]; denominator v1 - a1^2 + eps = [0.0225001, 0.0900001];
  //   w1 = w0 - 0.1 g1 / sqrt(..) = [0.666667407405, -1.66666685185]
  // a2 = 0.9 a1 + 0.1 g2 = [0.07, 0.11]; v2 - a2^2 + eps = [0.0238501, 0.4779001];
  //   w2 = w1 - 0.1 g2 / sqrt(..) = [0.504786769717, -1.95597551265]
  check_two_steps([] { return std::make_shared<RMSprop>(0.1, RMSpropOptions{.centered = true}); },
                  {0.666667407405, -1.66666685185}, {0.504786769717, -1.95597551265});
  // With momentum 0.5 as well: w2 = w1 - (0.5 inc1 + inc2) = [0.33812047342, -1.78930893858].
  check_two_steps(
      [] { return std::make_shared<RMSprop>(0.1, RMSpropOptions{.momentum = 0.5, .centered = true}); },
      {0.666667407405, -1.66666685185}, {0.33812047342, -1.78930893858});
}

// ---- Adagrad ------------------------------------------------------------------------------------

TEST_CASE("Adagrad accumulates squared gradients from initial_accumulator_value", "[adagrad]") {
  // acc1 = 0.1 + g1^2 = [0.35, 1.1]; w1 = w0 - 0.1 g1 / sqrt(acc1 + 1e-7) = [0.915484586601, -1.90465374541]
  // acc2 = acc1 + g2^2 = [0.4125, 5.1]; w2 = w1 - 0.1 g2 / sqrt(acc2 + 1e-7) = [0.876559644111, -1.9932152331]
  check_two_steps([] { return std::make_shared<Adagrad>(0.1); }, {0.915484586601, -1.90465374541},
                  {0.876559644111, -1.9932152331});
}

// ---- Nadam --------------------------------------------------------------------------------------

TEST_CASE("Nadam follows Keras' momentum-cache schedule", "[nadam]") {
  // u_t = 0.9 (1 - 0.5 * 0.96^t): u1 = 0.468, u2 = 0.48528, u3 = 0.5018688;
  // U_t = u1 ... ut: U1 = 0.468, U2 = 0.22711104, U3 = 0.113979945.
  // Step 1, element 0: m = 0.05, v = 0.00025;
  //   m_hat = u2 m / (1 - U1 u2) + (1 - u1) g / (1 - U1) = 0.48528 * 0.05 / 0.77288896 + 0.5 = 0.531393902,
  //   v_hat = v / (1 - 0.999) = 0.25;  w1[0] = 1 - 0.1 * m_hat / (0.5 + 1e-7) = 0.893721240925
  // Step 2, element 0: m = 0.07, v = 0.00031225;
  //   m_hat = u3 * 0.07 / (1 - U3) + (1 - u2) * 0.25 / (1 - U2) = 0.206142358,
  //   v_hat = 0.00031225 / (1 - 0.999^2) = 0.156203102; w2[0] = w1[0] - 0.1 m_hat / (sqrt(v_hat) + 1e-7)
  //   = 0.841563076021 (element 1 the same way: -1.98188779866).
  check_two_steps([] { return std::make_shared<Nadam>(0.1); }, {0.893721240925, -1.8937212303},
                  {0.841563076021, -1.98188779866});
}

TEST_CASE("Nadam keeps the momentum-cache product as optimizer state", "[nadam][state]") {
  Nadam opt(0.1);
  Variable w(vec({1, -2}, DType::float32), "w");
  opt.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
  opt.apply_gradients({{vec({0.25, 2}, DType::float32), &w}});
  Variable* u = nullptr;
  for (auto& [n, v] : opt.variables())
    if (n == "u_product") u = v;
  REQUIRE(u != nullptr);
  // U2 = 0.468 * 0.48528 (float32 like Keras)
  CHECK(u->value().item<double>() == Approx(0.22711104).epsilon(1e-6));
}

// ---- clipping, weight decay, loss scale, EMA ------------------------------------------------------

TEST_CASE("clipnorm rescales each gradient to at most that L2 norm", "[clip]") {
  // |g1| = sqrt(1.25) = 1.118034 > 1: g1 -> g1 / 1.118034 = [0.4472136, -0.8944272];
  //   SGD(0.1): w1 = [0.95527864045, -1.9105572809]
  // |g2| = sqrt(4.0625) = 2.0155644: w2 = w1 - 0.1 g2 / 2.0155644 = [0.942875166991, -2.00978506857]
  const std::vector<double> w1{0.95527864045, -1.9105572809}, w2{0.942875166991, -2.00978506857};
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.clipnorm = 1.0}); }, w1, w2);
  // A norm below clipnorm leaves the gradient as it is: the plain SGD numbers.
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.clipnorm = 10.0}); }, {0.95, -1.9},
                  {0.925, -2.1});
  // The same clipping reaches every update rule (Adam's first step is invariant to gradient scale
  // up to epsilon; its second is not): Adam with clipnorm = 1 equals Adam on the clipped gradients.
  for (DType dtype : {DType::float32, DType::float64}) {
    Adam clipped(0.1, {.clipnorm = 1.0});
    Adam plain(0.1);
    Variable a(vec({1, -2}, dtype), "a"), b(vec({1, -2}, dtype), "b");
    clipped.apply_gradients({{vec({0.5, -1}, dtype), &a}});
    plain.apply_gradients({{vec({0.5 / std::sqrt(1.25), -1 / std::sqrt(1.25)}, dtype), &b}});
    clipped.apply_gradients({{vec({0.25, 2}, dtype), &a}});
    plain.apply_gradients({{vec({0.25 / std::sqrt(4.0625), 2 / std::sqrt(4.0625)}, dtype), &b}});
    check_close(a.value(), b.value().to_vector<double>(), 1e-6);
  }
}

TEST_CASE("clipvalue clamps each gradient element", "[clip]") {
  // clipvalue = 0.75: g1 -> [0.5, -0.75], g2 -> [0.25, 0.75];
  //   w1 = [1 - 0.05, -2 + 0.075] = [0.95, -1.925]; w2 = [0.95 - 0.025, -1.925 - 0.075] = [0.925, -2.0]
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.clipvalue = 0.75}); }, {0.95, -1.925},
                  {0.925, -2.0});
  // Through RMSprop's rule: the clamped g1 = [0.5, -0.75] gives v = [0.025, 0.05625] and
  //   w1 = w0 - 0.1 g / sqrt(v + 1e-7) = [0.683772866437, -1.68377236]
  for (DType dtype : {DType::float32, DType::float64}) {
    RMSprop opt(0.1, {.clipvalue = 0.75});
    Variable w(vec({1, -2}, dtype), "w");
    opt.apply_gradients({{vec({0.5, -1}, dtype), &w}});
    check_close(w.value(), {1 - 0.05 / std::sqrt(0.025 + 1e-7), -2 + 0.075 / std::sqrt(0.05625 + 1e-7)});
  }
}

TEST_CASE("global_clipnorm rescales all gradients by their joint norm", "[clip]") {
  // a = [1, -2] with g = [0.5, -1], b = [3] with g = [2]: joint norm sqrt(0.25 + 1 + 4) = sqrt(5.25),
  //   scale = 1 / sqrt(5.25) = 0.43643578: a1 = [0.978178210976, -1.95635642195], b1 = 2.91271284391
  // step 2: g_a = [0.25, 2], g_b = [-1]: norm sqrt(0.0625 + 4 + 1) = 2.25, scale 1 / 2.25:
  //   a2 = [0.967067099865, -2.04524531084], b2 = 2.95715728835
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO("dtype " << name(dtype));
    SGD opt(0.1, {.global_clipnorm = 1.0});
    Variable a(vec({1, -2}, dtype), "a"), b(vec({3}, dtype), "b");
    opt.apply_gradients({{vec({0.5, -1}, dtype), &a}, {vec({2}, dtype), &b}});
    check_close(a.value(), {0.978178210976, -1.95635642195});
    check_close(b.value(), {2.91271284391});
    opt.apply_gradients({{vec({0.25, 2}, dtype), &a}, {vec({-1}, dtype), &b}});
    check_close(a.value(), {0.967067099865, -2.04524531084});
    check_close(b.value(), {2.95715728835});
  }
  // A joint norm under the limit changes nothing.
  SGD opt(0.1, {.global_clipnorm = 100.0});
  Variable w(vec({1, -2}, DType::float32), "w");
  opt.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
  check_close(w.value(), {0.95, -1.9});
}

TEST_CASE("only one of clipnorm, clipvalue and global_clipnorm may be set", "[clip][errors]") {
  CHECK_THROWS_AS(SGD(0.1, {.clipnorm = 1.0, .clipvalue = 1.0}), ValueError);
  CHECK_THROWS_AS(Adam(0.1, {.clipnorm = 1.0, .global_clipnorm = 1.0}), ValueError);
  CHECK_THROWS_AS(RMSprop(0.1, {.clipvalue = 1.0, .global_clipnorm = 1.0}), ValueError);
}

TEST_CASE("weight_decay shrinks each weight by w * weight_decay * lr before the update", "[weight_decay]") {
  // SGD(0.1, weight_decay = 0.1): w <- 0.99 w - 0.1 g.
  //   w1 = [0.99 - 0.05, -1.98 + 0.1] = [0.94, -1.88]
  //   w2 = [0.9306 - 0.025, -1.8612 - 0.2] = [0.9056, -2.0612]
  check_two_steps([] { return std::make_shared<SGD>(0.1, SGDOptions{.weight_decay = 0.1}); }, {0.94, -1.88},
                  {0.9056, -2.0612});
  // A gradient that is the weight itself is read before the decay writes the weight:
  //   w1 = 0.99 w0 - 0.1 w0 = 0.89 w0
  for (DType dtype : {DType::float32, DType::float64}) {
    SGD opt(0.1, {.weight_decay = 0.1});
    Variable w(vec({1, -2}, dtype), "w");
    opt.apply_gradients({{w.peek(), &w}});
    check_close(w.value(), {0.89, -1.78});
  }
}

TEST_CASE("exclude_from_weight_decay skips variables by object or by name pattern", "[weight_decay]") {
  for (DType dtype : {DType::float32, DType::float64}) {
    SGD opt(0.1, {.weight_decay = 0.1});
    Variable kernel(vec({1, -2}, dtype), "dense/kernel"), bias(vec({1, -2}, dtype), "dense/bias"),
        other(vec({1, -2}, dtype), "other");
    opt.exclude_from_weight_decay({&other}, {"bias"});
    const Tensor g = vec({0.5, -1}, dtype);
    opt.apply_gradients({{g, &kernel}, {g, &bias}, {g, &other}});
    check_close(kernel.value(), {0.94, -1.88});  // decayed
    check_close(bias.value(), {0.95, -1.9});     // name matches "bias"
    check_close(other.value(), {0.95, -1.9});    // excluded by object
  }
  // Excluding after the variables were seen takes effect from the next step.
  SGD opt(0.1, {.weight_decay = 0.1});
  Variable w(vec({1, -2}, DType::float32), "layer/w");
  opt.apply_gradients({{vec({0, 0}, DType::float32), &w}});
  check_close(w.value(), {0.99, -1.98});
  opt.exclude_from_weight_decay({}, {"^layer/"});
  opt.apply_gradients({{vec({0, 0}, DType::float32), &w}});
  check_close(w.value(), {0.99, -1.98});
  CHECK_THROWS_AS(opt.exclude_from_weight_decay({}, {"("}), ValueError);
}

TEST_CASE("loss_scale_factor divides the gradients before the update", "[loss_scale]") {
  // Gradients of a loss scaled by 4 give the plain SGD numbers.
  for (DType dtype : {DType::float32, DType::float64}) {
    SGD opt(0.1, {.loss_scale_factor = 4.0});
    Variable w(vec({1, -2}, dtype), "w");
    opt.apply_gradients({{vec({2, -4}, dtype), &w}});
    check_close(w.value(), {0.95, -1.9});
    opt.apply_gradients({{vec({1, 8}, dtype), &w}});
    check_close(w.value(), {0.925, -2.1});
  }
}

TEST_CASE("use_ema keeps a moving average of the weights", "[ema]") {
  // SGD(0.1) gives w1 = [0.95, -1.9], w2 = [0.925, -2.1]. ema_momentum = 0.5:
  //   step 1 (iterations 0, momentum 0): average = w1 = [0.95, -1.9]
  //   step 2: average = 0.5 [0.95, -1.9] + 0.5 [0.925, -2.1] = [0.9375, -2.0]
  for (DType dtype : {DType::float32, DType::float64}) {
    SGD opt(0.1, {.use_ema = true, .ema_momentum = 0.5});
    Variable w(vec({1, -2}, dtype), "w");
    opt.apply_gradients({{vec({0.5, -1}, dtype), &w}});
    REQUIRE(opt.get_slot(w, "average") != nullptr);
    check_close(opt.get_slot(w, "average")->value(), {0.95, -1.9});
    opt.apply_gradients({{vec({0.25, 2}, dtype), &w}});
    check_close(w.value(), {0.925, -2.1});  // the weights themselves are untouched
    check_close(opt.get_slot(w, "average")->value(), {0.9375, -2.0});
    opt.finalize_variable_values({&w});
    check_close(w.value(), {0.9375, -2.0});
  }
  // ema_overwrite_frequency = 2: after the second step the weights take the average.
  SGD opt(0.1, {.use_ema = true, .ema_momentum = 0.5, .ema_overwrite_frequency = 2});
  Variable w(vec({1, -2}, DType::float32), "w");
  opt.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
  check_close(w.value(), {0.95, -1.9});
  opt.apply_gradients({{vec({0.25, 2}, DType::float32), &w}});
  check_close(w.value(), {0.9375, -2.0});
  CHECK_THROWS_AS(SGD(0.1, {.use_ema = true, .ema_momentum = 1.5}), ValueError);
  CHECK_THROWS_AS(SGD(0.1, {.use_ema = true, .ema_overwrite_frequency = 0}), ValueError);
}

// ---- learning rates -----------------------------------------------------------------------------

TEST_CASE("a learning rate schedule advances with the iterations", "[schedule]") {
  // ExponentialDecay(0.5, 1, 0.5): lr(step) = 0.5 * 0.5^step = 0.5, 0.25, 0.125 for steps 0, 1, 2.
  // SGD on w0 = 0 with g = 1 each step: w = -0.5, -0.75, -0.875.
  SGD opt(schedules::ExponentialDecay(0.5, 1, 0.5));
  Variable w(constant(0.0), "w");
  CHECK(opt.learning_rate() == Approx(0.5));
  const std::vector<double> expected_w{-0.5, -0.75, -0.875}, expected_lr{0.25, 0.125, 0.0625};
  for (int i = 0; i < 3; ++i) {
    opt.apply_gradients({{constant(1.0), &w}});
    CHECK(w.value().item<double>() == Approx(expected_w[i]).margin(1e-7));
    CHECK(opt.learning_rate() == Approx(expected_lr[i]));
  }
  // The schedule is what get_config reports, serialized as Keras does.
  const auto config = opt.get_config();
  CHECK(config["learning_rate"]["class_name"] == "ExponentialDecay");
  CHECK(config["learning_rate"]["config"]["decay_rate"] == 0.5);
  // A schedule's learning rate cannot be set to a number, as in Keras; a new one can replace it.
  CHECK_THROWS_AS(opt.set_learning_rate(0.1), ValueError);
  opt.set_learning_rate(LearningRate(0.25));
  CHECK(opt.learning_rate() == 0.25);
  opt.set_learning_rate(schedules::PiecewiseConstantDecay({10}, {1.0, 0.5}));
  CHECK(opt.learning_rate() == 1.0);  // iterations = 3 <= 10
  // A shared schedule works too, and Adam takes a schedule the same way.
  auto shared = std::make_shared<schedules::InverseTimeDecay>(1.0, 1, 1.0);
  Adam adam(shared);
  CHECK(adam.learning_rate() == 1.0);
}

TEST_CASE("set_learning_rate changes the rate of the next step", "[schedule]") {
  SGD opt(0.1);
  Variable w(constant(0.0), "w");
  opt.apply_gradients({{constant(1.0), &w}});
  opt.set_learning_rate(0.5);
  CHECK(opt.learning_rate() == 0.5);
  opt.apply_gradients({{constant(1.0), &w}});
  CHECK(w.value().item<double>() == Approx(-0.6).margin(1e-7));
  // Kept in float32 like Keras' learning_rate variable.
  opt.set_learning_rate(0.1);
  CHECK(opt.learning_rate() == static_cast<double>(0.1f));
}

// ---- convergence --------------------------------------------------------------------------------

TEST_CASE("every optimizer minimises a quadratic", "[converge]") {
  // f(w) = sum((w - c)^2) with c = [3, -1, 0.5], gradients from a GradientTape.
  const std::vector<std::pair<std::string, Make>> cases{
      {"SGD", [] { return std::make_shared<SGD>(0.1); }},
      {"SGD momentum", [] { return std::make_shared<SGD>(0.05, SGDOptions{.momentum = 0.9}); }},
      {"SGD nesterov", [] { return std::make_shared<SGD>(0.05, SGDOptions{.momentum = 0.9, .nesterov = true}); }},
      {"Adam", [] { return std::make_shared<Adam>(0.05); }},
      {"Adam amsgrad", [] { return std::make_shared<Adam>(0.05, AdamOptions{.amsgrad = true}); }},
      {"AdamW", [] { return std::make_shared<AdamW>(0.05, AdamWOptions{.weight_decay = 1e-4}); }},
      {"RMSprop", [] { return std::make_shared<RMSprop>(0.01); }},
      {"RMSprop centered momentum",
       [] { return std::make_shared<RMSprop>(0.01, RMSpropOptions{.momentum = 0.5, .centered = true}); }},
      {"Adagrad", [] { return std::make_shared<Adagrad>(0.5); }},
      {"Nadam", [] { return std::make_shared<Nadam>(0.05); }},
  };
  const Tensor c = constant({3.0f, -1.0f, 0.5f}, {3});
  for (const auto& [label, make] : cases) {
    INFO(label);
    auto opt = make();
    Variable w(zeros({3}), "w");
    double first = 0, last = 0;
    for (int step = 0; step < 500; ++step) {
      GradientTape tape;
      const Tensor loss = reduce_sum(square(w - c));
      const Tensor g = tape.gradient(loss, w);
      opt->apply_gradients({{g, &w}});
      last = loss.item<double>();
      if (step == 0) first = last;
    }
    CHECK(first == Approx(10.25));
    CHECK(last < 1e-3);
    check_close(w.value(), {3, -1, 0.5}, 0.03);
  }
}

// ---- state --------------------------------------------------------------------------------------

TEST_CASE("variables() lists the iteration count, the learning rate and the slots", "[state]") {
  Adam opt(0.5, {.amsgrad = true});
  Variable kernel(vec({1, -2}, DType::float32), "dense/kernel"), bias(vec({0}, DType::float32), "dense/bias");
  opt.apply_gradients({{vec({0.5, -1}, DType::float32), &kernel}, {vec({1}, DType::float32), &bias}});
  std::vector<std::string> names;
  for (auto& [n, v] : opt.variables()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"iteration", "learning_rate", "dense/kernel/momentum",
                                          "dense/kernel/velocity", "dense/kernel/velocity_hat",
                                          "dense/bias/momentum", "dense/bias/velocity", "dense/bias/velocity_hat"});
  auto vars = opt.variables();
  CHECK(vars[0].second->dtype() == DType::int64);
  CHECK(vars[0].second->value().item<std::int64_t>() == 1);
  CHECK(vars[1].second->value().item<double>() == 0.5);
  check_close(vars[2].second->value(), {0.05, -0.1});       // m = 0.1 g
  check_close(vars[3].second->value(), {0.00025, 0.001});   // v = 0.001 g^2
  CHECK(opt.get_slot(kernel, "velocity") == vars[3].second);
  CHECK(opt.get_slot(kernel, "nothing") == nullptr);
  for (auto& [n, v] : vars) CHECK_FALSE(v->trainable());

  // SGD without momentum has no slots; with momentum one per variable.
  SGD plain(0.1);
  plain.build({&kernel});
  CHECK(plain.variables().size() == 2);
  SGD momentum(0.1, {.momentum = 0.9});
  momentum.build({&kernel, &bias});
  CHECK(momentum.variables().size() == 4);
  CHECK(momentum.variables()[2].first == "dense/kernel/momentum");
  // Adagrad's accumulators start at initial_accumulator_value; RMSprop's slots follow Keras.
  Adagrad adagrad(0.1, {.initial_accumulator_value = 0.25});
  adagrad.build({&kernel});
  check_close(adagrad.get_slot(kernel, "accumulator")->value(), {0.25, 0.25});
  RMSprop rms(0.1, {.momentum = 0.9, .centered = true});
  rms.build({&kernel});
  CHECK(rms.variables().size() == 5);
  CHECK(rms.variables()[4].first == "dense/kernel/average_gradient");
  // A schedule has no learning-rate variable.
  SGD scheduled(schedules::ExponentialDecay(0.1, 10, 0.5));
  CHECK(scheduled.variables().size() == 1);
}

TEST_CASE("restoring the slots and iterations resumes the same trajectory", "[state]") {
  // Adam for two steps in one go, against one step, a save of variables(), and a fresh optimizer
  // restored from it taking the second step.
  Adam reference(0.1);
  Variable a(vec({1, -2}, DType::float32), "w");
  reference.apply_gradients({{vec({0.5, -1}, DType::float32), &a}});
  std::vector<std::pair<std::string, Tensor>> saved;
  for (auto& [n, v] : reference.variables()) saved.emplace_back(n, v->value().astype(v->dtype()) + 0);
  const Tensor w_saved = a.value() + 0;
  reference.apply_gradients({{vec({0.25, 2}, DType::float32), &a}});

  Adam restored(0.1);
  Variable b(w_saved, "w");
  restored.build({&b});
  auto vars = restored.variables();
  REQUIRE(vars.size() == saved.size());
  for (std::size_t i = 0; i < vars.size(); ++i) {
    CHECK(vars[i].first == saved[i].first);
    vars[i].second->assign(saved[i].second);
  }
  CHECK(restored.iterations() == 1);
  restored.apply_gradients({{vec({0.25, 2}, DType::float32), &b}});
  check_close(b.value(), a.value().to_vector<double>(), 1e-7);
  check_close(b.value(), {0.806783196099, -1.93661061715});
  // set_iterations restores the count directly.
  restored.set_iterations(41);
  CHECK(restored.iterations() == 41);
  CHECK_THROWS_AS(restored.set_iterations(-1), ValueError);
}

TEST_CASE("slot names stay distinct when variables share a name", "[state]") {
  SGD opt(0.1, {.momentum = 0.5});
  Variable a(vec({1}, DType::float32), "w"), b(vec({2}, DType::float32), "w"), c(vec({3}, DType::float32));
  opt.build({&a, &b, &c});
  std::vector<std::string> names;
  for (auto& [n, v] : opt.variables()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"iteration", "learning_rate", "w/momentum", "w_1/momentum",
                                          "variable/momentum"});
}

TEST_CASE("a moved optimizer keeps its state", "[state]") {
  Nadam first(0.1);
  Variable w(vec({1, -2}, DType::float32), "w");
  first.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
  Nadam moved(std::move(first));
  moved.apply_gradients({{vec({0.25, 2}, DType::float32), &w}});
  check_close(w.value(), {0.841563076021, -1.98188779866});
  CHECK(moved.iterations() == 2);
}

// ---- apply --------------------------------------------------------------------------------------

TEST_CASE("apply_gradients skips variables without a gradient and rejects a step with none", "[apply]") {
  SGD opt(0.1, {.momentum = 0.9});
  Variable a(vec({1, -2}, DType::float32), "a"), b(vec({5}, DType::float32), "b");
  opt.apply_gradients({{vec({0.5, -1}, DType::float32), &a}, {Tensor(), &b}});
  check_close(a.value(), {0.95, -1.9});
  check_close(b.value(), {5});
  CHECK(opt.iterations() == 1);
  // No gradient at all is an error, as in Keras, and changes nothing; an empty list is a no-op.
  CHECK_THROWS_AS(opt.apply_gradients({{Tensor(), &a}, {Tensor(), &b}}), ValueError);
  opt.apply_gradients({});
  CHECK(opt.iterations() == 1);
  check_close(a.value(), {0.95, -1.9});
}

TEST_CASE("apply takes parallel lists, or the variables given to build", "[apply]") {
  SGD opt(0.1);
  Variable a(vec({1, -2}, DType::float32), "a");
  CHECK_THROWS_AS(opt.apply({vec({0.5, -1}, DType::float32)}), ValueError);  // not built
  opt.apply({vec({0.5, -1}, DType::float32)}, {&a});
  check_close(a.value(), {0.95, -1.9});
  opt.build({&a});
  opt.apply({vec({0.25, 2}, DType::float32)});
  check_close(a.value(), {0.925, -2.1});
  CHECK_THROWS_AS(opt.apply({vec({1, 1}, DType::float32)}, {}), ValueError);
  CHECK_THROWS_AS(opt.apply({vec({1, 1, 1}, DType::float32)}, {&a}), ShapeError);
  Variable i(constant(std::vector<std::int32_t>{1, 2}), "ints");
  CHECK_THROWS_AS(opt.apply({constant(std::vector<std::int32_t>{1, 2})}, {&i}), DTypeError);
}

TEST_CASE("gradients of another dtype are cast to the variable's", "[apply]") {
  Adam opt(0.1);
  Variable w(vec({1, -2}, DType::float32), "w");
  opt.apply_gradients({{vec({0.5, -1}, DType::float64), &w}});
  check_close(w.value(), {0.900000632452, -1.90000031623});
  CHECK(w.dtype() == DType::float32);
}

TEST_CASE("updates write in place and bump the version a tape checks", "[apply]") {
  for (DType dtype : {DType::float32, DType::float64}) {
    INFO("dtype " << name(dtype));
    Adam opt(0.1);
    Variable w(vec({1, -2}, dtype), "w");
    const void* storage = w.peek().raw_data();
    GradientTape tape;
    const Tensor loss = reduce_sum(square(w));  // saves w for the backward pass
    opt.apply_gradients({{vec({0.5, -1}, dtype), &w}});
    CHECK(w.peek().raw_data() == storage);
    CHECK_THROWS_AS(tape.gradient(loss, w), Error);  // w changed after the tape saved it
  }
}

// ---- configs and names ----------------------------------------------------------------------------
