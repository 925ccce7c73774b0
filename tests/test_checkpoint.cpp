// Training checkpoints: train::Checkpoint / train::CheckpointManager (max_to_keep, latest,
// restore) and a fit() resumed from a checkpoint ending exactly where an uninterrupted run does.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "scratch.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace keel;
using keel_test::Scratch;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

std::vector<std::vector<float>> all_weights(models::Model& m) {
  std::vector<std::vector<float>> out;
  for (Variable* v : m.weights()) out.push_back(values(v->value()));
  return out;
}

// Dropout (draws from the model's random stream), BatchNormalization (non-trainable state) and Adam
// (slots and an iteration count): everything a resumed run must get back.
std::shared_ptr<models::Sequential> make_model() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{4}), std::make_shared<layers::Dense>(16, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::BatchNormalization>(), std::make_shared<layers::Dropout>(0.3),
      std::make_shared<layers::Dense>(3)});
  m->compile({.optimizer = optimizers::Adam(0.01),
              .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
              .metrics = {"accuracy"}});
  return m;
}

struct Data {
  Tensor x, y;
};

Data make_data() {
  random::set_seed(1234);
  return {random::normal({48, 4}), random::uniform_int({48}, 0, 3)};
}

models::FitOptions fit_options(int epochs, int initial_epoch = 0, callbacks::CallbackList cbs = {}) {
  models::FitOptions o;
  o.batch_size = 16;
  o.epochs = epochs;
  o.verbose = 0;
  o.callbacks = std::move(cbs);
  o.shuffle = true;
  o.initial_epoch = initial_epoch;
  return o;
}

}  // namespace

TEST_CASE("CheckpointManager keeps the newest max_to_keep checkpoints and names the latest", "[checkpoint]") {
  Scratch scratch("keep");
  auto model = make_model();
  train::Checkpoint ckpt(*model);
  train::CheckpointManager manager(ckpt, scratch / "ckpts", 2);
  CHECK(manager.latest_checkpoint().empty());
  CHECK(manager.checkpoints().empty());
  CHECK_FALSE(manager.restore_latest());
  std::vector<std::string> written;
  for (int i = 0; i < 5; ++i) written.push_back(manager.save());
  CHECK(written.back() == scratch / "ckpts/ckpt-5.safetensors");
  CHECK(manager.checkpoints() == std::vector<std::string>{written[3], written[4]});
  CHECK(manager.latest_checkpoint() == written[4]);
  CHECK_FALSE(fs::exists(written[0]));
  CHECK(ckpt.save_counter() == 5);

  // A manager made later (another process) sees them and numbers on.
  train::Checkpoint other(*model);
  train::CheckpointManager later(other, scratch / "ckpts", std::nullopt);
  CHECK(later.latest_checkpoint() == written[4]);
  CHECK(later.save() == scratch / "ckpts/ckpt-6.safetensors");
  CHECK(later.checkpoints().size() == 3);  // max_to_keep = nullopt keeps them all

  CHECK_THROWS_AS(train::CheckpointManager(ckpt, scratch / "x", 0), ValueError);
}

TEST_CASE("Checkpoint::save numbers its files and restore brings back the save counter", "[checkpoint]") {
  Scratch scratch("numbered");
  auto model = make_model();
  train::Checkpoint ckpt(*model);
  CHECK(ckpt.save(scratch / "run") == scratch / "run-1.safetensors");
  CHECK(ckpt.save(scratch / "run") == scratch / "run-2.safetensors");
  train::Checkpoint fresh(*model);
  fresh.restore(scratch / "run-1.safetensors");
  CHECK(fresh.save_counter() == 1);
}

TEST_CASE("restore brings back weights, optimizer slots and iterations, epoch and the random state", "[checkpoint]") {
  Scratch scratch("restore");
  const Data d = make_data();
  random::set_seed(7);
  auto model = make_model();
  model->fit(d.x, d.y, fit_options(2));
  train::Checkpoint ckpt(*model);
  ckpt.set_epoch(2);
  const auto rng = random::get_state();
  ckpt.write(scratch / "c.safetensors");

  random::set_seed(99);  // a fresh process: other initial weights, other random state
  auto restored = make_model();
  train::Checkpoint ckpt2(*restored);
  ckpt2.restore(scratch / "c.safetensors");
  CHECK(ckpt2.epoch() == 2);
  CHECK(all_weights(*restored) == all_weights(*model));
  CHECK(restored->optimizer()->iterations() == model->optimizer()->iterations());
  // The layers of the second model have other names (dense_6 for dense_3): matched by position.
  const auto mine = model->trainable_weights(), theirs = restored->trainable_weights();
  REQUIRE(mine.size() == theirs.size());
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (const char* slot : {"momentum", "velocity"}) {
      Variable* a = model->optimizer()->get_slot(*mine[i], slot);
      Variable* b = restored->optimizer()->get_slot(*theirs[i], slot);
      REQUIRE(a);
      REQUIRE(b);
      CHECK(values(a->value()) == values(b->value()));
    }
  const auto now = random::get_state();
  CHECK(now.key == rng.key);
  CHECK(now.counter == rng.counter);
}

TEST_CASE("fit resumed from a checkpoint with initial_epoch ends with the weights of an uninterrupted run",
          "[checkpoint][resume]") {
  Scratch scratch("resume");
  const Data d = make_data();

  // The uninterrupted run: four epochs, shuffled, with dropout.
  random::set_seed(42);
  auto full = make_model();
  full->fit(d.x, d.y, fit_options(4));
  const auto expected = all_weights(*full);

  // The same run, stopped after two epochs with a checkpoint saved at the end of each.
  random::set_seed(42);
  auto first = make_model();
  train::Checkpoint ckpt(*first);
  train::CheckpointManager manager(ckpt, scratch / "ckpts", 1);
  first->fit(d.x, d.y, fit_options(2, 0, {manager.callback()}));
  CHECK(manager.checkpoints() == std::vector<std::string>{scratch / "ckpts/ckpt-2.safetensors"});

  // A new process: other seed, other initial weights, then the checkpoint.
  random::set_seed(999);
  auto resumed = make_model();
  train::Checkpoint ckpt2(*resumed);
  train::CheckpointManager manager2(ckpt2, scratch / "ckpts", 1);
  REQUIRE(manager2.restore_latest());
  CHECK(ckpt2.epoch() == 2);
  fs::copy_file(manager2.latest_checkpoint(), scratch / "epoch2.safetensors");  // max_to_keep drops it below
  const auto history = resumed->fit(d.x, d.y, fit_options(4, ckpt2.epoch(), {manager2.callback()}));
  CHECK(history.epoch == std::vector<int>{2, 3});
  CHECK(all_weights(*resumed) == expected);
  CHECK(manager2.latest_checkpoint() == scratch / "ckpts/ckpt-4.safetensors");

  // The random state is part of that: resuming with another one shuffles and drops out differently.
  random::set_seed(999);
  auto unlucky = make_model();
  train::Checkpoint ckpt3(*unlucky);
  ckpt3.restore(scratch / "epoch2.safetensors");
  // (fit draws from the model's own stream, restored with it)
  auto restart_rng = unlucky->seed_generator().state();
  restart_rng.counter += 1;
  unlucky->seed_generator().set_state(restart_rng);
  unlucky->fit(d.x, d.y, fit_options(4, 2));
  CHECK(all_weights(*unlucky) != expected);
}

TEST_CASE("a checkpoint that does not match the model is an IOError and changes nothing", "[checkpoint][errors]") {
  Scratch scratch("mismatch");
  auto model = make_model();
  train::Checkpoint ckpt(*model);
  ckpt.write(scratch / "c.safetensors");

  models::Sequential other{layers::InputLayer(Shape{4}), layers::Dense(5)};
  other.compile({.optimizer = "adam", .loss = "mse"});
  const auto before = all_weights(other);
  train::Checkpoint wrong(other);
  CHECK_THROWS_AS(wrong.restore(scratch / "c.safetensors"), IOError);
  CHECK_THROWS_WITH(wrong.restore(scratch / "c.safetensors"), Contains(scratch / "c.safetensors") && Contains("tensor"));
  CHECK(all_weights(other) == before);
  CHECK(wrong.epoch() == 0);

  // Optimizer state needs an optimizer to go to: the same model, loaded without compiling it.
  const Data d = make_data();
  model->fit(d.x, d.y, fit_options(1));
  ckpt.write(scratch / "trained.safetensors");
  model->save(scratch / "model.keel");
  const auto uncompiled = models::load_model(scratch / "model.keel", false);
  train::Checkpoint no_optimizer(*uncompiled);
  CHECK_THROWS_WITH(no_optimizer.restore(scratch / "trained.safetensors"), Contains("optimizer"));

  // Not a checkpoint: plain weights.
  model->save_weights(scratch / "weights.safetensors");
  CHECK_THROWS_WITH(ckpt.restore(scratch / "weights.safetensors"), Contains("format"));
  CHECK_THROWS_AS(ckpt.restore(""), ValueError);
}

TEST_CASE("a truncated checkpoint file is an IOError naming the file", "[checkpoint][errors]") {
  Scratch scratch("truncated");
  auto model = make_model();
  train::Checkpoint ckpt(*model);
  const std::string path = scratch / "c.safetensors";
  ckpt.write(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (std::size_t cut : {std::size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(cut));
    CHECK_THROWS_AS(ckpt.restore(path), IOError);
    CHECK_THROWS_WITH(ckpt.restore(path), Contains(path));
  }
}

namespace {

// A checkpoint edited as a script would: some tensors dropped or added, the metadata kept.
void edit_checkpoint(const std::string& from, const std::string& to, const std::vector<std::string>& drop,
                     const std::map<std::string, Tensor>& add = {}) {
  auto tensors = io::load_safetensors(from);
  const auto meta = io::load_safetensors_metadata(from);
  for (const auto& key : drop) REQUIRE(tensors.erase(key) == 1);
  for (const auto& [key, t] : add) tensors[key] = t;
  io::save_safetensors(to, tensors, meta);
}

std::shared_ptr<models::Sequential> momentum_model() {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{4}), std::make_shared<layers::Dense>(3, layers::DenseOptions{.name = "dense"})});
  m->compile({.optimizer = optimizers::SGD(0.1, {.momentum = 0.9}), .loss = "mse"});
  return m;
}

}  // namespace

TEST_CASE("a checkpoint missing an optimizer slot, or holding one too many, is an IOError listing them",
          "[checkpoint][errors]") {
  Scratch scratch("slots");
  random::set_seed(3);
  auto model = momentum_model();
  model->fit(random::normal({8, 4}), random::normal({8, 3}), fit_options(1));
  train::Checkpoint ckpt(*model);
  const std::string good = scratch / "good.safetensors", bad = scratch / "bad.safetensors";
  ckpt.write(good);

  auto fresh = momentum_model();
  train::Checkpoint restored(*fresh);
  const auto before = all_weights(*fresh);
  edit_checkpoint(good, bad, {"optimizer/dense/kernel/momentum"});
  CHECK_THROWS_AS(restored.restore(bad), IOError);
  CHECK_THROWS_WITH(restored.restore(bad), Contains(bad) && Contains("optimizer/dense/kernel/momentum") &&
                                               Contains("missing") && Contains("SGD"));
  CHECK(all_weights(*fresh) == before);  // nothing changed
  CHECK(fresh->optimizer()->iterations() == 0);

  // Missing and extra entries, reported together.
  edit_checkpoint(good, bad, {"optimizer/dense/bias/momentum", "optimizer/iteration"},
                  {{"optimizer/dense/kernel/velocity", zeros({4, 3})}});
  CHECK_THROWS_WITH(restored.restore(bad), Contains("optimizer/dense/bias/momentum") && Contains("optimizer/iteration") &&
                                               Contains("optimizer/dense/kernel/velocity") && Contains("2 of its") &&
                                               Contains("1 saved tensor"));
  // Every optimizer tensor gone, while the metadata still names the optimizer.
  edit_checkpoint(good, bad, {"optimizer/dense/bias/momentum", "optimizer/dense/kernel/momentum", "optimizer/iteration",
                              "optimizer/learning_rate"});
  CHECK_THROWS_WITH(restored.restore(bad), Contains("4 of its variables are missing"));
  // A slot of the right name with the wrong shape.
  edit_checkpoint(good, bad, {"optimizer/dense/kernel/momentum"}, {{"optimizer/dense/kernel/momentum", zeros({3, 4})}});
  CHECK_THROWS_WITH(restored.restore(bad), Contains("optimizer/dense/kernel/momentum") && Contains("[3,4]"));
  CHECK(all_weights(*fresh) == before);

  // The intact file restores.
  restored.restore(good);
  CHECK(all_weights(*fresh) == all_weights(*model));
  CHECK(fresh->optimizer()->iterations() == model->optimizer()->iterations());
}

TEST_CASE("restore with allow_partial takes what matches and leaves the rest (TF's expect_partial)", "[checkpoint]") {
  Scratch scratch("partial");
  random::set_seed(4);
  auto model = momentum_model();
  model->fit(random::normal({8, 4}), random::normal({8, 3}), fit_options(2));
  train::Checkpoint ckpt(*model);
  const std::string good = scratch / "good.safetensors", bad = scratch / "partial.safetensors";
  ckpt.write(good);
  edit_checkpoint(good, bad, {"optimizer/dense/kernel/momentum"}, {{"optimizer/other/thing", zeros({2})}});

  auto fresh = momentum_model();
  train::Checkpoint restored(*fresh);
  restored.restore(bad, {.allow_partial = true});
  CHECK(all_weights(*fresh) == all_weights(*model));
  CHECK(fresh->optimizer()->iterations() == model->optimizer()->iterations());
  const auto mine = model->trainable_weights(), theirs = fresh->trainable_weights();
  // The bias slot came back; the kernel's, absent from the file, kept its initial zeros.
  CHECK(values(fresh->optimizer()->get_slot(*theirs[1], "momentum")->value()) ==
        values(model->optimizer()->get_slot(*mine[1], "momentum")->value()));
  CHECK(values(fresh->optimizer()->get_slot(*theirs[0], "momentum")->value()) == std::vector<float>(12, 0.f));
  // A shape that does not match is still an error.
  edit_checkpoint(good, bad, {"optimizer/dense/bias/momentum"}, {{"optimizer/dense/bias/momentum", zeros({5})}});
  CHECK_THROWS_WITH(restored.restore(bad, {.allow_partial = true}), Contains("optimizer/dense/bias/momentum"));

  // A model without an optimizer takes the weights of a training checkpoint.
  models::Sequential inference{layers::InputLayer(Shape{4}), layers::Dense(3, {.name = "dense"})};
  train::Checkpoint weights_only(inference);
  CHECK_THROWS_AS(weights_only.restore(good), IOError);
  weights_only.restore(good, {.allow_partial = true});
  CHECK(all_weights(inference) == all_weights(*model));
  // And through the manager.
  train::CheckpointManager manager(ckpt, scratch / "ckpts", 2);
  manager.save();
  train::CheckpointManager manager2(weights_only, scratch / "ckpts", 2);
  CHECK(manager2.restore_latest(train::RestoreOptions{.allow_partial = true}));
}

TEST_CASE("a checkpoint written before the first training step restores without slots", "[checkpoint]") {
  Scratch scratch("unbuilt");
  auto model = momentum_model();
  train::Checkpoint ckpt(*model);
  ckpt.write(scratch / "c.safetensors");  // the optimizer has no slots yet
  CHECK(io::load_safetensors_metadata(scratch / "c.safetensors").at("optimizer_built") == "false");
  auto fresh = momentum_model();
  train::Checkpoint restored(*fresh);
  CHECK_NOTHROW(restored.restore(scratch / "c.safetensors"));
  CHECK(all_weights(*fresh) == all_weights(*model));
  // Its optimizer-wide state is still required.
  edit_checkpoint(scratch / "c.safetensors", scratch / "d.safetensors", {"optimizer/iteration"});
  CHECK_THROWS_WITH(restored.restore(scratch / "d.safetensors"), Contains("optimizer/iteration"));
}
