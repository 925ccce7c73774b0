// MirroredStrategy over several devices: replicas that are threads of one process (the CPU named
// N times here, as TensorFlow's logical CPU devices; GPUs in tests/cuda/). fit copies the model
// to every replica, splits each global batch between them, all-reduces the gradients over shared
// memory and applies them with the model's own optimizer, so N replicas with global batch B must
// reach the weights of one model trained with batch B.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "distribute/communicator.hpp"
#include "distribute/mirrored_replicas.hpp"
#include "regression_data.hpp"

using namespace keel;
using Catch::Matchers::Contains;

namespace {

using test::max_weight_diff;
using test::regression_data;
using test::regression_mlp;

std::vector<Device> cpus(int n) { return std::vector<Device>(static_cast<std::size_t>(n), Device::cpu()); }

// The same model from the same initial weights trained by one model and by `replicas` replicas
// of a MirroredStrategy: 97 rows in global batches of 16 (6 of 16 and one of a single row, which
// leaves all replicas but one without rows), 3 epochs, 21 steps. Returns the largest weight
// difference; the histories and evaluate must agree too.
double mirrored_vs_single(int replicas, const std::function<std::shared_ptr<optimizers::Optimizer>()>& make_opt,
                          bool dataset, callbacks::CallbackList (*make_callbacks)() = nullptr) {
  const auto [x, y] = regression_data(97);
  distribute::MirroredStrategy strategy(cpus(replicas));
  REQUIRE(strategy.num_replicas_in_sync() == replicas);
  random::set_seed(7);
  auto single = regression_mlp();
  single.compile({.optimizer = make_opt(), .loss = "mse", .metrics = {"mae"}});
  models::History h1 = single.fit(x, y, {.batch_size = 16, .epochs = 0, .verbose = 0});  // builds
  const std::vector<Tensor> start = single.get_weights();
  h1 = single.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0,
                         .callbacks = make_callbacks ? make_callbacks() : callbacks::CallbackList{}, .shuffle = false});
  auto scope = std::make_unique<distribute::StrategyScope>(&strategy);
  auto par = regression_mlp();
  par.compile({.optimizer = make_opt(), .loss = "mse", .metrics = {"mae"}});
  par.fit(x, y, {.batch_size = 16, .epochs = 0, .verbose = 0});
  par.set_weights(start);
  const callbacks::CallbackList cbs = make_callbacks ? make_callbacks() : callbacks::CallbackList{};
  const models::History hn =
      dataset ? par.fit(data::Dataset<>::from_tensor_slices({x, y}).batch(16),
                        {.epochs = 3, .verbose = 0, .callbacks = cbs})
              : par.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0, .callbacks = cbs, .shuffle = false});
  // The logs are the global batch's: the single model's.
  for (const char* key : {"loss", "mae"}) {
    REQUIRE(hn.history.at(key).size() == 3);
    for (std::size_t e = 0; e < 3; ++e) CHECK(hn.history.at(key)[e] == Approx(h1.history.at(key)[e]).epsilon(1e-4));
  }
  // evaluate runs on replica 0 alone, with its weights: the single model's numbers.
  const auto ev_n = par.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  const auto ev_1 = single.evaluate(x, y, {.batch_size = 10, .verbose = 0});
  CHECK(ev_n.at("loss") == Approx(ev_1.at("loss")).epsilon(1e-4));
  const double diff = max_weight_diff(par.get_weights(), single.get_weights());
  // Out of the scope the model trains alone again: its step, traced among the replicas, traces
  // afresh instead of waiting for them.
  scope.reset();
  const auto t0 = std::chrono::steady_clock::now();
  par.fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  single.fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK(max_weight_diff(par.get_weights(), single.get_weights()) < 1e-5);
  return diff;
}

}  // namespace

TEST_CASE("MirroredStrategy over the CPU named N times: N replicas with global batch B reach one model's weights: "
          "SGD",
          "[distributed]") {
  for (int n : {2, 3}) {
    INFO(n << " replicas");
    const auto sgd = [] { return std::make_shared<optimizers::SGD>(0.1, optimizers::SGDOptions{.momentum = 0.9}); };
    CHECK(mirrored_vs_single(n, sgd, false) < 1e-5);
  }
}

TEST_CASE("MirroredStrategy over the CPU named N times: N replicas with global batch B reach one model's weights: "
          "Adam, and a Dataset",
          "[distributed]") {
  CHECK(mirrored_vs_single(2, [] { return std::make_shared<optimizers::Adam>(0.01); }, false) < 1e-5);
  CHECK(mirrored_vs_single(3, [] { return std::make_shared<optimizers::Adam>(0.01); }, true) < 1e-5);
}

TEST_CASE("in-process replicas follow the model's optimizer: a LearningRateScheduler acts on all of them",
          "[distributed]") {
  // Only replica 0's optimizer updates the weights, which every replica copies before each step:
  // a learning rate a callback sets (0.1, 0.05, 0.025 by epoch) reaches every replica.
  const auto halving = [] {
    return callbacks::CallbackList{std::make_shared<callbacks::LearningRateScheduler>(
        [](int epoch, double) { return 0.1 * std::pow(0.5, epoch); })};
  };
  CHECK(mirrored_vs_single(2, [] { return std::make_shared<optimizers::SGD>(0.1); }, false, +halving) < 1e-5);
}

TEST_CASE("MirroredStrategy's devices, replicas and cross-replica collectives", "[distributed]") {
  distribute::MirroredStrategy two(cpus(2));
  CHECK(two.num_replicas_in_sync() == 2);
  CHECK(two.num_workers() == 1);
  CHECK(two.worker_index() == 0);
  CHECK(two.is_chief());
  CHECK(two.replicas_in_process());
  // Outside the replicas a value is the same on all of them (tf.distribute's cross-replica
  // context): a mean, max or min of it is itself, a sum is refused, broadcast gives it back.
  const Tensor v = constant(std::vector<float>{1.5f, -2.0f});
  for (auto op : {distribute::ReduceOp::mean, distribute::ReduceOp::max, distribute::ReduceOp::min})
    CHECK(two.all_reduce(v, op).to_vector<float>() == v.to_vector<float>());
  CHECK_THROWS_AS(two.reduce(distribute::ReduceOp::sum, v), ValueError);
  CHECK(two.broadcast(v, 1).to_vector<float>() == v.to_vector<float>());
  CHECK_THROWS_AS(two.broadcast(v, 2), ValueError);
  two.barrier();
  // One device: the strategy of one replica it was.
  distribute::MirroredStrategy one(cpus(1));
  CHECK(one.num_replicas_in_sync() == 1);
  CHECK_FALSE(one.replicas_in_process());
  if (cuda_device_count() == 0) {
    CHECK(distribute::MirroredStrategy().devices() == std::vector<Device>{Device::cpu()});
    CHECK_THROWS_AS(distribute::MirroredStrategy({Device::cpu(), Device::cuda(0)}), DeviceError);
  } else {
    CHECK_THROWS_AS(distribute::MirroredStrategy({Device::cpu(), Device::cuda(0)}), ValueError);
    CHECK_THROWS_AS(distribute::MirroredStrategy({Device::cuda(0), Device::cuda(0)}), ValueError);
  }
  CHECK_THROWS_AS(distribute::MirroredStrategy({Device::cuda(99)}), DeviceError);
}

TEST_CASE("replicas on threads: all_reduce of every dtype and ReduceOp, broadcast from every root", "[distributed]") {
  // Over 3 replicas, replica r holds b * (r + 1) (b = 1..5): sums b * 6, max b * 3, min b; a
  // bool all-reduce is an or (sum, max) or an and (min); 16-bit floats are combined in float32.
  const int n = 3;
  distribute::detail::ThreadWorld world = distribute::detail::make_thread_world(n, 30);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto& comm = *world.ranks[static_cast<std::size_t>(r)];
      using distribute::detail::Combine;
      for (Combine op : {Combine::sum, Combine::max, Combine::min}) {
        const double want_scale = op == Combine::sum ? 6 : op == Combine::max ? 3 : 1;
        std::vector<double> d(5);
        std::vector<std::int32_t> i(5);
        std::vector<std::uint16_t> h(5);
        for (int b = 0; b < 5; ++b) {
          d[static_cast<std::size_t>(b)] = (b + 1) * (r + 1);
          i[static_cast<std::size_t>(b)] = (b + 1) * (r + 1);
          h[static_cast<std::size_t>(b)] = float_to_bfloat16(static_cast<float>((b + 1) * (r + 1))).bits;
        }
        comm.all_reduce(d.data(), d.size(), DType::float64, op);
        comm.all_reduce(i.data(), i.size(), DType::int32, op);
        comm.all_reduce(h.data(), h.size(), DType::bfloat16, op);
        for (int b = 0; b < 5; ++b) {
          const double want = (b + 1) * want_scale;
          if (d[static_cast<std::size_t>(b)] != want || i[static_cast<std::size_t>(b)] != want ||
              bfloat16_to_float(bfloat16_t{h[static_cast<std::size_t>(b)]}) != static_cast<float>(want))
            ++failures;
        }
        bool flag = r == 1;
        comm.all_reduce(&flag, 1, DType::bool_, op);
        if (flag != (op != Combine::min)) ++failures;
      }
      for (int root = 0; root < n; ++root) {
        std::int64_t value = r == root ? 100 + root : -1;
        comm.broadcast(&value, sizeof value, root);
        if (value != 100 + root) ++failures;
      }
      comm.barrier();
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
}

TEST_CASE("replicas on threads: a replica that does not arrive, or fails, stops the others with an error",
          "[distributed]") {
  using Catch::Matchers::Contains;
  // Replica 1 never joins the all-reduce: replica 0 throws RuntimeError naming it after the
  // timeout (0.3 s), instead of waiting for ever.
  {
    distribute::detail::ThreadWorld world = distribute::detail::make_thread_world(2, 0.3);
    double v = 1;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(world.ranks[0]->all_reduce(&v, 1, DType::float64, distribute::detail::Combine::sum),
                      Contains("replica(s) 1"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  }
  // In a group run, replica 1 fails (a ShapeError) while replicas 0 and 2 wait in a collective:
  // they stop there, and run() rethrows replica 1's own error. The next run works.
  distribute::MirroredStrategy three(cpus(3));
  auto& group = three.replicas();
  const auto failing = [&](int r) {
    if (r == 1) throw ShapeError("replica 1's own error");
    distribute::get_strategy().barrier();
  };
  {
    auto scope = three.scope();
    CHECK_THROWS_AS(group.run(failing), ShapeError);
    std::vector<int> seen(3, -1);
    group.run([&](int r) {
      // Inside its replica, the strategy's collectives run over the replicas.
      const Tensor sum = distribute::get_strategy().all_reduce(constant(std::vector<float>{static_cast<float>(r)}));
      seen[static_cast<std::size_t>(r)] = static_cast<int>(sum.to_vector<float>()[0]);
      CHECK(distribute::get_strategy().worker_index() == r);
    });
    CHECK(seen == std::vector<int>{3, 3, 3});
  }
}

namespace {

// A subclassed model: clone_model cannot rebuild it from a config.
class Subclassed : public models::Model {
 public:
  Subclassed() : Model("subclassed") { dense_ = track(std::make_shared<layers::Dense>(1)); }
  KEEL_LAYER_BOILERPLATE(Subclassed)
  Tensor call(const Tensor& x, bool training) override { return (*dense_)(x, training); }

 private:
  std::shared_ptr<layers::Layer> dense_;
};

}  // namespace

TEST_CASE("in-process replicas need a model clone_model rebuilds: a subclassed model is a ValueError",
          "[distributed]") {
  const auto [x, y] = regression_data(16);
  distribute::MirroredStrategy two(cpus(2));
  auto scope = two.scope();
  Subclassed m;
  m.compile({.optimizer = "sgd", .loss = "mse"});
  CHECK_THROWS_WITH(m.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0}), Contains("clone_model"));
  // train_on_batch and predict run on the model itself.
  CHECK(std::isfinite(m.train_on_batch(x, y).at("loss")));
  CHECK(m.predict(x, {.verbose = 0}).shape() == Shape({16, 1}));
}

TEST_CASE("in-process replicas with Dropout and BatchNormalization train repeatably under fit's seed",
          "[distributed]") {
  // Each replica draws its own dropout masks from a stream of its own, seeded from fit's seed: two
  // runs give the same weights, bit for bit.
  const auto [x, y] = regression_data(64);
  distribute::MirroredStrategy two(cpus(2));
  auto scope = two.scope();
  std::vector<std::vector<Tensor>> runs;
  for (int run = 0; run < 2; ++run) {
    random::set_seed(5);
    models::Sequential m{layers::InputLayer({4}), layers::Dense(16, {.activation = "relu"}), layers::Dropout(0.3),
                         layers::BatchNormalization(), layers::Dense(1)};
    m.compile({.optimizer = "adam", .loss = "mse"});
    const auto h = m.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .seed = 3});
    for (double l : h.history.at("loss")) CHECK(std::isfinite(l));
    runs.push_back(m.get_weights());
  }
  CHECK(max_weight_diff(runs[0], runs[1]) == 0);
}
