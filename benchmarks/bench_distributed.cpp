// keel::distribute under mpirun (run it with -np 1 and -np 2):
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/benchmarks/bench_distributed
// * GradientAllReduce/<MB>: the train step's gradient all-reduce (10 gradients fused into 25 MB
//   buckets, weighted, recorded as kernels) against MPI_Allreduce of the same bytes called
//   directly in the same run: bus bandwidth 2 (N - 1) / N * bytes / time, and keel / MPI.
// * TensorAllReduce/<MB>: Strategy::all_reduce of one float32 tensor (a new tensor) against
//   MPI_Allreduce from one buffer into another, the same operation called directly.
// * CnnFit/<B>: fit() of the seed CIFAR-10 CNN (benchmarks/seed_models.hpp) at a global batch of
//   B (64, and 32), one thread per process: images/s (of the global batch) with N workers;
//   compare the -np 1 and -np 2 runs for the scaling ratio.
// * CnnOverlap/<KiB>: the share of the gradient all-reduce's time that overlapping it with the
//   backward pass hides (see below).
// Every rank runs the same fixed iteration counts (collectives must match).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <keel/keel.hpp>

#include "distribute/hooks.hpp"
#include "seed_models.hpp"

#if KEEL_BENCH_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C interface only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace {

using namespace keel;
using Clock = std::chrono::steady_clock;

distribute::MultiWorkerMirroredStrategy& world() {
  static distribute::MultiWorkerMirroredStrategy s;
  return s;
}

// keel's all-reduce (`keel_run`) against MPI's (`mpi_run`) on `bytes` per worker: untimed rounds
// of each first, then both timed in every iteration, every rank starting together. The first
// calls of a size run several times slower than later ones (measured at 1 MB: 6.5, 2.5, 0.5 ms,
// then 0.14-0.2), whoever makes them: with one warm-up round the first side timed paid for both.
// Counters from the medians of the per-iteration times: bus bandwidth 2 (N - 1) / N * bytes /
// time of each, and keel's time over MPI's.
template <class Keel, class Mpi>
void compare_all_reduce(benchmark::State& state, double bytes, Keel&& keel_run, [[maybe_unused]] Mpi&& mpi_run) {
  auto& s = world();
  const auto timed = [&s](auto&& fn) {
    s.barrier();
    const auto t0 = Clock::now();
    fn();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  constexpr int kWarmup = 5;
  for (int i = 0; i < kWarmup; ++i) {
    keel_run();
#if KEEL_BENCH_MPI
    mpi_run();
#endif
  }
  std::vector<double> keel_s, mpi_s;
  for (auto _ : state) {
    keel_s.push_back(timed(keel_run));
#if KEEL_BENCH_MPI
    mpi_s.push_back(timed(mpi_run));
#endif
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double n = s.num_workers(), bus = n > 1 ? 2 * (n - 1) / n : 1, keel_med = median(keel_s);
  state.counters["keel_GBps"] = bus * bytes / keel_med / 1e9;
  if (!mpi_s.empty()) {
    const double mpi_med = median(mpi_s);
    state.counters["mpi_GBps"] = bus * bytes / mpi_med / 1e9;
    state.counters["keel_over_mpi_time"] = keel_med / mpi_med;
  }
  state.counters["workers"] = n;
}

// The train step's gradient all-reduce of 10 float32 gradients against MPI_Allreduce in place on
// one buffer of the same bytes.
void GradientAllReduce(benchmark::State& state) {
  auto scope = world().scope();
  const std::int64_t per = state.range(0) * (1 << 20) / 4 / 10;
  std::vector<Tensor> grads;
  for (int i = 0; i < 10; ++i) grads.push_back(full({per}, 1.0f));
  std::vector<float> raw(static_cast<std::size_t>(per * 10), 1.0f);
  compare_all_reduce(
      state, static_cast<double>(per) * 4 * 10,
      [&] {
        std::vector<Tensor> g = grads;
        distribute::detail::reduce_gradients(g);
      },
      [&] {
#if KEEL_BENCH_MPI
        MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
      });
}
BENCHMARK(GradientAllReduce)->Arg(1)->Arg(10)->Arg(100)->Iterations(15)->Unit(benchmark::kMillisecond);

// Strategy::all_reduce on one float32 tensor (a new tensor, the input unchanged) against the
// same done by MPI directly: MPI_Allreduce from the input into a second buffer.
void TensorAllReduce(benchmark::State& state) {
  auto& s = world();
  const std::int64_t n = state.range(0) * (1 << 20) / 4;
  const Tensor x = full({n}, 1.0f);
  std::vector<float> in(static_cast<std::size_t>(n), 1.0f), out(static_cast<std::size_t>(n));
  compare_all_reduce(
      state, static_cast<double>(n) * 4, [&] { benchmark::DoNotOptimize(s.all_reduce(x)); },
      [&] {
#if KEEL_BENCH_MPI
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
      });
}
BENCHMARK(TensorAllReduce)->Arg(1)->Arg(10)->Arg(100)->Iterations(15)->Unit(benchmark::kMillisecond);

void CnnFit(benchmark::State& state) {
  auto& s = world();
  config::set_num_threads(1);
  auto scope = s.scope();
  auto model = bench::cnn();
  const std::int64_t batch = state.range(0);
  const auto d = bench::cnn_data(8 * batch);  // 8 global batches
  model->fit(d.x, d.y, {.batch_size = batch, .epochs = 1, .verbose = 0, .shuffle = false});
  double total = 0;
  for (auto _ : state) {
    s.barrier();
    const auto t0 = Clock::now();
    model->fit(d.x, d.y, {.batch_size = batch, .epochs = 1, .verbose = 0, .shuffle = false});
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const double images = static_cast<double>(state.iterations()) * 8 * static_cast<double>(batch);
  state.counters["global_images_per_s"] = images / total;
  state.counters["ms_per_step"] = total * 1e3 / (static_cast<double>(state.iterations()) * 8);
  state.counters["workers"] = s.num_workers();
}
// The seed batch of 64, and 32 (with -np 1: the compute of one worker's shard of 64 with -np 2,
// the bound a 2-worker run at 64 cannot beat).
BENCHMARK(CnnFit)->Arg(bench::kCnnBatch)->Arg(bench::kCnnBatch / 2)->Iterations(5)->Unit(benchmark::kMillisecond);

// CnnOverlap/<KiB>: the seed CNN's fit at global batch 64, one thread per process, with
// gradient buckets of at most <KiB> KiB (0: the default 25 MB), the all-reduce run after the
// backward pass (overlap_backward = false) and overlapped with it, alternately, 20 rounds of 8
// steps each. Counters: ms per step of each, the ms per step each spends in collectives, and
// hidden_share = 1 - (overlapped collective time) / (after-backward collective time): the
// share of the communication time the overlap takes off the step.
void CnnOverlap(benchmark::State& state) {
  config::set_num_threads(1);
  const std::size_t cap = state.range(0) > 0 ? static_cast<std::size_t>(state.range(0)) << 10 : std::size_t{25} << 20;
  distribute::MultiWorkerMirroredStrategy after({.bucket_bytes = cap, .overlap_backward = false});
  distribute::MultiWorkerMirroredStrategy overlapped({.bucket_bytes = cap, .overlap_backward = true});
  distribute::Strategy* strategies[2] = {&after, &overlapped};
  std::unique_ptr<models::Sequential> models[2];
  const auto d = bench::cnn_data(8 * bench::kCnnBatch);
  for (int k = 0; k < 2; ++k) {
    auto scope = strategies[k]->scope();
    models[k] = bench::cnn();
    models[k]->fit(d.x, d.y, {.batch_size = bench::kCnnBatch, .epochs = 1, .verbose = 0, .shuffle = false});
  }
  double step_s[2] = {0, 0}, comm_s[2] = {0, 0};
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      auto scope = strategies[k]->scope();
      strategies[k]->barrier();
      const double c0 = distribute::detail::collective_seconds();
      const auto t0 = Clock::now();
      models[k]->fit(d.x, d.y, {.batch_size = bench::kCnnBatch, .epochs = 1, .verbose = 0, .shuffle = false});
      step_s[k] += std::chrono::duration<double>(Clock::now() - t0).count();
      comm_s[k] += distribute::detail::collective_seconds() - c0;
    }
  }
  const double steps = static_cast<double>(state.iterations()) * 8;
  state.counters["after_ms_per_step"] = step_s[0] * 1e3 / steps;
  state.counters["overlap_ms_per_step"] = step_s[1] * 1e3 / steps;
  state.counters["after_comm_ms"] = comm_s[0] * 1e3 / steps;
  state.counters["overlap_comm_ms"] = comm_s[1] * 1e3 / steps;
  state.counters["hidden_share"] = comm_s[0] > 0 ? 1 - comm_s[1] / comm_s[0] : 0;
  state.counters["workers"] = after.num_workers();
}
BENCHMARK(CnnOverlap)->Arg(0)->Arg(128)->Arg(32)->Iterations(20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
