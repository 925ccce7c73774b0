// ParameterServerStrategy over MPI. Under mpirun -np 2 (one server, one worker) and -np 3 (one
// server, two workers; tests/cmake/distributed.cmake) the cases train for real; run alone (CTest's
// discovered entries) a job of one process is refused, which is what they then check.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "distribute/communicator.hpp"

using namespace keel;
using Catch::Matchers::Contains;

namespace {

// The processes of this job (MPI initialised on first use), 1 where keel has no MPI.
int job_size() { return distribute::detail::mpi_built() ? distribute::detail::mpi_world_size() : 1; }

// y = x . (1, -2, 0.5, 3) + 0.25 on x uniform in [-1, 1) from a fixed linear congruential
// sequence: a linear model fits it exactly, and its features are independent (so the solution is
// unique).
std::pair<Tensor, Tensor> linear_data(std::int64_t n) {
  std::vector<float> x, y;
  const float w[4] = {1, -2, 0.5f, 3};
  std::uint32_t state = 12345;
  for (std::int64_t i = 0; i < n; ++i) {
    float t = 0.25f;
    for (int j = 0; j < 4; ++j) {
      state = state * 1664525u + 1013904223u;
      x.push_back(static_cast<float>(state >> 8) / 8388608.0f - 1.0f);
      t += x.back() * w[j];
    }
    y.push_back(t);
  }
  return {constant(x, {n, 4}), constant(y, {n, 1})};
}

// A job too small for the options: the refusal every case checks when run alone.
void check_refused_alone(const distribute::ParameterServerOptions& o) {
  if (!distribute::detail::mpi_built()) {
    REQUIRE_THROWS_WITH(distribute::ParameterServerStrategy(o), Contains("built without MPI"));
    return;
  }
  REQUIRE_THROWS_AS(distribute::ParameterServerStrategy(o), ValueError);
  REQUIRE_THROWS_WITH(distribute::ParameterServerStrategy(o), Contains("need " + std::to_string(o.num_ps + 1) +
                                                                       " processes"));
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("ParameterServerStrategy checks its options and the size of the job", "[parameter_server]") {
  REQUIRE_THROWS_WITH(distribute::ParameterServerStrategy({.num_ps = 0}), Contains("num_ps must be at least 1"));
  REQUIRE_THROWS_WITH(distribute::ParameterServerStrategy({.max_staleness = -1}), Contains("max_staleness"));
  REQUIRE_THROWS_WITH(distribute::ParameterServerStrategy({.timeout_s = 0}), Contains("timeout_s"));
  const int n = job_size();
  // As many servers as processes leaves no worker.
  check_refused_alone({.num_ps = n});
}

TEST_CASE("parameter-server training converges on a linear regression, and every process ends with the servers' "
          "weights", "[parameter_server]") {
  const int n = job_size();
  const distribute::ParameterServerOptions o{.num_ps = 1, .max_staleness = 2, .timeout_s = 60};
  if (n < 2) return check_refused_alone(o);
  distribute::ParameterServerStrategy strategy(o);
  const int workers = n - 1;
  CHECK(strategy.num_workers() == workers);
  CHECK(strategy.num_replicas_in_sync() == 1);
  CHECK(strategy.is_parameter_server() == (strategy.worker_index() == -1));
  CHECK(strategy.is_chief() == (strategy.worker_index() == 0));
  if (strategy.is_parameter_server()) {
    CHECK_THROWS_WITH(strategy.barrier(), Contains("parameter server"));
  }

  auto scope = strategy.scope();
  models::Sequential model{layers::InputLayer({4}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::SGD(0.1), .loss = "mse"});
  const auto [x, y] = linear_data(240);
  const std::int64_t batch = 8, epochs = 12;
  const auto before = model.evaluate(x, y, {.verbose = 0}).at("loss");
  // This worker's own running loss at its last step (the logs before fit combines the workers').
  double own_loss = 0;
  callbacks::CallbackList cbs{std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
      .on_train_batch_end = [&](std::int64_t, const callbacks::Logs& l) { own_loss = l.at("loss"); }})};
  const models::History h = model.fit(x, y, {.batch_size = batch, .epochs = static_cast<int>(epochs), .verbose = 0, .callbacks = cbs,
                                             .validation_data = std::pair<models::ModelData, models::ModelData>{x, y}});
  const auto stats = strategy.stats();
  if (strategy.is_parameter_server()) {
    CHECK(h.epoch.empty());
    // One update per worker step: each worker's 240 / W rows in batches of 8, 12 times.
    std::int64_t expected = 0;
    for (int w = 0; w < workers; ++w) {
      const std::int64_t rows = 240 / workers + (w < 240 % workers ? 1 : 0);
      expected += (rows + batch - 1) / batch * epochs;
    }
    CHECK(stats.updates == expected);
    CHECK(stats.max_clock_lead <= o.max_staleness);
    // A gradient is stale by the updates the other workers pushed between its worker's pull
    // and its push. Pulled at clock c, the worker stays at c until it pushes; another worker,
    // at least c - s then, is answered up to c + s and its push of c + s + 1 is applied before
    // it is held: at most 2 s + 1 updates from each other worker.
    CHECK(stats.max_staleness <= static_cast<std::int64_t>(workers - 1) * (2 * o.max_staleness + 1));
    if (workers == 1) CHECK(stats.max_staleness == 0);
  } else {
    REQUIRE(h.history.at("loss").size() == static_cast<std::size_t>(epochs));
    CHECK(h.history.at("loss").back() < h.history.at("loss").front());
    CHECK(stats.steps == (240 / workers + batch - 1) / batch * epochs);
  }
  // The exact solution: kernel (1, -2, 0.5, 3), bias 0.25. Every process holds the same weights
  // (the servers' final ones), close to it.
  const auto kernel = values(model.trainable_weights()[0]->peek()), bias = values(model.trainable_weights()[1]->peek());
  const double want[4] = {1, -2, 0.5, 3};
  for (int j = 0; j < 4; ++j) CHECK(kernel[static_cast<std::size_t>(j)] == Approx(want[j]).margin(0.02));
  CHECK(bias[0] == Approx(0.25).margin(0.02));
  const double after = model.evaluate(x, y, {.verbose = 0}).at("loss");
  CHECK(after < before * 1e-3);
  if (!strategy.is_parameter_server()) {
    // The epoch logs are the workers' combined: the mean of their losses weighted by the rows
    // each trained (240 / W each, the remainder to the first), the same on every worker, and
    // val_loss the mean of the workers' evaluations.
    const int w = strategy.worker_index();
    const double rows = static_cast<double>(240 / workers + (w < 240 % workers ? 1 : 0));
    const double weighted = values(strategy.all_reduce(constant(own_loss * rows), distribute::ReduceOp::sum))[0];
    CHECK(h.history.at("loss").back() == Approx(weighted / 240).epsilon(1e-12));
    for (const char* key : {"loss", "val_loss"}) {
      const Tensor mine = constant(h.history.at(key).back());
      CHECK(values(strategy.all_reduce(mine, distribute::ReduceOp::max)) ==
            values(strategy.all_reduce(mine, distribute::ReduceOp::min)));
    }
    // The workers agree with each other bit for bit.
    for (Variable* v : model.trainable_weights()) {
      const Tensor hi = strategy.all_reduce(v->peek(), distribute::ReduceOp::max);
      const Tensor lo = strategy.all_reduce(v->peek(), distribute::ReduceOp::min);
      CHECK(values(hi) == values(lo));
    }
  }
}

TEST_CASE("global_clipnorm clips the whole gradient when several servers share the variables", "[parameter_server]") {
  const int n = job_size();
  const distribute::ParameterServerOptions o{.num_ps = 2, .max_staleness = 0, .timeout_s = 60};
  if (n < 3) return check_refused_alone(o);
  const auto [x, y] = linear_data(16);
  const double lr = 0.1, clip = 0.5;
  // The same step without a strategy: kernel and bias clipped together, by the norm of both.
  auto make = [&] {
    auto m = std::make_shared<models::Sequential>(
        std::vector<std::shared_ptr<layers::Layer>>{std::make_shared<layers::InputLayer>(Shape{4}),
                                                    std::make_shared<layers::Dense>(1)});
    m->trainable_weights()[0]->assign(constant<float>({0.1f, 0.2f, -0.3f, 0.4f}, {4, 1}));
    m->trainable_weights()[1]->assign(constant<float>({-0.5f}));
    m->compile({.optimizer = optimizers::SGD(lr, {.global_clipnorm = clip}), .loss = "mse"});
    return m;
  };
  auto reference = make();
  reference->fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  distribute::ParameterServerStrategy strategy(o);
  auto scope = strategy.scope();
  auto model = make();
  // Only the first n - 2 workers' rows: with one worker (n = 3) that is all 16, as the reference.
  model->fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  if (n == 3)
    for (std::size_t i = 0; i < 2; ++i) {
      const auto got = values(model->trainable_weights()[i]->peek()), want = values(reference->trainable_weights()[i]->peek());
      for (std::size_t j = 0; j < want.size(); ++j) CHECK(got[j] == Approx(want[j]).margin(1e-6));
    }
  // The step moved the weights by exactly lr * clip in norm (the gradient's norm exceeds clip here).
  double moved = 0;
  const double start[5] = {0.1, 0.2, -0.3, 0.4, -0.5};
  const auto k = values(model->trainable_weights()[0]->peek()), b = values(model->trainable_weights()[1]->peek());
  for (std::size_t j = 0; j < 4; ++j) moved += (k[j] - start[j]) * (k[j] - start[j]);
  moved += (b[0] - start[4]) * (b[0] - start[4]);
  if (n == 3) CHECK(std::sqrt(moved) == Approx(lr * clip).epsilon(1e-5));
}

TEST_CASE("a slow worker holds the others back by at most max_staleness steps", "[parameter_server]") {
  const int n = job_size();
  for (int bound : {0, 1}) {
    const distribute::ParameterServerOptions o{.num_ps = 1, .max_staleness = bound, .timeout_s = 60};
    if (n < 2) return check_refused_alone(o);
    distribute::ParameterServerStrategy strategy(o);
    auto scope = strategy.scope();
    models::Sequential model{layers::InputLayer({4}), layers::Dense(3, {.activation = "tanh"}), layers::Dense(1)};
    model.compile({.optimizer = optimizers::Adam(0.01), .loss = "mse"});
    const auto [x, y] = linear_data(96);
    // Worker 1 (where there is one) sleeps 3 ms before each batch: without the bound worker 0
    // would finish its 12 steps first.
    callbacks::CallbackList cbs;
    if (strategy.worker_index() == 1)
      cbs.push_back(std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
          .on_train_batch_begin = [](std::int64_t, const callbacks::Logs&) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
          }}));
    model.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = cbs});
    if (strategy.is_parameter_server()) {
      const auto stats = strategy.stats();
      CHECK(stats.max_clock_lead <= bound);
      // With two workers and a slow one the fast one runs into the bound.
      if (strategy.num_workers() > 1) CHECK(stats.max_clock_lead == bound);
      CHECK(stats.updates == 12 * 2);
    }
  }
}

TEST_CASE("Datasets are shared out to the workers by element", "[parameter_server]") {
  const int n = job_size();
  const distribute::ParameterServerOptions o{.num_ps = 1, .max_staleness = 4, .timeout_s = 60};
  if (n < 2) return check_refused_alone(o);
  distribute::ParameterServerStrategy strategy(o);
  auto scope = strategy.scope();
  models::Sequential model{layers::InputLayer({4}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
  const auto [x, y] = linear_data(64);
  // 8 batches of 8: worker w of W takes batches w, w + W, ...
  const auto ds = data::Dataset<>::from_tensor_slices({x, y}).batch(8);
  model.fit(ds, {.epochs = 3, .verbose = 0});
  const int workers = strategy.num_workers();
  if (strategy.is_parameter_server()) {
    CHECK(strategy.stats().updates == 8 * 3);
  } else {
    const int w = strategy.worker_index();
    CHECK(strategy.stats().steps == (8 - w + workers - 1) / workers * 3);
  }
}

TEST_CASE("a worker that stops pushing makes the server and the workers it holds throw, naming it, within "
          "timeout_s", "[.fault]") {
  // Run by its own CTest entry with 3 processes: worker 1 leaves fit at its third step.
  distribute::ParameterServerStrategy s({.num_ps = 1, .max_staleness = 1, .timeout_s = 3});
  if (s.num_workers() < 2) return;
  auto scope = s.scope();
  models::Sequential model{layers::InputLayer({4}), layers::Dense(1)};
  model.compile({.optimizer = optimizers::SGD(0.05), .loss = "mse"});
  const auto [x, y] = linear_data(96);
  callbacks::CallbackList cbs;
  if (s.worker_index() == 1)
    cbs.push_back(std::make_shared<callbacks::LambdaCallback>(callbacks::LambdaCallbackOptions{
        .on_train_batch_begin = [](std::int64_t step, const callbacks::Logs&) {
          if (step == 2) throw RuntimeError("worker 1 leaves");
        }}));
  const auto t0 = std::chrono::steady_clock::now();
  if (s.worker_index() == 1) {
    REQUIRE_THROWS_WITH(model.fit(x, y, {.batch_size = 8, .epochs = 5, .verbose = 0, .callbacks = cbs}),
                        Contains("worker 1 leaves"));
    return;
  }
  try {
    model.fit(x, y, {.batch_size = 8, .epochs = 5, .verbose = 0});
    FAIL("fit completed without worker 1");
  } catch (const RuntimeError& e) {
    // The server throws; worker 0, held two steps ahead of worker 1, is told why.
    CHECK_THAT(e.what(), Contains("worker 1 (rank 1)"));
    CHECK_THAT(e.what(), Contains("timeout_s = 3"));
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited >= 3);
  CHECK(waited < 15);
}
