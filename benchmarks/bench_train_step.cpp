// Whole training steps through the Keras API, at 1 and 2 threads: the seed CIFAR-10 CNN and a
// small LSTM regression, the two models scripts/bench-vs-peer.sh compares with libtorch.
//
//   cnn_fit/threads:T            model.fit over 8 batches of 64 (one epoch, shuffled), per step
//   cnn_tape/threads:T           one hand-written GradientTape step: forward + loss, gradient,
//                                optimizer apply
//   lstm_fit/seq:S/threads:T     as cnn_fit, batch 32
//   lstm_tape/seq:S/threads:T    as cnn_tape
//
// The models are the ones the libtorch comparison runs (benchmarks/seed_models.hpp).
//
// Counters: ms_per_step (wall), images_per_s (samples per second; items_per_second says the
// same), and for the tape steps the split of a step: fwd_ms (forward and loss, recorded),
// bwd_ms (tape.gradient), opt_ms (Adam), kernel_ms (wall time inside backend kernels, all
// phases; measured on extra steps with the clock on, as a share of their time) and
// overhead_ms = ms_per_step - kernel_ms: dispatch, shape checks, the tape and allocation.
// Read medians: --benchmark_repetitions=7 --benchmark_report_aggregates_only=true.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/kernel_clock.hpp"
#include "seed_models.hpp"

namespace {

using namespace keel;
using namespace keel::bench;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class Threads {
 public:
  explicit Threads(int n) : previous_(config::num_threads()) { config::set_num_threads(n); }
  ~Threads() { config::set_num_threads(previous_); }

 private:
  int previous_;
};

constexpr std::int64_t kFitBatches = 8;

void fit_steps(benchmark::State& state, models::Sequential& model, const Data& d, std::int64_t batch) {
  model.fit(d.x, d.y, {.batch_size = batch, .epochs = 1, .verbose = 0});  // builds, warms up
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    model.fit(d.x, d.y, {.batch_size = batch, .epochs = 1, .verbose = 0});
    total += ms_since(t0);
  }
  const double steps = static_cast<double>(state.iterations()) * kFitBatches;
  state.SetItemsProcessed(state.iterations() * kFitBatches * batch);
  state.counters["ms_per_step"] = total / steps;
  state.counters["images_per_s"] = steps * static_cast<double>(batch) / (total * 1e-3);
}

void tape_steps(benchmark::State& state, models::Sequential& model, const Data& d) {
  const auto& loss_fn = *model.loss();
  const auto optimizer = model.optimizer();
  auto step = [&](double* split) {
    const auto t0 = Clock::now();
    GradientTape tape;
    const Tensor loss = loss_fn(d.y, model(d.x, true));
    const auto t1 = Clock::now();
    const std::vector<Variable*> vars = model.trainable_weights();
    const std::vector<Tensor> grads = tape.gradient(loss, vars);
    const auto t2 = Clock::now();
    optimizer->apply(grads, vars);
    if (split) {
      split[0] += std::chrono::duration<double, std::milli>(t1 - t0).count();
      split[1] += std::chrono::duration<double, std::milli>(t2 - t1).count();
      split[2] += ms_since(t2);
    }
  };
  for (int i = 0; i < 3; ++i) step(nullptr);  // builds the model and the optimizer's slots
  double split[3] = {0, 0, 0};
  for (auto _ : state) step(split);
  const double n = static_cast<double>(state.iterations());
  const double total = split[0] + split[1] + split[2];
  // Kernel time from a few more steps with the kernel clock on (its two clock reads per kernel
  // call stay out of the timed steps above), as a share of those steps' own wall time.
  double clocked[3] = {0, 0, 0};
  const int extra = static_cast<int>(std::max<std::int64_t>(3, state.iterations() / 4));
  backend::set_kernel_clock(true);
  for (int i = 0; i < extra; ++i) step(clocked);
  backend::set_kernel_clock(false);
  const double share = backend::kernel_clock_seconds() * 1e3 / (clocked[0] + clocked[1] + clocked[2]);
  const double kernel = share * total;
  const std::int64_t batch = d.x.shape()[0];
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["ms_per_step"] = total / n;
  state.counters["images_per_s"] = n * static_cast<double>(batch) / (total * 1e-3);
  state.counters["fwd_ms"] = split[0] / n;
  state.counters["bwd_ms"] = split[1] / n;
  state.counters["opt_ms"] = split[2] / n;
  state.counters["kernel_ms"] = kernel / n;
  state.counters["overhead_ms"] = (total - kernel) / n;
}

void BM_cnn_fit(benchmark::State& state) {
  Threads threads(static_cast<int>(state.range(0)));
  auto model = cnn();
  fit_steps(state, *model, cnn_data(kFitBatches * kCnnBatch), kCnnBatch);
}

void BM_cnn_tape(benchmark::State& state) {
  Threads threads(static_cast<int>(state.range(0)));
  auto model = cnn();
  tape_steps(state, *model, cnn_data(kCnnBatch));
}

void BM_lstm_fit(benchmark::State& state) {
  Threads threads(static_cast<int>(state.range(1)));
  auto model = lstm(state.range(0));
  fit_steps(state, *model, lstm_data(state.range(0), kFitBatches * kLstmBatch), kLstmBatch);
}

void BM_lstm_tape(benchmark::State& state) {
  Threads threads(static_cast<int>(state.range(1)));
  auto model = lstm(state.range(0));
  tape_steps(state, *model, lstm_data(state.range(0), kLstmBatch));
}

BENCHMARK(BM_cnn_fit)->Name("cnn_fit")->ArgName("threads")->Arg(1)->Arg(2)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cnn_tape)->Name("cnn_tape")->ArgName("threads")->Arg(1)->Arg(2)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_lstm_fit)->Name("lstm_fit")->ArgNames({"seq", "threads"})
    ->ArgsProduct({{3, 50}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_lstm_tape)->Name("lstm_tape")->ArgNames({"seq", "threads"})
    ->ArgsProduct({{3, 50}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
