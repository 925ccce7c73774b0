// float32 square matrix products, one thread: keel::matmul against a direct OpenBLAS cblas_sgemm
// on the same buffers. FLOPS counts 2 n^3 per product (printed as e.g. "FLOPS=60.1G/s").
// The difference is keel's overhead: dispatch, output allocation, and its choice of kernel.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <keel/keel.hpp>

#include <cstdint>

namespace {

void set_flops(benchmark::State& state, std::int64_t n) {
  const double flops_per_product = 2.0 * static_cast<double>(n) * static_cast<double>(n) *
                                   static_cast<double>(n);
  state.counters["FLOPS"] = benchmark::Counter(
      flops_per_product * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_keel_matmul(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const int previous_threads = keel::config::num_threads();
  keel::config::set_num_threads(1);
  const std::int64_t n = state.range(0);
  const keel::Tensor a = keel::random::normal({n, n});
  const keel::Tensor b = keel::random::normal({n, n});
  for (auto _ : state) {
    keel::Tensor c = keel::matmul(a, b);
    benchmark::DoNotOptimize(c);
  }
  set_flops(state, n);
  keel::config::set_num_threads(previous_threads);
}

void BM_cblas_sgemm(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  openblas_set_num_threads(1);
  const std::int64_t n = state.range(0);
  // The same kind of buffers keel::matmul gets: keel-allocated, contiguous, row-major.
  const keel::Tensor a = keel::random::normal({n, n});
  const keel::Tensor b = keel::random::normal({n, n});
  const keel::Tensor c = keel::zeros({n, n});
  if (!a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous()) {
    state.SkipWithError("keel returned non-contiguous tensors");
    return;
  }
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = const_cast<float*>(c.data<float>());  // benchmark-only: c is never read as a value
  const auto ni = static_cast<int>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, pa, ni, pb, ni, 0.0f,
                pc, ni);
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

BENCHMARK(BM_keel_matmul)
    ->Name("keel_matmul")
    ->ArgName("n")
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_cblas_sgemm)
    ->Name("cblas_sgemm")
    ->ArgName("n")
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
