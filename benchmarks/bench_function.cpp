// Graph mode (keel::function) against eager execution, in one run:
//
//   add_chain/mode:M       100 adds of 4-element tensors: eager (M=0), traced with every pass
//                          (M=1: the chain fuses into one node), traced with jit_compile off
//                          (M=2: 100 replayed kernel calls). ns_per_op = time / 100.
//   chain5/mode:M          a 5-op elementwise chain (scale, shift, relu, times x, shift) on 4M
//                          floats: eager (0) or traced (1). bytes_per_second counts one read of x
//                          and one write of the result.
//   chain5_sigmoid/mode:M  the same with a sigmoid as the last op (compute-bound: its exp).
//   lstm_step/mode:M       a GradientTape training step (forward, gradient, Adam) of
//                          LSTM(50) + Dense(1), batch 32, seq 50: eager (0) or the whole step
//                          traced as one function (1).
//   cnn_step/mode:M        the same for the seed CIFAR-10 CNN, batch 64 (benchmarks/seed_models.hpp);
//                          peak_mib: the host memory a step holds at its peak beyond what was
//                          held before it (host_memory_stats), plus for a traced step its
//                          graph's planned buffers, which it holds between calls.
//   cnn_new_batch/mode:M   the CNN step at a batch size without a graph (24 sizes in turn):
//                          traced afresh (0), made from a -1 batch signature's fitted graph (1),
//                          or run eagerly (2).
//   cnn_fit/mode:M         model.fit of the seed CNN over 8 batches of 64, compiled with
//                          run_eagerly = true (0) or traced, the default (1).
//   cnn_fit_pair           the two fits of cnn_fit alternating in one loop (eager, then traced,
//                          each iteration), so that a change in the machine's speed during the
//                          run (a shared host) weighs on both: eager_ms, traced_ms (means) and
//                          speedup (eager / traced of the sums).
//   while_step/mode:M      a GradientTape training step through a keel::while_loop of n steps
//                          h <- tanh(h W) (h 16x32, W 32x32), n an argument cycling 1..20: eager
//                          (0) or traced (1: one graph with the loop's gradient for every n).
//
// Read medians: --benchmark_repetitions=5 --benchmark_report_aggregates_only=true.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <chrono>
#include <functional>
#include <vector>

#include "seed_models.hpp"

namespace {

using namespace keel;
using namespace keel::bench;

Tensor add_chain(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < 100; ++i) y = y + x;
  return y;
}

void BM_add_chain(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const Tensor x = random::normal({4});
  auto traced = keel::function(add_chain, {.jit_compile = mode == 1});
  traced(x);  // traces
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(mode == 0 ? add_chain(x) : traced(x));
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  state.counters["ns_per_op"] = ns / (100.0 * static_cast<double>(state.iterations()));
}

// Memory-bound steps (scale, shift, relu, times x, shift), and the same with a sigmoid last,
// whose exp makes the chain compute-bound.
Tensor chain5(const Tensor& x) { return relu(x * 1.5 + 0.25) * x - 1.0; }
Tensor chain5_sigmoid(const Tensor& x) { return sigmoid(relu(x * 1.5 + 0.25) * x); }

void run_chain(benchmark::State& state, Tensor (*chain)(const Tensor&)) {
  const Tensor x = random::normal({4 << 20});
  auto traced = keel::function(chain);
  for (auto _ : state) benchmark::DoNotOptimize(state.range(0) == 0 ? chain(x) : traced(x));
  state.SetBytesProcessed(state.iterations() * x.size() * 8);
}
void BM_chain5(benchmark::State& state) { run_chain(state, chain5); }
void BM_chain5_sigmoid(benchmark::State& state) { run_chain(state, chain5_sigmoid); }

// One training step as a function of the batch: forward and loss under a tape, the gradient,
// the optimizer's update.
std::function<Tensor(const Tensor&, const Tensor&)> training_step(models::Sequential& model) {
  return [&model](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    const Tensor loss = (*model.loss())(y, model(x, true));
    const std::vector<Variable*> vars = model.trainable_weights();
    model.optimizer()->apply(tape.gradient(loss, vars), vars);
    return loss;
  };
}

void run_steps(benchmark::State& state, models::Sequential& model, const Data& d) {
  const auto eager = training_step(model);
  auto traced = keel::function(eager);
  auto step = [&] { return state.range(0) == 0 ? eager(d.x, d.y) : traced(d.x, d.y); };
  for (int i = 0; i < 3; ++i) step();  // builds the model and the optimizer's slots, traces
  const std::size_t before = config::host_memory_stats().allocated_bytes;
  config::reset_host_peak_memory();
  step();
  const double peak = static_cast<double>(config::host_memory_stats().peak_allocated_bytes - before);
  for (auto _ : state) benchmark::DoNotOptimize(step());
  state.SetItemsProcessed(state.iterations() * d.x.shape()[0]);
  // A traced step allocates little: its values live in the graph's planned buffers.
  const double planned = state.range(0) == 0 ? 0 : static_cast<double>(traced.concrete_graph(d.x, d.y).planned_bytes());
  state.counters["peak_mib"] = (peak + planned) / (1 << 20);
  state.counters["planned_mib"] = planned / (1 << 20);  // of which the graph's arena
}

void BM_lstm_step(benchmark::State& state) {
  auto model = lstm(50);
  run_steps(state, *model, lstm_data(50, kLstmBatch));
}

void BM_cnn_step(benchmark::State& state) {
  auto model = cnn();
  run_steps(state, *model, cnn_data(kCnnBatch));
}

// The seed CNN's training step at a batch size it has no graph for, over 24 sizes (40-63) in
// turn: traced afresh (M=0: a new keel::function each call), made from a -1 batch signature's
// fitted graph (M=1: more sizes than the 8 plans it keeps, so every call makes one), or run
// eagerly (M=2) for reference.
void BM_cnn_new_batch(benchmark::State& state) {
  auto model = cnn();
  const Data d = cnn_data(kCnnBatch);
  const auto eager = training_step(*model);
  eager(d.x, d.y);  // builds the model and the optimizer's slots
  std::vector<Data> batches;
  for (std::int64_t b = 40; b < 64; ++b)
    batches.push_back({d.x.slice({keel::range(0, b)}).contiguous(), d.y.slice({keel::range(0, b)}).contiguous()});
  auto generic = keel::function(eager, {.input_signature = {TensorSpec{Shape({-1, 32, 32, 3})}, TensorSpec{Shape({-1}), d.y.dtype()}}});
  generic(d.x, d.y);  // traces and fits the batch
  std::size_t next = 0;
  for (auto _ : state) {
    const Data& b = batches[next++ % batches.size()];
    if (state.range(0) == 0) benchmark::DoNotOptimize(keel::function(eager)(b.x, b.y));
    else if (state.range(0) == 1) benchmark::DoNotOptimize(generic(b.x, b.y));
    else benchmark::DoNotOptimize(eager(b.x, b.y));
  }
  if (generic.trace_count() != 1) state.SkipWithError("the -1 batch signature traced again");
}

// model.fit over 8 batches of 64, compiled with run_eagerly (M=0) or traced (M=1).
void BM_cnn_fit(benchmark::State& state) {
  auto model = cnn();
  model->compile({.optimizer = optimizers::Adam(1e-3),
                  .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                  .run_eagerly = state.range(0) == 0});
  const Data d = cnn_data(8 * kCnnBatch);
  model->fit(d.x, d.y, {.batch_size = kCnnBatch, .epochs = 1, .verbose = 0});  // builds, traces
  for (auto _ : state) model->fit(d.x, d.y, {.batch_size = kCnnBatch, .epochs = 1, .verbose = 0});
  state.SetItemsProcessed(state.iterations() * 8 * kCnnBatch);
}

// cnn_fit's two models, fit in turn each iteration.
void BM_cnn_fit_pair(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto make = [](bool eager) {
    auto model = cnn();
    model->compile({.optimizer = optimizers::Adam(1e-3),
                    .loss = losses::SparseCategoricalCrossentropy({.from_logits = true}),
                    .run_eagerly = eager});
    return model;
  };
  auto eager = make(true), traced = make(false);
  const Data d = cnn_data(8 * kCnnBatch);
  const models::FitOptions options{.batch_size = kCnnBatch, .epochs = 1, .verbose = 0};
  eager->fit(d.x, d.y, options);  // builds
  traced->fit(d.x, d.y, options);  // builds, traces
  double eager_s = 0, traced_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    eager->fit(d.x, d.y, options);
    const auto t1 = Clock::now();
    traced->fit(d.x, d.y, options);
    eager_s += std::chrono::duration<double>(t1 - t0).count();
    traced_s += std::chrono::duration<double>(Clock::now() - t1).count();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["eager_ms"] = 1e3 * eager_s / n;
  state.counters["traced_ms"] = 1e3 * traced_s / n;
  state.counters["speedup"] = eager_s / traced_s;
}

// The loop's training step, eagerly (M=0) or traced (M=1), over trip counts 1..20 in turn.
void BM_while_step(benchmark::State& state) {
  Variable w(random::normal({32, 32}, 0, 0.2), "w");
  const auto step = [&w](const Tensor& h0, const Tensor& n) {
    GradientTape tape;
    const Tensor h = keel::while_loop([&n](const std::vector<Tensor>& s) { return s[1] < n; },
                                      [&w](const std::vector<Tensor>& s) {
                                        return std::vector<Tensor>{tanh(matmul(s[0], w.value())), s[1] + 1.0};
                                      },
                                      {h0, constant(0.0)})[0];
    const Tensor loss = reduce_mean(square(h));
    w.assign_sub(tape.gradient(loss, w) * 0.01);
    return loss;
  };
  auto traced = keel::function(step);
  const Tensor h0 = random::normal({16, 32});
  std::vector<Tensor> counts;
  for (int k = 1; k <= 20; ++k) counts.push_back(constant(static_cast<double>(k)));
  std::size_t next = 0;
  for (auto _ : state) {
    const Tensor& n = counts[next++ % counts.size()];
    benchmark::DoNotOptimize(state.range(0) == 0 ? step(h0, n) : traced(h0, n));
  }
  if (state.range(0) == 1 && traced.trace_count() != 1) state.SkipWithError("the loop traced again");
}

}  // namespace

BENCHMARK(BM_add_chain)->Name("add_chain")->ArgName("mode")->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(BM_chain5)->Name("chain5")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain5_sigmoid)->Name("chain5_sigmoid")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_lstm_step)->Name("lstm_step")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cnn_step)->Name("cnn_step")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cnn_new_batch)->Name("cnn_new_batch")->ArgName("mode")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cnn_fit)->Name("cnn_fit")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cnn_fit_pair)->Name("cnn_fit_pair")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_while_step)->Name("while_step")->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
