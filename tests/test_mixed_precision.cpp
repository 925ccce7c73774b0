// Mixed precision: dtype policies, layers under a mixed policy (float32 weights, half-precision
// compute and outputs, float32-only layers, per-layer policies), LossScaleOptimizer against
// numbers worked out by hand, and compile / fit under mixed_float16. Every test that changes
// the global policy restores float32 with a guard, whatever happens inside it.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "auto_name.hpp"
#include "policy_guard.hpp"
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <memory>
#include <string>
#include <vector>

using namespace keel;
using keel_test::is_auto_name;
using keel_test::PolicyGuard;
namespace mp = keel::mixed_precision;

namespace {

Tensor scalar1(double v) { return constant(std::vector<float>{static_cast<float>(v)}, Shape{1}); }

}  // namespace

TEST_CASE("policies name their compute and variable dtypes", "[policy]") {
  const mp::Policy f32;
  CHECK(f32.name() == "float32");
  CHECK(f32.compute_dtype() == DType::float32);
  CHECK(f32.variable_dtype() == DType::float32);
  CHECK_FALSE(f32.is_mixed());

  const mp::Policy f16("mixed_float16");
  CHECK(f16.compute_dtype() == DType::float16);
  CHECK(f16.variable_dtype() == DType::float32);
  CHECK(f16.is_mixed());

  const mp::Policy bf16("mixed_bfloat16");
  CHECK(bf16.compute_dtype() == DType::bfloat16);
  CHECK(bf16.variable_dtype() == DType::float32);

  try {
    mp::Policy bad("float16_mixed");
    FAIL("no ValueError");
  } catch (const ValueError& e) {
    const std::string what = e.what();
    CHECK(what.find("float16_mixed") != std::string::npos);
    CHECK(what.find("\"float32\"") != std::string::npos);
    CHECK(what.find("\"mixed_float16\"") != std::string::npos);
    CHECK(what.find("\"mixed_bfloat16\"") != std::string::npos);
  }
  CHECK_THROWS_AS(mp::set_global_policy("float64"), ValueError);
  CHECK(mp::global_policy().name() == "float32");  // a bad name leaves the policy alone
}

TEST_CASE("set_global_policy takes a name or a Policy", "[policy]") {
  PolicyGuard guard("mixed_bfloat16");
  CHECK(mp::global_policy().name() == "mixed_bfloat16");
  mp::set_global_policy(mp::Policy("mixed_float16"));
  CHECK(mp::global_policy() == mp::Policy("mixed_float16"));
  layers::Dense dense(2);
  CHECK(dense.dtype_policy().name() == "mixed_float16");
  CHECK(dense.compute_dtype() == DType::float16);
  CHECK(dense.variable_dtype() == DType::float32);
  CHECK(dense.get_config()["dtype"] == "mixed_float16");
}

TEST_CASE("Dense under mixed_float16: float32 kernel, float16 output equal to the float32 result", "[layers]") {
  random::set_seed(7);
  const Tensor x = random::normal({5, 3});
  PolicyGuard guard("mixed_float16");
  layers::Dense dense(4, {.bias_initializer = "ones"});
  const Tensor y = dense(x);
  CHECK(dense.kernel().dtype() == DType::float32);
  CHECK(dense.bias().dtype() == DType::float32);
  CHECK(y.dtype() == DType::float16);
  REQUIRE(y.shape() == Shape{5, 4});

  // The same product in float32 from the float32 weights; the float16 result differs by the
  // rounding of x and the kernel to float16 (relative 2^-11 each) and of the output.
  const Tensor expected = matmul(x, dense.kernel().peek()) + dense.bias().peek();
  const auto got = cast(y, DType::float32).to_vector<float>();
  const auto want = expected.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(5e-3).epsilon(5e-3));

  // Gradients reach the float32 weights through the casts, in float32.
  GradientTape tape;
  const Tensor loss = reduce_sum(cast(dense(x), DType::float32));
  const auto grads = tape.gradient(loss, std::vector<Variable*>{&dense.kernel(), &dense.bias()});
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].dtype() == DType::float32);
  CHECK(grads[0].shape() == Shape{3, 4});
  // d sum(x k + b) / d b = the batch size for every unit.
  for (float g : grads[1].to_vector<float>()) CHECK(g == Approx(5.0));
}

TEST_CASE("a layer made under float32 keeps float32 whatever the global policy becomes", "[layers]") {
  layers::Dense dense(2);
  PolicyGuard guard("mixed_float16");
  const Tensor y = dense(ones({3, 4}));
  CHECK(dense.dtype_policy().name() == "float32");
  CHECK(y.dtype() == DType::float32);
}

TEST_CASE("a float32 Activation ends a mixed model with float32 probabilities", "[layers]") {
  PolicyGuard guard("mixed_float16");
  models::Sequential model{layers::InputLayer({3}), layers::Dense(4),
                           layers::Activation("softmax", {.name = "predictions", .dtype = "float32"})};
  const auto list = model.layers();
  REQUIRE(list.size() == 2);
  CHECK(list[1]->dtype_policy().name() == "float32");
  const Tensor y = model(random::normal({2, 3}));
  CHECK(y.dtype() == DType::float32);
  const auto p = y.to_vector<float>();
  CHECK(p[0] + p[1] + p[2] + p[3] == Approx(1.0).epsilon(1e-5));
  // Without the float32 layer the model's output is in the compute dtype.
  models::Sequential half{layers::InputLayer({3}), layers::Dense(4)};
  CHECK(half(random::normal({2, 3})).dtype() == DType::float16);
}

TEST_CASE("BatchNormalization and Dropout compute in float32 and hand back float16", "[layers]") {
  PolicyGuard guard("mixed_float16");
  layers::BatchNormalization bn;
  layers::Dropout drop(0.5, {.seed = 1});
  // A float16 input, as a mixed Dense would give: values 0..7 in two features.
  const Tensor x = cast(reshape(arange(0, 8, 1, DType::float32), Shape{4, 2}), DType::float16);
  const Tensor y = bn(x, true);
  CHECK(y.dtype() == DType::float16);
  CHECK(bn.moving_mean().dtype() == DType::float32);
  // Feature 0 holds 0, 2, 4, 6 (mean 3): the moving mean moves 1% of the way (momentum 0.99).
  CHECK(bn.moving_mean().peek().to_vector<float>()[0] == Approx(0.03).epsilon(1e-4));
  // Normalised outputs have mean 0 (up to float16 rounding).
  const auto v = cast(y, DType::float32).to_vector<float>();
  CHECK(v[0] + v[2] + v[4] + v[6] == Approx(0.0).margin(1e-2));
  const Tensor d = drop(x, true);
  CHECK(d.dtype() == DType::float16);
  for (float e : cast(d, DType::float32).to_vector<float>()) CHECK((e == 0.0f || e >= 2.0f));
}

TEST_CASE("per-layer policies round-trip through the layer config", "[layers]") {
  PolicyGuard guard("float32");
  layers::Dense dense(3, {.dtype = "mixed_bfloat16"});
  CHECK(dense.compute_dtype() == DType::bfloat16);
  const nlohmann::json config = dense.get_config();
  CHECK(config["dtype"] == "mixed_bfloat16");
  const auto rebuilt = layers::from_config("Dense", config);
  CHECK(rebuilt->dtype_policy().name() == "mixed_bfloat16");
  // Keras 3 writes the policy as an object.
  nlohmann::json keras3 = config;
  keras3["dtype"] = {{"module", "keras"}, {"class_name", "DTypePolicy"}, {"config", {{"name", "mixed_float16"}}}};
  CHECK(layers::from_config("Dense", keras3)->dtype_policy().name() == "mixed_float16");
  CHECK_THROWS_AS(layers::Dense(3, {.dtype = "half"}), ValueError);
  layers::Dense later(3);
  later.set_dtype_policy("mixed_float16");
  CHECK(later(ones({1, 2})).dtype() == DType::float16);
}

TEST_CASE("LossScaleOptimizer defaults are Keras 3's", "[loss_scale]") {
  optimizers::LossScaleOptimizer opt(optimizers::SGD(0.1));
  CHECK(opt.initial_scale() == 32768.0);  // 2^15
  CHECK(opt.dynamic_scale() == 32768.0);
  CHECK(opt.loss_scale() == 32768.0);
  CHECK(opt.dynamic_growth_steps() == 2000);
  CHECK(opt.class_name() == "LossScaleOptimizer");
  CHECK(is_auto_name(opt.name(), "loss_scale_optimizer"));  // Keras: name=None -> auto_name
  CHECK(opt.learning_rate() == Approx(0.1));
  CHECK(opt.scale_loss(constant(2.0)).item<double>() == 65536.0);
}

TEST_CASE("LossScaleOptimizer by hand: unscale, skip non-finite steps, grow", "[loss_scale]") {
  // SGD with lr 0.1 on w = 1, loss scale 4, growth after 2 good steps.
  optimizers::LossScaleOptimizer opt(optimizers::SGD(0.1), {.initial_scale = 4, .dynamic_growth_steps = 2});
  Variable w(scalar1(1.0), "w");

  // scale_loss: 3 * 4 = 12; the TF2 name is the same.
  CHECK(opt.scale_loss(constant(3.0)).item<double>() == 12.0);
  CHECK(opt.get_scaled_loss(constant(3.0)).item<double>() == 12.0);
  // get_unscaled_gradients: 8 / 4 = 2.
  CHECK(opt.get_unscaled_gradients({scalar1(8.0)})[0].to_vector<float>()[0] == 2.0f);

  // Step 1: scaled gradient 8 -> unscaled 2 -> w = 1 - 0.1 * 2 = 0.8. One good step.
  opt.apply_gradients({{scalar1(8.0), &w}});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.8).epsilon(1e-6));
  CHECK(opt.step_counter() == 1);
  CHECK(opt.dynamic_scale() == 4.0);
  CHECK(opt.iterations() == 1);

  // Step 2: scaled gradient 4 -> unscaled 1 -> w = 0.8 - 0.1 = 0.7. The second good step in a
  // row: the scale doubles to 8 and the counter starts again.
  opt.apply({scalar1(4.0)}, {&w});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.7).epsilon(1e-6));
  CHECK(opt.dynamic_scale() == 8.0);
  CHECK(opt.step_counter() == 0);
  CHECK(opt.iterations() == 2);

  // Step 3: an inf gradient: skipped (w stays 0.7, the inner optimizer's iterations stay 2) and
  // the scale halves to 4.
  opt.apply_gradients({{scalar1(std::numeric_limits<double>::infinity()), &w}});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.7).epsilon(1e-6));
  CHECK(opt.dynamic_scale() == 4.0);
  CHECK(opt.iterations() == 2);

  // Step 4: a NaN among finite gradients skips the whole step: scale 2.
  Variable v(scalar1(5.0), "v");
  opt.apply_gradients({{scalar1(4.0), &w}, {scalar1(std::nan("")), &v}});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.7).epsilon(1e-6));
  CHECK(v.peek().to_vector<float>()[0] == 5.0f);
  CHECK(opt.dynamic_scale() == 2.0);

  // Step 5: finite again: scaled 2 at scale 2 -> unscaled 1 -> w = 0.6; counter 1.
  opt.apply_gradients({{scalar1(2.0), &w}});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.6).epsilon(1e-6));
  CHECK(opt.step_counter() == 1);
  CHECK(opt.iterations() == 3);
}

TEST_CASE("LossScaleOptimizer never scales below 1", "[loss_scale]") {
  optimizers::LossScaleOptimizer opt(optimizers::SGD(0.1), {.initial_scale = 2});
  Variable w(scalar1(1.0), "w");
  const Tensor inf = scalar1(std::numeric_limits<double>::infinity());
  opt.apply_gradients({{inf, &w}});
  CHECK(opt.dynamic_scale() == 1.0);
  opt.apply_gradients({{inf, &w}});
  CHECK(opt.dynamic_scale() == 1.0);
  CHECK(w.peek().to_vector<float>()[0] == 1.0f);
}

TEST_CASE("LossScaleOptimizer forwards state and serialises like the other optimizers", "[loss_scale]") {
  auto opt = std::make_shared<optimizers::LossScaleOptimizer>(optimizers::Adam(0.01),
                                                              optimizers::LossScaleOptimizerOptions{.initial_scale = 4});
  Variable w(scalar1(1.0), "w");
  opt->apply_gradients({{scalar1(4.0), &w}});
  CHECK(opt->inner_optimizer()->iterations() == 1);
  REQUIRE(opt->get_slot(w, "momentum") != nullptr);
  opt->set_learning_rate(0.5);
  CHECK(opt->inner_optimizer()->learning_rate() == Approx(0.5));
  std::vector<std::string> names;
  for (const auto& [name, v] : opt->variables()) names.push_back(name);
  REQUIRE(names.size() >= 4);
  CHECK(names[0] == "step_counter");
  CHECK(names[1] == "dynamic_scale");
  CHECK(names[2] == "iteration");

  const nlohmann::json serialized = optimizers::serialize(*opt);
  CHECK(serialized["class_name"] == "LossScaleOptimizer");
  CHECK_FALSE(serialized["config"].contains("learning_rate"));
  CHECK(serialized["config"]["initial_scale"] == 4.0);
  CHECK(serialized["config"]["dynamic_growth_steps"] == 2000);
  CHECK(serialized["config"]["inner_optimizer"]["class_name"] == "Adam");
  const auto back = optimizers::deserialize(serialized);
  auto lso = std::dynamic_pointer_cast<optimizers::LossScaleOptimizer>(back);
  REQUIRE(lso);
  CHECK(lso->initial_scale() == 4.0);
  CHECK(lso->inner_optimizer()->class_name() == "Adam");
  CHECK(lso->learning_rate() == Approx(0.5));

  CHECK_THROWS_AS(optimizers::LossScaleOptimizer(opt), ValueError);  // no wrapper of a wrapper
  CHECK_THROWS_AS(optimizers::LossScaleOptimizer(optimizers::SGD(), {.initial_scale = 0}), ValueError);
  CHECK_THROWS_AS(optimizers::LossScaleOptimizer(optimizers::SGD(), {.dynamic_growth_steps = 0}), ValueError);
}

TEST_CASE("compile wraps the optimizer under mixed_float16 and fit lowers the loss", "[model]") {
  random::set_seed(3);
  const Tensor x = random::normal({64, 4});
  const Tensor y = matmul(x, constant(std::vector<float>{0.5f, -1.0f, 0.25f, 2.0f}, Shape{4, 1})) + 0.5;
  PolicyGuard guard("mixed_float16");
  models::Sequential model{layers::InputLayer({4}), layers::Dense(16, {.activation = "relu"}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
  auto lso = std::dynamic_pointer_cast<optimizers::LossScaleOptimizer>(model.optimizer());
  REQUIRE(lso);
  CHECK(lso->inner_optimizer()->class_name() == "Adam");
  const auto history = model.fit(x, y, {.batch_size = 16, .epochs = 8, .verbose = 0});
  const auto& loss = history.history.at("loss");
  REQUIRE(loss.size() == 8);
  CHECK(std::isfinite(loss.back()));
  CHECK(loss.back() < 0.5 * loss.front());
  for (Variable* v : model.trainable_weights()) CHECK(v->dtype() == DType::float32);
  CHECK(model.predict(x).dtype() == DType::float16);
  // The first steps at 2^15 may overflow and be skipped; the scale then settles below it.
  CHECK(lso->dynamic_scale() >= 1.0);
  CHECK(lso->iterations() > 0);

  // An optimizer already wrapped is kept; mixed_bfloat16 needs no loss scaling.
  auto own = std::make_shared<optimizers::LossScaleOptimizer>(optimizers::SGD(0.01));
  model.compile({.optimizer = own, .loss = "mse"});
  CHECK(model.optimizer() == own);
  mp::set_global_policy("mixed_bfloat16");
  models::Sequential bf{layers::InputLayer({4}), layers::Dense(1)};
  bf.compile({.optimizer = optimizers::SGD(0.01), .loss = "mse"});
  CHECK(bf.optimizer()->class_name() == "SGD");
  const auto h = bf.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0});
  CHECK(h.history.at("loss").back() < h.history.at("loss").front());
}

TEST_CASE("LossScaleOptimizer switches the inner loss_scale_factor off: one unscaling only", "[loss_scale]") {
  // Keras 3 sets inner_optimizer.loss_scale_factor = None when wrapping ("otherwise gradients will
  // be scaled twice"). SGD(0.1) with its own factor 4, wrapped with a dynamic scale of 8:
  // a loss scaled by 8 gives the gradient 8 * 0.5 = 4; unscaled once, 4 / 8 = 0.5, the step is
  // w = 1 - 0.1 * 0.5 = 0.95, the same as plain SGD on the unscaled gradient 0.5. (Divided by 4
  // again, as before the fix, it would be 1 - 0.1 * 0.125 = 0.9875.)
  auto inner = std::make_shared<optimizers::SGD>(0.1, optimizers::SGDOptions{.loss_scale_factor = 4.0});
  optimizers::LossScaleOptimizer opt(inner, {.initial_scale = 8});
  CHECK_FALSE(inner->common_options().loss_scale_factor.has_value());
  CHECK(inner->get_config()["loss_scale_factor"].is_null());
  CHECK(opt.scale_loss(constant(1.0)).item<double>() == 8.0);  // the dynamic scale only, not 8 * 4

  Variable w(scalar1(1.0), "w");
  opt.apply_gradients({{scalar1(4.0), &w}});
  optimizers::SGD plain(0.1);
  Variable u(scalar1(1.0), "u");
  plain.apply_gradients({{scalar1(0.5), &u}});
  CHECK(w.peek().to_vector<float>()[0] == Approx(0.95).epsilon(1e-6));
  CHECK(w.peek().to_vector<float>()[0] == u.peek().to_vector<float>()[0]);
}

TEST_CASE("LossScaleOptimizer get_config has exactly Keras 3's keys", "[loss_scale][config]") {
  // Keras 3.12+ (keras-team/keras#21706): get_config returns name, inner_optimizer,
  // initial_scale and dynamic_growth_steps, not the base optimizer's options ("only name is
  // supported"), and __init__ refuses base options other than their defaults.
  optimizers::LossScaleOptimizer opt(optimizers::Adam(0.01), {.initial_scale = 16, .dynamic_growth_steps = 10,
                                                              .name = "lso"});
  const nlohmann::json c = opt.get_config();
  std::set<std::string> keys;
  for (const auto& [key, value] : c.items()) keys.insert(key);
  CHECK(keys == std::set<std::string>{"name", "inner_optimizer", "initial_scale", "dynamic_growth_steps"});
  CHECK(c["name"] == "lso");
  CHECK(c["initial_scale"] == 16.0);
  CHECK(c["dynamic_growth_steps"] == 10);
  CHECK(c["inner_optimizer"]["class_name"] == "Adam");
  CHECK(c["inner_optimizer"]["config"]["learning_rate"].get<double>() == Approx(0.01));

  // from_config: the new form, and an older one carrying the base options at their defaults.
  auto back = optimizers::LossScaleOptimizer::from_config(c);
  CHECK(back->get_config() == c);
  nlohmann::json legacy = c;
  legacy["weight_decay"] = nullptr;
  legacy["clipnorm"] = nullptr;
  legacy["use_ema"] = false;
  legacy["ema_momentum"] = 0.99;
  legacy["loss_scale_factor"] = nullptr;
  legacy["gradient_accumulation_steps"] = nullptr;
  CHECK(optimizers::LossScaleOptimizer::from_config(legacy)->get_config() == c);
  // A base option that would do something is refused, as in Keras ("set it on the inner optimizer").
  nlohmann::json clipped = c;
  clipped["clipnorm"] = 1.0;
  CHECK_THROWS_WITH(optimizers::LossScaleOptimizer::from_config(clipped),
                    Catch::Contains("clipnorm") && Catch::Contains("inner_optimizer"));
  nlohmann::json unknown = c;
  unknown["momentum"] = 0.9;
  CHECK_THROWS_AS(optimizers::LossScaleOptimizer::from_config(unknown), ValueError);
}

TEST_CASE("LossScaleOptimizer default names count like Keras' auto_name", "[loss_scale][names]") {
  const std::string first = optimizers::LossScaleOptimizer(optimizers::SGD()).name();
  const std::string second = optimizers::LossScaleOptimizer(optimizers::SGD()).name();
  CHECK(is_auto_name(first, "loss_scale_optimizer"));
  CHECK(is_auto_name(second, "loss_scale_optimizer"));
  CHECK(first != second);
}
