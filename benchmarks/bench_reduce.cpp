// Reductions, scans and softmax of a [4096, 1024] float32 tensor (16 MiB), in bytes read + written per second
// (bytes_per_second, binary units), at 1 and 2 threads:
//   reduce_sum/all          every element -> a scalar
//   reduce_sum/last_axis    [4096, 1024] -> [4096]   (contiguous rows: horizontal sums)
//   reduce_sum/first_axis   [4096, 1024] -> [1024]   (strided columns: vertical sums)
//   reduce_max/...          the same three shapes with max (NaN-propagating compare + select)
//   argmax/last_axis        [4096, 1024] -> [4096] int64 indices (read 1 array)
//   cumsum/last_axis,       running sums along the rows or down the columns (read 1, write 1
//   cumsum/first_axis       array)
//   softmax/last_axis,      softmax and log_softmax over the rows (read 1, write 1 array)
//   softmax_grad/last_axis  the gradient of sum(softmax(x, -1) * w) under a GradientTape: softmax,
//                           the product and its gradient, softmax's gradient (counted as 5 arrays)
//   global_avg_pool         reduce_mean over {1, 2} of [16, 64, 64, 64] (NHWC, the same 16 MiB):
//                           the middle axes (read 1 array)
//   log_softmax/last_axis
//   reduce_sum/short_rows,  the same 16 MiB as [1048576, 4] summed over its last axis (rows
//   reduce_max/short_rows   shorter than a SIMD batch: folded side by side in lanes)
//   softmax/short_rows      softmax over the rows of [524288, 8] (read 1, write 1 array)
//   argmax/short_rows       argmax over the rows of [1048576, 4] (read 1 array)
//   sparse_softmax_ce/...   sparse_softmax_cross_entropy_with_logits of [4096, 1024] logits and of
//                           [1048576, 4] (short_rows) with random labels (read 1 array)
//   sparse_softmax_ce_grad/ the same loss and the logits' gradient of its sum (3 arrays)
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

namespace {

constexpr std::int64_t kRows = 4096;
constexpr std::int64_t kCols = 1024;
constexpr std::int64_t kF = sizeof(float);

using ReduceFn = keel::Tensor (*)(const keel::Tensor&, std::vector<int>, bool);

void run(benchmark::State& state, const std::vector<int>& axes, std::int64_t out_elements,
         ReduceFn reduce = keel::reduce_sum) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const int previous_threads = keel::config::num_threads();
  keel::config::set_num_threads(static_cast<int>(state.range(0)));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor s = reduce(x, axes, false);
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * (kRows * kCols + out_elements) * kF);
  keel::config::set_num_threads(previous_threads);
}

void BM_reduce_sum_all(benchmark::State& state) { run(state, {}, 1); }
void BM_reduce_sum_last_axis(benchmark::State& state) { run(state, {-1}, kRows); }
void BM_reduce_sum_first_axis(benchmark::State& state) { run(state, {0}, kCols); }
void BM_reduce_max_all(benchmark::State& state) { run(state, {}, 1, keel::reduce_max); }
void BM_reduce_max_last_axis(benchmark::State& state) { run(state, {-1}, kRows, keel::reduce_max); }
void BM_reduce_max_first_axis(benchmark::State& state) { run(state, {0}, kCols, keel::reduce_max); }

// f(x) on the [4096, 1024] tensor, counting `arrays` arrays of its size moved.
template <class F>
void run_op(benchmark::State& state, F f, std::int64_t arrays) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const int previous_threads = keel::config::num_threads();
  keel::config::set_num_threads(static_cast<int>(state.range(0)));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = f(x);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * arrays * kRows * kCols * kF);
  keel::config::set_num_threads(previous_threads);
}

void BM_argmax(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::argmax(x, -1); }, 1);
}
void BM_cumsum_last_axis(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::cumsum(x, 1); }, 2);
}
void BM_cumsum_first_axis(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::cumsum(x, 0); }, 2);
}
void BM_softmax(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::softmax(x, -1); }, 2);
}
void BM_log_softmax(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::log_softmax(x, -1); }, 2);
}

void BM_reduce_sum_short_rows(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::reduce_sum(keel::reshape(x, {kRows * kCols / 4, 4}), {-1}); },
         1);
}
void BM_reduce_max_short_rows(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::reduce_max(keel::reshape(x, {kRows * kCols / 4, 4}), {-1}); },
         1);
}
void BM_softmax_short_rows(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::softmax(keel::reshape(x, {kRows * kCols / 8, 8}), -1); }, 2);
}

void BM_argmax_short_rows(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::argmax(keel::reshape(x, {kRows * kCols / 4, 4}), -1); }, 1);
}

// The loss of logits of the same 16 MiB in rows of `classes`, against random labels; with `grad`,
// also the logits' gradient of its sum under a GradientTape (counted as 3 arrays).
void sparse_ce(benchmark::State& state, std::int64_t classes, bool grad) {
  const std::int64_t rows = kRows * kCols / classes;
  const keel::Tensor labels = keel::random::uniform_int(keel::Shape{rows}, 0, classes);
  run_op(state, [&](const keel::Tensor& x) {
    const keel::Tensor logits = keel::reshape(x, {rows, classes});
    if (!grad) return keel::sparse_softmax_cross_entropy_with_logits(labels, logits);
    keel::GradientTape tape;
    tape.watch(logits);
    return tape.gradient(keel::reduce_sum(keel::sparse_softmax_cross_entropy_with_logits(labels, logits)), logits);
  }, grad ? 3 : 1);
}
void BM_sparse_ce_last_axis(benchmark::State& state) { sparse_ce(state, kCols, false); }
void BM_sparse_ce_short_rows(benchmark::State& state) { sparse_ce(state, 4, false); }
void BM_sparse_ce_grad_last_axis(benchmark::State& state) { sparse_ce(state, kCols, true); }
void BM_sparse_ce_grad_short_rows(benchmark::State& state) { sparse_ce(state, 4, true); }

void BM_softmax_grad(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const int previous_threads = keel::config::num_threads();
  keel::config::set_num_threads(static_cast<int>(state.range(0)));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor w = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(x);
    keel::Tensor dx = tape.gradient(keel::reduce_sum(keel::softmax(x, -1) * w), x);
    benchmark::DoNotOptimize(dx);
  }
  state.SetBytesProcessed(state.iterations() * 5 * kRows * kCols * kF);
  keel::config::set_num_threads(previous_threads);
}

void BM_global_avg_pool(benchmark::State& state) {
  run_op(state, [](const keel::Tensor& x) { return keel::reduce_mean(keel::reshape(x, {16, 64, 64, 64}), {1, 2}); }, 1);
}

void thread_args(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_reduce_sum_all)->Name("reduce_sum/all")->Apply(thread_args);
BENCHMARK(BM_reduce_sum_last_axis)->Name("reduce_sum/last_axis")->Apply(thread_args);
BENCHMARK(BM_reduce_sum_first_axis)->Name("reduce_sum/first_axis")->Apply(thread_args);
BENCHMARK(BM_reduce_max_all)->Name("reduce_max/all")->Apply(thread_args);
BENCHMARK(BM_reduce_max_last_axis)->Name("reduce_max/last_axis")->Apply(thread_args);
BENCHMARK(BM_reduce_max_first_axis)->Name("reduce_max/first_axis")->Apply(thread_args);
BENCHMARK(BM_argmax)->Name("argmax/last_axis")->Apply(thread_args);
BENCHMARK(BM_cumsum_last_axis)->Name("cumsum/last_axis")->Apply(thread_args);
BENCHMARK(BM_cumsum_first_axis)->Name("cumsum/first_axis")->Apply(thread_args);
BENCHMARK(BM_global_avg_pool)->Name("global_avg_pool")->Apply(thread_args);
BENCHMARK(BM_softmax_grad)->Name("softmax_grad/last_axis")->Apply(thread_args);
BENCHMARK(BM_softmax)->Name("softmax/last_axis")->Apply(thread_args);
BENCHMARK(BM_log_softmax)->Name("log_softmax/last_axis")->Apply(thread_args);
BENCHMARK(BM_reduce_sum_short_rows)->Name("reduce_sum/short_rows")->Apply(thread_args);
BENCHMARK(BM_reduce_max_short_rows)->Name("reduce_max/short_rows")->Apply(thread_args);
BENCHMARK(BM_softmax_short_rows)->Name("softmax/short_rows")->Apply(thread_args);
BENCHMARK(BM_argmax_short_rows)->Name("argmax/short_rows")->Apply(thread_args);
BENCHMARK(BM_sparse_ce_last_axis)->Name("sparse_softmax_ce/last_axis")->Apply(thread_args);
BENCHMARK(BM_sparse_ce_short_rows)->Name("sparse_softmax_ce/short_rows")->Apply(thread_args);
BENCHMARK(BM_sparse_ce_grad_last_axis)->Name("sparse_softmax_ce_grad/last_axis")->Apply(thread_args);
BENCHMARK(BM_sparse_ce_grad_short_rows)->Name("sparse_softmax_ce_grad/short_rows")->Apply(thread_args);

}  // namespace

BENCHMARK_MAIN();
