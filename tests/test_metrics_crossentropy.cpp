// The cross-entropy metric classes (metrics::BinaryCrossentropy, CategoricalCrossentropy,
// SparseCategoricalCrossentropy): running means of the loss functions over updates, with
// from_logits, label_smoothing, axis and ignore_class, checked against values worked out in the
// comments (several are Keras' documented examples); their names, resolution by name, configs,
// from_config and their errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "metric_fixtures.hpp"
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace keel;
using keel_test::f32;
using keel_test::i64;
using Catch::Contains;

namespace {

// -(y log p + (1 - y) log(1 - p)) for one element.
double bce(double y, double p) { return -(y * std::log(p) + (1 - y) * std::log(1 - p)); }
double softplus(double x) { return std::log1p(std::exp(x)); }

}  // namespace

// ---- BinaryCrossentropy -------------------------------------------------------------------------------

TEST_CASE("metrics::BinaryCrossentropy averages the per-sample loss over updates", "[metrics][crossentropy]") {
  metrics::BinaryCrossentropy m;
  CHECK(m.name() == "binary_crossentropy");
  CHECK(m.direction() == "down");
  // Keras' example: [[0, 1], [0, 0]] vs [[0.6, 0.4], [0.4, 0.6]]:
  //   row 0: (bce(0, 0.6) + bce(1, 0.4)) / 2 = -log 0.4;  row 1: (-log 0.6 - log 0.4) / 2
  //   mean 0.81492
  const Tensor y = f32({0, 1, 0, 0}, {2, 2}), p = f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2});
  const double row0 = -std::log(0.4), row1 = (-std::log(0.6) - std::log(0.4)) / 2;
  m.update_state(y, p);
  CHECK(m.result() == Approx((row0 + row1) / 2).epsilon(1e-6));
  CHECK(m.result() == Approx(0.81492424).epsilon(1e-6));
  // update 2: labels [1] against [[0.9]] (rank 1 against [N, 1] is aligned): bce(1, 0.9)
  m.update_state(f32({1}), f32({0.9f}, {1, 1}));
  CHECK(m.result() == Approx((row0 + row1 + bce(1, 0.9)) / 3).epsilon(1e-6));
  // Labels [N] against predictions [N, 1] give one loss per sample, weighted per sample:
  //   weights [1, 3] on bce(1, 0.9) and bce(0, 0.2) -> (bce(1, 0.9) + 3 bce(0, 0.2)) / 4
  metrics::BinaryCrossentropy column;
  column.update_state(f32({1, 0}), f32({0.9f, 0.2f}, {2, 1}), f32({1, 3}));
  CHECK(column.result() == Approx((bce(1, 0.9) + 3 * bce(0, 0.2)) / 4).epsilon(1e-6));
  // Keras' weighted example: weights [1, 0] -> row 0 only = 0.91629
  m.reset_state();
  m.update_state(y, p, f32({1, 0}));
  CHECK(m.result() == Approx(0.9162905).epsilon(1e-6));
}

TEST_CASE("metrics::BinaryCrossentropy with label_smoothing and from_logits", "[metrics][crossentropy]") {
  // label_smoothing 0.2: labels y (1 - 0.2) + 0.1, so 0 -> 0.1 and 1 -> 0.9.
  //   row 0: (bce(0.1, 0.6) + bce(0.9, 0.4)) / 2; row 1: (bce(0.1, 0.4) + bce(0.1, 0.6)) / 2
  metrics::BinaryCrossentropy smooth({.label_smoothing = 0.2});
  smooth.update_state(f32({0, 1, 0, 0}, {2, 2}), f32({0.6f, 0.4f, 0.4f, 0.6f}, {2, 2}));
  const double row0 = (bce(0.1, 0.6) + bce(0.9, 0.4)) / 2, row1 = (bce(0.1, 0.4) + bce(0.1, 0.6)) / 2;
  CHECK(smooth.result() == Approx((row0 + row1) / 2).epsilon(1e-6));
  // from_logits: label 1 with logit 0 -> softplus(-0) = log 2; label 0 with logit 2 ->
  // softplus(2) = log(1 + e^2)
  metrics::BinaryCrossentropy logits({.from_logits = true});
  logits.update_state(f32({1, 0}, {2, 1}), f32({0, 2}, {2, 1}));
  CHECK(logits.result() == Approx((std::log(2.0) + softplus(2.0)) / 2).epsilon(1e-6));
  CHECK_THROWS_AS(metrics::BinaryCrossentropy({.label_smoothing = 1.5}), ValueError);
}

// ---- CategoricalCrossentropy --------------------------------------------------------------------------

TEST_CASE("metrics::CategoricalCrossentropy with label_smoothing, from_logits and axis", "[metrics][crossentropy]") {
  // Keras' example: one-hot [[0, 1, 0], [0, 0, 1]] against [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]:
  //   -log 0.95 and -log 0.1 -> mean 1.17694; weighted [0.3, 0.7] -> 1.62720
  const Tensor y = f32({0, 1, 0, 0, 0, 1}, {2, 3}), p = f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3});
  metrics::CategoricalCrossentropy m;
  CHECK(m.name() == "categorical_crossentropy");
  m.update_state(y, p);
  CHECK(m.result() == Approx((-std::log(0.95) - std::log(0.1)) / 2).epsilon(1e-5));
  m.reset_state();
  m.update_state(y, p, f32({0.3f, 0.7f}));
  CHECK(m.result() == Approx(0.3 * -std::log(0.95) + 0.7 * -std::log(0.1)).epsilon(1e-5));

  // label_smoothing 0.3 over 3 classes: labels y (1 - 0.3) + 0.1, probabilities clipped to
  // [1e-7, 1 - 1e-7]:
  //   row 0: -(0.1 log 0.05 + 0.8 log 0.95 + 0.1 log 1e-7); row 1: -(0.1 log 0.1 + 0.1 log 0.8 + 0.8 log 0.1)
  metrics::CategoricalCrossentropy smooth({.label_smoothing = 0.3});
  smooth.update_state(y, p);
  const double s0 = -(0.1 * std::log(0.05) + 0.8 * std::log(0.95) + 0.1 * std::log(1e-7));
  const double s1 = -(0.1 * std::log(0.1) + 0.1 * std::log(0.8) + 0.8 * std::log(0.1));
  CHECK(smooth.result() == Approx((s0 + s1) / 2).epsilon(1e-4));

  // from_logits: logits [1, 2, 3] with class 2 -> log(e + e^2 + e^3) - 3
  metrics::CategoricalCrossentropy logits({.from_logits = true});
  logits.update_state(f32({0, 0, 1}, {1, 3}), f32({1, 2, 3}, {1, 3}));
  CHECK(logits.result() == Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3).epsilon(1e-6));

  // axis 0: the classes run down the columns. Labels [[0, 1], [1, 0]] and predictions
  // [[0.2, 0.7], [0.8, 0.3]]: column 0 is class 1 with probability 0.8, column 1 class 0 with
  // 0.7 -> (-log 0.8 - log 0.7) / 2. Along the rows (axis -1) it would be
  // (-log(0.7 / 0.9) - log(0.8 / 1.1)) / 2 (each row normalised to sum 1).
  const Tensor ya = f32({0, 1, 1, 0}, {2, 2}), pa = f32({0.2f, 0.7f, 0.8f, 0.3f}, {2, 2});
  metrics::CategoricalCrossentropy by_column({.axis = 0});
  metrics::CategoricalCrossentropy by_row;
  by_column.update_state(ya, pa);
  by_row.update_state(ya, pa);
  CHECK(by_column.result() == Approx((-std::log(0.8) - std::log(0.7)) / 2).epsilon(1e-6));
  CHECK(by_row.result() == Approx((-std::log(0.7 / 0.9) - std::log(0.8 / 1.1)) / 2).epsilon(1e-6));
  CHECK(by_column.axis() == 0);
}

// ---- SparseCategoricalCrossentropy --------------------------------------------------------------------

TEST_CASE("metrics::SparseCategoricalCrossentropy over updates and with from_logits", "[metrics][crossentropy]") {
  // Keras' example: labels [1, 2] -> -log 0.95 and -log 0.1 -> 1.17694; weighted [0.3, 0.7] -> 1.62720
  const Tensor p = f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3});
  metrics::SparseCategoricalCrossentropy m;
  CHECK(m.name() == "sparse_categorical_crossentropy");
  m.update_state(i64({1, 2}, {2}), p);
  CHECK(m.result() == Approx(1.1769392).epsilon(1e-5));
  // update 2: labels [[0]] ([N, 1]) against [[0.5, 0.25, 0.25]] -> -log 0.5; three samples now
  m.update_state(i64({0}, {1, 1}), f32({0.5f, 0.25f, 0.25f}, {1, 3}));
  CHECK(m.result() == Approx((-std::log(0.95) - std::log(0.1) - std::log(0.5)) / 3).epsilon(1e-5));
  m.reset_state();
  m.update_state(f32({1, 2}), p, f32({0.3f, 0.7f}));  // float labels 1.0 and 2.0 are classes 1 and 2
  CHECK(m.result() == Approx(1.6271976).epsilon(1e-5));
  // from_logits: logits [1, 9, 0] with class 1 -> log(e + e^9 + 1) - 9
  metrics::SparseCategoricalCrossentropy logits({.from_logits = true});
  logits.update_state(i64({1}, {1}), f32({1, 9, 0}, {1, 3}));
  CHECK(logits.result() == Approx(std::log(std::exp(1.0) + std::exp(9.0) + 1) - 9).epsilon(1e-4));
}

TEST_CASE("metrics::SparseCategoricalCrossentropy leaves ignore_class out of the mean", "[metrics][crossentropy]") {
  // Keras' test data: ignore_class 0, labels [0, 1, 2], predictions
  // [[0.8, 0.1, 0.1], [0.05, 0.95, 0], [0.1, 0.8, 0.1]]: the first entry is left out.
  const Tensor y = i64({0, 1, 2}, {3});
  const Tensor p = f32({0.8f, 0.1f, 0.1f, 0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {3, 3});
  const double l1 = -std::log(0.95), l2 = -std::log(0.1);
  // Weighted [0.5, 1.5, 2]: (1.5 l1 + 2 l2) / 3.5 = 1.33775, Keras' value.
  metrics::SparseCategoricalCrossentropy weighted({.ignore_class = 0});
  weighted.update_state(y, p, f32({0.5f, 1.5f, 2.0f}));
  CHECK(weighted.result() == Approx((1.5 * l1 + 2 * l2) / 3.5).epsilon(1e-5));
  CHECK(weighted.result() == Approx(1.33774646).epsilon(1e-5));
  // Unweighted: (l1 + l2) / 2, the two entries that count (Keras 3 divides by 3 here).
  metrics::SparseCategoricalCrossentropy plain({.ignore_class = 0});
  plain.update_state(y, p);
  CHECK(plain.result() == Approx((l1 + l2) / 2).epsilon(1e-5));
  // from_logits (Keras' logits): rows 1 and 2 count:
  //   log(e + e^9 + 1) - 9 and log(e + e^8 + e) - 1
  metrics::SparseCategoricalCrossentropy logits({.from_logits = true, .ignore_class = 0});
  logits.update_state(y, f32({10, 1, 1, 1, 9, 0, 1, 8, 1}, {3, 3}));
  const double g1 = std::log(std::exp(1.0) + std::exp(9.0) + 1) - 9;
  const double g2 = std::log(2 * std::exp(1.0) + std::exp(8.0)) - 1;
  CHECK(logits.result() == Approx((g1 + g2) / 2).epsilon(1e-4));

  // Per-timestep labels [N, T] = [[1, -1], [2, 0]] with ignore_class -1 (padding) and
  // predictions [2, 2, 3]: entries (0,0) -log 0.8, (1,0) -log 0.6, (1,1) -log 0.5 count.
  const Tensor seq_y = i64({1, -1, 2, 0}, {2, 2});
  const Tensor seq_p = f32({0.1f, 0.8f, 0.1f, 0.3f, 0.3f, 0.4f, 0.2f, 0.2f, 0.6f, 0.5f, 0.25f, 0.25f}, {2, 2, 3});
  const double a = -std::log(0.8), b = -std::log(0.6), c = -std::log(0.5);
  metrics::SparseCategoricalCrossentropy padded({.ignore_class = -1});
  padded.update_state(seq_y, seq_p);
  CHECK(padded.result() == Approx((a + b + c) / 3).epsilon(1e-5));
  // update 2 with per-sample weights [1, 3], applied to each entry of its sample: the counting
  // entries weigh 1, 3, 3 -> totals (a + b + c) + (a + 3 b + 3 c), weights 3 + 7
  padded.update_state(seq_y, seq_p, f32({1, 3}));
  CHECK(padded.result() == Approx((2 * a + 4 * b + 4 * c) / 10).epsilon(1e-5));
  // Every label ignored: nothing counts, the result stays 0 (not NaN).
  metrics::SparseCategoricalCrossentropy none({.ignore_class = 1});
  none.update_state(i64({1, 1}, {2}), f32({0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f}, {2, 3}));
  CHECK(none.result() == 0.0);
}

// ---- names, configs, errors -----------------------------------------------------------------------------

TEST_CASE("cross-entropy metrics resolve by name and class name", "[metrics][crossentropy][resolve]") {
  auto bce = metrics::get("binary_crossentropy");
  CHECK(dynamic_cast<metrics::BinaryCrossentropy*>(bce.get()) != nullptr);
  CHECK(bce->name() == "binary_crossentropy");
  CHECK(bce->class_name() == "BinaryCrossentropy");
  CHECK(bce->direction() == "down");
  CHECK(metrics::get("bce")->name() == "bce");  // Keras' alias, reported under its own name
  CHECK(dynamic_cast<metrics::BinaryCrossentropy*>(metrics::get("BCE").get()) != nullptr);
  CHECK(dynamic_cast<metrics::BinaryCrossentropy*>(metrics::get("BinaryCrossentropy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::CategoricalCrossentropy*>(metrics::get("categorical_crossentropy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::CategoricalCrossentropy*>(metrics::get("CategoricalCrossentropy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::SparseCategoricalCrossentropy*>(
            metrics::get("sparse_categorical_crossentropy").get()) != nullptr);
  CHECK(dynamic_cast<metrics::SparseCategoricalCrossentropy*>(metrics::get("SparseCategoricalCrossentropy").get()) !=
        nullptr);
  const metrics::MetricRef by_name = "sparse_categorical_crossentropy";
  CHECK(dynamic_cast<metrics::SparseCategoricalCrossentropy*>(by_name.get().get()) != nullptr);
  const metrics::MetricRef object = metrics::CategoricalCrossentropy({.name = "cce", .from_logits = true});
  CHECK(object.name() == "cce");
  CHECK(dynamic_cast<metrics::CategoricalCrossentropy*>(object.get().get())->from_logits());
}

TEST_CASE("cross-entropy metric configs are Keras' and round-trip through from_config", "[metrics][crossentropy][config]") {
  const metrics::BinaryCrossentropy bce({.name = "b", .from_logits = true, .label_smoothing = 0.1});
  const nlohmann::json b = bce.get_config();
  CHECK(b == nlohmann::json{{"name", "b"}, {"dtype", "float32"}, {"from_logits", true}, {"label_smoothing", 0.1}});
  const nlohmann::json c = metrics::CategoricalCrossentropy({.label_smoothing = 0.2, .axis = 0}).get_config();
  CHECK(c == nlohmann::json{{"name", "categorical_crossentropy"}, {"dtype", "float32"}, {"from_logits", false},
                            {"label_smoothing", 0.2}, {"axis", 0}});
  const nlohmann::json s = metrics::SparseCategoricalCrossentropy({.ignore_class = -1}).get_config();
  CHECK(s == nlohmann::json{{"name", "sparse_categorical_crossentropy"}, {"dtype", "float32"}, {"from_logits", false},
                            {"ignore_class", -1}, {"axis", -1}});
  CHECK(metrics::SparseCategoricalCrossentropy().get_config().at("ignore_class").is_null());
  // from_config: the same class and options back, and the same values on data.
  for (const auto& [cls, config] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"BinaryCrossentropy", b}, {"CategoricalCrossentropy", c}, {"SparseCategoricalCrossentropy", s}}) {
    const auto m = metrics::from_config(cls, config);
    CHECK(m->class_name() == cls);
    CHECK(m->get_config() == config);
  }
  auto rebuilt = metrics::from_config("BinaryCrossentropy", b);
  rebuilt->update_state(f32({1, 0}, {2, 1}), f32({0, 2}, {2, 1}));
  metrics::BinaryCrossentropy original({.from_logits = true, .label_smoothing = 0.1});
  original.update_state(f32({1, 0}, {2, 1}), f32({0, 2}, {2, 1}));
  CHECK(rebuilt->result() == Approx(original.result()));
  CHECK(rebuilt->name() == "b");
  // Missing entries take the defaults; a wrong type names the class and the entry.
  CHECK(metrics::from_config("SparseCategoricalCrossentropy", nlohmann::json::object())->name() ==
        "sparse_categorical_crossentropy");
  CHECK_THROWS_WITH(metrics::from_config("BinaryCrossentropy", {{"from_logits", "yes"}}),
                    Contains("BinaryCrossentropy") && Contains("from_logits"));
  CHECK_THROWS_WITH(metrics::from_config("MeanMetricWrapper", nlohmann::json::object()),
                    Contains("cannot be rebuilt"));
}

TEST_CASE("cross-entropy metrics name themselves and the shapes on bad input", "[metrics][crossentropy][errors]") {
  metrics::BinaryCrossentropy bce;
  CHECK_THROWS_AS(bce.update_state(f32({1, 0, 1, 0, 1, 0}, {2, 3}), f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})),
                  ShapeError);
  CHECK_THROWS_WITH(bce.update_state(f32({1, 0, 1, 0, 1, 0}, {2, 3}), f32({0.5f, 0.5f, 0.5f, 0.5f}, {2, 2})),
                    Contains("binary_crossentropy (BinaryCrossentropy): y_true [2,3], y_pred [2,2]"));
  CHECK(bce.result() == 0.0);
  metrics::CategoricalCrossentropy cce;
  CHECK_THROWS_AS(cce.update_state(f32({0, 1}, {1, 2}), f32({0.2f, 0.3f, 0.5f}, {1, 3})), ShapeError);
  // The sparse one: labels that do not match the predictions' leading axes, and a label outside
  // the classes, with and without ignore_class.
  metrics::SparseCategoricalCrossentropy scce;
  CHECK_THROWS_WITH(scce.update_state(i64({0, 1, 2}, {3}), f32({0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f}, {2, 3})),
                    Contains("SparseCategoricalCrossentropy") && Contains("[3]") && Contains("[2,3]"));
  CHECK_THROWS_WITH(scce.update_state(i64({5}, {1}), f32({0.2f, 0.3f, 0.5f}, {1, 3})),
                    Contains("SparseCategoricalCrossentropy"));
  metrics::SparseCategoricalCrossentropy ignoring({.ignore_class = -1});
  CHECK_THROWS_WITH(ignoring.update_state(i64({5}, {1}), f32({0.2f, 0.3f, 0.5f}, {1, 3})),
                    Contains("SparseCategoricalCrossentropy"));
}

TEST_CASE("compiled metrics keep their options through model save and load", "[metrics][config][saving]") {
  // Saving writes each metric object as {class_name, config}; loading rebuilds it with
  // metrics::from_config (names stay names).
  auto model = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{4}), std::make_shared<layers::Dense>(3)});
  model->compile({.optimizer = "sgd",
                  .loss = losses::BinaryCrossentropy({.from_logits = true}),
                  .metrics = {metrics::BinaryCrossentropy({.name = "bce_logits", .from_logits = true,
                                                           .label_smoothing = 0.1}),
                              metrics::SparseCategoricalCrossentropy({.ignore_class = 2}),
                              metrics::Precision({.thresholds = {0.3, 0.7}}),
                              metrics::Recall({.thresholds = 0.4}),
                              metrics::AUC({.multi_label = true, .num_labels = 3, .label_weights = {1, 2, 3}}),
                              "categorical_crossentropy"}});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("keel_test_metrics_saving_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.keel").string();
  model->save(path);
  const auto loaded = models::load_model(path);
  std::filesystem::remove_all(dir);
  const auto before = model->metrics(), after = loaded->metrics();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    INFO(before[i]->name());
    CHECK(after[i]->class_name() == before[i]->class_name());
    CHECK(after[i]->name() == before[i]->name());
    CHECK(after[i]->get_config() == before[i]->get_config());
  }
}
