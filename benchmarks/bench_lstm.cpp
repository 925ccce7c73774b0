// One training step of a small recurrent regression model, the case where eager per-op cost
// dominates: LSTM(1 -> 50 units) on [batch 32, time T, 1] -> last hidden state -> Dense(1),
// mean squared error, Adam. At 1 thread.
//
//   lstm_train_step/seq:T   forward + backward (GradientTape) + an Adam update of the five
//                           weights, written inline with keel ops and Variable::assign_sub
//   lstm_forward_backward/seq:T   the same without the Adam update
//   lstm_forward/seq:T      the forward pass alone, recorded on a tape (the tape is dropped)
//   lstm_inference/seq:T    the forward pass with no tape
//
// Counters: ms_per_step (wall time); steps/s is items_per_second. The comparison with libtorch on
// the same step is scripts/bench-vs-peer.sh, which runs both in one run (bench_train_step has the
// Keras-layer version of this model). The machines are shared: run with
// --benchmark_repetitions=5 and read the medians.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr std::int64_t kBatch = 32, kUnits = 50, kFeatures = 1;

// Keeps keel at one thread for the benchmark, restoring the previous setting after it.
class OneThread {
 public:
  OneThread() : previous_(keel::config::num_threads()) { keel::config::set_num_threads(1); }
  ~OneThread() { keel::config::set_num_threads(previous_); }

 private:
  int previous_;
};

struct Model {
  keel::Variable kernel, recurrent_kernel, bias, dense_w, dense_b;
  keel::Tensor x, y, h0, c0;

  explicit Model(std::int64_t seq) {
    keel::random::set_seed(7);
    // Glorot-uniform-like scales; the forget-gate bias starts at 1 (Keras' unit_forget_bias).
    kernel = keel::Variable(keel::random::uniform({kFeatures, 4 * kUnits}, -0.17, 0.17), "kernel");
    recurrent_kernel = keel::Variable(keel::random::uniform({kUnits, 4 * kUnits}, -0.12, 0.12),
                                      "recurrent_kernel");
    std::vector<float> b(4 * kUnits, 0.0f);
    for (std::int64_t j = kUnits; j < 2 * kUnits; ++j) b[static_cast<std::size_t>(j)] = 1.0f;
    bias = keel::Variable(keel::constant(b), "bias");
    dense_w = keel::Variable(keel::random::uniform({kUnits, 1}, -0.3, 0.3), "dense/kernel");
    dense_b = keel::Variable(keel::zeros({1}), "dense/bias");
    x = keel::random::normal({kBatch, seq, kFeatures});
    y = keel::random::normal({kBatch, 1});
    h0 = keel::zeros({kBatch, kUnits});
    c0 = keel::zeros({kBatch, kUnits});
  }

  keel::Tensor loss() const {
    const keel::LSTMSequence s = keel::lstm(x, h0, c0, kernel, recurrent_kernel, bias);
    const keel::Tensor pred = keel::add(keel::matmul(s.h, dense_w), dense_b);  // Dense(1)
    return keel::reduce_mean(keel::square(keel::sub(pred, y)));
  }

  std::vector<keel::Variable*> weights() {
    return {&kernel, &recurrent_kernel, &bias, &dense_w, &dense_b};
  }
};

// Adam (Kingma & Ba) with Keras' defaults, the bias correction folded into the step size.
struct Adam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7;
  std::int64_t t = 0;
  std::vector<keel::Tensor> m, v;

  void apply(const std::vector<keel::Tensor>& grads, const std::vector<keel::Variable*>& vars) {
    if (m.empty())
      for (const auto* var : vars) {
        m.push_back(keel::zeros_like(var->peek()));
        v.push_back(keel::zeros_like(var->peek()));
      }
    ++t;
    const double step = lr * std::sqrt(1 - std::pow(beta2, double(t))) / (1 - std::pow(beta1, double(t)));
    for (std::size_t i = 0; i < vars.size(); ++i) {
      const keel::Tensor& g = grads[i];
      m[i] = m[i] * beta1 + g * (1 - beta1);
      v[i] = v[i] * beta2 + keel::square(g) * (1 - beta2);
      vars[i]->assign_sub(m[i] * step / (keel::sqrt(v[i]) + epsilon));
    }
  }
};

// Wall time of the timed loop, for counters in plain milliseconds (Google Benchmark's rate
// counters would print them with a misleading "/s" suffix).
class LoopTimer {
 public:
  LoopTimer() : start_(std::chrono::steady_clock::now()) {}
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

void set_counters(benchmark::State& state, const LoopTimer& timer) {
  state.SetItemsProcessed(state.iterations());
  state.counters["ms_per_step"] = benchmark::Counter(timer.elapsed_ms(), benchmark::Counter::kAvgIterations);
}

void BM_lstm_train_step(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  OneThread one;
  const std::int64_t seq = state.range(0);
  Model model(seq);
  Adam adam;
  const auto vars = model.weights();
  const LoopTimer timer;
  for (auto _ : state) {
    keel::GradientTape tape;
    const keel::Tensor loss = model.loss();
    const std::vector<keel::Tensor> grads = tape.gradient(loss, vars);
    adam.apply(grads, vars);
    benchmark::DoNotOptimize(loss);
  }
  set_counters(state, timer);
}
BENCHMARK(BM_lstm_train_step)->Name("lstm_train_step")->ArgName("seq")->Arg(3)->Arg(50)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_lstm_forward_backward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  OneThread one;
  const std::int64_t seq = state.range(0);
  Model model(seq);
  const auto vars = model.weights();
  const LoopTimer timer;
  for (auto _ : state) {
    keel::GradientTape tape;
    const keel::Tensor loss = model.loss();
    std::vector<keel::Tensor> grads = tape.gradient(loss, vars);
    benchmark::DoNotOptimize(grads);
  }
  set_counters(state, timer);
}
BENCHMARK(BM_lstm_forward_backward)->Name("lstm_forward_backward")->ArgName("seq")->Arg(3)->Arg(50)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_lstm_forward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  OneThread one;
  const std::int64_t seq = state.range(0);
  Model model(seq);
  const LoopTimer timer;
  for (auto _ : state) {
    keel::GradientTape tape;
    keel::Tensor loss = model.loss();
    benchmark::DoNotOptimize(loss);
  }
  set_counters(state, timer);
}
BENCHMARK(BM_lstm_forward)->Name("lstm_forward")->ArgName("seq")->Arg(3)->Arg(50)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_lstm_inference(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  OneThread one;
  const std::int64_t seq = state.range(0);
  Model model(seq);
  const LoopTimer timer;
  for (auto _ : state) {
    keel::Tensor loss = model.loss();
    benchmark::DoNotOptimize(loss);
  }
  set_counters(state, timer);
}
BENCHMARK(BM_lstm_inference)->Name("lstm_inference")->ArgName("seq")->Arg(3)->Arg(50)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
