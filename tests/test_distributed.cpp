// keel::distribute over MPI. Every case runs in a job of any size: alone (CTest's discovered
// entries), and under mpirun -np 2 / -np 3 (tests/cmake/distributed.cmake), where the expected
// values below follow from the number of workers N and this worker's rank r.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "distribute/communicator.hpp"
#include "regression_data.hpp"
#include "distribute/hooks.hpp"

using namespace keel;
using Catch::Matchers::Contains;

namespace {

distribute::MultiWorkerMirroredStrategy& world() {
  static distribute::MultiWorkerMirroredStrategy s({.timeout_s = 60});
  return s;
}

using test::max_weight_diff;
using test::regression_data;
using test::regression_mlp;

// Whether every worker holds the same values (max over workers == min over workers).
bool same_everywhere(distribute::Strategy& s, const std::vector<Tensor>& ws) {
  for (const Tensor& w : ws) {
    const Tensor hi = s.all_reduce(w, distribute::ReduceOp::max), lo = s.all_reduce(w, distribute::ReduceOp::min);
    if (max_weight_diff({hi}, {lo}) != 0) return false;
  }
  return true;
}

std::string rank_path(const std::string& name, int rank) {
  return (std::filesystem::temp_directory_path() / ("keel_dist_" + std::to_string(::getppid()) + "_" +
                                                      std::to_string(rank) + "_" + name))
      .string();
}

}  // namespace

TEST_CASE("the default strategy has one replica, and scope() installs and restores a strategy", "[distributed]") {
  CHECK(distribute::get_strategy().num_replicas_in_sync() == 1);
  CHECK(distribute::get_strategy().is_chief());
  auto& s = world();
  CHECK(s.num_workers() == s.num_replicas_in_sync());
  CHECK(s.worker_index() >= 0);
  CHECK(s.worker_index() < s.num_workers());
  CHECK(s.is_chief() == (s.worker_index() == 0));
  {
    auto scope = s.scope();
    CHECK(&distribute::get_strategy() == &s);
    {
      distribute::MirroredStrategy local({Device::cpu()});
      auto inner = local.scope();
      CHECK(&distribute::get_strategy() == &local);
      CHECK(local.num_replicas_in_sync() == 1);
    }
    CHECK(&distribute::get_strategy() == &s);
  }
  CHECK(distribute::get_strategy().num_replicas_in_sync() == 1);
}

TEST_CASE("workers started on one machine share its cores: each pool takes cores / workers threads",
          "[distributed]") {
  auto& s = world();  // MPI started by keel: the pool was sized then (the tests run on one machine)
  if (!distribute::detail::mpi_built()) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(config::num_threads() == std::max(1, cores / s.num_workers()));
}

TEST_CASE("all_reduce: every dtype and every ReduceOp", "[distributed]") {
  auto& s = world();
  const int n = s.num_workers(), r = s.worker_index();
  // Worker r contributes r + 1 everywhere: sum = N (N + 1) / 2, max = N, min = 1, mean = sum / N.
  const double sum = n * (n + 1) / 2.0;
  for (DType dt : {DType::float32, DType::float64, DType::int32, DType::int64, DType::uint8, DType::float16,
                   DType::bfloat16}) {
    INFO(name(dt));
    const Tensor v = full({3, 2}, r + 1).astype(dt);
    for (double got : s.all_reduce(v).to_vector<double>()) CHECK(got == sum);
    for (double got : s.reduce(distribute::ReduceOp::sum, v).to_vector<double>()) CHECK(got == sum);
    for (double got : s.all_reduce(v, distribute::ReduceOp::max).to_vector<double>()) CHECK(got == n);
    for (double got : s.all_reduce(v, distribute::ReduceOp::min).to_vector<double>()) CHECK(got == 1);
    const double mean = is_floating(dt) ? sum / n : std::trunc(sum / n);  // integers divide truncating
    for (double got : s.all_reduce(v, distribute::ReduceOp::mean).to_vector<double>())
      CHECK(got == Approx(mean).epsilon(dt == DType::bfloat16 ? 1e-2 : 1e-3));
    CHECK(s.all_reduce(v).shape() == v.shape());
    CHECK(s.all_reduce(v).dtype() == dt);
  }
  // bool: sum and max are "any", min is "all". Only worker 0 holds true.
  const Tensor b = full({2}, r == 0 ? 1 : 0).astype(DType::bool_);
  for (bool got : s.all_reduce(b).to_vector<bool>()) CHECK(got);
  for (bool got : s.all_reduce(b, distribute::ReduceOp::min).to_vector<bool>()) CHECK(got == (n == 1));
  CHECK_THROWS_AS(s.all_reduce(Tensor()), ValueError);
}

TEST_CASE("broadcast gives root's value, and workers passing different shapes get a ShapeError", "[distributed]") {
  auto& s = world();
  const int n = s.num_workers(), r = s.worker_index();
  for (int root : {0, n - 1}) {
    const Tensor got = s.broadcast(constant({float(r), float(10 * r)}, {2}), root);
    CHECK(got.to_vector<float>() == std::vector<float>{float(root), float(10 * root)});
  }
  CHECK_THROWS_AS(s.broadcast(zeros({2}), n), ValueError);
  CHECK_THROWS_AS(s.broadcast(zeros({2}), -1), ValueError);
  if (n > 1) {
    CHECK_THROWS_AS(s.all_reduce(zeros({r + 1})), ShapeError);
    CHECK_THROWS_AS(s.broadcast(zeros({2}, r == 0 ? DType::float32 : DType::float64)), ShapeError);
  }
  s.barrier();
}

TEST_CASE("keel's NCCL transport opens libnccl and reads its version", "[distributed]") {
  if (!distribute::detail::nccl_built()) {
    CHECK(distribute::detail::nccl_version().empty());
    return;
  }
  // Built with NCCL's header: the library is opened (dlopen) and checked on first use.
  const std::string v = distribute::detail::nccl_version();
  int major = 0, minor = 0, patch = 0;
  REQUIRE(std::sscanf(v.c_str(), "%d.%d.%d", &major, &minor, &patch) == 3);
  CHECK(major * 100 + minor >= 214);
}

TEST_CASE("strategy options are checked", "[distributed]") {
  CHECK_THROWS_AS(distribute::MultiWorkerMirroredStrategy({.communication = "gloo"}), ValueError);
  // NCCL needs a GPU per process (and keel built with it): here there is none. With GPUs the
  // [cuda][nccl] cases of test_cuda run it.
  if (cuda_device_count() == 0)
    CHECK_THROWS_WITH(distribute::MultiWorkerMirroredStrategy({.communication = "nccl"}),
                      Contains("a GPU per process"));
  CHECK_THROWS_AS(distribute::MultiWorkerMirroredStrategy({.timeout_s = 0}), ValueError);
  CHECK_THROWS_AS(distribute::MultiWorkerMirroredStrategy({.timeout_s = std::nan("")}), ValueError);
  // No GPU here (or not that many): a clear DeviceError; the CPU twice: two replicas on threads
  // (test_distributed_mirrored).
  CHECK_THROWS_AS(distribute::MirroredStrategy({Device::cuda(cuda_device_count())}), DeviceError);
  CHECK(distribute::MirroredStrategy({Device::cpu(), Device::cpu()}).num_replicas_in_sync() == 2);
  distribute::MirroredStrategy cpu({Device::cpu()});
  CHECK(cpu.devices().size() == 1);
}

TEST_CASE("the shards of a global batch cover every row once, and Dataset::shard every element once",
          "[distributed]") {
  auto& s = world();
  auto scope = s.scope();
  const int n = s.num_workers(), r = s.worker_index();
  for (std::int64_t rows = 0; rows <= 17; ++rows) {
    std::vector<std::int32_t> seen(static_cast<std::size_t>(rows) + 1, 0);
    const auto [b, e] = distribute::detail::shard_range(rows);
    CHECK(e - b >= rows / n);
    CHECK(e - b <= rows / n + 1);
    for (std::int64_t i = b; i < e; ++i) ++seen[static_cast<std::size_t>(i)];
    const auto total = s.all_reduce(constant(seen)).to_vector<std::int32_t>();
    for (std::int64_t i = 0; i < rows; ++i) CHECK(total[static_cast<std::size_t>(i)] == 1);
  }
  // Dataset::shard(N, r): elements r, r + N, ...; over the workers each of 0..22 exactly once.
  std::vector<std::int64_t> ids(23);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i);
  const auto elements = data::Dataset<>::from_tensor_slices(constant(ids));
  std::vector<std::int32_t> count(23, 0);
  for (const Tensor& e : elements.shard(n, r)) ++count[static_cast<std::size_t>(e.item<std::int64_t>())];
  const auto total = s.all_reduce(constant(count)).to_vector<std::int32_t>();
  for (std::int32_t c : total) CHECK(c == 1);
  std::vector<std::int64_t> second;
  for (const Tensor& e : elements.take(10).shard(3, 1)) second.push_back(e.item<std::int64_t>());
  CHECK(second == std::vector<std::int64_t>{1, 4, 7});
  CHECK_THROWS_AS(elements.shard(0, 0), ValueError);
  CHECK_THROWS_AS(elements.shard(2, 2), ValueError);
  CHECK_THROWS_AS(elements.shard(2, -1), ValueError);
}

namespace {

// Trains the same model, from the chief's initial weights, on one process (no strategy) and
// data-parallel (every worker, global batch `batch`); returns the largest weight difference.
// 97 rows in batches of 16: 6 full batches and one of a single row (a shard of 0 rows for all
// but one worker), 7 steps per epoch, 3 epochs: 21 steps.
double parallel_vs_single(const std::function<std::shared_ptr<optimizers::Optimizer>()>& make_opt, bool dataset,
                          distribute::Strategy& s = world()) {
  const auto [x, y] = regression_data(97);
  random::set_seed(1000 + static_cast<std::uint64_t>(s.worker_index()));  // different starts: fit broadcasts
  auto scope = std::make_unique<distribute::StrategyScope>(&s);
  auto par = regression_mlp();
  par.compile({.optimizer = make_opt(), .loss = "mse", .metrics = {"mae"}});
  std::vector<Tensor> chief0;
  for (const Tensor& w : par.get_weights()) chief0.push_back(s.broadcast(w));
  scope.reset();
  auto single = regression_mlp();
  single.compile({.optimizer = make_opt(), .loss = "mse", .metrics = {"mae"}});
  single.set_weights(chief0);
  const auto h1 = single.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false});
  scope = std::make_unique<distribute::StrategyScope>(&s);
  models::History hn;
  if (dataset) {
    hn = par.fit(data::Dataset<>::from_tensor_slices({x, y}).batch(16), {.epochs = 3, .verbose = 0});
  } else {
    hn = par.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0, .shuffle = false});
  }
  // The logs are those of the global batch: the single process's.
  CHECK(hn.history.at("loss").back() == Approx(h1.history.at("loss").back()).epsilon(1e-4));
  CHECK(hn.history.at("mae").back() == Approx(h1.history.at("mae").back()).epsilon(1e-4));
  const auto ev_n = par.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  scope.reset();
  const auto ev_1 = single.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  CHECK(ev_n.at("loss") == Approx(ev_1.at("loss")).epsilon(1e-4));
  CHECK(same_everywhere(s, par.get_weights()));
  return max_weight_diff(par.get_weights(), single.get_weights());
}

}  // namespace

TEST_CASE("N workers with global batch B reach the weights of one process with batch B: SGD", "[distributed]") {
  CHECK(parallel_vs_single([] { return std::make_shared<optimizers::SGD>(0.1, optimizers::SGDOptions{.momentum = 0.9}); },
                           false) < 1e-5);
}

TEST_CASE("N workers with global batch B reach the weights of one process with batch B: Adam", "[distributed]") {
  CHECK(parallel_vs_single([] { return std::make_shared<optimizers::Adam>(0.01); }, false) < 1e-5);
}

TEST_CASE("a Dataset passed to fit is sharded by rows of each global batch: same weights as one process",
          "[distributed]") {
  CHECK(parallel_vs_single([] { return std::make_shared<optimizers::Adam>(0.01); }, true) < 1e-5);
}

TEST_CASE("gradients in buckets of 64 bytes, each all-reduced while the backward pass runs: same weights as one process",
          "[distributed]") {
  // The MLP's gradients (kernel 4x8, bias 8, kernel 8x1, bias 1) in 3 buckets, from the last:
  // {bias 1, kernel 8x1} {bias 8} {kernel 4x8}; the first starts while the first layer's
  // backward still runs.
  static distribute::MultiWorkerMirroredStrategy small({.timeout_s = 60, .bucket_bytes = 64});
  CHECK(parallel_vs_single([] { return std::make_shared<optimizers::Adam>(0.01); }, false, small) < 1e-5);
  static distribute::MultiWorkerMirroredStrategy after({.timeout_s = 60, .bucket_bytes = 64, .overlap_backward = false});
  CHECK(parallel_vs_single([] { return std::make_shared<optimizers::Adam>(0.01); }, false, after) < 1e-5);
}

namespace {

// A world of two whose other worker always holds this worker's values: a sum is twice the
// value, a max or a min the value itself. A started all-reduce completes on its second test()
// or at wait(). Every call is logged, to see when the collectives run.
class MirrorCommunicator final : public distribute::detail::Communicator {
 public:
  std::vector<std::string> log;
  int size() const override { return 2; }
  int rank() const override { return 0; }
  void all_reduce(void* buf, std::size_t count, DType dtype, distribute::detail::Combine op) override {
    log.push_back("all_reduce");
    if (op == distribute::detail::Combine::sum) twice(buf, count, dtype);
  }
  std::unique_ptr<distribute::detail::PendingCollective> start_all_reduce(void* buf, std::size_t count, DType dtype,
                                                                          distribute::detail::Combine) override {
    log.push_back("start");
    return std::make_unique<Pending>(*this, buf, count, dtype);
  }
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::string transport() const override { return "mirror"; }

 private:
  static void twice(void* buf, std::size_t n, DType dt) {
    for (std::size_t i = 0; i < n; ++i) {
      if (dt == DType::float32) static_cast<float*>(buf)[i] *= 2;
      if (dt == DType::float64) static_cast<double*>(buf)[i] *= 2;
      if (dt == DType::int64) static_cast<std::int64_t*>(buf)[i] *= 2;
      if (dt == DType::int32) static_cast<std::int32_t*>(buf)[i] *= 2;
    }
  }
  struct Pending final : distribute::detail::PendingCollective {
    Pending(MirrorCommunicator& c, void* b, std::size_t n, DType d) : comm(c), buf(b), count(n), dtype(d) {}
    bool test() override {
      comm.log.push_back("test");
      if (!done && ++tests >= 2) complete();
      return done;
    }
    void wait() override {
      comm.log.push_back("wait");
      if (!done) complete();
    }
    void complete() {
      twice(buf, count, dtype);
      done = true;
    }
    MirrorCommunicator& comm;
    void* buf;
    std::size_t count;
    DType dtype;
    int tests = 0;
    bool done = false;
  };
};

class MirrorStrategy final : public distribute::Strategy {
 public:
  MirrorStrategy(std::shared_ptr<MirrorCommunicator> comm, bool overlap)
      : Strategy(std::move(comm), {.bucket_bytes = 256, .overlap_backward = overlap}) {}
};

std::ptrdiff_t count_of(const std::vector<std::string>& log, const std::string& what) {
  return std::count(log.begin(), log.end(), what);
}

}  // namespace

TEST_CASE("fit starts each gradient bucket's all-reduce during the backward pass, eagerly and replayed, with the "
          "weights of one all-reduce after it",
          "[distributed]") {
  const auto [x, y] = regression_data(64);
  for (bool eager : {true, false}) {
    INFO((eager ? "run_eagerly" : "traced step"));
    std::vector<Tensor> weights[2];
    std::vector<std::string> logs[2];
    for (bool overlap : {false, true}) {
      auto comm = std::make_shared<MirrorCommunicator>();
      MirrorStrategy s(comm, overlap);
      auto scope = s.scope();
      random::set_seed(5);
      models::Sequential m{layers::InputLayer({4}), layers::Dense(16, {.activation = "tanh"}),
                           layers::Dense(16, {.activation = "tanh"}), layers::Dense(1)};
      m.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse", .run_eagerly = eager});
      m.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
      weights[overlap] = m.get_weights();
      logs[overlap] = comm->log;
    }
    // Both sum the same buckets (reverse order, at most 256 bytes: {b3, k3, b2} {k2} {b1} {k1}).
    CHECK(max_weight_diff(weights[0], weights[1]) == 0);
    const int steps = 2 * 4;
    // After the backward pass: each bucket reduced at once (the blocking all-reduce; the logs'
    // reductions at each epoch's end are further ones).
    CHECK(count_of(logs[0], "start") == 0);
    CHECK(count_of(logs[0], "all_reduce") >= 4 * steps);
    // Overlapped: a bucket starts before the backward pass's next node once its gradients are
    // final, and the progress calls move it on; a later bucket starts after that. {k1} is final
    // only after the last node: nothing is left to overlap, so it is reduced at once.
    const auto& log = logs[1];
    const auto first_test = std::find(log.begin(), log.end(), "test") - log.begin();
    const auto last_start = log.rend() - std::find(log.rbegin(), log.rend(), "start") - 1;
    CHECK(first_test < last_start);
    CHECK(count_of(log, "start") == 3 * steps);
    CHECK(count_of(log, "wait") == 3 * steps);
  }
}

TEST_CASE("Dropout and BatchNormalization models: every replica keeps the same trainable weights", "[distributed]") {
  auto& s = world();
  const auto [x, y] = regression_data(64);
  random::set_seed(7 + static_cast<std::uint64_t>(s.worker_index()));  // different masks per worker
  auto scope = s.scope();
  models::Sequential model{layers::InputLayer({4}), layers::Dense(16, {.activation = "relu"}),
                           layers::BatchNormalization(), layers::Dropout(0.3), layers::Dense(1)};
  model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
  const auto before = model.get_weights();
  model.fit(x, y, {.batch_size = 16, .epochs = 5, .verbose = 0, .shuffle = true});
  std::vector<Tensor> trainable;
  for (Variable* v : model.trainable_weights()) trainable.push_back(v->peek());
  CHECK(same_everywhere(s, trainable));
  CHECK(max_weight_diff(before, model.get_weights()) > 1e-3);  // it trained
  // BatchNormalization's moving statistics are per replica (TF's non-synchronised batch norm):
  // each worker's come from its own shards.
}

TEST_CASE("only the chief writes: CSVLogger, ModelCheckpoint and Model::save", "[distributed]") {
  auto& s = world();
  const int r = s.worker_index();
  const auto [x, y] = regression_data(32);
  auto scope = s.scope();
  auto model = regression_mlp();
  model.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
  const std::string csv = rank_path("log.csv", r), ckpt = rank_path("ckpt.weights.h5", r), saved = rank_path("m.keras", r);
  auto logger = std::make_shared<callbacks::CSVLogger>(csv);
  auto checkpoint = std::make_shared<callbacks::ModelCheckpoint>(ckpt, callbacks::ModelCheckpointOptions{.save_weights_only = true});
  model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = {logger, checkpoint}});
  model.save(saved);
  CHECK(std::filesystem::exists(csv) == s.is_chief());
  CHECK(std::filesystem::exists(ckpt) == s.is_chief());
  CHECK(std::filesystem::exists(saved) == s.is_chief());
  for (const auto& p : {csv, ckpt, saved}) std::filesystem::remove_all(p);
}

TEST_CASE("a worker that stops answering makes the others throw, naming it, within timeout_s", "[.fault]") {
  // Run by its own CTest entry with 2 workers: worker 1 leaves without joining the collective.
  distribute::MultiWorkerMirroredStrategy s({.timeout_s = 3});
  if (s.num_workers() < 2) return;
  if (s.worker_index() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s.all_reduce(ones({4}));
    FAIL("the all-reduce completed without worker 1");
  } catch (const RuntimeError& e) {
    CHECK_THAT(e.what(), Contains("rank(s) 1 did not answer"));
    CHECK_THAT(e.what(), Contains("timeout_s = 3"));
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited >= 3);
  CHECK(waited < 10);
  // The communicator stays failed: later collectives throw at once.
  CHECK_THROWS_AS(s.barrier(), RuntimeError);
}
