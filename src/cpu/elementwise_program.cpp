// Fused elementwise programs: each thread takes whole tiles, and the SIMD table's program kernel
// runs a tile's elements a register block at a time through every step (simd/program_impl.hpp).
#include "cpu/elementwise_program.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

using kernel::ElementwiseProgram;
using kernel::ProgramInput;
using kernel::ProgramRef;

// Elements per tile: a tile's stored registers, row repetitions and streamed output tiles stay
// in a core's L1 cache (32 KiB on the cores measured). When every step ran over the whole tile
// before the next, 4096 (16 KiB a float register) spilled to L2: the 5-op chain on 4M floats
// ran 1.07-1.28 ms against 0.74-0.93 ms with 1024, alternately in three rounds.
constexpr std::int64_t kTile = 1024;
// Below this many elements a program runs on the calling thread alone.
constexpr std::int64_t kParallelMin = 1 << 16;

// The last-level cache's size as the kernel describes cpu0's caches (sysfs), or 0. glibc's
// sysconf counts it from CPUID, which virtual machines report oddly: 320 MB of L3 on a 2-vCPU
// AMD EPYC guest whose sysfs (and lscpu) say 32 MB.
std::size_t sysfs_last_level_cache() {
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || level < best_level || size.empty()) continue;
    std::size_t value = 0, at = 0;
    for (; at < size.size() && size[at] >= '0' && size[at] <= '9' && value < (std::size_t{1} << 40); ++at)
      value = value * 10 + static_cast<std::size_t>(size[at] - '0');
    if (at < size.size() && size[at] == 'K') value <<= 10;
    else if (at < size.size() && size[at] == 'M') value <<= 20;
    best = value;
    best_level = level;
  }
  return best;
}

// Three quarters of the last-level cache (glibc's memcpy switches to non-temporal stores
// there), and never below the elementwise kernels' own threshold.
std::size_t cache_stream_bytes() {
  long llc = static_cast<long>(sysfs_last_level_cache());
#if defined(_SC_LEVEL3_CACHE_SIZE)
  if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#if defined(_SC_LEVEL2_CACHE_SIZE)
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return std::max(kStreamOutputBytes, llc > 0 ? static_cast<std::size_t>(llc) / 4 * 3 : std::size_t{0});
}

std::atomic<std::size_t> stream_bytes_set{0};

// Tiles this short whose steps are all correctly rounded IEEE arithmetic run as plain loops: the
// program kernel's padded block (a copy of every slot in and out) costs more than the arithmetic
// there (a graph of scalar-sized math).
// The results are the SIMD kernels' bit for bit (one rounding per operation either way; no
// contraction into fused multiply-adds here).
constexpr std::int64_t kScalarTile = 16;

bool exact_step(const kernel::ProgramStep& s) {
  using kernel::BinaryOp;
  using kernel::UnaryOp;
  if (s.binary)
    return s.binary_op == BinaryOp::add || s.binary_op == BinaryOp::sub || s.binary_op == BinaryOp::mul ||
           s.binary_op == BinaryOp::div;
  return s.unary_op == UnaryOp::neg || s.unary_op == UnaryOp::square;
}

template <class T>
[[gnu::optimize("fp-contract=off")]] void scalar_step(const TileStep& s, const T* a, std::int64_t sa,
                                                      const T* b, std::int64_t sb, T* y, std::int64_t n) {
  using kernel::BinaryOp;
  if (!s.binary) {
    if (s.unary_op == kernel::UnaryOp::neg)
      for (std::int64_t e = 0; e < n; ++e) y[e] = -a[e * sa];
    else
      for (std::int64_t e = 0; e < n; ++e) y[e] = a[e * sa] * a[e * sa];
    return;
  }
  switch (s.binary_op) {
    case BinaryOp::add: for (std::int64_t e = 0; e < n; ++e) y[e] = a[e * sa] + b[e * sb]; return;
    case BinaryOp::sub: for (std::int64_t e = 0; e < n; ++e) y[e] = a[e * sa] - b[e * sb]; return;
    case BinaryOp::mul: for (std::int64_t e = 0; e < n; ++e) y[e] = a[e * sa] * b[e * sb]; return;
    default: for (std::int64_t e = 0; e < n; ++e) y[e] = a[e * sa] / b[e * sb]; return;
  }
}

// The program over slots: the inputs, then the outputs, then the registers. With in_registers
// (for the SIMD table's program kernel), an operand that the step before produced comes from
// registers, and a register's result is stored only when a step other than the next one reads
// it; without, every operand is in memory (or a scalar) and every result is stored.
void lower(const ElementwiseProgram& p, bool in_registers, std::vector<TileStep>& steps) {
  const int ni = static_cast<int>(p.inputs.size()), no = p.num_outputs;
  auto slot = [&](const ProgramRef& r) {
    return r.kind == ProgramRef::input ? r.index : r.kind == ProgramRef::output ? ni + r.index : ni + no + r.index;
  };
  auto same = [](const ProgramRef& x, const ProgramRef& y) { return x.kind == y.kind && x.index == y.index; };
  steps.assign(p.steps.size(), TileStep{});
  // The last step that reads a register's value, walking back from the end: -1 when no step
  // does before the register is written again.
  thread_local std::vector<std::int64_t> last_read;
  last_read.assign(static_cast<std::size_t>(p.num_registers), -1);
  for (auto k = static_cast<std::int64_t>(p.steps.size()) - 1; k >= 0; --k) {
    const kernel::ProgramStep& s = p.steps[static_cast<std::size_t>(k)];
    TileStep& t = steps[static_cast<std::size_t>(k)];
    t.binary = s.binary;
    t.unary_op = s.unary_op;
    t.binary_op = s.binary_op;
    t.alpha = s.alpha;
    t.out = slot(s.out);
    if (s.out.kind == ProgramRef::reg) {
      std::int64_t& r = last_read[static_cast<std::size_t>(s.out.index)];
      if (in_registers && r <= k + 1) t.out = -1;
      r = -1;  // reads before step k are of an earlier value
    }
    auto operand = [&](const ProgramRef& ref, TileStep::Source& source, int& at) {
      at = slot(ref);
      if (in_registers && k > 0 && ref.kind != ProgramRef::input &&
          same(ref, p.steps[static_cast<std::size_t>(k - 1)].out))
        source = TileStep::previous;
      else if (ref.kind == ProgramRef::input && p.inputs[static_cast<std::size_t>(ref.index)] == ProgramInput::scalar)
        source = TileStep::scalar;
      else
        source = TileStep::memory;
      if (ref.kind == ProgramRef::reg) {
        std::int64_t& r = last_read[static_cast<std::size_t>(ref.index)];
        r = std::max(r, k);
      }
    };
    operand(s.a, t.a_source, t.a);
    if (s.binary) operand(s.b, t.b_source, t.b);
  }
}

template <class T>
struct TileRun {
  const ElementwiseProgram& p;
  const std::vector<TileStep>& lowered;  // for registers unless loops
  bool loops;  // tiny tiles of exact arithmetic: plain loops (see kScalarTile)
  const void* const* inputs;
  void* const* outputs;
  std::int64_t tile;  // a multiple of row_length
  bool stream;        // outputs go through cached tiles, then to memory with streaming stores

  // Runs tiles [first, last) of the whole range [0, n) with this thread's scratch.
  void operator()(std::int64_t n, std::int64_t first, std::int64_t last) const {
    // Registers, output tiles when streaming, then one tile-long repetition of each row input
    // (a tile starts on a row boundary, so one repetition serves every tile). Kept per thread
    // between calls.
    thread_local std::vector<T> scratch;
    thread_local std::vector<T*> slots;
    const std::size_t ni = p.inputs.size(), no = static_cast<std::size_t>(p.num_outputs);
    std::size_t rows_in = 0;
    for (ProgramInput k : p.inputs) rows_in += k == ProgramInput::row;
    const auto tsize = static_cast<std::size_t>(tile);
    const std::size_t shadows = stream ? no : 0;
    const auto regs = static_cast<std::size_t>(p.num_registers);
    const std::size_t need = tsize * (regs + shadows + rows_in);
    if (scratch.size() < need) scratch.resize(need);
    slots.assign(ni + no + regs, nullptr);
    for (std::size_t r = 0; r < regs; ++r) slots[ni + no + r] = scratch.data() + r * tsize;
    std::size_t next = (regs + shadows) * tsize;
    for (std::size_t i = 0; i < ni; ++i) {
      const T* in = static_cast<const T*>(inputs[i]);
      if (p.inputs[i] != ProgramInput::row) {
        slots[i] = const_cast<T*>(in);
        continue;
      }
      T* row = scratch.data() + next;
      next += tsize;
      for (std::int64_t e = 0; e < tile; ++e) row[e] = in[e % p.row_length];
      slots[i] = row;
    }
    T* const shadow = scratch.data() + regs * tsize;
    const auto& kern = typed_kernels<T>();
    for (std::int64_t k = first; k < last; ++k) {
      const std::int64_t begin = k * tile, len = std::min(tile, n - begin);
      for (std::size_t i = 0; i < ni; ++i)
        if (p.inputs[i] == ProgramInput::full) slots[i] = const_cast<T*>(static_cast<const T*>(inputs[i])) + begin;
      for (std::size_t j = 0; j < no; ++j)
        slots[ni + j] = stream ? shadow + j * tsize : static_cast<T*>(outputs[j]) + begin;
      if (!loops) {
        kern.program(lowered.data(), lowered.size(), slots.data(), len);
      } else {
        for (const TileStep& s : lowered) {
          const T* a = slots[static_cast<std::size_t>(s.a)];
          const T* b = s.binary ? slots[static_cast<std::size_t>(s.b)] : nullptr;
          const std::int64_t sa = s.a_source == TileStep::scalar ? 0 : 1, sb = s.b_source == TileStep::scalar ? 0 : 1;
          scalar_step(s, a, sa, b, sb, slots[static_cast<std::size_t>(s.out)], len);
        }
      }
      if (stream)
        for (std::size_t j = 0; j < no; ++j)
          kern.stream_copy(shadow + j * tsize, static_cast<T*>(outputs[j]) + begin, len);
    }
  }
};

}  // namespace

std::size_t program_stream_bytes() {
  static const std::size_t from_cache = cache_stream_bytes();
  const std::size_t set = stream_bytes_set.load(std::memory_order_relaxed);
  return set > 0 ? set : from_cache;
}

void set_program_stream_bytes(std::size_t bytes) { stream_bytes_set.store(bytes, std::memory_order_relaxed); }

void run_elementwise_program(const ElementwiseProgram& program, DType dtype, std::int64_t n,
                             const void* const* inputs, void* const* outputs) {
  if (n <= 0) return;
  const std::int64_t row = std::max<std::int64_t>(program.row_length, 1);
  // A multiple of the row length, and no longer than n needs (small programs, small scratch).
  const std::int64_t rows_needed = (n + row - 1) / row;
  const std::int64_t tile = std::max<std::int64_t>(1, std::min(kTile / row, rows_needed)) * row;
  const std::int64_t tiles = (n + tile - 1) / tile;
  detail::dispatch_float(dtype, "fused elementwise", [&]<class T>() {
    // Streaming a program's outputs costs a pass (each tile is computed into cached scratch,
    // then copied out with streaming stores), which pays only for outputs the last-level cache
    // cannot keep for their next reader.
    const bool stream = static_cast<std::size_t>(n) * sizeof(T) >= program_stream_bytes();
    const bool exact = std::all_of(program.steps.begin(), program.steps.end(), exact_step);
    const bool loops = exact && tile <= kScalarTile;
    thread_local std::vector<TileStep> lowered;  // reused: no allocation per call of a small program
    lower(program, /*in_registers=*/!loops, lowered);
    const TileRun<T> run{program, lowered, loops, inputs, outputs, tile, stream};
    const bool parallel = n >= kParallelMin && tiles > 1;
    parallel_ranges(tiles, parallel ? 2 * std::max(1, parallel_threads()) : 1,
                    [&](std::int64_t first, std::int64_t last) { run(n, first, last); }, parallel);
  });
}

}  // namespace keel::cpu
