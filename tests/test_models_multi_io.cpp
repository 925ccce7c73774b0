// Multi-input, multi-output models in fit / evaluate / predict: inputs and targets as lists
// (model order) or maps (by Input / output layer name), one loss, a list or a map of losses,
// loss_weights that weight the total, per-output metrics and Keras 3's History names.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

using namespace keel;

namespace {

// Two independent branches, so each output's numbers can be worked out alone:
//   out_a = in_a . [1, 1] + 0      (in_a: 2 features)
//   out_b = in_b . [1] + 0         (in_b: 1 feature)
models::Model two_branch_model() {
  auto a = models::Input({2}, DType::float32, "in_a");
  auto b = models::Input({1}, DType::float32, "in_b");
  auto out_a = layers::Dense(1, {.kernel_initializer = "ones", .name = "out_a"})(a);
  auto out_b = layers::Dense(1, {.kernel_initializer = "ones", .name = "out_b"})(b);
  return models::Model(std::vector<Tensor>{a, b}, std::vector<Tensor>{out_a, out_b}, "two_branch");
}

// in_a rows [1, 1], [2, 0] -> out_a = [2, 2]; y_a = [3, 1]: errors [-1, 1], mse_a = 1, mae_a = 1.
// in_b rows [1], [2]       -> out_b = [1, 2]; y_b = [3, 2]: errors [-2, 0], mse_b = 2, mae_b = 1.
const Tensor kXa = constant({1.f, 1.f, 2.f, 0.f}, {2, 2});
const Tensor kXb = constant({1.f, 2.f}, {2, 1});
const Tensor kYa = constant({3.f, 1.f}, {2, 1});
const Tensor kYb = constant({3.f, 2.f}, {2, 1});

// With loss_weights {out_a: 0.5, out_b: 2}: out_a_loss = 0.5 * 1 = 0.5, out_b_loss = 2 * 2 = 4,
// loss = 0.5 + 4 = 4.5 (Keras 3 logs each output's loss times its weight).
void check_weighted_logs(const std::map<std::string, double>& r, const std::string& prefix = "") {
  CHECK(r.at(prefix + "loss") == Approx(4.5));
  CHECK(r.at(prefix + "out_a_loss") == Approx(0.5));
  CHECK(r.at(prefix + "out_b_loss") == Approx(4.0));
  CHECK(r.at(prefix + "out_a_mae") == Approx(1.0));
  CHECK(r.at(prefix + "out_b_mae") == Approx(1.0));
}

}  // namespace

TEST_CASE("maps by name: loss_weights weight the total and History names each output", "[models][multi_io]") {
  auto model = two_branch_model();
  CHECK(model.input_names() == std::vector<std::string>{"in_a", "in_b"});
  CHECK(model.output_names() == std::vector<std::string>{"out_a", "out_b"});
  model.compile({.optimizer = optimizers::SGD(0.0),
                 .loss = std::map<std::string, losses::LossRef>{{"out_a", "mse"}, {"out_b", "mse"}},
                 .loss_weights = std::map<std::string, double>{{"out_a", 0.5}, {"out_b", 2.0}},
                 .metrics = std::map<std::string, std::vector<metrics::MetricRef>>{{"out_a", {"mae"}}, {"out_b", {"mae"}}}});
  const std::map<std::string, Tensor> x{{"in_b", kXb}, {"in_a", kXa}};  // map order is not model order
  const std::map<std::string, Tensor> y{{"out_a", kYa}, {"out_b", kYb}};
  check_weighted_logs(model.evaluate(x, y, {.batch_size = 2, .verbose = 0}));
  // lr 0: the weights stay, so every epoch and the validation repeat the same numbers.
  const auto h = model.fit(x, y, {.batch_size = 2, .epochs = 2, .verbose = 0, .validation_data = std::make_pair(
                                                                                  models::ModelData(x), models::ModelData(y))});
  for (const char* key : {"loss", "out_a_loss", "out_b_loss", "out_a_mae", "out_b_mae", "val_loss", "val_out_a_loss",
                          "val_out_b_loss", "val_out_a_mae", "val_out_b_mae"})
    CHECK(h.history.at(key).size() == 2);
  std::map<std::string, double> last, last_val;
  for (const auto& [k, v] : h.history) last[k] = v.back();
  check_weighted_logs(last);
  check_weighted_logs(last, "val_");
  CHECK(h.history.size() == 10);  // nothing else: no unprefixed "mae"
}

TEST_CASE("lists in model order give the numbers of the maps", "[models][multi_io]") {
  auto model = two_branch_model();
  model.compile({.optimizer = optimizers::SGD(0.0),
                 .loss = std::vector<losses::LossRef>{"mse", "mse"},
                 .loss_weights = {0.5, 2.0},
                 .metrics = std::vector<std::vector<metrics::MetricRef>>{{"mae"}, {"mae"}}});
  check_weighted_logs(model.evaluate(std::vector<Tensor>{kXa, kXb}, std::vector<Tensor>{kYa, kYb}, {.verbose = 0}));
  // One loss for all outputs and a flat metrics list (applied to every output, as tf.keras):
  // without weights the total is mse_a + mse_b = 3.
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse", .metrics = {"mae"}});
  const auto r = model.evaluate(std::vector<Tensor>{kXa, kXb}, std::vector<Tensor>{kYa, kYb}, {.verbose = 0});
  CHECK(r.at("loss") == Approx(3.0));
  CHECK(r.at("out_a_loss") == Approx(1.0));
  CHECK(r.at("out_b_loss") == Approx(2.0));
  CHECK(r.at("out_a_mae") == Approx(1.0));
  CHECK(r.at("out_b_mae") == Approx(1.0));
}

TEST_CASE("an output without a loss does not count in the total", "[models][multi_io]") {
  auto model = two_branch_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = std::map<std::string, losses::LossRef>{{"out_b", "mae"}}});
  const auto r = model.evaluate(std::vector<Tensor>{kXa, kXb}, std::vector<Tensor>{kYa, kYb}, {.verbose = 0});
  CHECK(r.at("loss") == Approx(1.0));  // mae_b = (2 + 0) / 2
  CHECK(r.at("out_b_loss") == Approx(1.0));
  CHECK(r.count("out_a_loss") == 0);
}

TEST_CASE("a gradient step follows the weighted total loss", "[models][multi_io]") {
  const bool eager = GENERATE(false, true);
  auto model = two_branch_model();
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse", .loss_weights = {0.5, 2.0}, .run_eagerly = eager});
  model.fit(std::vector<Tensor>{kXa, kXb}, std::vector<Tensor>{kYa, kYb},
            {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  // d(0.5 mse_a)/dk_a = 0.5 * mean(2 e x) with e = [-1, 1], x = [1, 1], [2, 0]:
  //   0.5 * ([-2, -2] + [4, 0]) / 2 = [0.5, -0.5] -> k_a = [1, 1] - 0.1 [0.5, -0.5] = [0.95, 1.05]
  //   d/db_a = 0.5 * mean(2 e) = 0 -> b_a = 0
  // d(2 mse_b)/dk_b = 2 * mean(2 e x) with e = [-2, 0], x = [1, 2]: 2 * (-4 + 0) / 2 = -4 -> 1.4
  //   d/db_b = 2 * mean(2 e) = -4 -> b_b = 0.4
  const auto w = model.get_weights();
  REQUIRE(w.size() == 4);
  CHECK(w[0].to_vector<float>()[0] == Approx(0.95f));
  CHECK(w[0].to_vector<float>()[1] == Approx(1.05f));
  CHECK(w[1].to_vector<float>()[0] == Approx(0.0f).margin(1e-7));
  CHECK(w[2].to_vector<float>()[0] == Approx(1.4f));
  CHECK(w[3].to_vector<float>()[0] == Approx(0.4f));
}

TEST_CASE("Dataset elements of nested pairs feed several inputs and outputs", "[models][multi_io]") {
  auto model = two_branch_model();
  model.compile({.optimizer = optimizers::SGD(0.0), .loss = "mse", .loss_weights = {0.5, 2.0},
                 .metrics = std::vector<std::vector<metrics::MetricRef>>{{"mae"}, {"mae"}}});
  using XY = std::pair<std::pair<Tensor, Tensor>, std::pair<Tensor, Tensor>>;
  // One batch of the two rows, then the two rows one at a time: the same weighted means.
  const auto ds = data::Dataset<XY>::from_generator([i = 0]() mutable -> std::optional<XY> {
    if (i++ > 0) return std::nullopt;
    return XY{{kXa, kXb}, {kYa, kYb}};
  });
  check_weighted_logs(model.evaluate(ds, {.verbose = 0}));
  const auto h = model.fit(ds, {.epochs = 1, .verbose = 0});
  CHECK(h.history.at("loss")[0] == Approx(4.5));
  // Lists of tensors per element work the same.
  using Lists = std::pair<std::vector<Tensor>, std::vector<Tensor>>;
  const auto rows = data::Dataset<Lists>::from_generator([i = 0]() mutable -> std::optional<Lists> {
    if (i >= 2) return std::nullopt;
    const std::int64_t r = i++;
    return Lists{{slice(kXa, {r, 0}, {1, 2}), slice(kXb, {r, 0}, {1, 1})},
                 {slice(kYa, {r, 0}, {1, 1}), slice(kYb, {r, 0}, {1, 1})}};
  });
  check_weighted_logs(model.evaluate(rows, {.verbose = 0}));
}

TEST_CASE("predict_all returns every output; predict wants one", "[models][multi_io]") {
  auto model = two_branch_model();
  const auto outs = model.predict_all(std::map<std::string, Tensor>{{"in_a", kXa}, {"in_b", kXb}}, {.batch_size = 1});
  REQUIRE(outs.size() == 2);
  CHECK(outs[0].to_vector<float>() == std::vector<float>{2.f, 2.f});
  CHECK(outs[1].to_vector<float>() == std::vector<float>{1.f, 2.f});
  CHECK_THROWS_AS(model.predict(std::vector<Tensor>{kXa, kXb}), ValueError);
  // A non-contiguous input (a transpose) gives the same predictions.
  const Tensor xa_t = transpose(constant({1.f, 2.f, 1.f, 0.f}, {2, 2}), {1, 0});
  REQUIRE_FALSE(xa_t.is_contiguous());
  CHECK(model.predict_all(std::vector<Tensor>{xa_t, kXb})[0].to_vector<float>() == std::vector<float>{2.f, 2.f});
}

TEST_CASE("multi-input errors name the inputs, outputs and shapes", "[models][multi_io][errors]") {
  auto model = two_branch_model();
  using L = std::map<std::string, losses::LossRef>;
  CHECK_THROWS_AS(model.compile({.loss = L{{"out_c", "mse"}}}), ValueError);
  CHECK_THROWS_WITH(model.compile({.loss = L{{"out_c", "mse"}}}), Catch::Contains("out_c") && Catch::Contains("out_a"));
  CHECK_THROWS_AS(model.compile({.loss = std::vector<losses::LossRef>{"mse"}}), ValueError);
  CHECK_THROWS_AS(model.compile({.loss = "mse", .loss_weights = {1.0, 2.0, 3.0}}), ValueError);
  CHECK_THROWS_AS(model.compile({.loss = "mse", .loss_weights = std::map<std::string, double>{{"nope", 1.0}}}), ValueError);
  CHECK_THROWS_AS(model.compile({.loss = "mse", .metrics = std::vector<std::vector<metrics::MetricRef>>{{"mae"}}}),
                  ValueError);
  model.compile({.optimizer = "sgd", .loss = "mse"});
  const std::vector<Tensor> y{kYa, kYb};
  CHECK_THROWS_AS(model.fit(std::vector<Tensor>{kXa}, y, {.verbose = 0}), ValueError);  // 1 of 2 inputs
  CHECK_THROWS_WITH(model.fit(std::map<std::string, Tensor>{{"in_a", kXa}}, y, {.verbose = 0}),
                    Catch::Contains("in_b"));
  CHECK_THROWS_WITH(model.fit(std::map<std::string, Tensor>{{"in_a", kXa}, {"in_b", kXb}, {"in_z", kXb}}, y,
                              {.verbose = 0}),
                    Catch::Contains("in_z"));
  // Different sample counts across inputs and targets.
  CHECK_THROWS_AS(model.fit(std::vector<Tensor>{kXa, constant({1.f, 2.f, 3.f}, {3, 1})}, y, {.verbose = 0}), ShapeError);
  // A wrong feature size is the functional model's ShapeError naming the input.
  CHECK_THROWS_AS(model.evaluate(std::vector<Tensor>{kXb, kXb}, y, {.verbose = 0}), ShapeError);
  // No samples at all.
  CHECK_THROWS_AS(model.fit(std::vector<Tensor>{zeros({0, 2}), zeros({0, 1})}, std::vector<Tensor>{zeros({0, 1}), zeros({0, 1})},
                            {.verbose = 0}),
                  ValueError);
}

TEST_CASE("a multi-output model saves and reloads its per-output compile settings", "[models][multi_io]") {
  auto model = two_branch_model();
  model.compile({.optimizer = optimizers::SGD(0.0),
                 .loss = std::map<std::string, losses::LossRef>{{"out_a", "mse"}, {"out_b", "mse"}},
                 .loss_weights = std::map<std::string, double>{{"out_a", 0.5}, {"out_b", 2.0}},
                 .metrics = std::vector<std::vector<metrics::MetricRef>>{{"mae"}, {"mae"}}});
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/keel_multi_io_" +
                           std::to_string(::getpid()) + ".keel";
  model.save(path);
  auto loaded = models::load_model(path);
  std::remove(path.c_str());
  check_weighted_logs(loaded->evaluate(std::vector<Tensor>{kXa, kXb}, std::vector<Tensor>{kYa, kYb}, {.verbose = 0}));
}
