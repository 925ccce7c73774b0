#pragma once
// Fused elementwise programs on a run of elements (cpu/elementwise_program.cpp cuts the work into
// tiles and lowers the program to TileSteps): the steps run on a block of a few batches at a
// time, each step's result kept in registers for the next, so a chain of k steps loads its
// inputs and stores its results once per block instead of making k passes through the L1 cache
// (what bounded the earlier step-by-step runs over whole tiles). Every op is the batch function
// that with_unary / with_binary give the contiguous kernels: the same bits.
#include <xsimd/xsimd.hpp>

#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/kernels.hpp"

namespace keel::cpu::simd_impl {

// kernels_impl.hpp, which includes this header, defines them.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_unary(UnaryOp op, T alpha, Visit&& visit);
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_binary(BinaryOp op, Visit&& visit);

// Batches per block: AVX-512's 32 vector registers hold 8 (the result, two operands, and the
// temporaries of the op). 0: no program kernel at this level. AVX2's and SSE2's 16 registers hold
// blocks of 2 or 4 batches, whose step dispatch cost more than the L1 round trips they save: the
// 5-op chain on 4M floats ran 1.3-2.2 ms against 0.7-1.0 ms a step at a time over L1 tiles
// (cpu/elementwise_program.cpp), and its sigmoid variant 2.6-4.6 against 1.6-2.0, where
// AVX-512's blocks of 8 took it from 0.99-1.10 to 0.55-0.74 ms (alternately, three rounds).
template <class B>
inline constexpr int kProgramBatches = sizeof(B) == 64 ? 8 : 0;

// f(0), ..., f(N - 1) with the index a constant, so that arrays of batches indexed by it stay
// in registers.
template <int N, class F>
[[gnu::always_inline]] inline void each_batch(F&& f) {
  [&]<int... J>(std::integer_sequence<int, J...>) __attribute__((always_inline)) { (f(std::integral_constant<int, J>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

// One block at element `at`: NB full batches, or (Padded) the m < NB batches' worth of elements
// left at the end, read through a zero-padded copy and written back element by element.
template <class A, class T, int NB, bool Padded>
[[gnu::always_inline]] inline void program_block(const TileStep* steps, std::size_t count, T* const* slots, std::int64_t at,
                          std::int64_t m) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  B acc[NB] = {};
  auto fetch = [&](TileStep::Source source, int slot, B(&v)[NB]) __attribute__((always_inline)) {
    if (source == TileStep::previous) {
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = acc[j]; });
    } else if (source == TileStep::scalar) {
      const B s(slots[slot][0]);
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = s; });
    } else if constexpr (Padded) {
      alignas(64) T buf[NB * W] = {};
      std::memcpy(buf, slots[slot] + at, sizeof(T) * static_cast<std::size_t>(m));
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = B::load_aligned(buf + j * W); });
    } else {
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { v[j] = B::load_unaligned(slots[slot] + at + j * W); });
    }
  };
  for (std::size_t k = 0; k < count; ++k) {
    const TileStep& s = steps[k];
    B a[NB];
    fetch(s.a_source, s.a, a);
    if (s.binary) {
      B b[NB];
      fetch(s.b_source, s.b, b);
      with_binary<A, T>(s.binary_op, [&](auto f) __attribute__((always_inline)) { each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j] = f(a[j], b[j]); }); });
    } else {
      with_unary<A>(s.unary_op, static_cast<T>(s.alpha),
                    [&](auto f) __attribute__((always_inline)) { each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j] = f(a[j]); }); });
    }
    if (s.out < 0) continue;
    if constexpr (Padded) {
      alignas(64) T buf[NB * W];
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j].store_aligned(buf + j * W); });
      std::memcpy(slots[s.out] + at, buf, sizeof(T) * static_cast<std::size_t>(m));
    } else {
      each_batch<NB>([&](auto j) __attribute__((always_inline)) { acc[j].store_unaligned(slots[s.out] + at + j * W); });
    }
  }
}

template <class A, class T>
void program(const TileStep* steps, std::size_t count, T* const* slots, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  constexpr int NB = kProgramBatches<B>;
  constexpr std::int64_t block = NB * B::size;
  std::int64_t i = 0;
  for (; i + block <= n; i += block) program_block<A, T, NB, false>(steps, count, slots, i, block);
  if (i < n) program_block<A, T, NB, true>(steps, count, slots, i, n - i);
}

}  // namespace keel::cpu::simd_impl
