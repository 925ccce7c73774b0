// Normalisation throughput on 4 MiB of float32 (1M elements), in bytes of the logical op per
// second (every input element read once + every output element written once; Google Benchmark
// prints bytes_per_second in binary units), at 1 and 2 threads, beside a memcpy of the same bytes.
//
//   batch_norm/train_forward        [64,32,32,16], batch statistics + normalise: x in, y out (2N)
//   batch_norm/train_forward_backward  the forward + the backward wrt x, gamma, beta:
//                                   x in, y out, then x and dy in, dx out (5N)
//   batch_norm/inference_forward    moving statistics: x in, y out (2N)
//   batch_norm/composite_forward    the same training forward from plain ops (moments, sub, mul,
//                                   add...), for scale: what the fused kernel saves
//   layer_norm/forward/<rows>x<cols>   over the last axis: x in, y out (2N)
//   layer_norm/forward_backward/...    + the backward wrt x, gamma, beta (5N)
//   moments/<fused|composite>/layout:L  the mean and biased variance: x in (N); L = 0: over the
//                                   last axis of [1024, 1024], 1: the spatial axes {1, 2} of
//                                   [64, 32, 32, 16] (instance statistics), 2: GroupNormalization's
//                                   {1, 2, 4} of [64, 32, 32, 4, 4]; composite = plain reductions
//   moments_backward/<fused|composite>/layout:L  + the gradient wrt x: x in twice, dx out (3N)
//   group_norm/<fused|composite>    [64,32,32,16] in 4 groups with gamma and beta: x in, y out (2N);
//                                   composite = the plain ops it replaces (reshape, reductions,
//                                   elementwise)
//   group_norm_backward/<...>       + the gradient wrt x, gamma and beta (5N)
//   memcpy/<bytes>                  the baseline: a memcpy moving the same number of bytes (half
//                                   read, half written), split over the same number of threads
//
// The fused batch-norm forward reads x twice (statistics, then normalisation), so its best
// possible rate is about 2/3 of memcpy's once x no longer fits in cache.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr std::int64_t kN = 64 * 32 * 32 * 16;  // 1M elements
constexpr std::int64_t kF = sizeof(float);

int threads_of(const benchmark::State& state) { return static_cast<int>(state.range(0)); }

// Sets keel's thread count for one benchmark and restores it afterwards.
class ThreadScope {
 public:
  explicit ThreadScope(int n) : previous_(keel::config::num_threads()) { keel::config::set_num_threads(n); }
  ~ThreadScope() { keel::config::set_num_threads(previous_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
};

struct BatchNormData {
  keel::Tensor x = keel::random::normal({64, 32, 32, 16}, 0.5, 2.0);
  keel::Tensor gamma = keel::random::normal({16}, 1.0, 0.1);
  keel::Tensor beta = keel::random::normal({16});
  keel::Tensor mm = keel::zeros({16});
  keel::Tensor mv = keel::ones({16});
};

void BM_batch_norm_train_forward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const BatchNormData d;
  for (auto _ : state) {
    auto r = keel::batch_norm(d.x, d.gamma, d.beta, d.mm, d.mv, true);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_batch_norm_train_forward_backward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const BatchNormData d;
  const keel::Tensor dy = keel::random::normal({64, 32, 32, 16});
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(d.x);
    tape.watch(d.gamma);
    tape.watch(d.beta);
    auto r = keel::batch_norm(d.x, d.gamma, d.beta, d.mm, d.mv, true);
    auto g = tape.gradient(r.y, {d.x, d.gamma, d.beta}, dy);
    benchmark::DoNotOptimize(g);
  }
  state.SetBytesProcessed(state.iterations() * 5 * kN * kF);
}

void BM_batch_norm_inference_forward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const BatchNormData d;
  for (auto _ : state) {
    auto r = keel::batch_norm(d.x, d.gamma, d.beta, d.mm, d.mv, false);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_batch_norm_composite_forward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const BatchNormData d;
  for (auto _ : state) {
    auto [mean, var] = keel::moments(d.x, {0, 1, 2}, true);
    keel::Tensor y = (d.x - mean) * keel::rsqrt(var + 1e-3) * d.gamma + d.beta;
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

// layer_norm over the last axis of a [rows, kN / rows] tensor; range(1) = rows.
void BM_layer_norm_forward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const std::int64_t rows = state.range(1), cols = kN / rows;
  const keel::Tensor x = keel::random::normal({rows, cols});
  const keel::Tensor gamma = keel::random::normal({cols}), beta = keel::random::normal({cols});
  for (auto _ : state) {
    keel::Tensor y = keel::layer_norm(x, gamma, beta);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_layer_norm_forward_backward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const std::int64_t rows = state.range(1), cols = kN / rows;
  const keel::Tensor x = keel::random::normal({rows, cols});
  const keel::Tensor gamma = keel::random::normal({cols}), beta = keel::random::normal({cols});
  const keel::Tensor dy = keel::random::normal({rows, cols});
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(x);
    tape.watch(gamma);
    tape.watch(beta);
    keel::Tensor y = keel::layer_norm(x, gamma, beta);
    auto g = tape.gradient(y, {x, gamma, beta}, dy);
    benchmark::DoNotOptimize(g);
  }
  state.SetBytesProcessed(state.iterations() * 5 * kN * kF);
}

// moments over layout range(1) (see the top), by the fused op or by the plain reductions it replaces.
struct MomentsCase {
  keel::Tensor x;
  std::vector<int> axes;
};
MomentsCase moments_case(std::int64_t layout) {
  if (layout == 0) return {keel::random::normal({1024, 1024}), {1}};
  if (layout == 1) return {keel::random::normal({64, 32, 32, 16}), {1, 2}};
  return {keel::random::normal({64, 32, 32, 4, 4}), {1, 2, 4}};
}
std::pair<keel::Tensor, keel::Tensor> plain_moments(const keel::Tensor& x, const std::vector<int>& axes) {
  const keel::Tensor mean = keel::reduce_mean(x, axes, true);
  return {mean, keel::reduce_mean(keel::square(x - mean), axes, true)};
}

template <bool Fused, bool Backward>
void BM_moments(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const MomentsCase c = moments_case(state.range(1));
  for (auto _ : state) {
    keel::GradientTape tape;
    if (Backward) tape.watch(c.x);
    const auto [mean, var] = Fused ? keel::moments(c.x, c.axes, true) : plain_moments(c.x, c.axes);
    if (Backward) {
      keel::Tensor g = tape.gradient(keel::reduce_sum(mean) + keel::reduce_sum(var), c.x);
      benchmark::DoNotOptimize(g);
    }
    benchmark::DoNotOptimize(var);
  }
  state.SetBytesProcessed(state.iterations() * (Backward ? 3 : 1) * kN * kF);
}

keel::Tensor plain_group_norm(const keel::Tensor& x, const keel::Tensor& gamma, const keel::Tensor& beta) {
  const keel::Tensor g = keel::reshape(x, {64, 1024, 4, 4});
  const auto [mean, var] = plain_moments(g, {1, 3});
  const keel::Tensor y = keel::reshape((g - mean) * keel::rsqrt(var + 1e-3), x.shape());
  return y * gamma + beta;
}

template <bool Fused, bool Backward>
void BM_group_norm(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const BatchNormData d;
  for (auto _ : state) {
    keel::GradientTape tape;
    if (Backward) {
      tape.watch(d.x);
      tape.watch(d.gamma);
      tape.watch(d.beta);
    }
    const keel::Tensor y = Fused ? keel::group_norm(d.x, 4, d.gamma, d.beta) : plain_group_norm(d.x, d.gamma, d.beta);
    if (Backward) {
      auto g = tape.gradient(y, {d.x, d.gamma, d.beta}, d.x);
      benchmark::DoNotOptimize(g);
    }
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * (Backward ? 5 : 2) * kN * kF);
}

// memcpy of range(1) bytes in total (read + written), split into one chunk per thread. The
// benchmark target links no OpenMP, so the second thread is a std::thread started per
// iteration (tens of microseconds against a copy of several milliseconds).
void BM_memcpy(benchmark::State& state) {
  const int threads = threads_of(state);
  const auto copy_bytes = static_cast<std::size_t>(state.range(1) / 2);
  std::vector<char> src(copy_bytes, 1);
  std::vector<char> dst(copy_bytes, 0);  // touched, so page faults are not timed
  auto part = [&](int t) {
    const std::size_t chunk = (copy_bytes + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
    const std::size_t begin = std::min(copy_bytes, static_cast<std::size_t>(t) * chunk);
    const std::size_t end = std::min(copy_bytes, begin + chunk);
    std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
  };
  for (auto _ : state) {
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t) helpers.emplace_back(part, t);
    part(0);
    for (auto& h : helpers) h.join();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(1));
}

void thread_args(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}

void layer_norm_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "rows"});
  for (std::int64_t rows : {kN / 16, std::int64_t{1024}})  // [65536, 16] and [1024, 1024]
    for (int t : {1, 2}) b->Args({t, rows});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void moments_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "layout"});
  for (std::int64_t layout : {0, 1, 2})
    for (int t : {1, 2}) b->Args({t, layout});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void memcpy_args(benchmark::internal::Benchmark* b, std::int64_t bytes) {
  b->ArgNames({"threads", "bytes"})->Args({1, bytes})->Args({2, bytes})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_batch_norm_train_forward)->Name("batch_norm/train_forward")->Apply(thread_args);
BENCHMARK(BM_batch_norm_train_forward_backward)->Name("batch_norm/train_forward_backward")->Apply(thread_args);
BENCHMARK(BM_batch_norm_inference_forward)->Name("batch_norm/inference_forward")->Apply(thread_args);
BENCHMARK(BM_batch_norm_composite_forward)->Name("batch_norm/composite_forward")->Apply(thread_args);
BENCHMARK(BM_layer_norm_forward)->Name("layer_norm/forward")->Apply(layer_norm_args);
BENCHMARK(BM_layer_norm_forward_backward)->Name("layer_norm/forward_backward")->Apply(layer_norm_args);
BENCHMARK(BM_moments<true, false>)->Name("moments/fused")->Apply(moments_args);
BENCHMARK(BM_moments<false, false>)->Name("moments/composite")->Apply(moments_args);
BENCHMARK(BM_moments<true, true>)->Name("moments_backward/fused")->Apply(moments_args);
BENCHMARK(BM_moments<false, true>)->Name("moments_backward/composite")->Apply(moments_args);
BENCHMARK(BM_group_norm<true, false>)->Name("group_norm/fused")->Apply(thread_args);
BENCHMARK(BM_group_norm<false, false>)->Name("group_norm/composite")->Apply(thread_args);
BENCHMARK(BM_group_norm<true, true>)->Name("group_norm_backward/fused")->Apply(thread_args);
BENCHMARK(BM_group_norm<false, true>)->Name("group_norm_backward/composite")->Apply(thread_args);
BENCHMARK(BM_memcpy)->Name("memcpy/as_forward")->Apply([](benchmark::internal::Benchmark* b) {
  memcpy_args(b, 2 * kN * kF);
});
BENCHMARK(BM_memcpy)->Name("memcpy/as_forward_backward")->Apply([](benchmark::internal::Benchmark* b) {
  memcpy_args(b, 5 * kN * kF);
});

}  // namespace

BENCHMARK_MAIN();
