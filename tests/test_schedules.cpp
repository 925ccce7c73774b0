// Learning-rate schedules: each at several steps against values worked out by hand from Keras 3's
// formulas (staircase, warmup, restarts, cycle), their configs, and bad arguments.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>

using namespace keel;
using namespace keel::optimizers::schedules;

namespace {
constexpr double kPi = std::numbers::pi;
constexpr double kTol = 1e-12;
}  // namespace

TEST_CASE("ExponentialDecay decays by decay_rate every decay_steps", "[schedules]") {
  // 0.1 * 0.5^(step / 10)
  ExponentialDecay s(0.1, 10, 0.5);
  CHECK(s(0) == Approx(0.1).epsilon(kTol));
  CHECK(s(5) == Approx(0.1 * std::sqrt(0.5)).epsilon(kTol));  // 0.0707106781
  CHECK(s(10) == Approx(0.05).epsilon(kTol));
  CHECK(s(25) == Approx(0.1 * std::pow(0.5, 2.5)).epsilon(kTol));  // 0.0176776695
}

TEST_CASE("ExponentialDecay with staircase decays in whole periods", "[schedules]") {
  // 0.1 * 0.5^floor(step / 10)
  ExponentialDecay s(0.1, 10, 0.5, {.staircase = true});
  CHECK(s(0) == Approx(0.1).epsilon(kTol));
  CHECK(s(5) == Approx(0.1).epsilon(kTol));
  CHECK(s(9) == Approx(0.1).epsilon(kTol));
  CHECK(s(10) == Approx(0.05).epsilon(kTol));
  CHECK(s(19) == Approx(0.05).epsilon(kTol));
  CHECK(s(25) == Approx(0.025).epsilon(kTol));
}

TEST_CASE("PiecewiseConstantDecay switches after each boundary", "[schedules]") {
  // values[0] for step <= 100, values[1] for 100 < step <= 110, values[2] after.
  PiecewiseConstantDecay s({100, 110}, {1.0, 0.5, 0.1});
  CHECK(s(0) == 1.0);
  CHECK(s(100) == 1.0);
  CHECK(s(101) == 0.5);
  CHECK(s(110) == 0.5);
  CHECK(s(111) == 0.1);
  CHECK(s(100000) == 0.1);
  PiecewiseConstantDecay one({5}, {2.0, 3.0});
  CHECK(one(5) == 2.0);
  CHECK(one(6) == 3.0);
  CHECK_THROWS_AS(PiecewiseConstantDecay({100, 110}, {1.0, 0.5}), ValueError);
}

TEST_CASE("CosineDecay follows half a cosine to alpha and stays there", "[schedules]") {
  // 1.0 * 0.5 (1 + cos(pi min(step, 100) / 100))
  CosineDecay s(1.0, 100);
  CHECK(s(0) == Approx(1.0).epsilon(kTol));
  CHECK(s(25) == Approx(0.5 * (1 + std::cos(kPi / 4))).epsilon(kTol));  // 0.853553390593
  CHECK(s(50) == Approx(0.5).epsilon(kTol));
  CHECK(s(100) == Approx(0.0).margin(kTol));
  CHECK(s(200) == Approx(0.0).margin(kTol));
  // alpha = 0.1: (1 - 0.1) * cosine + 0.1
  CosineDecay a(2.0, 100, {.alpha = 0.1});
  CHECK(a(50) == Approx(2.0 * (0.9 * 0.5 + 0.1)).epsilon(kTol));  // 1.1
  CHECK(a(100) == Approx(0.2).epsilon(kTol));
  CHECK(a(150) == Approx(0.2).epsilon(kTol));
}

TEST_CASE("CosineDecay with warmup rises linearly to warmup_target, then decays from it", "[schedules]") {
  // warmup: (target - initial) * step / warmup_steps + initial for step < 10;
  // then target * 0.5 (1 + cos(pi (step - 10) / 100)), the step capped at 110.
  CosineDecay s(0.1, 100, {.warmup_target = 1.0, .warmup_steps = 10});
  CHECK(s(0) == Approx(0.1).epsilon(kTol));
  CHECK(s(5) == Approx(0.9 * 0.5 + 0.1).epsilon(kTol));  // 0.55
  CHECK(s(9) == Approx(0.9 * 0.9 + 0.1).epsilon(kTol));  // 0.91
  CHECK(s(10) == Approx(1.0).epsilon(kTol));
  CHECK(s(60) == Approx(0.5).epsilon(kTol));
  CHECK(s(110) == Approx(0.0).margin(kTol));
  CHECK(s(500) == Approx(0.0).margin(kTol));
  // With alpha the floor is alpha * warmup_target.
  CosineDecay a(0.0, 100, {.alpha = 0.5, .warmup_target = 2.0, .warmup_steps = 20});
  CHECK(a(10) == Approx(1.0).epsilon(kTol));
  CHECK(a(70) == Approx(2.0 * (0.5 * 0.5 + 0.5)).epsilon(kTol));  // 1.5
  CHECK(a(1000) == Approx(1.0).epsilon(kTol));
}

TEST_CASE("CosineDecayRestarts restarts with periods growing by t_mul", "[schedules]") {
  // first period 10, t_mul 2: periods [0, 10), [10, 30), [30, 70), ...
  CosineDecayRestarts s(1.0, 10);
  CHECK(s(0) == Approx(1.0).epsilon(kTol));
  CHECK(s(5) == Approx(0.5).epsilon(kTol));                                  // half way through period 0
  CHECK(s(10) == Approx(1.0).epsilon(kTol));                                 // restart
  CHECK(s(15) == Approx(0.5 * (1 + std::cos(kPi * 0.25))).epsilon(kTol));  // a quarter of period 1
  CHECK(s(20) == Approx(0.5).epsilon(kTol));                                 // half of period 1
  CHECK(s(30) == Approx(1.0).epsilon(kTol));                                 // restart
  CHECK(s(50) == Approx(0.5).epsilon(kTol));                                 // half of period 2
  // m_mul = 0.5 halves the rate at each restart; alpha = 0.2 lifts the floor.
  CosineDecayRestarts m(1.0, 10, {.m_mul = 0.5, .alpha = 0.2});
  CHECK(m(5) == Approx(0.8 * 0.5 + 0.2).epsilon(kTol));         // 0.6
  CHECK(m(10) == Approx(0.8 * 0.5 + 0.2).epsilon(kTol));        // restart at 0.5: 0.6
  CHECK(m(20) == Approx(0.8 * 0.25 + 0.2).epsilon(kTol));       // 0.4
  CHECK(m(30) == Approx(0.8 * 0.25 + 0.2).epsilon(kTol));       // restart at 0.25: 0.4
  // t_mul = 1: equal periods.
  CosineDecayRestarts e(1.0, 10, {.t_mul = 1.0});
  CHECK(e(10) == Approx(1.0).epsilon(kTol));
  CHECK(e(15) == Approx(0.5).epsilon(kTol));
  CHECK(e(25) == Approx(0.5).epsilon(kTol));
  CHECK(e(19) == Approx(0.5 * (1 + std::cos(kPi * 0.9))).epsilon(kTol));
}

TEST_CASE("PolynomialDecay goes to end_learning_rate and stays", "[schedules]") {
  // (1.0 - 0.1) (1 - min(step, 10) / 10)^power + 0.1
  PolynomialDecay s(1.0, 10, {.end_learning_rate = 0.1});
  CHECK(s(0) == Approx(1.0).epsilon(kTol));
  CHECK(s(5) == Approx(0.55).epsilon(kTol));
  CHECK(s(10) == Approx(0.1).epsilon(kTol));
  CHECK(s(20) == Approx(0.1).epsilon(kTol));
  PolynomialDecay p(1.0, 10, {.end_learning_rate = 0.1, .power = 2.0});
  CHECK(p(5) == Approx(0.9 * 0.25 + 0.1).epsilon(kTol));  // 0.325
  // Keras' defaults: end_learning_rate 1e-4, power 1.
  PolynomialDecay d(1.0, 10);
  CHECK(d(10) == Approx(1e-4).epsilon(kTol));
  CHECK(d(5) == Approx((1.0 - 1e-4) * 0.5 + 1e-4).epsilon(kTol));
}

TEST_CASE("PolynomialDecay with cycle stretches decay_steps to the next multiple", "[schedules]") {
  // decay_steps becomes 10 * ceil(step / 10) (10 at step 0).
  PolynomialDecay s(1.0, 10, {.end_learning_rate = 0.1, .cycle = true});
  CHECK(s(0) == Approx(1.0).epsilon(kTol));
  CHECK(s(5) == Approx(0.55).epsilon(kTol));
  CHECK(s(10) == Approx(0.1).epsilon(kTol));
  CHECK(s(15) == Approx(0.9 * 0.25 + 0.1).epsilon(kTol));  // steps 20: p = 0.75
  CHECK(s(20) == Approx(0.1).epsilon(kTol));
  CHECK(s(21) == Approx(0.9 * 0.3 + 0.1).epsilon(kTol));   // steps 30: p = 0.7
}

TEST_CASE("InverseTimeDecay divides by 1 + decay_rate * step / decay_steps", "[schedules]") {
  InverseTimeDecay s(1.0, 10, 0.5);
  CHECK(s(0) == Approx(1.0).epsilon(kTol));
  CHECK(s(5) == Approx(0.8).epsilon(kTol));       // 1 / 1.25
  CHECK(s(10) == Approx(1 / 1.5).epsilon(kTol));
  CHECK(s(30) == Approx(0.4).epsilon(kTol));      // 1 / 2.5
  InverseTimeDecay st(1.0, 10, 0.5, {.staircase = true});
  CHECK(st(5) == Approx(1.0).epsilon(kTol));
  CHECK(st(15) == Approx(1 / 1.5).epsilon(kTol));
  CHECK(st(30) == Approx(0.4).epsilon(kTol));
}

TEST_CASE("schedules report Keras' config and deserialize back", "[schedules]") {
  ExponentialDecay e(0.1, 1000, 0.96, {.staircase = true});
  const auto c = e.get_config();
  CHECK(c["initial_learning_rate"].get<double>() == 0.1);
  CHECK(c["decay_steps"].get<double>() == 1000);
  CHECK(c["decay_rate"].get<double>() == 0.96);
  CHECK(c["staircase"] == true);
  CHECK(c["name"] == "ExponentialDecay");
  CosineDecay cd(0.1, 100);
  CHECK(cd.get_config()["warmup_target"].is_null());
  CHECK(CosineDecayRestarts(0.1, 10).get_config()["name"] == "SGDRDecay");
  CHECK(PiecewiseConstantDecay({1}, {1.0, 2.0}).get_config()["name"] == "PiecewiseConstant");

  const std::vector<std::shared_ptr<LearningRateSchedule>> all{
      std::make_shared<ExponentialDecay>(0.1, 10, 0.5, ExponentialDecayOptions{.staircase = true}),
      std::make_shared<PiecewiseConstantDecay>(std::vector<double>{3, 7}, std::vector<double>{1, 0.5, 0.25}),
      std::make_shared<CosineDecay>(0.1, 20, CosineDecayOptions{.alpha = 0.1, .warmup_target = 1.0, .warmup_steps = 5}),
      std::make_shared<CosineDecayRestarts>(0.1, 10, CosineDecayRestartsOptions{.t_mul = 1.5, .m_mul = 0.9}),
      std::make_shared<PolynomialDecay>(0.1, 10, PolynomialDecayOptions{.power = 0.5, .cycle = true}),
      std::make_shared<InverseTimeDecay>(0.1, 10, 0.5),
  };
  for (const auto& s : all) {
    INFO(s->class_name());
    const auto serialized = serialize(*s);
    CHECK(serialized["module"] == "keras.optimizers.schedules");
    auto back = deserialize(serialized);
    CHECK(back->class_name() == s->class_name());
    CHECK(back->get_config() == s->get_config());
    for (std::int64_t step : {0, 3, 7, 12, 40}) CHECK((*back)(step) == (*s)(step));
  }
  CHECK_THROWS_AS(deserialize(nlohmann::json{{"class_name", "Nope"}, {"config", nlohmann::json::object()}}),
                  ValueError);
  CHECK_THROWS_AS(deserialize(nlohmann::json{{"class_name", "ExponentialDecay"}, {"config", {{"decay_steps", 1}}}}),
                  ValueError);
}

TEST_CASE("schedules reject a decay period that is not positive", "[schedules]") {
  CHECK_THROWS_AS(ExponentialDecay(0.1, 0, 0.5), ValueError);
  CHECK_THROWS_AS(CosineDecay(0.1, -1), ValueError);
  CHECK_THROWS_AS(CosineDecayRestarts(0.1, 0), ValueError);
  CHECK_THROWS_AS(PolynomialDecay(0.1, 0), ValueError);
  CHECK_THROWS_AS(InverseTimeDecay(0.1, 0, 0.5), ValueError);
}

TEST_CASE("a custom schedule subclasses LearningRateSchedule", "[schedules]") {
  struct Halving : LearningRateSchedule {
    double operator()(std::int64_t step) const override { return 1.0 / static_cast<double>(1 << step); }
  };
  optimizers::SGD opt(Halving{});
  Variable w(constant(0.0), "w");
  for (int i = 0; i < 3; ++i) opt.apply_gradients({{constant(1.0), &w}});
  CHECK(w.value().item<double>() == Approx(-1.75));  // -(1 + 0.5 + 0.25)
  CHECK(opt.learning_rate() == 0.125);
  CHECK(opt.get_config()["learning_rate"]["class_name"] == "LearningRateSchedule");
}
