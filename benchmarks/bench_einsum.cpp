// einsum and tensordot against the matmul they reduce to, on the same operands in the same run:
// a plain product (ij,jk->ik), one with a transposed operand (ij,kj->ik, read through matmul's
// transpose flag, no copy), a batched one (bij,bjk->bik) and a contraction over two axes
// (tensordot of [m, a, b] with [a, b, n]). The target is einsum within 1.1x of matmul; the
// ratios are printed at the end. float32, one thread and two.
//
//   build/benchmarks/bench_einsum --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

namespace {

struct Case {
  std::string name;
  double flops;
  std::function<keel::Tensor(const std::vector<keel::Tensor>&)> contraction, baseline;
  std::vector<keel::Shape> shapes;
};

std::vector<Case> cases() {
  using keel::Tensor;
  using V = std::vector<Tensor>;
  std::vector<Case> c;
  for (std::int64_t n : {128, 512})
    c.push_back({"ij,jk->ik/" + std::to_string(n), 2.0 * n * n * n,
                 [](const V& x) { return keel::einsum("ij,jk->ik", x); },
                 [](const V& x) { return keel::matmul(x[0], x[1]); }, {{n, n}, {n, n}}});
  c.push_back({"ij,kj->ik/512", 2.0 * 512 * 512 * 512, [](const V& x) { return keel::einsum("ij,kj->ik", x); },
               [](const V& x) { return keel::matmul(x[0], x[1], false, true); }, {{512, 512}, {512, 512}}});
  c.push_back({"bij,bjk->bik/32x64", 2.0 * 32 * 64 * 64 * 64, [](const V& x) { return keel::einsum("bij,bjk->bik", x); },
               [](const V& x) { return keel::matmul(x[0], x[1]); }, {{32, 64, 64}, {32, 64, 64}}});
  c.push_back({"tensordot2/256x16x16", 2.0 * 256 * 256 * 256,
               [](const V& x) { return keel::tensordot(x[0], x[1], 2); },
               [](const V& x) { return keel::matmul(keel::reshape(x[0], {256, 256}), keel::reshape(x[1], {256, 256})); },
               {{256, 16, 16}, {16, 16, 256}}});
  return c;
}

void run(benchmark::State& state, const Case& c, bool contraction, int threads) {
  const int previous = keel::config::num_threads();
  keel::config::set_num_threads(threads);
  std::vector<keel::Tensor> x;
  for (const keel::Shape& s : c.shapes) x.push_back(keel::random::normal(s));
  for (auto _ : state) {
    keel::Tensor y = contraction ? c.contraction(x) : c.baseline(x);
    benchmark::DoNotOptimize(y);
  }
  state.counters["FLOPS"] = benchmark::Counter(c.flops * double(state.iterations()), benchmark::Counter::kIsRate);
  keel::config::set_num_threads(previous);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  keel::DeviceScope cpu(keel::Device::cpu());
  keel::random::set_seed(1);
  const std::vector<Case> all = cases();
  for (const Case& c : all)
    for (int t : {1, 2}) {
      const std::string suffix = "/" + c.name + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(("einsum" + suffix).c_str(), run, c, true, t)->UseRealTime();
      benchmark::RegisterBenchmark(("matmul" + suffix).c_str(), run, c, false, t)->UseRealTime();
    }
  keel_bench::RateReporter reporter("FLOPS");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\neinsum / tensordot GFLOP/s and their ratio to the equivalent matmul (same run; target >= 0.91x):\n");
  for (const Case& c : all)
    for (int t : {1, 2}) {
      const std::string suffix = "/" + c.name + "/threads:" + std::to_string(t);
      std::printf("  %-26s threads %d  %s\n", c.name.c_str(), t,
                  keel_bench::ratio_text(reporter.rate("einsum" + suffix), reporter.rate("matmul" + suffix)).c_str());
    }
  benchmark::Shutdown();
  return 0;
}
