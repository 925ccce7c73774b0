// Eager per-op overhead: `add` of two 1-element float32 tensors, where the arithmetic is free and
// everything measured is dispatch, allocation and (with a tape) recording.
//
//   add/no_tape               one add, no GradientTape active
//   add/profiled              the same while the profiler records (shapes and memory off); its
//                             restart every 1000 adds is included in the per-add time
//   add/tape_recording        one add whose input is watched by an active tape; a fresh
//                             (non-persistent) tape every 1000 adds keeps memory bounded, and its
//                             creation and destruction are included in the per-add time
//   add_chain100/no_tape      100 dependent adds
//   add_chain100/tape_backward 100 dependent adds recorded on a tape + tape.gradient()
//
// time_per_op is the wall time per add (for the chain + backward: the whole iteration divided by
// its 100 adds); items_per_second counts adds.
#include <benchmark/benchmark.h>
#include <keel/keel.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace {

constexpr std::int64_t kAddsPerTape = 1000;
constexpr int kChainLength = 100;

keel::Tensor one_element(float value) { return keel::constant(std::vector<float>{value}, {1}); }

void set_per_op_counters(benchmark::State& state, std::int64_t ops_per_iteration) {
  const auto ops = static_cast<double>(state.iterations() * ops_per_iteration);
  state.SetItemsProcessed(state.iterations() * ops_per_iteration);
  state.counters["time_per_op"] =
      benchmark::Counter(ops, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_add_no_tape(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor a = one_element(1.0f);
  const keel::Tensor b = one_element(2.0f);
  for (auto _ : state) {
    keel::Tensor c = keel::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  set_per_op_counters(state, 1);
}
BENCHMARK(BM_add_no_tape)->Name("add/no_tape");

// The same add while the profiler records it: the difference to add/no_tape is the profiler's
// cost per op. The profile restarts every kAddsPerTape adds, so that its events stay bounded.
void BM_add_profiled(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor a = one_element(1.0f);
  const keel::Tensor b = one_element(2.0f);
  std::int64_t n = 0;
  keel::profiler::start("", {.record_shapes = false, .profile_memory = false});
  for (auto _ : state) {
    keel::Tensor c = keel::add(a, b);
    benchmark::DoNotOptimize(c);
    if (++n % kAddsPerTape == 0) {
      keel::profiler::stop();
      keel::profiler::start("", {.record_shapes = false, .profile_memory = false});
    }
  }
  keel::profiler::stop();
  set_per_op_counters(state, 1);
}
BENCHMARK(BM_add_profiled)->Name("add/profiled");

void BM_add_tape_recording(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor a = one_element(1.0f);
  const keel::Tensor b = one_element(2.0f);
  std::optional<keel::GradientTape> tape;
  std::int64_t n = 0;
  for (auto _ : state) {
    if (n++ % kAddsPerTape == 0) {
      tape.reset();                       // destroy the old tape first: tapes nest as a stack
      tape.emplace(/*persistent=*/false);
      tape->watch(a);
    }
    keel::Tensor c = keel::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  tape.reset();  // after the loop: not timed
  set_per_op_counters(state, 1);
}
BENCHMARK(BM_add_tape_recording)->Name("add/tape_recording");

void BM_add_chain_no_tape(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor a = one_element(1.0f);
  const keel::Tensor b = one_element(2.0f);
  for (auto _ : state) {
    keel::Tensor y = a;
    for (int i = 0; i < kChainLength; ++i) y = keel::add(y, b);
    benchmark::DoNotOptimize(y);
  }
  set_per_op_counters(state, kChainLength);
}
BENCHMARK(BM_add_chain_no_tape)->Name("add_chain100/no_tape");

void BM_add_chain_tape_backward(benchmark::State& state) {
  keel::DeviceScope cpu(keel::Device::cpu());
  const keel::Tensor a = one_element(1.0f);
  const keel::Tensor b = one_element(2.0f);
  for (auto _ : state) {
    keel::GradientTape tape;
    tape.watch(a);
    keel::Tensor y = a;
    for (int i = 0; i < kChainLength; ++i) y = keel::add(y, b);
    keel::Tensor dy_da = tape.gradient(y, a);
    benchmark::DoNotOptimize(dy_da);
  }
  set_per_op_counters(state, kChainLength);
}
BENCHMARK(BM_add_chain_tape_backward)->Name("add_chain100/tape_backward");

}  // namespace

BENCHMARK_MAIN();
