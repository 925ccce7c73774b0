// float32 matrix products: keel::matmul against direct calls on the same buffers of
//   dnnl      oneDNN's dnnl_sgemm, the library keel's float32 matmul runs on where the build has
//             it (its OpenMP threads)
//   cblas     OpenBLAS's cblas_sgemm (its OpenMP threads), keel's library in builds without oneDNN
// at 1 and 2 threads, for squares 64..2048 and the products of the seed CNN's Dense layers
// (forward and both gradients, batch 64) and of the LSTM's gates (batch 32, 50 units; one step,
// and the input projection of 50 steps as one batched product). The difference from the library
// library's column is keel's overhead: dispatch, output allocation, splitting over threads. FLOPS counts
// 2 m n k per product; the ratios are printed at the end.
//
//   build/benchmarks/bench_matmul --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <keel/keel.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

#ifdef KEEL_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

namespace {

struct Shape3 {
  std::string name;
  std::int64_t batch, m, k, n;
  bool ta = false, tb = false;  // keel::matmul's transpose_a / transpose_b
  double flops() const { return 2.0 * double(batch) * double(m) * double(k) * double(n); }
};

std::vector<Shape3> shapes() {
  std::vector<Shape3> s;
  for (std::int64_t n : {64, 128, 256, 512, 1024, 2048}) s.push_back({"square_" + std::to_string(n), 1, n, n, n});
  s.push_back({"cnn_dense1_forward", 1, 64, 1024, 128});
  s.push_back({"cnn_dense1_grad_input", 1, 64, 128, 1024, false, true});
  s.push_back({"cnn_dense1_grad_kernel", 1, 1024, 64, 128, true, false});
  s.push_back({"lstm_gates_step", 1, 32, 50, 200});
  s.push_back({"lstm_input_projection_b50", 50, 32, 1, 200});
  return s;
}

void set_rate(benchmark::State& state, double flops) {
  state.counters["FLOPS"] = benchmark::Counter(flops * double(state.iterations()), benchmark::Counter::kIsRate);
}

class Threads {
 public:
  explicit Threads(int n) : previous_(keel::config::num_threads()) { keel::config::set_num_threads(n); }
  ~Threads() { keel::config::set_num_threads(previous_); }

 private:
  int previous_;
};

struct Operands {
  keel::Tensor a, b, c;
  explicit Operands(const Shape3& s) {
    const keel::Shape sa = s.ta ? keel::Shape{s.batch, s.k, s.m} : keel::Shape{s.batch, s.m, s.k};
    const keel::Shape sb = s.tb ? keel::Shape{s.batch, s.n, s.k} : keel::Shape{s.batch, s.k, s.n};
    a = keel::random::normal(sa);
    b = keel::random::normal(sb);
    c = keel::zeros({s.batch, s.m, s.n});
  }
  const float* pa(const Shape3& s, std::int64_t i) const { return a.data<float>() + i * s.m * s.k; }
  const float* pb(const Shape3& s, std::int64_t i) const { return b.data<float>() + i * s.k * s.n; }
  float* pc(const Shape3& s, std::int64_t i) const {  // benchmark-only: c is never read as a value
    return const_cast<float*>(c.data<float>()) + i * s.m * s.n;
  }
};

void BM_keel(benchmark::State& state, Shape3 s, int threads) {
  Threads t(threads);
  const Operands o(s);
  for (auto _ : state) {
    keel::Tensor c = keel::matmul(o.a, o.b, s.ta, s.tb);
    benchmark::DoNotOptimize(c);
  }
  set_rate(state, s.flops());
}

#ifdef KEEL_BENCH_ONEDNN
void BM_dnnl(benchmark::State& state, Shape3 s, int threads) {
  omp_set_num_threads(threads);
  const Operands o(s);
  const std::int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  for (auto _ : state) {
    for (std::int64_t i = 0; i < s.batch; ++i)
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, o.pa(s, i), lda, o.pb(s, i), ldb, 0.0f,
                 o.pc(s, i), s.n);
    benchmark::ClobberMemory();
  }
  set_rate(state, s.flops());
}
#endif

void BM_cblas(benchmark::State& state, Shape3 s, int threads) {
  openblas_set_num_threads(threads);
  const Operands o(s);
  const auto lda = static_cast<int>(s.ta ? s.m : s.k), ldb = static_cast<int>(s.tb ? s.k : s.n);
  for (auto _ : state) {
    for (std::int64_t i = 0; i < s.batch; ++i)
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, int(s.m),
                  int(s.n), int(s.k), 1.0f, o.pa(s, i), lda, o.pb(s, i), ldb, 0.0f, o.pc(s, i), int(s.n));
    benchmark::ClobberMemory();
  }
  set_rate(state, s.flops());
}

// keel's rate and its ratios to the direct calls for each shape, from the benchmarks of this run.
void print_ratios(const keel_bench::RateReporter& r) {
  std::printf("\nkeel::matmul GFLOP/s and its ratio to direct library calls (same run):\n");
  std::printf("  %-28s %7s %9s %20s %20s\n", "shape", "threads", "keel", "/ dnnl_sgemm", "/ cblas_sgemm");
  for (const Shape3& s : shapes())
    for (int t : {1, 2}) {
      const std::string suffix = "/" + s.name + "/threads:" + std::to_string(t);
      const double k = r.rate("keel" + suffix);
      if (k <= 0) continue;
      std::printf("  %-28s %7d %9.1f %20s %20s\n", s.name.c_str(), t, k * 1e-9,
                  keel_bench::ratio_text(k, r.rate("dnnl" + suffix)).c_str(),
                  keel_bench::ratio_text(k, r.rate("cblas" + suffix)).c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  keel::DeviceScope cpu(keel::Device::cpu());
  for (const Shape3& s : shapes())
    for (int t : {1, 2}) {
      const std::string suffix = "/" + s.name + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(("keel" + suffix).c_str(), BM_keel, s, t)->UseRealTime()->Unit(benchmark::kMicrosecond);
#ifdef KEEL_BENCH_ONEDNN
      benchmark::RegisterBenchmark(("dnnl" + suffix).c_str(), BM_dnnl, s, t)->UseRealTime()->Unit(benchmark::kMicrosecond);
#endif
      benchmark::RegisterBenchmark(("cblas" + suffix).c_str(), BM_cblas, s, t)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  keel_bench::RateReporter reporter("FLOPS");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
