// conv2d throughput at one thread, float32, NHWC, 3x3 kernels with "same" padding, against plain
// GEMMs of the im2col-equivalent shapes measured in the same run, on the library keel's GEMMs run
// on (oneDNN's dnnl_sgemm where the build has it, else OpenBLAS's cblas_sgemm):
//   forward:  y[M, Cout] = col[M, K] @ W[K, Cout]    M = N*Ho*Wo, K = 3*3*Cin
//   backward: dcol[M, K] = dy[M, Cout] @ W^T          dW[K, Cout] = col^T @ dy
// A forward counts 2*M*K*Cout FLOPs; forward+backward (gradients for input and kernel) 3x that.
// The sgemm side runs on buffers already in im2col form, so it omits the im2col/col2im copies.
// The layers are the CIFAR-10 CNN's three convolutions at batch 64 and a ResNet-style
// 56x56x64->64 layer at batch 8. At the end the conv rates are printed as ratios of the GEMM rates.
//
//   build/benchmarks/bench_conv --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <keel/keel.hpp>
#ifdef KEEL_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#endif

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

namespace {

struct Layer {
  const char* name;
  std::int64_t n, hw, cin, cout;
  std::int64_t m() const { return n * hw * hw; }  // stride 1, "same": Ho = H, Wo = W
  std::int64_t k() const { return 9 * cin; }
  double forward_flops() const { return 2.0 * double(m()) * double(k()) * double(cout); }
};

const Layer kLayers[] = {
    {"3to16_32x32_b64", 64, 32, 3, 16},
    {"16to32_16x16_b64", 64, 16, 16, 32},
    {"32to64_8x8_b64", 64, 8, 32, 64},
    {"64to64_56x56_b8", 8, 56, 64, 64},
};

// Row-major C = op(A) op(B) on the GEMM library keel uses.
void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
#ifdef KEEL_BENCH_ONEDNN
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#else
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
#endif
}

#ifdef KEEL_BENCH_ONEDNN
constexpr const char* kGemmLibrary = "dnnl_sgemm";
#else
constexpr const char* kGemmLibrary = "cblas_sgemm";
#endif

// Printed as e.g. "FLOPS=60.1G/s".
void set_rate(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] = benchmark::Counter(flops_per_iteration * double(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

void BM_conv2d_forward(benchmark::State& state, Layer l) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor x = keel::random::normal({l.n, l.hw, l.hw, l.cin});
  const keel::Tensor k = keel::random::normal({3, 3, l.cin, l.cout});
  for (auto _ : state) {
    keel::Tensor y = keel::conv2d(x, k, {1, 1}, "same");
    benchmark::DoNotOptimize(y);
  }
  set_rate(state, l.forward_flops());
}

void BM_conv2d_forward_backward(benchmark::State& state, Layer l) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor x = keel::random::normal({l.n, l.hw, l.hw, l.cin});
  const keel::Tensor k = keel::random::normal({3, 3, l.cin, l.cout});
  const keel::Tensor dy = keel::random::normal({l.n, l.hw, l.hw, l.cout});
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(x);
    tape.watch(k);
    const keel::Tensor y = keel::conv2d(x, k, {1, 1}, "same");
    auto grads = tape.gradient(y, std::vector<keel::Tensor>{x, k}, dy);
    benchmark::DoNotOptimize(grads);
  }
  set_rate(state, 3 * l.forward_flops());
}

// The forward GEMM alone, on buffers of the im2col shape.
void BM_sgemm_forward(benchmark::State& state, Layer l) {
  const auto M = static_cast<int>(l.m()), K = static_cast<int>(l.k()), O = static_cast<int>(l.cout);
  std::vector<float> col(std::size_t(M) * K, 0.5f), w(std::size_t(K) * O, 0.25f), y(std::size_t(M) * O);
  for (auto _ : state) {
    gemm(false, false, M, O, K, col.data(), K, w.data(), O, y.data(), O);
    benchmark::ClobberMemory();
  }
  set_rate(state, l.forward_flops());
}

// The three GEMMs of an im2col forward + backward (without the im2col/col2im copies).
void BM_sgemm_forward_backward(benchmark::State& state, Layer l) {
  const auto M = static_cast<int>(l.m()), K = static_cast<int>(l.k()), O = static_cast<int>(l.cout);
  std::vector<float> col(std::size_t(M) * K, 0.5f), w(std::size_t(K) * O, 0.25f), y(std::size_t(M) * O, 1.0f);
  std::vector<float> dcol(std::size_t(M) * K), dw(std::size_t(K) * O);
  for (auto _ : state) {
    gemm(false, false, M, O, K, col.data(), K, w.data(), O, y.data(), O);
    gemm(false, true, M, K, O, y.data(), O, w.data(), O, dcol.data(), K);
    gemm(true, false, K, O, M, col.data(), K, y.data(), O, dw.data(), O);
    benchmark::ClobberMemory();
  }
  set_rate(state, 3 * l.forward_flops());
}

// conv rate / GEMM rate of each layer, from the benchmarks of this run.
void print_ratios(const keel_bench::RateReporter& r) {
  std::printf("\nconv2d GFLOP/s / im2col-equivalent %s GFLOP/s (same run, 1 thread):\n", kGemmLibrary);
  std::printf("  %-20s %22s %26s\n", "layer", "forward", "forward+backward");
  for (const Layer& l : kLayers) {
    const std::string n = l.name;
    auto ratio = [&](const std::string& conv, const std::string& gemm) {
      return keel_bench::ratio_text(r.rate(conv + "/" + n), r.rate(gemm + "/" + n));
    };
    std::printf("  %-20s %22s %26s\n", l.name, ratio("conv2d_forward", "sgemm_forward").c_str(),
                ratio("conv2d_forward_backward", "sgemm_forward_backward").c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // One thread for keel's kernels and for the BLAS both sides call.
  keel::config::set_num_threads(1);
  openblas_set_num_threads(1);
#ifdef KEEL_BENCH_ONEDNN
  omp_set_num_threads(1);
#endif
  for (const Layer& l : kLayers) {
    const std::string n = l.name;
    benchmark::RegisterBenchmark(("conv2d_forward/" + n).c_str(), BM_conv2d_forward, l)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("sgemm_forward/" + n).c_str(), BM_sgemm_forward, l)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("conv2d_forward_backward/" + n).c_str(), BM_conv2d_forward_backward, l)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(("sgemm_forward_backward/" + n).c_str(), BM_sgemm_forward_backward, l)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  keel_bench::RateReporter reporter("FLOPS");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
