#pragma once
// Fused elementwise programs on a run of elements (cpu/elementwise_program.cpp cuts the work into
// tiles and lowers the program to TileSteps): the steps run on a block of a few batches at a
// time, each step's result kept in registers for the next, so a chain of k steps loads its
// inputs and stores its results once per block instead of making k passes through the L1 cache
// (what bounded the earlier step-by-step runs over whole tiles). Every op is the batch function
// that with_unary / with_binary give the contiguous kernels: the same bits.
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/kernels.hpp"

namespace keel::cpu::simd_impl {

// kernels_impl.hpp, which includes this header, defines them.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_unary(UnaryOp op, T alpha, Visit&& visit);
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_binary(BinaryOp op, Visit&& visit);

// Batches per block: 8 at every level. acc and o take 16 registers: half of AVX-512's, all of
// AVX2's and SSE2's 16 (an op's temporaries spill there), and the step dispatch, paid per block,
// is what blocks of 4 did not amortise. The 5-op chain on 4M floats, alternately against a step
// at a time over 1024-element L1 tiles (three rounds): AVX-512 0.96-1.40 -> 0.68-0.82 ms, AVX2
// 1.26-2.13 -> 0.88-1.21 ms (blocks of 4: 1.37-1.79), SSE2 1.93-2.84 -> 1.69-1.85 ms.
inline constexpr int kProgramBatches = 8;

// f(0), ..., f(N - 1) with the index a constant, so that arrays of batches indexed by it stay
// in registers.
template <int N, class F>
[[gnu::always_inline]] inline void each_batch(F&& f) {
  [&]<int... J>(std::integer_sequence<int, J...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, J>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

// One block of NB batches at element `at`. The block lives in two arrays of registers: acc, the
// result of the step before, and o, the other operand of a binary step. A step reads its operand
// that is not the previous result into o (or, when neither is, the first operand into acc): no
// third array, so that with the op's temporaries the arrays stay in registers (three arrays of 4
// batches spilled on AVX2).
template <class A, class T, int NB>
[[gnu::always_inline]] inline void program_block(const TileStep* steps, std::size_t count, T* const* slots,
                                                 std::int64_t at) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  B acc[NB] = {}, o[NB];
  // A memory or scalar operand into v.
  auto load = [&](TileStep::Source source, int slot, B(&v)[NB]) __attribute__((always_inline)) {
    if (source == TileStep::scalar) {
      const B s(slots[slot][0]);
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = s; });
    } else {
      const T* const x = slots[slot] + at;
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = B::load_unaligned(x + j * W); });
    }
  };
  for (std::size_t k = 0; k < count; ++k) {
    const TileStep& s = steps[k];
    if (s.binary) {
      bool swapped = false;  // acc holds b, o holds a
      if (s.a_source == TileStep::previous) {
        if (s.b_source == TileStep::previous)
          each_batch<NB>([&](auto j) __attribute__((always_inline)) { o[j] = acc[j]; });
        else
          load(s.b_source, s.b, o);
      } else if (s.b_source == TileStep::previous) {
        load(s.a_source, s.a, o);
        swapped = true;
      } else {
        load(s.a_source, s.a, acc);
        load(s.b_source, s.b, o);
      }
      with_binary<A, T>(s.binary_op, [&](auto f) __attribute__((always_inline)) {
        if (swapped) each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j] = f(o[j], acc[j]); });
        else each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j] = f(acc[j], o[j]); });
      });
    } else {
      if (s.a_source != TileStep::previous) load(s.a_source, s.a, acc);
      with_unary<A>(s.unary_op, static_cast<T>(s.alpha), [&](auto f) __attribute__((always_inline)) {
        each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j] = f(acc[j]); });
      });
    }
    if (s.out < 0) continue;
    T* const y = slots[s.out] + at;  // read once: the stores below may alias slots and steps
    each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j].store_unaligned(y + j * W); });
  }
}

template <class A, class T>
void program(const TileStep* steps, std::size_t count, T* const* slots, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  constexpr int NB = kProgramBatches;
  constexpr std::int64_t block = NB * B::size;
  std::int64_t i = 0;
  for (; i + block <= n; i += block) program_block<A, T, NB>(steps, count, slots, i);
  if (i == n) return;
  // The remainder: the same block over zero-padded copies of the slots' elements there, and the
  // results copied back. One instantiation of the block serves both: its code (every op, 8 times
  // over) is most of a SIMD table's.
  const auto m = static_cast<std::size_t>(n - i);
  std::size_t num_slots = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const TileStep& s = steps[k];
    num_slots = std::max({num_slots, static_cast<std::size_t>(s.a) + 1, static_cast<std::size_t>(s.out + 1),
                          s.binary ? static_cast<std::size_t>(s.b) + 1 : std::size_t{0}});
  }
  thread_local std::vector<T> pad;
  thread_local std::vector<T*> padded;
  if (pad.size() < num_slots * static_cast<std::size_t>(block)) pad.resize(num_slots * static_cast<std::size_t>(block));
  padded.assign(slots, slots + num_slots);
  // A slot read before it is written gets its elements and zeros after them; one written first
  // needs no zeros (a block stores every lane).
  auto copy_in = [&](TileStep::Source source, int slot) {
    const auto j = static_cast<std::size_t>(slot);
    if (source != TileStep::memory || padded[j] != slots[j]) return;
    padded[j] = pad.data() + j * static_cast<std::size_t>(block);
    std::memcpy(padded[j], slots[j] + i, sizeof(T) * m);
    std::fill(padded[j] + m, padded[j] + block, T(0));
  };
  for (std::size_t k = 0; k < count; ++k) {
    const TileStep& s = steps[k];
    copy_in(s.a_source, s.a);
    if (s.binary) copy_in(s.b_source, s.b);
    const auto y = static_cast<std::size_t>(s.out);
    if (s.out >= 0 && padded[y] == slots[y])  // written before it is read
      padded[y] = pad.data() + y * static_cast<std::size_t>(block);
  }
  program_block<A, T, NB>(steps, count, padded.data(), 0);
  for (std::size_t k = 0; k < count; ++k)
    if (const int y = steps[k].out; y >= 0)
      std::memcpy(slots[y] + i, padded[static_cast<std::size_t>(y)], sizeof(T) * m);
}

}  // namespace keel::cpu::simd_impl
