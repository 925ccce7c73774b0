// Elementwise throughput on 4M float32 (a [4096, 1024] tensor), in bytes of the logical op per
// second (every input element read once + every output element written once; bytes_per_second,
// which Google Benchmark prints in binary units: 1 G/s = 2^30 B/s), at 1 and 2 threads.
//
//   relu_xw_b/full          relu(x * w + b), x, w, b all [4096, 1024]   (read 3, write 1 array)
//   relu_xw_b/per_feature   relu(x * w + b), w, b [1024] broadcast over [4096, 1024] (a Dense
//                           layer's bias + activation pattern; read 1, write 1 array)
//   bias_add_relu           bias_add(x, b, "relu"), b [1024]: the same Dense ending fused into
//                           one pass (read 1, write 1 array)
//   exp, tanh, sigmoid,
//   relu                    unary: read 1, write 1 array
//   round, tan, mish,
//   hard_swish              tf.math / Keras 3 unary ops (xsimd kernels): read 1, write 1 array
//   add, maximum            binary: read 2, write 1 array
//   mul/repeated_scalar,    mul(g, x) with g a broadcast_to view of one value, or of a [1024]
//   mul/repeated_row        row, over [4096, 1024] (stride 0 along the repeated axes): a sum's or
//                           a bias's gradient times a tensor (read 1, write 1 array)
//   mul/column,             mul(x, c) with c a contiguous column of one value per row: [4096, 1]
//   mul/short_column        over [4096, 1024], and [1048576, 1] over [1048576, 4] (x / row sums,
//                           per-sample weights over few classes): read 1, write 1 array
//   slice/short_columns     slice(x, {0, 1}, {rows, 2}).contiguous() of [1048576, 4]: runs of 8
//                           bytes one row apart (read and write half an array)
//   mod, floordiv, atan2    binary; mod is a scalar std::fmod loop (exact remainders)
//   transpose               transpose(x).contiguous(): read 1, write 1 array
//   exp_transposed          exp of the transposed view: read 1, write 1 array
//   greater, where          greater(x, y) (bool out: read 2 arrays, write a quarter of one);
//                           where(mask, x, y) (read 2.25, write 1 array)
//   cast/f32_f16, f16_f32,
//   cast/f32_bf16, bf16_f32 float32 <-> half types: read 1 and write half an array or back
//   gather/rows,            gather(x, 4096 random row ids, 0) and gather(x, 512 random column ids,
//   gather/last_axis        1): read and write the gathered bytes
//   dropout                 dropout(x, 0.5) without a tape (no mask kept): read 1, write 1 array
//   random/uniform, normal,
//   truncated_normal        random draws of the same shape: write 1 array
//   memcpy/...              the baseline: a plain memcpy moving the same number of bytes
//                           (half read, half written), split over the same number of threads
//
// The eager relu(x * w + b) runs three ops and materialises two temporaries, so it moves more
// memory than its logical byte count: the gap to memcpy is what a fused kernel would recover.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace {

constexpr std::int64_t kRows = 4096;
constexpr std::int64_t kCols = 1024;
constexpr std::int64_t kN = kRows * kCols;  // 4M elements
constexpr std::int64_t kF = sizeof(float);

int threads_of(const benchmark::State& state) { return static_cast<int>(state.range(0)); }

// Sets keel's thread count for one benchmark and restores it afterwards.
class ThreadScope {
 public:
  explicit ThreadScope(int n) : previous_(keel::config::num_threads()) {
    keel::config::set_num_threads(n);
  }
  ~ThreadScope() { keel::config::set_num_threads(previous_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
};

void BM_relu_xw_b_full(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor w = keel::random::normal({kRows, kCols});
  const keel::Tensor b = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::relu(x * w + b);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 4 * kN * kF);
}

void BM_relu_xw_b_per_feature(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor w = keel::random::normal({kCols});
  const keel::Tensor b = keel::random::normal({kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::relu(x * w + b);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * (2 * kN + 2 * kCols) * kF);
}

// A Dense layer's ending as the layer runs it: bias_add with the activation fused (one pass).
void BM_bias_add_relu(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor b = keel::random::normal({kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::bias_add(x, b, "relu");
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * (2 * kN + kCols) * kF);
}

template <keel::Tensor (*Op)(const keel::Tensor&)>
void BM_unary(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = Op(x);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_dropout(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::dropout(x, 0.5);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

// random draws into [4096, 1024] float32: state.range(1) = 0 uniform, 1 normal, 2 truncated
// normal (write 1 array).
void BM_random(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  for (auto _ : state) {
    keel::Tensor y = state.range(1) == 0   ? keel::random::uniform({kRows, kCols})
                     : state.range(1) == 1 ? keel::random::normal({kRows, kCols})
                                           : keel::random::truncated_normal({kRows, kCols});
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * kN * kF);
}

template <keel::Tensor (*Op)(const keel::Tensor&, const keel::Tensor&)>
void BM_binary(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor y = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor z = Op(x, y);
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * 3 * kN * kF);
}

// mul with a broadcast view (stride 0 along its repeated axes), as a backward pass gets one
// from a sum or a broadcast: state.range(1) = 0 repeats one value, 1 a row of kCols.
void BM_mul_repeated(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Shape small = state.range(1) == 0 ? keel::Shape{1, 1} : keel::Shape{1, kCols};
  const keel::Tensor g = keel::broadcast_to(keel::random::normal(small), {kRows, kCols});
  for (auto _ : state) {
    keel::Tensor z = keel::mul(g, x);
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

// mul of x [rows, cols] (the same kN elements) by a contiguous [rows, 1]: state.range(1) = cols.
void BM_mul_column(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const std::int64_t cols = state.range(1), rows = kN / cols;
  const keel::Tensor x = keel::random::normal({rows, cols});
  const keel::Tensor c = keel::random::normal({rows, 1});
  for (auto _ : state) {
    keel::Tensor z = keel::mul(x, c);
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_slice_short_columns(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kN / 4, 4});
  for (auto _ : state) {
    keel::Tensor z = keel::slice(x, {0, 1}, {kN / 4, 2}).contiguous();
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * kN * kF);
}

void BM_transpose(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::transpose(x).contiguous();
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_exp_transposed(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor y = keel::exp(keel::transpose(x));
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kN * kF);
}

void BM_greater(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor y = keel::random::normal({kRows, kCols});
  for (auto _ : state) {
    keel::Tensor z = keel::greater(x, y);
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * (2 * kN * kF + kN));
}

void BM_where(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const keel::Tensor y = keel::random::normal({kRows, kCols});
  const keel::Tensor mask = keel::greater(x, y);  // random: half true
  for (auto _ : state) {
    keel::Tensor z = keel::where(mask, x, y);
    benchmark::DoNotOptimize(z);
  }
  state.SetBytesProcessed(state.iterations() * (3 * kN * kF + kN));
}

// gather along axis state.range(1): 4096 random rows, or 512 random columns of every row.
void BM_gather(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const int axis = static_cast<int>(state.range(1));
  const keel::Tensor x = keel::random::normal({kRows, kCols});
  const std::int64_t n = axis == 0 ? kRows : 512;
  const keel::Tensor ids = keel::random::uniform_int({n}, 0, axis == 0 ? kRows : kCols);
  for (auto _ : state) {
    keel::Tensor y = keel::gather(x, ids, axis);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * (axis == 0 ? kN : kRows * n) * kF);
}

// cast from state.range(1)'s dtype to state.range(2)'s (0 float32, 1 float16, 2 bfloat16).
void BM_cast(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  ThreadScope threads(threads_of(state));
  const keel::DType types[] = {keel::DType::float32, keel::DType::float16, keel::DType::bfloat16};
  const keel::DType from = types[state.range(1)], to = types[state.range(2)];
  const keel::Tensor x = keel::cast(keel::random::normal({kRows, kCols}), from);
  for (auto _ : state) {
    keel::Tensor y = keel::cast(x, to);
    benchmark::DoNotOptimize(y);
  }
  const auto bytes = static_cast<std::int64_t>(keel::itemsize(from) + keel::itemsize(to));
  state.SetBytesProcessed(state.iterations() * kN * bytes);
}

// memcpy of state.range(1) bytes in total (read + written), split into one chunk per thread.
void BM_memcpy(benchmark::State& state) {
  const int threads = threads_of(state);
  const auto copy_bytes = static_cast<std::size_t>(state.range(1) / 2);
  std::vector<char> src(copy_bytes, 1);
  std::vector<char> dst(copy_bytes, 0);  // touched, so page faults are not timed
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const std::size_t parts = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t part = static_cast<std::size_t>(omp_get_thread_num());
      const std::size_t chunk = (copy_bytes + parts - 1) / parts;
      const std::size_t begin = std::min(copy_bytes, part * chunk);
      const std::size_t end = std::min(copy_bytes, begin + chunk);
      std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(1));
}

void thread_args(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
}

// Threads 1 and 2 for BM_random's draw `kind`.
void random_args(benchmark::internal::Benchmark* b, int kind) {
  b->ArgNames({"threads", "kind"})->Args({1, kind})->Args({2, kind})->UseRealTime()->Unit(benchmark::kMillisecond);
}

// The memcpy baselines, named after the op whose byte count they move.
void memcpy_args(benchmark::internal::Benchmark* b, std::int64_t bytes) {
  b->ArgNames({"threads", "bytes"})
      ->Args({1, bytes})
      ->Args({2, bytes})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_relu_xw_b_full)->Name("relu_xw_b/full")->Apply(thread_args);
BENCHMARK(BM_relu_xw_b_per_feature)->Name("relu_xw_b/per_feature")->Apply(thread_args);
BENCHMARK(BM_bias_add_relu)->Name("bias_add_relu")->Apply(thread_args);
BENCHMARK(BM_unary<keel::exp>)->Name("exp")->Apply(thread_args);
BENCHMARK(BM_unary<keel::tanh>)->Name("tanh")->Apply(thread_args);
BENCHMARK(BM_unary<keel::sigmoid>)->Name("sigmoid")->Apply(thread_args);
BENCHMARK(BM_unary<keel::relu>)->Name("relu")->Apply(thread_args);
BENCHMARK(BM_unary<keel::round>)->Name("round")->Apply(thread_args);
BENCHMARK(BM_unary<keel::tan>)->Name("tan")->Apply(thread_args);
BENCHMARK(BM_unary<keel::mish>)->Name("mish")->Apply(thread_args);
BENCHMARK(BM_unary<keel::hard_swish>)->Name("hard_swish")->Apply(thread_args);
BENCHMARK(BM_dropout)->Name("dropout")->Apply(thread_args);
BENCHMARK(BM_random)->Name("random/uniform")->Apply([](benchmark::internal::Benchmark* b) { random_args(b, 0); });
BENCHMARK(BM_random)->Name("random/normal")->Apply([](benchmark::internal::Benchmark* b) { random_args(b, 1); });
BENCHMARK(BM_random)->Name("random/truncated_normal")->Apply([](benchmark::internal::Benchmark* b) {
  random_args(b, 2);
});
BENCHMARK(BM_binary<keel::add>)->Name("add")->Apply(thread_args);
BENCHMARK(BM_binary<keel::maximum>)->Name("maximum")->Apply(thread_args);
BENCHMARK(BM_transpose)->Name("transpose")->Apply(thread_args);
BENCHMARK(BM_exp_transposed)->Name("exp_transposed")->Apply(thread_args);
BENCHMARK(BM_greater)->Name("greater")->Apply(thread_args);
BENCHMARK(BM_where)->Name("where")->Apply(thread_args);
BENCHMARK(BM_gather)->Name("gather/rows")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "axis"})->Args({1, 0})->Args({2, 0})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_gather)->Name("gather/last_axis")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "axis"})->Args({1, 1})->Args({2, 1})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_cast)->Name("cast")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "from", "to"});
  for (const int t : {1, 2})
    for (const auto& [from, to] : {std::pair{0, 1}, {1, 0}, {0, 2}, {2, 0}}) b->Args({t, from, to});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_mul_repeated)->Name("mul/repeated_scalar")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "row"})->Args({1, 0})->Args({2, 0})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_mul_repeated)->Name("mul/repeated_row")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "row"})->Args({1, 1})->Args({2, 1})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_mul_column)->Name("mul/column")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "cols"})->Args({1, kCols})->Args({2, kCols})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_mul_column)->Name("mul/short_column")->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "cols"})->Args({1, 4})->Args({2, 4})->UseRealTime()->Unit(benchmark::kMillisecond);
});
BENCHMARK(BM_slice_short_columns)->Name("slice/short_columns")->Apply(thread_args);
BENCHMARK(BM_binary<keel::mod>)->Name("mod")->Apply(thread_args);
BENCHMARK(BM_binary<keel::floordiv>)->Name("floordiv")->Apply(thread_args);
BENCHMARK(BM_binary<keel::atan2>)->Name("atan2")->Apply(thread_args);
BENCHMARK(BM_memcpy)
    ->Name("memcpy/as_relu_xw_b_full")
    ->Apply([](benchmark::internal::Benchmark* b) { memcpy_args(b, 4 * kN * kF); });
BENCHMARK(BM_memcpy)
    ->Name("memcpy/as_add")
    ->Apply([](benchmark::internal::Benchmark* b) { memcpy_args(b, 3 * kN * kF); });
BENCHMARK(BM_memcpy)
    ->Name("memcpy/as_unary_and_per_feature")
    ->Apply([](benchmark::internal::Benchmark* b) { memcpy_args(b, 2 * kN * kF); });

}  // namespace

BENCHMARK_MAIN();
