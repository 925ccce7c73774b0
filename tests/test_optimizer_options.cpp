// Optimizer options: configs and from_config, names (optimizers::get, OptimizerRef, Keras 3's
// auto names) and the ValueErrors of bad arguments.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "auto_name.hpp"
#include "optimizer_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace keel;
using keel_test::check_close;
using keel_test::is_auto_name;
using keel_test::next_auto_name;
using keel_test::vec;
using namespace keel::optimizers;

TEST_CASE("get_config reports Keras' keys and from_config rebuilds the optimizer", "[config]") {
  Adam opt(0.25, {.beta_1 = 0.8, .amsgrad = true, .clipnorm = 2.0, .name = "my_adam"});
  const auto c = opt.get_config();
  CHECK(c["name"] == "my_adam");
  CHECK(c["learning_rate"].get<double>() == 0.25);
  CHECK(c["beta_1"].get<double>() == 0.8);
  CHECK(c["beta_2"].get<double>() == 0.999);
  CHECK(c["epsilon"].get<double>() == 1e-7);
  CHECK(c["amsgrad"] == true);
  CHECK(c["clipnorm"].get<double>() == 2.0);
  CHECK(c["clipvalue"].is_null());
  CHECK(c["global_clipnorm"].is_null());
  CHECK(c["weight_decay"].is_null());
  CHECK(c["use_ema"] == false);
  CHECK(c["ema_momentum"].get<double>() == 0.99);
  CHECK(c["ema_overwrite_frequency"].is_null());

  const auto s = serialize(opt);
  CHECK(s["class_name"] == "Adam");
  auto back = deserialize(s);
  CHECK(back->class_name() == "Adam");
  CHECK(back->get_config() == c);

  for (const char* n : {"sgd", "adam", "adamw", "rmsprop", "adagrad", "nadam"}) {
    INFO(n);
    auto o = get(n);
    CHECK(deserialize(serialize(*o))->get_config() == o->get_config());
  }
  SGD sched(schedules::CosineDecay(0.1, 100, {.warmup_target = 0.2, .warmup_steps = 10}), {.momentum = 0.9});
  auto sched_back = deserialize(serialize(sched));
  CHECK(sched_back->get_config() == sched.get_config());
  CHECK(sched_back->learning_rate_spec().is_schedule());
  CHECK_THROWS_AS(from_config("Lionn", nlohmann::json::object()), ValueError);
}

TEST_CASE("optimizers::get knows Keras' names and rejects others", "[names]") {
  CHECK(get("sgd")->class_name() == "SGD");
  CHECK(get("adam")->class_name() == "Adam");
  CHECK(get("Adam")->class_name() == "Adam");
  CHECK(get("adamw")->class_name() == "AdamW");
  CHECK(get("rmsprop")->class_name() == "RMSprop");
  CHECK(get("adagrad")->class_name() == "Adagrad");
  CHECK(get("nadam")->class_name() == "Nadam");
  // Keras' defaults.
  CHECK(get("sgd")->learning_rate() == Approx(0.01).epsilon(1e-7));
  CHECK(get("adam")->learning_rate() == Approx(0.001).epsilon(1e-7));
  CHECK(is_auto_name(get("rmsprop")->name(), "rm_sprop"));
  CHECK(is_auto_name(get("sgd")->name(), "sgd"));
  CHECK_THROWS_AS(get("adamaxx"), ValueError);
  CHECK_THROWS_AS(get(""), ValueError);
  CHECK_THROWS_WITH(get("sdg"), Catch::Contains("sdg"));
}

TEST_CASE("OptimizerRef takes a name, a temporary or a shared_ptr", "[names]") {
  OptimizerRef by_name = "adam";
  CHECK(by_name.get()->class_name() == "Adam");
  OptimizerRef by_string = std::string("rmsprop");
  CHECK(by_string->class_name() == "RMSprop");
  OptimizerRef by_object = SGD(0.5, {.momentum = 0.9});
  CHECK(by_object->class_name() == "SGD");
  CHECK(by_object->learning_rate() == 0.5);
  auto shared = std::make_shared<Nadam>(0.01);
  OptimizerRef by_ptr = shared;
  CHECK(by_ptr.get() == shared);
  OptimizerRef none;
  CHECK_FALSE(static_cast<bool>(none));
  CHECK_THROWS_AS(OptimizerRef("bogus"), ValueError);
}

TEST_CASE("bad optimizer arguments are ValueErrors", "[errors]") {
  CHECK_THROWS_AS(SGD(0.1, {.momentum = -0.1}), ValueError);
  CHECK_THROWS_AS(SGD(0.1, {.momentum = 1.5}), ValueError);
  CHECK_THROWS_AS(SGD(0.1, {.loss_scale_factor = 0.0}), ValueError);
  SGD opt(0.1);
  CHECK_THROWS_AS(opt.apply_gradients({{constant(1.0), nullptr}}), ValueError);
}

// ---- default names (Keras 3.15, keras-team/keras#22972) ---------------------------------------------

TEST_CASE("optimizers default to Keras 3's auto names: the snake-case class name and a counter", "[names]") {
  // Keras 3.15 made every optimizer's default name None, so BaseOptimizer names it
  // auto_name(class name) = uniquify(to_snake_case(class name)): the first "adam", then "adam_1",
  // "adam_2", ... Keras' own test (optimizer_test.py, test_optimizer_auto_naming) checks
  // "adam", "adam_1", "sgd", "sgd_1", "adam_w", "adam_w_1". Keras' to_snake_case splits
  // "RMSprop" as "RM" + "Sprop": "rm_sprop".
  const std::string a1 = Adam().name(), a2 = Adam().name();
  CHECK(is_auto_name(a1, "adam"));
  CHECK(a2 == next_auto_name(a1, "adam"));
  const std::string s1 = SGD().name(), s2 = SGD().name();
  CHECK(is_auto_name(s1, "sgd"));
  CHECK(s2 == next_auto_name(s1, "sgd"));
  const std::string w1 = AdamW().name(), w2 = AdamW().name();
  CHECK(is_auto_name(w1, "adam_w"));
  CHECK(w2 == next_auto_name(w1, "adam_w"));
  CHECK(is_auto_name(RMSprop().name(), "rm_sprop"));
  CHECK(is_auto_name(Adagrad().name(), "adagrad"));
  CHECK(is_auto_name(Nadam().name(), "nadam"));
  // By name: the same rule (optimizers::get("adam") makes Adam()).
  CHECK(get("adam")->name() == next_auto_name(a2, "adam"));
  // An explicit name is kept, and a config round trip keeps the name without a new number.
  CHECK(Adam(0.001, {.name = "my_adam"}).name() == "my_adam");
  Adam named(0.001);
  const std::string before = named.name();
  CHECK(deserialize(serialize(named))->name() == before);
  CHECK(Adam().name() == next_auto_name(before, "adam"));
}

// ---- argument validation ------------------------------------------------------------------------

TEST_CASE("negative or non-finite learning rates are ValueErrors naming the class and the value", "[errors]") {
  CHECK_THROWS_AS(SGD(-0.1), ValueError);
  CHECK_THROWS_WITH(SGD(-0.1), Catch::Contains("SGD") && Catch::Contains("learning_rate=-0.1"));
  CHECK_THROWS_WITH(Adam(std::nan("")), Catch::Contains("Adam") && Catch::Contains("nan"));
  CHECK_THROWS_AS(RMSprop(std::numeric_limits<double>::infinity()), ValueError);
  CHECK_THROWS_AS(AdamW(-1e-3), ValueError);
  CHECK_THROWS_AS(Adagrad(-1.0), ValueError);
  CHECK_THROWS_AS(Nadam(-1.0), ValueError);
  Adam opt(0.1);
  CHECK_THROWS_WITH(opt.set_learning_rate(-0.5), Catch::Contains("Adam") && Catch::Contains("-0.5"));
  CHECK_THROWS_AS(opt.set_learning_rate(LearningRate(std::nan(""))), ValueError);
  CHECK(opt.learning_rate() == Approx(0.1));  // a refused rate leaves the old one
  // Accepted, as in Keras: a learning rate of 0 (nothing moves).
  SGD still(0.0);
  Variable w(vec({1, -2}, DType::float32), "w");
  still.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
  check_close(w.value(), {1, -2});
}

TEST_CASE("negative or NaN clip options are ValueErrors; 0 turns clipping off as in Keras", "[clip][errors]") {
  CHECK_THROWS_WITH(SGD(0.1, {.clipnorm = -1.0}), Catch::Contains("SGD") && Catch::Contains("clipnorm=-1"));
  CHECK_THROWS_WITH(Adam(0.1, {.clipvalue = -0.5}), Catch::Contains("Adam") && Catch::Contains("clipvalue=-0.5"));
  CHECK_THROWS_WITH(RMSprop(0.1, {.global_clipnorm = std::nan("")}),
                    Catch::Contains("RMSprop") && Catch::Contains("global_clipnorm=nan"));
  CHECK_THROWS_AS(AdamW(0.1, {.clipnorm = -2.0}), ValueError);
  // Keras clips only when the option is > 0 (BaseOptimizer._clip_gradients), so 0 is accepted
  // and means no clipping: the plain SGD step w -= 0.1 g, g = [0.5, -1] -> [0.95, -1.9].
  for (SGDOptions o : {SGDOptions{.clipnorm = 0.0}, SGDOptions{.clipvalue = 0.0}, SGDOptions{.global_clipnorm = 0.0}}) {
    SGD opt(0.1, o);
    Variable w(vec({1, -2}, DType::float32), "w");
    opt.apply_gradients({{vec({0.5, -1}, DType::float32), &w}});
    check_close(w.value(), {0.95, -1.9});
  }
}

TEST_CASE("set_loss_scale_factor sets or clears the gradient divisor", "[loss_scale]") {
  // Gradient 2 under a factor of 4 is 0.5: w = 1 - 0.1 * 0.5 = 0.95; cleared, the next gradient
  // 0.5 applies as it is: 0.95 - 0.05 = 0.9.
  SGD opt(0.1, {.loss_scale_factor = 4.0});
  Variable w(vec({1}, DType::float32), "w");
  opt.apply_gradients({{vec({2}, DType::float32), &w}});
  check_close(w.value(), {0.95});
  opt.set_loss_scale_factor(std::nullopt);
  CHECK_FALSE(opt.common_options().loss_scale_factor.has_value());
  CHECK(opt.scale_loss(constant(3.0)).item<double>() == 3.0);
  opt.apply_gradients({{vec({0.5}, DType::float32), &w}});
  check_close(w.value(), {0.9});
  CHECK(opt.get_config()["loss_scale_factor"].is_null());
  CHECK_THROWS_WITH(opt.set_loss_scale_factor(0.0), Catch::Contains("SGD") && Catch::Contains("loss_scale_factor"));
}
