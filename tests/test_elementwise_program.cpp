// Fused elementwise programs (what graph mode's fusion pass runs) against the contiguous kernels
// they stand for: every unary and binary op, its operands from the step before, from memory, from
// a scalar and from a repeated row, at every SIMD level, in float32 and float64, at lengths with
// and without a remainder past the last full register block, on one thread and over the pool,
// with outputs written directly and through streamed tiles. The bits must be the same: a program
// only changes the order in which elements visit the steps, never an op's arithmetic.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/elementwise_program.hpp"
#include "cpu/elementwise_program.hpp"
#include "cpu/kernels.hpp"
#include "simd_levels.hpp"

using namespace keel;
using kernel::BinaryOp;
using kernel::ElementwiseProgram;
using kernel::ProgramInput;
using kernel::ProgramRef;
using kernel::ProgramStep;
using kernel::UnaryOp;

namespace {

constexpr std::int64_t kRow = 7;  // the row input's length: every n below is a multiple

ProgramRef in(int i) { return {ProgramRef::input, i}; }
ProgramRef out(int i) { return {ProgramRef::output, i}; }
ProgramRef reg(int i) { return {ProgramRef::reg, i}; }

ProgramStep unary_step(UnaryOp op, ProgramRef a, ProgramRef y) {
  ProgramStep s;
  s.unary_op = op;
  s.alpha = 0.3;  // leaky_relu's and elu's
  s.a = a;
  s.out = y;
  return s;
}

ProgramStep binary_step(BinaryOp op, ProgramRef a, ProgramRef b, ProgramRef y) {
  ProgramStep s;
  s.binary = true;
  s.binary_op = op;
  s.a = a;
  s.b = b;
  s.out = y;
  return s;
}

// Inputs: x (full), s (a scalar), row (kRow elements repeated), y (full).
// The unary program: r0 = x * s; r0 = op(r0); out0 = r0 + row; out1 = op(x); out2 = op(s).
ElementwiseProgram unary_program(UnaryOp op) {
  ElementwiseProgram p;
  p.inputs = {ProgramInput::full, ProgramInput::scalar, ProgramInput::row, ProgramInput::full};
  p.row_length = kRow;
  p.num_outputs = 3;
  p.num_registers = 1;
  p.steps = {binary_step(BinaryOp::mul, in(0), in(1), reg(0)), unary_step(op, reg(0), reg(0)),
             binary_step(BinaryOp::add, reg(0), in(2), out(0)), unary_step(op, in(0), out(1)),
             unary_step(op, in(1), out(2))};
  return p;
}

// The binary program, its registers read by the next step (from registers), two steps later
// and later still (from memory: stored for those reads), and not at all (never stored):
//   r0 = x + s; r1 = op(r0, y); r1 = op(y, r1); out0 = op(r1, s); out1 = op(s, r0);
//   out2 = op(out1, out1); r0 = op(row, x); r1 = op(r0, s); out3 = op(r0, r1); r0 = op(out3, x).
ElementwiseProgram binary_program(BinaryOp op) {
  ElementwiseProgram p;
  p.inputs = {ProgramInput::full, ProgramInput::scalar, ProgramInput::row, ProgramInput::full};
  p.row_length = kRow;
  p.num_outputs = 4;
  p.num_registers = 2;
  p.steps = {binary_step(BinaryOp::add, in(0), in(1), reg(0)), binary_step(op, reg(0), in(3), reg(1)),
             binary_step(op, in(3), reg(1), reg(1)),          binary_step(op, reg(1), in(1), out(0)),
             binary_step(op, in(1), reg(0), out(1)),          binary_step(op, out(1), out(1), out(2)),
             binary_step(op, in(2), in(0), reg(0)),           binary_step(op, reg(0), in(1), reg(1)),
             binary_step(op, reg(0), reg(1), out(3)),         binary_step(op, out(3), in(0), reg(0))};
  return p;
}

// The program a step at a time over whole arrays through the active level's contiguous kernels.
template <class T>
std::vector<std::vector<T>> reference(const ElementwiseProgram& p, const std::vector<std::vector<T>>& inputs,
                                      std::int64_t n) {
  const auto& kern = cpu::typed_kernels<T>();
  const auto size = static_cast<std::size_t>(n);
  std::vector<std::vector<T>> outs(static_cast<std::size_t>(p.num_outputs), std::vector<T>(size));
  std::vector<std::vector<T>> regs(static_cast<std::size_t>(p.num_registers), std::vector<T>(size));
  std::vector<T> row(size);
  for (std::size_t e = 0; e < size; ++e) row[e] = inputs[2][e % kRow];
  auto at = [&](const ProgramRef& r, std::int64_t& stride) -> T* {
    stride = 1;
    if (r.kind == ProgramRef::output) return outs[static_cast<std::size_t>(r.index)].data();
    if (r.kind == ProgramRef::reg) return regs[static_cast<std::size_t>(r.index)].data();
    if (p.inputs[static_cast<std::size_t>(r.index)] == ProgramInput::scalar) stride = 0;
    if (p.inputs[static_cast<std::size_t>(r.index)] == ProgramInput::row) return row.data();
    return const_cast<T*>(inputs[static_cast<std::size_t>(r.index)].data());
  };
  for (const ProgramStep& s : p.steps) {
    std::int64_t sa = 1, sb = 1, so = 1;
    const T* a = at(s.a, sa);
    T* y = at(s.out, so);
    if (s.binary) {
      const T* b = at(s.b, sb);
      kern.binary(s.binary_op, a, sa, b, sb, y, n);
    } else if (sa == 0) {
      kern.unary(s.unary_op, a, y, 1, static_cast<T>(s.alpha));
      std::fill(y + 1, y + n, y[0]);
    } else {
      kern.unary(s.unary_op, a, y, n, static_cast<T>(s.alpha));
    }
  }
  return outs;
}

template <class T>
void check_program(const ElementwiseProgram& p, std::int64_t n, std::mt19937& gen) {
  std::normal_distribution<double> normal(0.0, 1.5);
  auto draw = [&](std::int64_t count) {
    std::vector<T> v(static_cast<std::size_t>(count));
    for (T& e : v) e = static_cast<T>(normal(gen));
    return v;
  };
  const std::vector<std::vector<T>> inputs{draw(n), {T(0.75)}, draw(kRow), draw(n)};
  std::vector<std::vector<T>> got(static_cast<std::size_t>(p.num_outputs), std::vector<T>(static_cast<std::size_t>(n)));
  std::vector<const void*> in_ptrs;
  for (const auto& v : inputs) in_ptrs.push_back(v.data());
  std::vector<void*> out_ptrs;
  for (auto& v : got) out_ptrs.push_back(v.data());
  cpu::run_elementwise_program(p, std::is_same_v<T, float> ? DType::float32 : DType::float64, n, in_ptrs.data(),
                               out_ptrs.data());
  const auto want = reference<T>(p, inputs, n);
  for (std::size_t j = 0; j < got.size(); ++j) {
    INFO("output " << j);
    // Bit for bit: NaNs from ops outside their domain included.
    CHECK(std::memcmp(got[j].data(), want[j].data(), sizeof(T) * got[j].size()) == 0);
  }
}

struct Restore {
  ~Restore() { cpu::set_program_stream_bytes(0); }
};

}  // namespace

TEST_CASE("every op of a fused program gives its contiguous kernel's bits at every SIMD level", "[function][simd]") {
  // 7: one partial block; 917: full blocks and a remainder; 28679: several tiles (1022 elements,
  // a multiple of the row) with a partial last one; 70007: over the pool.
  const std::vector<std::int64_t> lengths{7, 917, 28679, 70007};
  Restore restore;
  std::mt19937 gen(7);
  testing::at_every_simd_level([&](const std::string&) {
    for (std::size_t threshold : {std::size_t{0}, std::size_t{1} << 12}) {  // 4 KiB: streamed tiles
      cpu::set_program_stream_bytes(threshold);
      for (std::int64_t n : lengths) {
        if (threshold != 0 && n < 20000) continue;
        for (int op = 0; op <= static_cast<int>(UnaryOp::mish); ++op) {
          INFO("unary op " << op << ", " << n << " elements, streaming from " << threshold);
          check_program<float>(unary_program(static_cast<UnaryOp>(op)), n, gen);
          check_program<double>(unary_program(static_cast<UnaryOp>(op)), n, gen);
        }
        for (int op = 0; op <= static_cast<int>(BinaryOp::atan2); ++op) {
          INFO("binary op " << op << ", " << n << " elements, streaming from " << threshold);
          check_program<float>(binary_program(static_cast<BinaryOp>(op)), n, gen);
          check_program<double>(binary_program(static_cast<BinaryOp>(op)), n, gen);
        }
      }
    }
  });
}

TEST_CASE("a fused program writing its one output over its input gives the out-of-place bits", "[function][simd]") {
  // What graph mode's memory planning does when the input dies at the program: the output is
  // the input's memory. Each element is read before it is written, in blocks and in the padded
  // remainder of a tile alike.
  ElementwiseProgram p;
  p.inputs = {ProgramInput::full, ProgramInput::scalar, ProgramInput::row};
  p.row_length = kRow;
  p.num_outputs = 1;
  p.num_registers = 1;
  p.steps = {binary_step(BinaryOp::mul, in(0), in(1), reg(0)), unary_step(UnaryOp::tanh, reg(0), reg(0)),
             binary_step(BinaryOp::sub, reg(0), in(0), reg(0)), binary_step(BinaryOp::add, reg(0), in(2), out(0))};
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  testing::at_every_simd_level([&](const std::string&) {
    for (std::int64_t n : {7, 917, 70007}) {
      INFO(n << " elements");
      std::vector<float> x(static_cast<std::size_t>(n)), row(kRow), separate(x.size());
      for (float& e : x) e = normal(gen);
      for (float& e : row) e = normal(gen);
      const float s = 1.25f;
      const void* inputs[] = {x.data(), &s, row.data()};
      void* out_of_place[] = {separate.data()};
      cpu::run_elementwise_program(p, DType::float32, n, inputs, out_of_place);
      void* in_place[] = {x.data()};
      cpu::run_elementwise_program(p, DType::float32, n, inputs, in_place);
      CHECK(std::memcmp(x.data(), separate.data(), sizeof(float) * x.size()) == 0);
    }
  });
}

TEST_CASE("a program streams its outputs from three quarters of the last-level cache the kernel describes",
          "[function]") {
  // The kernel's description of cpu0's caches (sysfs), not glibc's sysconf, which counts from CPUID
  // and on some virtual machines reports ten times the cache (320 MB of L3 for 32 MB). Read here
  // independently: the highest-level data or unified cache.
  cpu::set_program_stream_bytes(0);
  // Each cache as (level, bytes); the largest level that holds data wins.
  std::vector<std::pair<int, std::size_t>> caches;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    auto read = [&](const char* name) {
      std::ifstream in(entry.path() / name);
      std::string word;
      in >> word;
      return word;
    };
    const std::string type = read("type"), size = read("size"), level = read("level");
    if (type.empty() || type == "Instruction" || size.size() < 2 || level.empty()) continue;
    const std::size_t number = std::stoull(size.substr(0, size.size() - 1));
    caches.emplace_back(std::stoi(level), size.back() == 'M' ? number * 1024 * 1024 : number * 1024);
  }
  const std::size_t llc = caches.empty() ? 0 : std::max_element(caches.begin(), caches.end())->second;
  if (llc == 0) {
    WARN("no cache description in sysfs: the threshold comes from sysconf");
    CHECK(cpu::program_stream_bytes() >= cpu::kStreamOutputBytes);
    return;
  }
  CHECK(cpu::program_stream_bytes() == std::max(cpu::kStreamOutputBytes, llc / 4 * 3));
  cpu::set_program_stream_bytes(12345);
  CHECK(cpu::program_stream_bytes() == 12345);
  cpu::set_program_stream_bytes(0);
}
