// keras.constraints: MaxNorm, NonNeg, UnitNorm, MinMaxNorm, their configs, the optimizer hook
// (variable.assign(constraint(variable)) after each update) and layers' *_constraint options.
#include <catch2/catch.hpp>
#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <vector>

using namespace keel;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("MaxNorm scales the columns whose norm exceeds max_value", "[constraints]") {
  // w = [[3, 1], [4, 0]]: column norms (axis 0) 5 and 1. max_value 2:
  // column 0 * clip(5, 0, 2) / (1e-7 + 5) = 2/5 -> [1.2, 1.6]; column 1 * 1 / (1 + 1e-7) ~ unchanged.
  const Tensor w = constant({3.f, 1.f, 4.f, 0.f}, Shape{2, 2});
  const auto out = values(constraints::MaxNorm(2.0)(w));
  CHECK(out[0] == Approx(1.2).epsilon(1e-6));
  CHECK(out[2] == Approx(1.6).epsilon(1e-6));
  CHECK(out[1] == Approx(1.0).epsilon(1e-6));
  CHECK(out[3] == 0.f);
  // axis 1: row norms sqrt(10) and 4, both above 2: row 0 * 2/sqrt(10), row 1 * 2/4.
  const auto rows = values(constraints::MaxNorm(2.0, 1)(w));
  CHECK(rows[0] == Approx(3 * 2 / std::sqrt(10.0)).epsilon(1e-6));
  CHECK(rows[2] == Approx(2.0).epsilon(1e-6));
  CHECK(rows[3] == 0.f);
}

TEST_CASE("NonNeg, UnitNorm and MinMaxNorm by hand", "[constraints]") {
  // NonNeg: w * (w >= 0).
  const auto nn = values(constraints::NonNeg()(constant({-1.f, 2.f, -0.5f, 0.f}, Shape{4})));
  CHECK(nn == std::vector<float>{0.f, 2.f, 0.f, 0.f});
  // UnitNorm(axis 0) on [[3, 1], [4, 0]]: columns / (5, 1) -> [[0.6, 1], [0.8, 0]].
  const auto un = values(constraints::UnitNorm()(constant({3.f, 1.f, 4.f, 0.f}, Shape{2, 2})));
  CHECK(un[0] == Approx(0.6).epsilon(1e-6));
  CHECK(un[1] == Approx(1.0).epsilon(1e-6));
  CHECK(un[2] == Approx(0.8).epsilon(1e-6));
  // MinMaxNorm(1, 2, rate 0.5) on [[3, 0.3], [4, 0.4]]: norms 5 and 0.5.
  // column 0: desired = 0.5 * clip(5, 1, 2) + 0.5 * 5 = 3.5 -> scale 0.7 -> [2.1, 2.8];
  // column 1: desired = 0.5 * 1 + 0.5 * 0.5 = 0.75 -> scale 1.5 -> [0.45, 0.6].
  const auto mm =
      values(constraints::MinMaxNorm(1.0, 2.0, 0.5)(constant({3.f, 0.3f, 4.f, 0.4f}, Shape{2, 2})));
  CHECK(mm[0] == Approx(2.1).epsilon(1e-5));
  CHECK(mm[2] == Approx(2.8).epsilon(1e-5));
  CHECK(mm[1] == Approx(0.45).epsilon(1e-5));
  CHECK(mm[3] == Approx(0.6).epsilon(1e-5));
}

TEST_CASE("constraint configs follow Keras 3", "[constraints]") {
  const nlohmann::json j = constraints::serialize(constraints::MaxNorm(3.0, 1));
  CHECK(j["module"] == "keras.constraints");
  CHECK(j["class_name"] == "MaxNorm");
  CHECK(j["config"]["max_value"] == 3.0);
  CHECK(j["config"]["axis"] == 1);
  CHECK(j["registered_name"].is_null());
  CHECK(constraints::serialize(constraints::Constraint()).is_null());
  const nlohmann::json mm = constraints::serialize(constraints::MinMaxNorm(0.5, 2.0, 0.25, 0));
  CHECK(mm["config"] == nlohmann::json{{"min_value", 0.5}, {"max_value", 2.0}, {"rate", 0.25}, {"axis", 0}});
  CHECK(constraints::NonNeg().get_config() == nlohmann::json::object());

  // get(): names with Keras' defaults (MaxNorm(2, 0)), objects with their arguments.
  const auto by_name = constraints::get("max_norm");
  CHECK(by_name.class_name() == "MaxNorm");
  CHECK(by_name.get_config()["max_value"] == 2.0);
  const auto back = constraints::get(mm);
  CHECK(back.class_name() == "MinMaxNorm");
  CHECK(back.get_config() == mm["config"]);
  const auto multi = constraints::get(nlohmann::json{{"class_name", "UnitNorm"}, {"config", {{"axis", {0, 1}}}}});
  CHECK(multi.get_config()["axis"] == nlohmann::json{0, 1});
  CHECK_FALSE(constraints::get(nullptr).active());

  CHECK_THROWS_AS(constraints::get("max_nrom"), ValueError);
  CHECK_THROWS_AS(constraints::get(nlohmann::json{{"class_name", "Radial"}}), ValueError);
  CHECK_THROWS_AS(constraints::get(nlohmann::json{{"class_name", "MaxNorm"}, {"config", {{"max_value", "x"}}}}),
                  ValueError);
  CHECK_THROWS_AS(constraints::get(42), ValueError);
  CHECK_THROWS_AS(constraints::MinMaxNorm(2.0, 1.0), ValueError);
  // An axis the weight does not have.
  CHECK_THROWS_AS(constraints::MaxNorm(2.0, 3)(zeros({2, 2})), ShapeError);
  CHECK_THROWS_AS(constraints::Constraint()(zeros({2})), ValueError);
}

TEST_CASE("the optimizer projects a constrained variable after its update", "[constraints]") {
  Variable v(constant({-1.f, 2.f}, Shape{2}), "v");
  v.set_constraint(constraints::NonNeg().function());
  Variable free(constant({-1.f, 2.f}, Shape{2}), "free");
  optimizers::SGD sgd(1.0);
  // SGD(lr = 1): [-1, 2] - [1, 1] = [-2, 1]; NonNeg -> [0, 1]; the unconstrained one stays [-2, 1].
  sgd.apply_gradients({{constant({1.f, 1.f}, Shape{2}), &v}, {constant({1.f, 1.f}, Shape{2}), &free}});
  CHECK(values(v.peek()) == std::vector<float>{0.f, 1.f});
  CHECK(values(free.peek()) == std::vector<float>{-2.f, 1.f});
}

TEST_CASE("Dense(kernel_constraint = non_neg) keeps a non-negative kernel through fit", "[constraints]") {
  random::set_seed(3);
  const Tensor x = random::normal({64, 4});
  const Tensor y = -reduce_sum(x, {1}, true);  // y = -sum(x): the best kernel is all -1
  const auto train = [&](constraints::Constraint c) {
    models::Sequential model;
    model.add(layers::InputLayer(Shape{4}));
    model.add(layers::Dense(1, {.kernel_constraint = c, .bias_constraint = "max_norm"}));
    model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
    model.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0, .seed = 1});
    auto* dense = dynamic_cast<layers::Dense*>(model.layers()[0].get());
    REQUIRE(dense != nullptr);
    return values(dense->kernel().peek());
  };
  for (float k : train("non_neg")) CHECK(k >= 0.f);
  // Without the constraint the same fit drives the kernel negative (so the check above can fail).
  int negative = 0;
  for (float k : train({})) negative += k < 0.f;
  CHECK(negative == 4);
}

TEST_CASE("layers serialise their constraints and read them back", "[constraints]") {
  layers::Dense d(3, {.kernel_constraint = constraints::MaxNorm(1.5, 0), .bias_constraint = "non_neg"});
  const nlohmann::json c = d.get_config();
  CHECK(c["kernel_constraint"]["class_name"] == "MaxNorm");
  CHECK(c["kernel_constraint"]["config"]["max_value"] == 1.5);
  CHECK(c["bias_constraint"]["class_name"] == "NonNeg");
  auto back = layers::from_config("Dense", c);
  const nlohmann::json c2 = back->get_config();
  CHECK(c2["kernel_constraint"] == c["kernel_constraint"]);
  CHECK(c2["bias_constraint"] == c["bias_constraint"]);
  // Unconstrained layers write Keras' null.
  CHECK(layers::Dense(2).get_config()["kernel_constraint"].is_null());

  // Every layer family with Keras' *_constraint keys has them.
  layers::LSTM lstm(4, {.recurrent_constraint = "unit_norm"});
  CHECK(lstm.get_config()["recurrent_constraint"]["class_name"] == "UnitNorm");
  CHECK(lstm.get_config()["kernel_constraint"].is_null());
  layers::BatchNormalization bn({.gamma_constraint = "non_neg"});
  CHECK(bn.get_config()["gamma_constraint"]["class_name"] == "NonNeg");
  layers::Conv2D conv(2, {3, 3}, {.kernel_constraint = constraints::MaxNorm(2.0, std::vector<int>{0, 1, 2})});
  CHECK(conv.get_config()["kernel_constraint"]["config"]["axis"] == nlohmann::json{0, 1, 2});
  layers::Embedding emb(10, 3, {.embeddings_constraint = "unit_norm"});
  CHECK(emb.get_config()["embeddings_constraint"]["class_name"] == "UnitNorm");
  layers::MultiHeadAttention mha(2, 4, {.kernel_constraint = "max_norm"});
  CHECK(mha.get_config()["kernel_constraint"]["class_name"] == "MaxNorm");
  layers::PReLU prelu({.alpha_constraint = "non_neg"});
  CHECK(prelu.get_config()["alpha_constraint"]["class_name"] == "NonNeg");

  // The constraint reaches the weight's variable when the layer builds.
  layers::Dense built(2, {.kernel_constraint = "non_neg"});
  built(zeros({1, 3}));
  REQUIRE(built.kernel().constraint());
  CHECK_FALSE(static_cast<bool>(built.bias().constraint()));

  nlohmann::json bad = c;
  bad["kernel_constraint"] = "bogus";
  CHECK_THROWS_AS(layers::from_config("Dense", bad), ValueError);
}
