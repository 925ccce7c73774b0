// Post-training quantization's speed, at one thread: the Fashion-MNIST sample's CNN (Conv2D 32
// and 64 "same" + ReLU, 2x2 max pools, Dense 3136 -> 128 -> 10) predicting batches of 1 and 64
// as float32, int8 (dynamic and static activations) and float16 weights; and Dense layers
// 1024 -> 1024 alone; the int8 GEMM alone, and with a sigmoid in its epilogue against a pass
// afterwards. Counter: images_per_second (items/s). A table of ratios against float32,
// measured in the same run, ends the output; run with --benchmark_repetitions=5 for medians.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "cpu/int8_gemm.hpp"
#include "rate_reporter.hpp"

namespace {

using namespace keel;

std::shared_ptr<models::Model> fashion_cnn() {
  random::set_seed(1);
  return std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{28, 28, 1}),
      std::make_shared<layers::Conv2D>(32, 3, layers::Conv2DOptions{.padding = "same", .activation = "relu"}),
      std::make_shared<layers::MaxPooling2D>(2),
      std::make_shared<layers::Conv2D>(64, 3, layers::Conv2DOptions{.padding = "same", .activation = "relu"}),
      std::make_shared<layers::MaxPooling2D>(2), std::make_shared<layers::Flatten>(),
      std::make_shared<layers::Dense>(128, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dense>(10)});
}

std::shared_ptr<models::Model> dense_stack() {
  random::set_seed(2);
  return std::make_shared<models::Sequential>(std::vector<std::shared_ptr<layers::Layer>>{
      std::make_shared<layers::InputLayer>(Shape{1024}),
      std::make_shared<layers::Dense>(1024, layers::DenseOptions{.activation = "relu"}),
      std::make_shared<layers::Dense>(1024)});
}

const char* const kVariants[] = {"float32", "int8_dynamic", "int8_static", "float16"};

std::shared_ptr<models::Model> variant(models::Model& base, const std::string& v, const Tensor& calibration) {
  if (v == "int8_dynamic") return quantization::quantize(base);
  if (v == "int8_static") return quantization::quantize(base, {.activations = "static"}, calibration);
  if (v == "float16") return quantization::quantize(base, {.dtype = "float16"});
  return nullptr;
}

void BM_predict(benchmark::State& state, std::string model_name, std::string v, std::int64_t batch) {
  config::set_num_threads(1);
  auto base = model_name == "cnn" ? fashion_cnn() : dense_stack();
  const Shape in = model_name == "cnn" ? Shape{batch, 28, 28, 1} : Shape{batch, 1024};
  random::set_seed(3);
  const Tensor x = random::uniform(in, 0.0, 1.0);
  std::vector<std::int64_t> cal_shape = in.dims();
  cal_shape[0] = 64;
  auto q = variant(*base, v, random::uniform(Shape(cal_shape), 0.0, 1.0));
  models::Model& m = q ? *q : *base;
  (void)m(x, false);  // built, packed
  for (auto _ : state) benchmark::DoNotOptimize(m(x, false));
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["images_per_second"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                           benchmark::Counter::kIsRate);
}

// The GEMMs of the CNN's second convolution (im2col rows x 288 -> 64) and of Dense 1024 -> 1024:
// the int8 kernel alone against keel's float32 matmul. Counter: multiply-adds per second.
struct GemmShape {
  const char* name;
  std::int64_t m, n, k;
};
const GemmShape kGemms[] = {{"conv2_b64", 64 * 14 * 14, 64, 288}, {"dense_b64", 64, 1024, 1024}, {"dense_b1", 1, 1024, 1024}};

// The operands of an int8 GEMM of shape g, and an epilogue with per-channel scales.
struct Int8Gemm {
  explicit Int8Gemm(GemmShape shape)
      : g(shape),
        a(static_cast<std::size_t>(g.m * ((g.k + 3) / 4 * 4)), 17),
        q(static_cast<std::size_t>(g.k * g.n), -3),
        w(cpu::int8::pack(q.data(), g.k, g.n)),
        scale(static_cast<std::size_t>(g.n), 0.01f),
        out(static_cast<std::size_t>(g.m * g.n)) {
    e.w_scale = scale.data();
  }
  void run(const cpu::int8::Epilogue& with) { cpu::int8::gemm(a.data(), w.k4, g.m, w, with, out.data(), g.n); }
  void count(benchmark::State& state) const {
    state.counters["macs_per_second"] =
        benchmark::Counter(static_cast<double>(state.iterations() * g.m * g.n * g.k), benchmark::Counter::kIsRate);
  }
  GemmShape g;
  std::vector<std::uint8_t> a;
  std::vector<std::int8_t> q;
  cpu::int8::PackedWeights w;
  std::vector<float> scale, out;
  cpu::int8::Epilogue e;
};

void BM_gemm_int8(benchmark::State& state, GemmShape g) {
  Int8Gemm gemm(g);
  config::set_num_threads(1);
  for (auto _ : state) gemm.run(gemm.e);
  gemm.count(state);
}

// An elementwise activation (sigmoid) on the int8 GEMM's output: in the epilogue, on each block
// of rows while it is in cache, against a second pass over the whole output afterwards (what an
// unfused activation op costs). Counter: multiply-adds per second.
void BM_gemm_int8_sigmoid(benchmark::State& state, GemmShape g, bool fused) {
  Int8Gemm gemm(g);
  gemm.e.activation = kernel::UnaryOp::sigmoid;
  cpu::int8::Epilogue with = gemm.e, after = gemm.e;
  with.activate = fused;
  after.activate = true;
  config::set_num_threads(1);
  for (auto _ : state) {
    gemm.run(with);
    if (!fused) cpu::int8::activate(after, gemm.out.data(), g.m * g.n);
  }
  gemm.count(state);
}

void BM_gemm_float(benchmark::State& state, GemmShape g) {
  config::set_num_threads(1);
  const Tensor a = random::uniform({g.m, g.k}, -1.0, 1.0), b = random::uniform({g.k, g.n}, -1.0, 1.0);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  state.counters["macs_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * g.m * g.n * g.k), benchmark::Counter::kIsRate);
}

std::string name(const std::string& model, const std::string& v, std::int64_t batch) {
  return model + "_" + v + "/batch:" + std::to_string(batch);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const std::string model : {"cnn", "dense1024"})
    for (std::int64_t batch : {1, 64})
      for (const char* v : kVariants)
        benchmark::RegisterBenchmark(name(model, v, batch).c_str(), BM_predict, model, std::string(v), batch)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
  for (const GemmShape& g : kGemms) {
    benchmark::RegisterBenchmark((std::string("gemm_int8/") + g.name).c_str(), BM_gemm_int8, g)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark((std::string("gemm_float32/") + g.name).c_str(), BM_gemm_float, g)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    for (const bool fused : {true, false})
      benchmark::RegisterBenchmark((std::string("gemm_int8_sigmoid/") + g.name + (fused ? "/fused" : "/after")).c_str(),
                                   BM_gemm_int8_sigmoid, g, fused)
          ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  keel_bench::RateReporter reporter("images_per_second");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nspeed-up over float32 (images/s, same run; int8 instruction set: %s)\n",
              keel::quantization::int8_kernel_level().c_str());
  for (const std::string model : {"cnn", "dense1024"})
    for (std::int64_t batch : {1, 64}) {
      const double base = reporter.rate(name(model, "float32", batch));
      std::printf("  %-10s batch %-3lld", model.c_str(), static_cast<long long>(batch));
      for (const char* v : {"int8_dynamic", "int8_static", "float16"}) {
        const double r = reporter.rate(name(model, v, batch));
        if (base > 0 && r > 0) std::printf("  %s %.2fx", v, r / base);
      }
      std::printf("\n");
    }
  benchmark::Shutdown();
  return 0;
}
