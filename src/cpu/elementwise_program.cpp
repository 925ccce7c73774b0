// Fused elementwise programs: each thread takes whole tiles and runs every step of the program
// on a tile before the next, through the SIMD table's contiguous kernels.
#include "cpu/elementwise_program.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "keel/core/config.hpp"
#include "cpu/thread_pool.hpp"

namespace keel::cpu {

namespace {

using kernel::ElementwiseProgram;
using kernel::ProgramInput;
using kernel::ProgramRef;

// Elements per tile: a program's registers and output tiles stay in a core's L1 cache (32 KiB
// on the cores measured). 4096 (16 KiB a float register) spilled to L2: the 5-op chain on 4M
// floats ran 1.07-1.28 ms against 0.74-0.93 ms with 1024, alternately in three rounds (2048 and
// 512 were in between).
constexpr std::int64_t kTile = 1024;
// Below this many elements a program runs on the calling thread alone.
constexpr std::int64_t kParallelMin = 1 << 16;

// Three quarters of the last-level cache (glibc's memcpy switches to non-temporal stores
// there), and never below the elementwise kernels' own threshold.
std::size_t cache_stream_bytes() {
  long llc = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#if defined(_SC_LEVEL2_CACHE_SIZE)
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return std::max(kStreamOutputBytes, llc > 0 ? static_cast<std::size_t>(llc) / 4 * 3 : std::size_t{0});
}

std::atomic<std::size_t> stream_bytes_set{0};

// Tiles this short whose steps are all correctly rounded IEEE arithmetic run as plain loops: a
// SIMD kernel call per step costs more than the arithmetic there (a graph of scalar-sized math).
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
[[gnu::optimize("fp-contract=off")]] void scalar_step(const kernel::ProgramStep& s, const T* a, std::int64_t sa,
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

template <class T>
struct TileRun {
  const ElementwiseProgram& p;
  const void* const* inputs;
  void* const* outputs;
  std::int64_t tile;  // a multiple of row_length
  bool stream;        // outputs go through cached tiles, then to memory with streaming stores

  // Runs tiles [first, last) of the whole range [0, n) with this thread's scratch.
  void operator()(std::int64_t n, std::int64_t first, std::int64_t last) const {
    // Registers, then one tile-long repetition of each row input (a tile starts on a row
    // boundary, so one repetition serves every tile). Kept per thread between calls.
    thread_local std::vector<T> scratch;
    std::size_t rows_in = 0;
    for (ProgramInput k : p.inputs) rows_in += k == ProgramInput::row;
    const auto tsize = static_cast<std::size_t>(tile);
    const std::size_t shadows = stream ? static_cast<std::size_t>(p.num_outputs) : 0;
    const std::size_t need = tsize * (static_cast<std::size_t>(p.num_registers) + shadows + rows_in);
    if (scratch.size() < need) scratch.resize(need);
    thread_local std::vector<T*> rows;
    rows.assign(p.inputs.size(), nullptr);
    T* const shadow = scratch.data() + static_cast<std::size_t>(p.num_registers) * tsize;
    std::size_t next = (static_cast<std::size_t>(p.num_registers) + shadows) * tsize;
    for (std::size_t i = 0; i < p.inputs.size(); ++i) {
      if (p.inputs[i] != ProgramInput::row) continue;
      rows[i] = scratch.data() + next;
      next += tsize;
      const T* r = static_cast<const T*>(inputs[i]);
      for (std::int64_t e = 0; e < tile; ++e) rows[i][e] = r[e % p.row_length];
    }
    const auto& kern = typed_kernels<T>();
    const bool exact = std::all_of(p.steps.begin(), p.steps.end(), exact_step);
    for (std::int64_t k = first; k < last; ++k) {
      const std::int64_t begin = k * tile, len = std::min(tile, n - begin);
      // A reference's tile: its pointer and its stride (0 for a scalar).
      auto at = [&](const ProgramRef& ref, std::int64_t& stride) -> T* {
        stride = 1;
        switch (ref.kind) {
          case ProgramRef::input: {
            const auto i = static_cast<std::size_t>(ref.index);
            if (p.inputs[i] == ProgramInput::scalar) {
              stride = 0;
              return const_cast<T*>(static_cast<const T*>(inputs[i]));
            }
            if (p.inputs[i] == ProgramInput::row) return rows[i];
            return const_cast<T*>(static_cast<const T*>(inputs[i])) + begin;
          }
          case ProgramRef::output:
            if (stream) return shadow + static_cast<std::size_t>(ref.index) * tsize;
            return static_cast<T*>(outputs[ref.index]) + begin;
          case ProgramRef::reg: return scratch.data() + static_cast<std::size_t>(ref.index) * tsize;
        }
        return nullptr;
      };
      const bool scalar = exact && len <= kScalarTile;
      for (const auto& s : p.steps) {
        std::int64_t sa = 1, sb = 1, so = 1;
        T* y = at(s.out, so);
        const T* a = at(s.a, sa);
        if (scalar) {
          const T* b = s.binary ? at(s.b, sb) : nullptr;  // sets sb: before it is passed
          scalar_step(s, a, sa, b, sb, y, len);
        } else if (s.binary) {
          const T* b = at(s.b, sb);
          kern.binary(s.binary_op, a, sa, b, sb, y, len);
        } else if (sa == 0) {  // a unary step of a scalar: computed once, then spread
          kern.unary(s.unary_op, a, y, 1, static_cast<T>(s.alpha));
          std::fill(y + 1, y + len, y[0]);
        } else {
          kern.unary(s.unary_op, a, y, len, static_cast<T>(s.alpha));
        }
      }
      if (stream)
        for (int j = 0; j < p.num_outputs; ++j)
          kern.stream_copy(shadow + static_cast<std::size_t>(j) * tsize, static_cast<T*>(outputs[j]) + begin, len);
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
    const TileRun<T> run{program, inputs, outputs, tile, stream};
    const bool parallel = n >= kParallelMin && tiles > 1;
    parallel_ranges(tiles, parallel ? 2 * std::max(1, config::num_threads()) : 1,
                    [&](std::int64_t first, std::int64_t last) { run(n, first, last); }, parallel);
  });
}

}  // namespace keel::cpu
