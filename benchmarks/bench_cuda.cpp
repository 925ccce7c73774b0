// keel on cuda:0 against the CUDA libraries called directly on the same buffers, in the same run:
//
//   matmul/{f32,tf32,bf16}    keel::matmul of two 4096x4096 matrices   vs cublasGemmEx       TFLOP/s
//   conv2d/{f32,tf32}         keel::conv2d, batch 64, 56x56x64 -> 64,  vs cudnnConvolution-  TFLOP/s
//                             3x3 "same", NHWC                             Forward (NHWC)
//   add/64M                   keel::add of two 64M-float tensors       vs cudaMemcpyAsync    GB/s
//                             (8 bytes read + 4 written per element)      device to device
//                                                                          (4 read + 4 written)
//   tiny_add                  keel::add of two 1-element tensors       vs a 4-byte           us per op
//                             (dispatch, allocation, launch)              cudaMemcpyAsync
//   cifar10_cnn_train_step    one train_step of samples/cifar10_cnn.cpp's network on a batch of
//                             64 synthetic 32x32x3 images (forward, backward, Adam)    images/s
//
// Work on the GPU is asynchronous: every timed iteration ends with a wait for the device
// (keel::cuda_synchronize() after keel's ops, cudaDeviceSynchronize() after the baselines'); the
// big ops run several times per iteration so that the wait is a small part of it. At the end a
// table gives each keel rate and its ratio to the direct call (1.00x = as fast as cuBLAS / cuDNN /
// memcpy).
//
//   build/benchmarks/bench_cuda --benchmark_min_time=0.1
//
// Without a GPU it prints a line and exits with 77 (CTest's "skipped").
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <keel/keel.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using keel::DType;
using keel::Tensor;

constexpr std::int64_t kMatmulN = 4096;
constexpr std::int64_t kAddElements = std::int64_t{64} << 20;  // 64M floats, 256 MiB per tensor
constexpr int kBigOpsPerSync = 4;
constexpr int kTinyOpsPerSync = 1000;

struct ConvShape {
  std::int64_t n = 64, h = 56, w = 56, cin = 64, cout = 64, k = 3;
  double flops() const { return 2.0 * double(n * h * w * cout) * double(k * k * cin); }  // "same", stride 1
};
constexpr ConvShape kConv{};

enum class Precision { f32, tf32, bf16 };
const char* precision_name(Precision p) { return p == Precision::f32 ? "f32" : p == Precision::tf32 ? "tf32" : "bf16"; }

// One cuBLAS and one cuDNN handle for the baselines, on the legacy default stream.
cublasHandle_t g_cublas = nullptr;
cudnnHandle_t g_cudnn = nullptr;

bool cuda_ok(cudaError_t status, benchmark::State& state, const char* what) {
  if (status == cudaSuccess) return true;
  state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(status)).c_str());
  return false;
}
bool cublas_ok(cublasStatus_t status, benchmark::State& state, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  state.SkipWithError((std::string(what) + ": cuBLAS status " + std::to_string(int(status))).c_str());
  return false;
}
bool cudnn_ok(cudnnStatus_t status, benchmark::State& state, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  state.SkipWithError((std::string(what) + ": " + cudnnGetErrorString(status)).c_str());
  return false;
}

// Waits for everything queued on the device: the baselines' default stream and keel's stream.
bool sync(benchmark::State& state) { return cuda_ok(cudaDeviceSynchronize(), state, "cudaDeviceSynchronize"); }

void* device_ptr(const Tensor& t) { return t.raw_data(); }  // benchmark-only: written by the baselines

void set_rate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration * double(state.iterations()), benchmark::Counter::kIsRate);
}

// TF32 on for this benchmark only.
struct TF32For {
  explicit TF32For(bool on) { keel::config::set_tf32(on); }
  ~TF32For() { keel::config::set_tf32(false); }
};

// Runs `op` once outside the timing (first-call costs: cuBLAS/cuDNN plans, cache growth), then
// kOps times per timed iteration followed by a device synchronisation. An exception from keel
// ends the benchmark with its message.
template <class Op>
void timed(benchmark::State& state, int ops_per_sync, Op op) {
  try {
    op();
    keel::cuda_synchronize();
    for (auto _ : state) {
      for (int i = 0; i < ops_per_sync; ++i) op();
      keel::cuda_synchronize();  // keel's own wait (throws DeviceError on a failed kernel)
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// ---- matmul -------------------------------------------------------------------------------

std::pair<Tensor, Tensor> matmul_operands(Precision p) {
  keel::random::set_seed(1);
  Tensor a = keel::random::normal({kMatmulN, kMatmulN});
  Tensor b = keel::random::normal({kMatmulN, kMatmulN});
  if (p == Precision::bf16) {
    a = keel::cast(a, DType::bfloat16);
    b = keel::cast(b, DType::bfloat16);
  }
  return {a, b};
}

void BM_keel_matmul(benchmark::State& state, Precision p) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  TF32For tf32(p == Precision::tf32);
  Tensor a, b;
  try {
    std::tie(a, b) = matmul_operands(p);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  Tensor c;
  timed(state, kBigOpsPerSync, [&] { c = keel::matmul(a, b); });
  const double n = double(kMatmulN);
  set_rate(state, "FLOPS", 2 * n * n * n * kBigOpsPerSync);
}

void BM_cublas_gemm(benchmark::State& state, Precision p) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  Tensor a, b, c;
  try {
    std::tie(a, b) = matmul_operands(p);
    c = keel::zeros({kMatmulN, kMatmulN}, a.dtype());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!sync(state)) return;
  const cudaDataType type = p == Precision::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = p == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = 1, beta = 0;
  const int n = static_cast<int>(kMatmulN);
  // Row-major C = A B is column-major C^T = B^T A^T: pass B first.
  auto gemm = [&] {
    return cublasGemmEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, device_ptr(b), type, n,
                        device_ptr(a), type, n, &beta, device_ptr(c), type, n, compute, CUBLAS_GEMM_DEFAULT);
  };
  if (!cublas_ok(gemm(), state, "cublasGemmEx") || !sync(state)) return;
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; i < kBigOpsPerSync && ok; ++i) ok = cublas_ok(gemm(), state, "cublasGemmEx");
    if (!ok || !sync(state)) break;
  }
  const double nd = double(kMatmulN);
  set_rate(state, "FLOPS", 2 * nd * nd * nd * kBigOpsPerSync);
}

// ---- conv2d -------------------------------------------------------------------------------

std::pair<Tensor, Tensor> conv_operands() {
  keel::random::set_seed(2);
  const ConvShape s = kConv;
  return {keel::random::normal({s.n, s.h, s.w, s.cin}), keel::random::normal({s.k, s.k, s.cin, s.cout}, 0, 0.05)};
}

void BM_keel_conv2d(benchmark::State& state, Precision p) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  TF32For tf32(p == Precision::tf32);
  Tensor x, k, y;
  try {
    std::tie(x, k) = conv_operands();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  timed(state, kBigOpsPerSync, [&] { y = keel::conv2d(x, k, {1, 1}, "same"); });
  set_rate(state, "FLOPS", kConv.flops() * kBigOpsPerSync);
}

// cuDNN descriptors and workspace, released on scope exit.
struct CudnnConv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  void* workspace = nullptr;
  ~CudnnConv() {
    if (workspace) cudaFree(workspace);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

void BM_cudnn_conv(benchmark::State& state, Precision p) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  const ConvShape s = kConv;
  Tensor x, k, k_krsc, y;
  try {
    std::tie(x, k) = conv_operands();
    // cuDNN's NHWC filters are [out, kh, kw, in]; keel's kernels are [kh, kw, in, out].
    k_krsc = keel::transpose(k, {3, 0, 1, 2}).contiguous();
    y = keel::zeros({s.n, s.h, s.w, s.cout});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  CudnnConv d;
  const int pad = static_cast<int>(s.k / 2);
  if (!cudnn_ok(cudnnCreateTensorDescriptor(&d.x), state, "cudnnCreateTensorDescriptor") ||
      !cudnn_ok(cudnnCreateTensorDescriptor(&d.y), state, "cudnnCreateTensorDescriptor") ||
      !cudnn_ok(cudnnCreateFilterDescriptor(&d.w), state, "cudnnCreateFilterDescriptor") ||
      !cudnn_ok(cudnnCreateConvolutionDescriptor(&d.conv), state, "cudnnCreateConvolutionDescriptor") ||
      !cudnn_ok(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(s.n), int(s.cin), int(s.h),
                                           int(s.w)),
                state, "cudnnSetTensor4dDescriptor(x)") ||
      !cudnn_ok(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, int(s.n), int(s.cout), int(s.h),
                                           int(s.w)),
                state, "cudnnSetTensor4dDescriptor(y)") ||
      !cudnn_ok(cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, int(s.cout), int(s.cin), int(s.k),
                                           int(s.k)),
                state, "cudnnSetFilter4dDescriptor") ||
      !cudnn_ok(cudnnSetConvolution2dDescriptor(d.conv, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                state, "cudnnSetConvolution2dDescriptor"))
    return;
  // float32: FMA kernels only (no TF32), as keel by default; tf32: tensor cores allowed.
  const cudnnMathType_t math = p == Precision::tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  if (!cudnn_ok(cudnnSetConvolutionMathType(d.conv, math), state, "cudnnSetConvolutionMathType")) return;
  // The heuristics' first choice that runs in at most 1 GiB of workspace and keeps to `math`.
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  if (!cudnn_ok(cudnnGetConvolutionForwardAlgorithm_v7(g_cudnn, d.x, d.w, d.conv, d.y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                state, "cudnnGetConvolutionForwardAlgorithm_v7"))
    return;
  int chosen = -1;
  for (int i = 0; i < returned && chosen < 0; ++i) {
    const bool math_ok = p == Precision::tf32 || perf[i].mathType == CUDNN_FMA_MATH ||
                         perf[i].mathType == CUDNN_DEFAULT_MATH;
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= (std::size_t{1} << 30) && math_ok) chosen = i;
  }
  if (chosen < 0) {
    state.SkipWithError("cuDNN offered no forward algorithm");
    return;
  }
  const cudnnConvolutionFwdAlgo_t algo = perf[chosen].algo;
  if (p == Precision::tf32 &&
      !cudnn_ok(cudnnSetConvolutionMathType(d.conv, perf[chosen].mathType), state, "cudnnSetConvolutionMathType"))
    return;
  std::size_t workspace_bytes = 0;
  if (!cudnn_ok(cudnnGetConvolutionForwardWorkspaceSize(g_cudnn, d.x, d.w, d.conv, d.y, algo, &workspace_bytes),
                state, "cudnnGetConvolutionForwardWorkspaceSize"))
    return;
  if (workspace_bytes > 0 && !cuda_ok(cudaMalloc(&d.workspace, workspace_bytes), state, "cudaMalloc(workspace)"))
    return;
  if (!sync(state)) return;
  const float alpha = 1, beta = 0;
  auto forward = [&] {
    return cudnnConvolutionForward(g_cudnn, &alpha, d.x, device_ptr(x), d.w, device_ptr(k_krsc), d.conv, algo,
                                   d.workspace, workspace_bytes, &beta, d.y, device_ptr(y));
  };
  if (!cudnn_ok(forward(), state, "cudnnConvolutionForward") || !sync(state)) return;
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; i < kBigOpsPerSync && ok; ++i) ok = cudnn_ok(forward(), state, "cudnnConvolutionForward");
    if (!ok || !sync(state)) break;
  }
  set_rate(state, "FLOPS", kConv.flops() * kBigOpsPerSync);
  state.SetLabel("algo " + std::to_string(int(algo)));
}

// ---- elementwise bandwidth ----------------------------------------------------------------

void BM_keel_add(benchmark::State& state) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  Tensor a, b, c;
  try {
    a = keel::random::uniform({kAddElements});
    b = keel::random::uniform({kAddElements});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  timed(state, kBigOpsPerSync, [&] { c = keel::add(a, b); });
  set_rate(state, "BYTES", 3.0 * 4 * double(kAddElements) * kBigOpsPerSync);
}

void BM_memcpy_d2d(benchmark::State& state) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  Tensor src, dst;
  try {
    src = keel::random::uniform({kAddElements});
    dst = keel::zeros({kAddElements});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const std::size_t bytes = std::size_t(kAddElements) * 4;
  if (!sync(state)) return;
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; i < kBigOpsPerSync && ok; ++i)
      ok = cuda_ok(cudaMemcpyAsync(device_ptr(dst), device_ptr(src), bytes, cudaMemcpyDeviceToDevice, 0), state,
                   "cudaMemcpyAsync");
    if (!ok || !sync(state)) break;
  }
  set_rate(state, "BYTES", 2.0 * double(bytes) * kBigOpsPerSync);
}

// ---- per-op overhead ----------------------------------------------------------------------

void set_time_per_op(benchmark::State& state, int ops_per_iteration) {
  state.counters["time_per_op"] = benchmark::Counter(double(state.iterations()) * ops_per_iteration,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_keel_tiny_add(benchmark::State& state) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  Tensor a, b, c;
  try {
    a = keel::constant({1.0f}, {1});
    b = keel::constant({2.0f}, {1});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  timed(state, kTinyOpsPerSync, [&] { c = keel::add(a, b); });
  set_time_per_op(state, kTinyOpsPerSync);
}

void BM_memcpy_4_bytes(benchmark::State& state) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  Tensor src, dst;
  try {
    src = keel::constant({1.0f}, {1});
    dst = keel::zeros({1});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!sync(state)) return;
  for (auto _ : state) {
    bool ok = true;
    for (int i = 0; i < kTinyOpsPerSync && ok; ++i)
      ok = cuda_ok(cudaMemcpyAsync(device_ptr(dst), device_ptr(src), 4, cudaMemcpyDeviceToDevice, 0), state,
                   "cudaMemcpyAsync");
    if (!ok || !sync(state)) break;
  }
  set_time_per_op(state, kTinyOpsPerSync);
}

// ---- CIFAR-10 CNN training ----------------------------------------------------------------

// The network of samples/cifar10_cnn.cpp (without --bn).
keel::models::Sequential cifar10_cnn() {
  namespace layers = keel::layers;
  keel::models::Sequential model(std::vector<std::shared_ptr<layers::Layer>>{}, "cifar10_cnn");
  model.add(layers::InputLayer({32, 32, 3}));
  for (int filters : {16, 32, 64}) {
    model.add(layers::Conv2D(filters, 3, {.padding = "same", .activation = "relu"}));
    model.add(layers::MaxPooling2D(2));
  }
  model.add(layers::Flatten());
  model.add(layers::Dense(128, {.activation = "relu"}));
  model.add(layers::Dense(10));
  return model;
}

void BM_keel_cifar10_train_step(benchmark::State& state) {
  keel::DeviceScope gpu(keel::Device::cuda(0));
  const std::int64_t batch = 64;
  try {
    keel::random::set_seed(3);
    const Tensor x = keel::random::uniform({batch, 32, 32, 3});
    const Tensor y = keel::random::uniform_int({batch}, 0, 10, DType::int64);
    keel::models::Sequential model = cifar10_cnn();
    model.compile({.optimizer = keel::optimizers::Adam(1e-3),
                   .loss = keel::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                   .metrics = {"accuracy"}});
    model.train_step(x, y, Tensor());  // builds the model and the optimizer's slots
    timed(state, 1, [&] { model.train_step(x, y, Tensor()); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  set_rate(state, "images", double(batch));
}

// ---- the summary table --------------------------------------------------------------------

// Prints as usual, and remembers each benchmark's rate counter for the table at the end.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      for (const char* counter : {"FLOPS", "BYTES", "time_per_op", "images"}) {
        auto it = run.counters.find(counter);
        if (it != run.counters.end()) values_[run.run_name.function_name] = it->second.value;
      }
    }
  }

  // One row: keel's value, the baseline's, and their ratio (>1 = keel faster for rates; for
  // times, keel's time over the baseline's: >1 = keel slower).
  void row(const char* what, const std::string& keel_name, const std::string& base_name, const char* unit,
           double scale) const {
    auto k = values_.find(keel_name), b = values_.find(base_name);
    char kv[32] = "-", bv[32] = "-", ratio[32] = "-";
    if (k != values_.end()) std::snprintf(kv, sizeof kv, "%.2f", k->second * scale);
    if (b != values_.end()) std::snprintf(bv, sizeof bv, "%.2f", b->second * scale);
    if (k != values_.end() && b != values_.end() && b->second > 0)
      std::snprintf(ratio, sizeof ratio, "%.2fx", k->second / b->second);
    std::printf("  %-28s %12s %12s %-10s %8s\n", what, kv, bv, unit, ratio);
  }

  void print_summary() const {
    std::printf("\n== bench_cuda summary ==\n");
    std::printf("  %-28s %12s %12s %-10s %8s\n", "benchmark", "keel", "baseline", "unit", "ratio");
    for (Precision p : {Precision::f32, Precision::tf32, Precision::bf16}) {
      const std::string s = precision_name(p);
      row(("matmul 4096 " + s + " vs cuBLAS").c_str(), "keel_matmul/" + s, "cublas_gemm/" + s, "TFLOP/s", 1e-12);
    }
    for (Precision p : {Precision::f32, Precision::tf32}) {
      const std::string s = precision_name(p);
      row(("conv2d 64x56x56x64 " + s + " vs cuDNN").c_str(), "keel_conv2d/" + s, "cudnn_conv/" + s, "TFLOP/s", 1e-12);
    }
    row("add 64M f32 vs memcpy", "keel_add/64M", "memcpy_d2d/256MiB", "GB/s", 1e-9);
    row("tiny add vs 4-byte memcpy", "keel_tiny_add", "memcpy_4_bytes", "us/op", 1e6);
    row("cifar10 CNN train step", "keel_cifar10_train_step/batch64", "-", "images/s", 1.0);
    std::printf("== end of summary ==\n");
  }

 private:
  std::map<std::string, double> values_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (keel::cuda_device_count() == 0) {
    std::printf("no CUDA device: bench_cuda skipped\n");
    return 77;
  }
  if (cudaSetDevice(0) != cudaSuccess || cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS ||
      cudnnCreate(&g_cudnn) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench_cuda: could not create the cuBLAS / cuDNN handles\n");
    return 1;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("cuda:0 = %s, %d SMs, %.1f GiB, cuDNN %zu, cuBLAS handle ready\n", prop.name,
                prop.multiProcessorCount, double(prop.totalGlobalMem) / double(1 << 30), cudnnGetVersion());

  auto reg = [](const std::string& name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  for (Precision p : {Precision::f32, Precision::tf32, Precision::bf16}) {
    const std::string s = precision_name(p);
    reg("keel_matmul/" + s, BM_keel_matmul, p);
    reg("cublas_gemm/" + s, BM_cublas_gemm, p);
  }
  for (Precision p : {Precision::f32, Precision::tf32}) {
    const std::string s = precision_name(p);
    reg("keel_conv2d/" + s, BM_keel_conv2d, p);
    reg("cudnn_conv/" + s, BM_cudnn_conv, p);
  }
  reg("keel_add/64M", BM_keel_add);
  reg("memcpy_d2d/256MiB", BM_memcpy_d2d);
  benchmark::RegisterBenchmark("keel_tiny_add", BM_keel_tiny_add)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("memcpy_4_bytes", BM_memcpy_4_bytes)->UseRealTime()->Unit(benchmark::kMicrosecond);
  reg("keel_cifar10_train_step/batch64", BM_keel_cifar10_train_step);

  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  cudnnDestroy(g_cudnn);
  cublasDestroy(g_cublas);
  return 0;
}
