// Sorting and selection on one row of 1M float32 normals, in elements per second, at 1 thread,
// against the standard library on the same data in the same run:
//   sort/1M            keel::sort (values)                    vs std_sort/1M: copy + std::sort
//   argsort/1M         keel::argsort (stable int32 positions) vs std_sort/1M as well
//   top_k/1M/k         keel::top_k (values + int32 indices)   vs std_partial_sort/1M/k: copy +
//                      std::partial_sort(begin, begin + k, end, std::greater)
// The baselines copy the input first (they sort in place; keel leaves its input alone). The
// table at the end divides the rates (medians with --benchmark_repetitions): a ratio below 1.5
// means keel takes less than 1.5x the standard library's time.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

namespace {

constexpr std::int64_t kN = 1 << 20;
const int kTopK[] = {10, 1000};

const std::vector<float>& data() {
  static const std::vector<float> v = [] {
    std::mt19937 gen(42);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> out(static_cast<std::size_t>(kN));
    for (auto& x : out) x = dist(gen);
    return out;
  }();
  return v;
}

keel::Tensor input() {
  keel::DeviceScope cpu(keel::Device::cpu());
  return keel::constant(data());
}

void BM_sort(benchmark::State& state) {
  const keel::Tensor x = input();
  for (auto _ : state) {
    keel::Tensor y = keel::sort(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

void BM_argsort(benchmark::State& state) {
  const keel::Tensor x = input();
  for (auto _ : state) {
    keel::Tensor y = keel::argsort(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

void BM_std_sort(benchmark::State& state) {
  std::vector<float> v(data().size());
  for (auto _ : state) {
    std::copy(data().begin(), data().end(), v.begin());
    std::sort(v.begin(), v.end());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

void BM_top_k(benchmark::State& state, int k) {
  const keel::Tensor x = input();
  for (auto _ : state) {
    keel::TopK r = keel::top_k(x, k);
    benchmark::DoNotOptimize(r.values.raw_data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

void BM_std_partial_sort(benchmark::State& state, int k) {
  std::vector<float> v(data().size());
  for (auto _ : state) {
    std::copy(data().begin(), data().end(), v.begin());
    std::partial_sort(v.begin(), v.begin() + k, v.end(), std::greater<float>());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

// M elements/s of each and the time ratio keel / baseline (= baseline rate / keel rate).
void print_ratios(const keel_bench::RateReporter& r) {
  std::printf("\nkeel time / standard library time on the same 1M floats (same run, 1 thread):\n");
  auto line = [&](const std::string& op, const std::string& base) {
    const double a = r.rate(op), b = r.rate(base);
    if (a <= 0 || b <= 0) return;
    std::printf("  %-18s %8.1f M/s   %-26s %8.1f M/s   ratio %.2fx\n", op.c_str(), a * 1e-6, base.c_str(), b * 1e-6,
                b / a);
  };
  line("sort/1M", "std_sort/1M");
  line("argsort/1M", "std_sort/1M");
  for (int k : kTopK) line("top_k/1M/" + std::to_string(k), "std_partial_sort/1M/" + std::to_string(k));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  keel::config::set_num_threads(1);
  benchmark::RegisterBenchmark("sort/1M", BM_sort)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("argsort/1M", BM_argsort)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("std_sort/1M", BM_std_sort)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (int k : kTopK) {
    const std::string s = std::to_string(k);
    benchmark::RegisterBenchmark(("top_k/1M/" + s).c_str(), BM_top_k, k)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("std_partial_sort/1M/" + s).c_str(), BM_std_partial_sort, k)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  keel_bench::RateReporter reporter("items_per_second");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
