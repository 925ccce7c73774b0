// keel::distribute under mpirun (run it with -np 1 and -np 2):
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/benchmarks/bench_distributed
// * GradientAllReduce/<MB>: the train step's gradient all-reduce (10 gradients fused into 25 MB
//   buckets, weighted, recorded as kernels) against MPI_Allreduce of the same bytes called
//   directly in the same run: bus bandwidth 2 (N - 1) / N * bytes / time, and keel / MPI.
// * CnnFit/<B>: fit() of the seed CIFAR-10 CNN (benchmarks/seed_models.hpp) at a global batch of
//   B (64, and 32), one thread per process: images/s (of the global batch) with N workers;
//   compare the -np 1 and -np 2 runs for the scaling ratio.
// * CnnOverlap/<KiB>: the share of the gradient all-reduce's time that overlapping it with the
//   backward pass hides (see below).
// Every rank runs the same fixed iteration counts (collectives must match).
#include <benchmark/benchmark.h>

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

void GradientAllReduce(benchmark::State& state) {
  auto& s = world();
  auto scope = s.scope();
  const std::int64_t mb = state.range(0);
  const std::int64_t per = mb * (1 << 20) / 4 / 10;  // 10 float32 gradients
  std::vector<Tensor> grads;
  for (int i = 0; i < 10; ++i) grads.push_back(full({per}, 1.0f));
  const double bytes = static_cast<double>(per) * 4 * 10, n = s.num_workers();
  double keel_s = 0, mpi_s = 0;
  std::vector<float> raw(static_cast<std::size_t>(per * 10), 1.0f);
  // One untimed round of each first: MPI connects a pair of processes on its first message.
  {
    std::vector<Tensor> g = grads;
    distribute::detail::reduce_gradients(g);
#if KEEL_BENCH_MPI
    MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
  }
  for (auto _ : state) {
    std::vector<Tensor> g = grads;
    s.barrier();
    auto t0 = Clock::now();
    distribute::detail::reduce_gradients(g);
    keel_s += std::chrono::duration<double>(Clock::now() - t0).count();
#if KEEL_BENCH_MPI
    s.barrier();
    t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mpi_s += std::chrono::duration<double>(Clock::now() - t0).count();
#endif
  }
  const double it = static_cast<double>(state.iterations()), bus = n > 1 ? 2 * (n - 1) / n : 1;
  state.counters["keel_GBps"] = bus * bytes * it / keel_s / 1e9;
  if (mpi_s > 0) {
    state.counters["mpi_GBps"] = bus * bytes * it / mpi_s / 1e9;
    state.counters["keel_over_mpi_time"] = keel_s / mpi_s;
  }
  state.counters["workers"] = n;
}
BENCHMARK(GradientAllReduce)->Arg(1)->Arg(10)->Arg(100)->Iterations(10)->Unit(benchmark::kMillisecond);

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
