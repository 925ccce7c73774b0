// 2x2 stride-2 pooling throughput at one thread, float32 NHWC, against memcpy of the same input
// in the same run. bytes_per_second counts the input's bytes once per iteration for every benchmark (pooling
// also writes a quarter of that; memcpy writes all of it), so pool/memcpy says how close a pool
// comes to streaming its input. forward_backward also reads the upstream gradient and writes the
// input's gradient. Shapes: the CIFAR-10 CNN's pooled activations at batch 64, and 56x56x64 at
// batch 8. Beside them, resize_bilinear of each input to twice its size (the window ops' family in
// keel's layers), whose rate counts the output's bytes.
//
//   build/benchmarks/bench_pool --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rate_reporter.hpp"

namespace {

struct Image {
  const char* name;
  std::int64_t n, hw, c;
  std::int64_t bytes() const { return n * hw * hw * c * std::int64_t(sizeof(float)); }
};

const Image kImages[] = {
    {"32x32x16_b64", 64, 32, 16},
    {"16x16x32_b64", 64, 16, 32},
    {"8x8x64_b64", 64, 8, 64},
    {"56x56x64_b8", 8, 56, 64},
};

// Printed as bytes_per_second.
void set_rate(benchmark::State& state, const Image& im) {
  state.SetBytesProcessed(im.bytes() * state.iterations());
}

keel::Tensor pool(bool max, const keel::Tensor& x) {
  return max ? keel::max_pool2d(x, {2, 2}, {2, 2}) : keel::avg_pool2d(x, {2, 2}, {2, 2});
}

void BM_pool_forward(benchmark::State& state, Image im, bool max) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor x = keel::random::normal({im.n, im.hw, im.hw, im.c});
  for (auto _ : state) {
    keel::Tensor y = pool(max, x);
    benchmark::DoNotOptimize(y);
  }
  set_rate(state, im);
}

void BM_pool_forward_backward(benchmark::State& state, Image im, bool max) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor x = keel::random::normal({im.n, im.hw, im.hw, im.c});
  const keel::Tensor dy = keel::random::normal({im.n, im.hw / 2, im.hw / 2, im.c});
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(x);
    const keel::Tensor y = pool(max, x);
    auto g = tape.gradient(y, std::vector<keel::Tensor>{x}, dy);
    benchmark::DoNotOptimize(g);
  }
  set_rate(state, im);
}

// resize_bilinear of the same input to twice its height and width, alone or with its gradient:
// bytes_per_second counts the output's bytes (4x the input's).
void BM_resize_up2x(benchmark::State& state, Image im, bool backward) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor x = keel::random::normal({im.n, im.hw, im.hw, im.c});
  const keel::Tensor dy = keel::random::normal({im.n, 2 * im.hw, 2 * im.hw, im.c});
  for (auto _ : state) {
    keel::GradientTape tape;
    if (backward) tape.watch(x);
    const keel::Tensor y = keel::resize_bilinear(x, {2 * im.hw, 2 * im.hw});
    if (backward) benchmark::DoNotOptimize(tape.gradient(y, std::vector<keel::Tensor>{x}, dy));
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(4 * im.bytes() * state.iterations());
}

void BM_memcpy(benchmark::State& state, Image im) {
  std::vector<float> src(std::size_t(im.bytes()) / sizeof(float), 1.0f), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), std::size_t(im.bytes()));
    benchmark::ClobberMemory();
  }
  set_rate(state, im);
}

// pooling rate / memcpy rate of each input, from the benchmarks of this run.
void print_ratios(const keel_bench::RateReporter& r) {
  const char* ops[] = {"max_pool2d_forward", "avg_pool2d_forward", "max_pool2d_forward_backward",
                       "avg_pool2d_forward_backward"};
  std::printf("\npooling GB/s / memcpy GB/s of the same input (same run, 1 thread):\n  %-14s", "input");
  for (const char* op : ops) std::printf(" %28s", op);
  std::printf("\n");
  for (const Image& im : kImages) {
    const std::string n = im.name;
    std::printf("  %-14s", im.name);
    for (const char* op : ops)
      std::printf(" %28s", keel_bench::ratio_text(r.rate(std::string(op) + "/" + n), r.rate("memcpy/" + n)).c_str());
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  keel::config::set_num_threads(1);
  for (const Image& im : kImages) {
    const std::string n = im.name;
    benchmark::RegisterBenchmark(("max_pool2d_forward/" + n).c_str(), BM_pool_forward, im, true)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("avg_pool2d_forward/" + n).c_str(), BM_pool_forward, im, false)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("max_pool2d_forward_backward/" + n).c_str(), BM_pool_forward_backward, im, true)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("avg_pool2d_forward_backward/" + n).c_str(), BM_pool_forward_backward, im, false)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("resize_bilinear_up2x/" + n).c_str(), BM_resize_up2x, im, false)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("resize_bilinear_up2x_forward_backward/" + n).c_str(), BM_resize_up2x, im, true)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(("memcpy/" + n).c_str(), BM_memcpy, im)->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  keel_bench::RateReporter reporter("bytes_per_second");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_ratios(reporter);
  benchmark::Shutdown();
  return 0;
}
