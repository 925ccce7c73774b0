// callbacks::BackupAndRestore: a run interrupted by an exception and started again ends with
// the weights of an uninterrupted run (weights, optimizer slots and the random stream restored).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include "scratch.hpp"

#include <filesystem>
#include <fstream>

using namespace keel;

namespace {

// Dropout and a shuffled order make the run depend on the random stream, Adam on its slots:
// a restore that missed either would end with other weights.
std::shared_ptr<models::Sequential> make_model(const std::vector<Tensor>& initial) {
  auto m = std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{3}), std::make_shared<layers::Dense>(8, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dropout>(0.25), std::make_shared<layers::Dense>(1)});
  if (!initial.empty()) m->set_weights(initial);
  m->compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
  return m;
}

struct Data {
  Tensor x, y;
};
Data make_data() {
  random::set_seed(11);
  Data d;
  d.x = random::uniform({24, 3}, -1, 1);
  d.y = reduce_sum(d.x, {1}, true);  // y = x1 + x2 + x3
  return d;
}

// Throws at the end of epoch `at` (after the callbacks before it in the list have run).
class Crash : public callbacks::Callback {
 public:
  explicit Crash(int at) : at_(at) {}
  void on_epoch_end(int epoch, const callbacks::Logs&) override {
    if (epoch == at_) throw RuntimeError("simulated crash");
  }

 private:
  int at_;
};

std::vector<std::vector<float>> values(const std::vector<Tensor>& ws) {
  std::vector<std::vector<float>> out;
  for (const auto& w : ws) out.push_back(w.to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("BackupAndRestore resumes after a crash with the weights of an uninterrupted run", "[callbacks][backup]") {
  keel_test::Scratch dir("backup");
  const Data d = make_data();
  const std::vector<Tensor> initial = make_model({})->get_weights();
  const models::FitOptions base{.batch_size = 8, .epochs = 4, .verbose = 0, .seed = 5};

  // Uninterrupted: 4 epochs.
  auto plain = make_model(initial);
  plain->fit(d.x, d.y, base);
  const auto expected = values(plain->get_weights());

  // Interrupted at the end of epoch index 1 (after the backup of that epoch)...
  auto backup = std::make_shared<callbacks::BackupAndRestore>(dir / "bk");
  {
    auto first = make_model(initial);
    auto o = base;
    o.callbacks = {backup, std::make_shared<Crash>(1)};
    CHECK_THROWS_AS(first->fit(d.x, d.y, o), RuntimeError);
    CHECK(backup->restored_epoch() == -1);
  }
  REQUIRE(std::filesystem::exists(dir / "bk/training_state.json"));
  // ... and started again from scratch: it restores epoch 1 and runs epochs 2 and 3.
  auto second = make_model(initial);
  auto o = base;
  o.callbacks = {backup};
  const auto h = second->fit(d.x, d.y, o);
  CHECK(backup->restored_epoch() == 1);
  CHECK(h.epoch == std::vector<int>{2, 3});
  const auto got = values(second->get_weights());
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == expected[i].size());
    for (std::size_t j = 0; j < got[i].size(); ++j) CHECK(got[i][j] == Approx(expected[i][j]).margin(1e-6));
  }
  CHECK(second->optimizer()->iterations() == plain->optimizer()->iterations());  // 4 epochs x 3 batches
  // A finished run deletes its backup: the next fit starts afresh.
  CHECK_FALSE(std::filesystem::exists(dir / "bk/training_state.json"));
  auto third = make_model(initial);
  third->fit(d.x, d.y, o);
  CHECK(backup->restored_epoch() == -1);
}

TEST_CASE("a restart without the backup differs: the check above can fail", "[callbacks][backup]") {
  const Data d = make_data();
  const std::vector<Tensor> initial = make_model({})->get_weights();
  auto plain = make_model(initial);
  plain->fit(d.x, d.y, {.batch_size = 8, .epochs = 4, .verbose = 0, .seed = 5});
  // Two epochs, then two more in a new fit() with the same seed: the stream restarts, so the
  // shuffles and dropout masks of epochs 3 and 4 are those of epochs 1 and 2.
  auto split = make_model(initial);
  split->fit(d.x, d.y, {.batch_size = 8, .epochs = 2, .verbose = 0, .seed = 5});
  split->fit(d.x, d.y, {.batch_size = 8, .epochs = 4, .verbose = 0, .initial_epoch = 2, .seed = 5});
  CHECK(values(split->get_weights()) != values(plain->get_weights()));
}

TEST_CASE("BackupAndRestore option and file errors", "[callbacks][backup][errors]") {
  keel_test::Scratch dir("backup_errors");
  CHECK_THROWS_AS(callbacks::BackupAndRestore(""), ValueError);
  CHECK_THROWS_AS(callbacks::BackupAndRestore(dir / "b", {.save_freq = "batch"}), ValueError);
  std::filesystem::create_directories(dir / "b");
  { std::ofstream(dir / "b/training_state.json") << "{not json"; }
  auto model = make_model({});
  const Data d = make_data();
  auto o = models::FitOptions{.epochs = 1, .verbose = 0};
  o.callbacks = {std::make_shared<callbacks::BackupAndRestore>(dir / "b")};
  CHECK_THROWS_AS(model->fit(d.x, d.y, o), IOError);
}
