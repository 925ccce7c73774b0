// Magnitude pruning (tfmot.sparsity.keras): schedules, masks, the wrapper in training, strip,
// save/load and the summaries. Expected values are derived by hand from tfmot's formulas
// (pruning_schedule.py, pruning_impl.py, pruning_utils.py) in the comments.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <filesystem>
#include <set>

#include "event_files.hpp"
#include "scratch.hpp"

using namespace keel;

namespace {

// A wrapper around a Dense(units) built on inputs of `in` features, its kernel set to `k`.
std::shared_ptr<pruning::PruneLowMagnitude> wrapped_dense(std::int64_t in, int units, const std::vector<float>& k,
                                                          pruning::PruningSchedule s, pruning::PruningOptions o = {}) {
  auto w = std::make_shared<pruning::PruneLowMagnitude>(std::make_shared<layers::Dense>(units), s, o);
  (*w)(zeros(Shape{1, in}));
  auto& dense = dynamic_cast<layers::Dense&>(*w->layer());
  dense.kernel().assign(constant(k, Shape{in, units}));
  return w;
}

std::vector<float> values(const Variable* v) { return v->peek().to_vector<float>(); }

std::shared_ptr<models::Sequential> small_model() {
  return std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{6}), std::make_shared<layers::Dense>(8, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dense>(3)});
}

std::pair<Tensor, Tensor> toy_data(std::int64_t n) {
  random::set_seed(3);
  Tensor x = random::normal({n, 6});
  Tensor y = random::normal({n, 3});
  return {x, y};
}

callbacks::CallbackList with_pruning_step() { return {std::make_shared<callbacks::UpdatePruningStep>()}; }

}  // namespace

TEST_CASE("PolynomialDecay and ConstantSparsity follow tfmot's formulas", "[pruning]") {
  const pruning::PolynomialDecay p{.initial_sparsity = 0.2, .final_sparsity = 0.8, .begin_step = 10,
                                   .end_step = 110, .power = 3, .frequency = 10};
  // step 10: p = 0 -> 0.8 + (0.2 - 0.8) * 1^3 = 0.2; prune: (10 - 10) % 10 == 0.
  auto d = pruning::evaluate(p, 10);
  CHECK(d.should_prune);
  CHECK(d.sparsity == Approx(0.2).epsilon(1e-6));
  // step 60: p = 50/100 = 0.5 -> 0.8 - 0.6 * 0.5^3 = 0.8 - 0.075 = 0.725.
  d = pruning::evaluate(p, 60);
  CHECK(d.should_prune);
  CHECK(d.sparsity == Approx(0.725).epsilon(1e-6));
  // step 35: p = 0.25 -> 0.8 - 0.6 * 0.75^3 = 0.8 - 0.253125 = 0.546875; (35 - 10) % 10 = 5: no update.
  d = pruning::evaluate(p, 35);
  CHECK_FALSE(d.should_prune);
  CHECK(d.sparsity == Approx(0.546875).epsilon(1e-6));
  // step 110 = end_step: still in range, sparsity final; step 120: past the end, no update.
  CHECK(pruning::evaluate(p, 110).should_prune);
  CHECK(pruning::evaluate(p, 110).sparsity == Approx(0.8).epsilon(1e-6));
  CHECK_FALSE(pruning::evaluate(p, 120).should_prune);
  CHECK(pruning::evaluate(p, 120).sparsity == Approx(0.8).epsilon(1e-6));
  // Before begin_step: p clamps to 0 (initial sparsity), no update.
  CHECK_FALSE(pruning::evaluate(p, 0).should_prune);
  CHECK(pruning::evaluate(p, 0).sparsity == Approx(0.2).epsilon(1e-6));

  // ConstantSparsity with end_step = -1 prunes forever every `frequency` steps from begin_step.
  const pruning::ConstantSparsity c{.target_sparsity = 0.7, .begin_step = 5, .end_step = -1, .frequency = 4};
  CHECK(pruning::evaluate(c, 5).should_prune);
  CHECK_FALSE(pruning::evaluate(c, 6).should_prune);
  CHECK(pruning::evaluate(c, 9).should_prune);
  CHECK(pruning::evaluate(c, 5 + 4 * 250000).should_prune);
  CHECK_FALSE(pruning::evaluate(c, 4).should_prune);
  CHECK(pruning::evaluate(c, 9).sparsity == Approx(0.7).epsilon(1e-6));
  // With an end step, nothing after it.
  CHECK_FALSE(pruning::evaluate(pruning::ConstantSparsity{.target_sparsity = 0.5, .end_step = 100, .frequency = 50}, 150)
                  .should_prune);

  // tfmot's validation.
  CHECK_THROWS_AS(pruning::validate(pruning::PolynomialDecay{.end_step = -1}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::PolynomialDecay{.begin_step = 10, .end_step = 5}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::PolynomialDecay{.final_sparsity = 1.0}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::ConstantSparsity{.target_sparsity = -0.1}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::ConstantSparsity{.begin_step = -1}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::ConstantSparsity{.frequency = 0}), ValueError);
  CHECK_THROWS_AS(pruning::validate(pruning::ConstantSparsity{.end_step = -2}), ValueError);
  CHECK_NOTHROW(pruning::validate(pruning::ConstantSparsity{}));
}

TEST_CASE("the magnitude mask keeps round(size * (1 - sparsity)) weights, ties at the threshold kept", "[pruning]") {
  // |w| = [0.1, 0.5, 0.3, 0.3, 0.2, 0.0], size 6.
  const std::vector<float> k = {0.1f, -0.5f, 0.3f, -0.3f, 0.2f, 0.0f};
  // sparsity 0.5: k = round(6 * 0.5) = 3; sorted |w| = [0.5, 0.3, 0.3, 0.2, 0.1, 0]: threshold
  // values[2] = 0.3, mask = |w| >= 0.3.
  auto w = wrapped_dense(6, 1, k, pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 0, .frequency = 1});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{0, 1, 1, 1, 0, 0});
  CHECK(values(w->pruning_vars()[0].threshold)[0] == Approx(0.3f));
  // sparsity 0.6: k = round(6 * 0.4 = 2.4) = 2, threshold values[1] = 0.3: both 0.3s stay (3 kept).
  w = wrapped_dense(6, 1, k, pruning::ConstantSparsity{.target_sparsity = 0.6, .begin_step = 0, .frequency = 1});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{0, 1, 1, 1, 0, 0});
  // size 5, sparsity 0.5: 5 * 0.5 = 2.5 rounds half to even: 2 kept (|w| = 0.4, 0.5).
  w = wrapped_dense(5, 1, {0.1f, 0.4f, -0.2f, 0.5f, 0.3f},
                    pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 0, .frequency = 1});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{0, 1, 0, 1, 0});
  // Masks apply to the weights only when asked (tfmot's weight_mask_op).
  CHECK(dynamic_cast<layers::Dense&>(*w->layer()).kernel().peek().to_vector<float>()[0] == 0.1f);
  w->apply_masks();
  CHECK(dynamic_cast<layers::Dense&>(*w->layer()).kernel().peek().to_vector<float>() ==
        std::vector<float>{0, 0.4f, 0, 0.5f, 0});
}

TEST_CASE("masks update only at the schedule's steps", "[pruning]") {
  auto w = wrapped_dense(4, 2, {1, 2, 3, 4, 5, 6, 7, 8},
                         pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 2, .end_step = 9, .frequency = 3});
  // Pruning steps: 2, 5, 8 ((step - 2) % 3 == 0 within [2, 9]).
  std::vector<std::int64_t> pruned_at;
  for (std::int64_t s = 0; s <= 12; ++s) {
    w->set_pruning_step(s);
    if (w->update_masks()) pruned_at.push_back(s);
  }
  CHECK(pruned_at == std::vector<std::int64_t>{2, 5, 8});
  CHECK(w->pruning_step() == 12);

  // In fit: the step of batch b (1-based) is b; frequency 2 from step 0 prunes at steps 2, 4, 6.
  auto model = small_model();
  auto pruned = pruning::prune_low_magnitude(*model, pruning::ConstantSparsity{.target_sparsity = 0.5, .frequency = 2});
  pruned->compile({.optimizer = std::make_shared<optimizers::SGD>(0.01), .loss = "mse"});
  auto* first = pruning::collect_prunable_layers(*pruned)[0];
  struct Recorder : callbacks::Callback {
    pruning::PruneLowMagnitude* w;
    std::vector<double> kept;
    std::vector<std::int64_t> steps;
    void on_train_batch_end(std::int64_t, const callbacks::Logs&) override {
      kept.push_back(reduce_mean(w->pruning_vars()[0].mask->peek()).item<double>());
      steps.push_back(w->pruning_step());
    }
  };
  auto rec = std::make_shared<Recorder>();
  rec->w = first;
  auto [x, y] = toy_data(48);
  pruned->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .callbacks = {std::make_shared<callbacks::UpdatePruningStep>(), rec}});
  CHECK(rec->steps == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  // Step 1: no update (mask all ones); from step 2 on: half of the 6 * 8 kernel entries.
  CHECK(rec->kept == std::vector<double>{1.0, 0.5, 0.5, 0.5, 0.5, 0.5});
}

TEST_CASE("masked weights stay exactly zero through SGD with momentum and Adam", "[pruning]") {
  for (bool adam : {false, true}) {
    INFO((adam ? "Adam, run eagerly" : "SGD momentum, traced steps"));
    auto model = small_model();
    // One mask update, at step 1; the optimizers' state keeps moving the weights afterwards.
    auto pruned = pruning::prune_low_magnitude(
        *model, pruning::ConstantSparsity{.target_sparsity = 0.75, .begin_step = 0, .end_step = 1, .frequency = 1});
    optimizers::OptimizerRef opt = adam ? optimizers::OptimizerRef(std::make_shared<optimizers::Adam>(0.05))
                                        : optimizers::OptimizerRef(std::make_shared<optimizers::SGD>(
                                              0.05, optimizers::SGDOptions{.momentum = 0.9}));
    pruned->compile({.optimizer = opt, .loss = "mse", .run_eagerly = adam});
    auto [x, y] = toy_data(64);
    pruned->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = with_pruning_step()});
    for (auto* w : pruning::collect_prunable_layers(*pruned)) {
      const auto& p = w->pruning_vars()[0];
      const std::vector<float> mask = values(p.mask), kernel = values(p.weight);
      const std::vector<float> original = model->get_layer(w->layer()->name())->weights()[0]->peek().to_vector<float>();
      std::size_t zeros = 0, moved = 0;
      for (std::size_t i = 0; i < mask.size(); ++i) {
        if (mask[i] == 0.0f) {
          ++zeros;
          CHECK(kernel[i] == 0.0f);
        } else if (kernel[i] != original[i]) {
          ++moved;
        }
      }
      // 75% of 6 * 8 = 36 (first layer) or of 8 * 3 = 18 (second layer).
      CHECK(zeros == static_cast<std::size_t>(std::lround(0.75 * static_cast<double>(mask.size()))));
      CHECK(moved > 0);  // the kept weights did train
    }
    CHECK(pruning::sparsity(*pruned) == Approx(0.75));
    // The original model is unchanged.
    CHECK(pruning::sparsity(*model) == 0.0);
  }
}

TEST_CASE("the wrapper's gradient of a masked weight is zero", "[pruning]") {
  auto w = wrapped_dense(4, 1, {0.1f, -2.0f, 0.3f, 1.5f},
                         pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 0, .frequency = 1});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());  // keeps -2.0 and 1.5
  auto& kernel = dynamic_cast<layers::Dense&>(*w->layer()).kernel();
  // Without apply_masks the stored kernel still holds 0.1 and 0.3; a tape sees weight * mask's
  // gradient: d/dk sum(x k) = x, times the mask [0, 1, 0, 1].
  const Tensor x = constant({1.0f, 2.0f, 3.0f, 4.0f}, Shape{1, 4});
  GradientTape tape;
  Tensor loss = reduce_sum((*w)(x));
  const Tensor g = tape.gradient(loss, kernel);
  CHECK(g.to_vector<float>() == std::vector<float>{0.0f, 2.0f, 0.0f, 4.0f});
}

TEST_CASE("sparsity_m_by_n 2:4 zeroes the 2 smallest of every 4 input weights", "[pruning]") {
  // Dense kernel [in = 8, out = 2], row-major (i, j) at i * 2 + j. Column 0 rows 0-3:
  // [0.1, -0.9, 0.5, 0.2] -> keeps rows 1, 2; rows 4-7: [0.3, 0.3, 0.3, 0.1] -> ties keep the
  // lower indices 4, 5. Column 1 rows 0-3: [4, 3, 2, 1] -> rows 0, 1; rows 4-7: [-1, 0, 0, 5] -> rows 4, 7.
  const std::vector<float> k = {0.1f, 4, -0.9f, 3, 0.5f, 2, 0.2f, 1, 0.3f, -1, 0.3f, 0, 0.3f, 0, 0.1f, 5};
  auto w = wrapped_dense(8, 2, k, pruning::ConstantSparsity{.target_sparsity = 0.1, .begin_step = 0, .frequency = 1},
                         {.sparsity_m_by_n = std::array<int, 2>{2, 4}});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1});
  CHECK(values(w->pruning_vars()[0].threshold)[0] == 999.0f);  // tfmot's placeholder

  // A Conv2D kernel [3, 3, in = 8, out = 4]: every (h, w, out) group of 4 inputs keeps exactly 2.
  auto conv = std::make_shared<pruning::PruneLowMagnitude>(
      std::make_shared<layers::Conv2D>(4, std::array<int, 2>{3, 3}), pruning::ConstantSparsity{.begin_step = 0, .frequency = 1},
      pruning::PruningOptions{.sparsity_m_by_n = std::array<int, 2>{2, 4}});
  (*conv)(zeros(Shape{1, 5, 5, 8}));
  conv->set_pruning_step(1);
  REQUIRE(conv->update_masks());
  const std::vector<float> kern = values(conv->pruning_vars()[0].weight);
  const std::vector<float> mask = values(conv->pruning_vars()[0].mask);
  for (int hw = 0; hw < 9; ++hw)
    for (int o = 0; o < 4; ++o)
      for (int g = 0; g < 8; g += 4) {
        float kept_min = 1e30f, dropped_max = -1;
        int kept = 0;
        for (int i = g; i < g + 4; ++i) {
          const std::size_t at = static_cast<std::size_t>((hw * 8 + i) * 4 + o);
          if (mask[at] == 1.0f) {
            ++kept;
            kept_min = std::min(kept_min, std::fabs(kern[at]));
          } else {
            dropped_max = std::max(dropped_max, std::fabs(kern[at]));
          }
        }
        CHECK(kept == 2);
        CHECK(kept_min >= dropped_max);
      }
  // A training run keeps the pattern and the zeros.
  auto model = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{6}), std::make_shared<layers::Dense>(8)});
  auto pruned = pruning::prune_low_magnitude(*model, pruning::ConstantSparsity{.begin_step = 0, .frequency = 1},
                                             {.sparsity_m_by_n = std::array<int, 2>{2, 4}});
  pruned->compile({.optimizer = std::make_shared<optimizers::Adam>(0.01), .loss = "mse"});
  random::set_seed(5);
  pruned->fit(random::normal({32, 6}), random::normal({32, 8}), {.batch_size = 8, .verbose = 0, .callbacks = with_pruning_step()});
  const auto kernel = values(pruning::collect_prunable_layers(*pruned)[0]->pruning_vars()[0].weight);
  // in = 6: groups rows 0-3 (2 kept) and rows 4-5 (a partial group of 2: both kept).
  for (int o = 0; o < 8; ++o) {
    int nz = 0;
    for (int i = 0; i < 4; ++i) nz += kernel[static_cast<std::size_t>(i * 8 + o)] != 0.0f;
    CHECK(nz <= 2);
  }
}

TEST_CASE("block_size pools magnitudes over blocks (tfmot's block sparsity)", "[pruning]") {
  // Kernel [2, 4] = [[1, 3, 0.5, 0.5], [2, 2, 4, 0]], block {1, 2}, AVG: pooled [[2, 0.5], [2, 2]];
  // sparsity 0.5: k = round(4 * 0.5) = 2, sorted [2, 2, 2, 0.5], threshold 2: three blocks stay.
  auto w = wrapped_dense(2, 4, {1, 3, 0.5f, 0.5f, 2, 2, 4, 0},
                         pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 0, .frequency = 1},
                         {.block_size = {1, 2}});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{1, 1, 0, 0, 1, 1, 1, 1});
  CHECK(values(w->pruning_vars()[0].threshold)[0] == 2.0f);
  // MAX pooling: pooled [[3, 0.5], [2, 4]]: threshold values[1] = 3: blocks (0,0), (1,1) stay.
  w = wrapped_dense(2, 4, {1, 3, 0.5f, 0.5f, 2, 2, 4, 0},
                    pruning::ConstantSparsity{.target_sparsity = 0.5, .begin_step = 0, .frequency = 1},
                    {.block_size = {1, 2}, .block_pooling_type = "MAX"});
  w->set_pruning_step(1);
  REQUIRE(w->update_masks());
  CHECK(values(w->pruning_vars()[0].mask) == std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1});
  // Block sparsity needs rank-2 weights (a Conv2D kernel is rank 4).
  auto conv = std::make_shared<pruning::PruneLowMagnitude>(std::make_shared<layers::Conv2D>(2, std::array<int, 2>{3, 3}),
                                                           pruning::ConstantSparsity{},
                                                           pruning::PruningOptions{.block_size = {2, 2}});
  CHECK_THROWS_AS((*conv)(zeros(Shape{1, 5, 5, 3})), ValueError);
}

TEST_CASE("strip_pruning gives plain layers with the zeros and the same predictions", "[pruning]") {
  auto model = small_model();
  auto pruned = pruning::prune_low_magnitude(
      *model, pruning::PolynomialDecay{.initial_sparsity = 0.3, .final_sparsity = 0.6, .begin_step = 0, .end_step = 4,
                                       .frequency = 2});
  // Layer names follow tfmot: prune_low_magnitude_<layer>.
  CHECK(pruned->layers()[0]->name() == "prune_low_magnitude_" + model->layers()[0]->name());
  CHECK(pruned->layers()[0]->class_name() == "PruneLowMagnitude");
  pruned->compile({.optimizer = "adam", .loss = "mse"});
  auto [x, y] = toy_data(32);
  pruned->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .callbacks = with_pruning_step()});
  // Steps 1-4; updates at 2 (p = 0.5: 0.6 - 0.3 * 0.125 = 0.5625) and 4 (p = 1: 0.6).
  // First kernel 48 entries: k = round(48 * 0.4) = round(19.2) = 19 kept -> 29 zeros; second 24:
  // round(9.6) = 10 kept -> 14 zeros. Sparsity (29 + 14) / 72.
  CHECK(pruning::sparsity(*pruned) == Approx(43.0 / 72.0));
  auto stripped = pruning::strip_pruning(*pruned);
  for (const auto& l : stripped->layers()) CHECK(l->class_name() == "Dense");
  CHECK(stripped->layers()[0]->name() == model->layers()[0]->name());
  CHECK(pruning::sparsity(*stripped) == Approx(43.0 / 72.0));
  const auto a = pruned->predict(x).to_vector<float>(), b = stripped->predict(x).to_vector<float>();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);
  CHECK(pruned->evaluate(x, y, {.verbose = 0}).at("loss") == Approx(0.0).margin(100));
}

TEST_CASE("pruned models save and load with their masks, functional models too", "[pruning]") {
  keel_test::Scratch dir("pruning_save");
  auto in = models::Input(Shape{6}, DType::float32, "features");
  auto h = layers::Dense(8, {.activation = "relu", .name = "hidden"})(in);
  auto out = layers::Dense(3, {.name = "head"})(h);
  models::Model model(in, out, "functional");
  auto pruned = pruning::prune_low_magnitude(model, pruning::ConstantSparsity{.target_sparsity = 0.5, .frequency = 1});
  CHECK(pruned->get_layer("prune_low_magnitude_hidden") != nullptr);
  pruned->compile({.optimizer = std::make_shared<optimizers::SGD>(0.05, optimizers::SGDOptions{.momentum = 0.9}), .loss = "mse"});
  auto [x, y] = toy_data(24);
  pruned->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .callbacks = with_pruning_step()});
  for (const std::string path : {dir / "pruned.keel", dir / "pruned_dir"}) {
    pruned->save(path);
    auto loaded = models::load_model(path);
    auto wrappers = pruning::collect_prunable_layers(*loaded);
    REQUIRE(wrappers.size() == 2);
    auto originals = pruning::collect_prunable_layers(*pruned);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(values(wrappers[i]->pruning_vars()[0].mask) == values(originals[i]->pruning_vars()[0].mask));
      CHECK(values(wrappers[i]->pruning_vars()[0].weight) == values(originals[i]->pruning_vars()[0].weight));
      CHECK(wrappers[i]->pruning_step() == 3);
    }
    CHECK(loaded->predict(x).to_vector<float>() == pruned->predict(x).to_vector<float>());
    CHECK(pruning::sparsity(*loaded) == Approx(0.5));
    // Training goes on after loading (the optimizer state came back).
    loaded->fit(x, y, {.batch_size = 8, .verbose = 0, .callbacks = with_pruning_step()});
    CHECK(pruning::collect_prunable_layers(*loaded)[0]->pruning_step() == 6);
  }
  // The stripped functional model keeps the layer names and the graph.
  auto stripped = pruning::strip_pruning(*pruned);
  CHECK(stripped->get_layer("hidden") != nullptr);
  CHECK(stripped->predict(x).to_vector<float>() == pruned->predict(x).to_vector<float>());
}

TEST_CASE("fit without UpdatePruningStep is a ValueError, as tfmot raises", "[pruning]") {
  auto model = small_model();
  auto pruned = pruning::prune_low_magnitude(*model);
  pruned->compile({.optimizer = "sgd", .loss = "mse"});
  auto [x, y] = toy_data(16);
  CHECK_THROWS_AS(pruned->fit(x, y, {.verbose = 0}), ValueError);
  pruned->compile({.optimizer = "sgd", .loss = "mse", .run_eagerly = true});
  CHECK_THROWS_AS(pruned->fit(x, y, {.verbose = 0}), ValueError);
  // Inference does not need it.
  CHECK(pruned->predict(x).shape() == Shape{16, 3});
}

TEST_CASE("prune_low_magnitude wraps the prunable layers only and rejects what it cannot prune", "[pruning]") {
  models::Sequential model({std::make_shared<layers::InputLayer>(Shape{8, 8, 1}),
                            std::make_shared<layers::Conv2D>(4, std::array<int, 2>{3, 3}),
                            std::make_shared<layers::MaxPooling2D>(), std::make_shared<layers::Flatten>(),
                            std::make_shared<layers::Dense>(2)});
  auto pruned = pruning::prune_low_magnitude(model, pruning::PolynomialDecay{});
  std::vector<std::string> classes;
  for (const auto& l : pruned->layers()) classes.push_back(l->class_name());
  CHECK(classes == std::vector<std::string>{"PruneLowMagnitude", "MaxPooling2D", "Flatten", "PruneLowMagnitude"});
  // Weights are copied, the masks start as ones, the step at -1.
  auto* conv = pruning::collect_prunable_layers(*pruned)[0];
  CHECK(values(conv->pruning_vars()[0].weight) == model.layers()[0]->weights()[0]->peek().to_vector<float>());
  CHECK(reduce_min(conv->pruning_vars()[0].mask->peek()).item<float>() == 1.0f);
  CHECK(conv->pruning_step() == -1);
  // A wrapped model wraps nothing twice.
  auto again = pruning::prune_low_magnitude(*pruned);
  CHECK(pruning::collect_prunable_layers(*again).size() == 2);

  // Recurrent and embedding layers prune their kernels (LSTM: kernel and recurrent_kernel).
  auto lstm = std::dynamic_pointer_cast<pruning::PruneLowMagnitude>(
      pruning::prune_low_magnitude(std::make_shared<layers::LSTM>(3)));
  (*lstm)(zeros(Shape{2, 5, 4}));
  REQUIRE(lstm->pruning_vars().size() == 2);
  CHECK(lstm->pruning_vars()[1].mask->name() == lstm->name() + "/recurrent_kernel_mask");
  auto emb = std::dynamic_pointer_cast<pruning::PruneLowMagnitude>(
      pruning::prune_low_magnitude(std::make_shared<layers::Embedding>(10, 4)));
  (*emb)(constant({1, 2, 3}, Shape{1, 3}, DType::int32));
  CHECK(emb->pruning_vars().size() == 1);

  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Flatten>()), ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(
                      2, layers::DenseOptions{.activity_regularizer = regularizers::Regularizer("l2")})),
                  ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(2), pruning::PolynomialDecay{.end_step = -1}),
                  ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(2), pruning::ConstantSparsity{},
                                               {.sparsity_m_by_n = std::array<int, 2>{4, 4}}),
                  ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(2), pruning::ConstantSparsity{},
                                               {.block_pooling_type = "MIN"}),
                  ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(2), pruning::ConstantSparsity{},
                                               {.block_size = {1, 4}, .sparsity_m_by_n = std::array<int, 2>{2, 4}}),
                  ValueError);
  CHECK_THROWS_AS(pruning::prune_low_magnitude(pruning::prune_low_magnitude(std::make_shared<layers::Dense>(2))),
                  ValueError);
  struct Custom : models::Model {
    Tensor call(const Tensor& x, bool) override { return x; }
  };
  Custom custom;
  CHECK_THROWS_AS(pruning::prune_low_magnitude(custom), ValueError);
}

TEST_CASE("the wrapper's config round-trips and a bad one is a ValueError", "[pruning][serialization]") {
  auto w = std::make_shared<pruning::PruneLowMagnitude>(
      std::make_shared<layers::Dense>(4, layers::DenseOptions{.name = "d"}),
      pruning::PolynomialDecay{.initial_sparsity = 0.1, .final_sparsity = 0.9, .begin_step = 3, .end_step = 30,
                               .power = 2, .frequency = 7},
      pruning::PruningOptions{.block_size = {1, 4}, .block_pooling_type = "MAX"});
  const nlohmann::json c = w->get_config();
  CHECK(c["name"] == "prune_low_magnitude_d");
  CHECK(c["pruning_schedule"]["class_name"] == "PolynomialDecay");
  CHECK(c["pruning_schedule"]["config"]["frequency"] == 7);
  CHECK(c["block_size"] == nlohmann::json::array({1, 4}));
  CHECK(c["layer"]["class_name"] == "Dense");
  auto back = layers::from_config("PruneLowMagnitude", c);
  CHECK(back->get_config() == c);
  nlohmann::json bad = c;
  bad["pruning_schedule"]["class_name"] = "Exponential";
  CHECK_THROWS_AS(layers::from_config("PruneLowMagnitude", bad), ValueError);
  bad = c;
  bad["pruning_schedule"]["config"]["end_step"] = "soon";
  CHECK_THROWS_AS(layers::from_config("PruneLowMagnitude", bad), ValueError);
  bad = c;
  bad.erase("layer");
  CHECK_THROWS_AS(layers::from_config("PruneLowMagnitude", bad), ValueError);
}

TEST_CASE("PruningSummaries writes each mask's sparsity and threshold to TensorBoard", "[pruning]") {
  keel_test::Scratch dir("pruning_summaries");
  auto model = small_model();
  auto pruned = pruning::prune_low_magnitude(*model, pruning::ConstantSparsity{.target_sparsity = 0.5, .frequency = 1});
  pruned->compile({.optimizer = "sgd", .loss = "mse"});
  auto [x, y] = toy_data(16);
  pruned->fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0,
                     .callbacks = {std::make_shared<callbacks::UpdatePruningStep>(),
                                   std::make_shared<callbacks::PruningSummaries>(dir.dir, callbacks::TensorBoardOptions{.write_graph = false})}});
  std::map<std::string, std::vector<std::pair<std::int64_t, float>>> scalars;
  for (const auto& e : std::filesystem::directory_iterator(dir / "train"))
    for (const auto& ev : keel_test::read_events(e.path().string()))
      if (ev.has_summary())
        for (const auto& v : ev.summary().value()) scalars[v.tag()].push_back({ev.step(), v.simple_value()});
  const std::string first = pruning::collect_prunable_layers(*pruned)[0]->name();
  const auto& sp = scalars[first + "/kernel_mask/sparsity"];
  // One value per epoch, at the optimizer's iterations (2 batches per epoch); 50% of the mask is 0.
  REQUIRE(sp.size() == 2);
  CHECK(sp[0].first == 2);
  CHECK(sp[1].first == 4);
  CHECK(sp[1].second == Approx(0.5));
  REQUIRE(scalars[first + "/kernel_threshold/threshold"].size() == 2);
  CHECK(scalars[first + "/kernel_threshold/threshold"][1].second > 0.0f);
  CHECK(scalars.count("epoch_loss") == 1);  // the TensorBoard callback's own logs
}
