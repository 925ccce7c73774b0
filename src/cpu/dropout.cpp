// dropout's CPU kernel.
#include "cpu/dropout.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "cpu/strided.hpp"

namespace keel::cpu {

namespace {

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) with the
// counter layout documented in src/ops/random.cpp: block b of a reservation {key, counter} is the
// Philox block of counter words {lo32(counter + b), hi32(counter + b), stream, 0} under the key
// {lo32(key), hi32(key)}. random.cpp keeps its generator private, so dropout carries this one;
// the two must produce the same words (test_dropout checks an unseeded mask against
// random::uniform after the same set_seed), which keeps "one global stream" true.
//
// kLanes consecutive blocks are computed together, lane by lane, so that the compiler turns the
// rounds into SIMD multiplies (a block at a time is a chain of dependent scalar multiplies and
// made dropout ~25x slower than relu).
constexpr std::int64_t kLanes = 16;

// On x86-64 an AVX2 clone, picked at load time (the library is built for baseline x86-64),
// does twice the 32x32->64-bit multiplies per instruction: about 1.4x faster dropout.
#if defined(__x86_64__) && defined(__GNUC__)
#define KEEL_DROPOUT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KEEL_DROPOUT_CLONES
#endif

// out[4 g + k] = word k of block counter0 + g, for g < kLanes.
KEEL_DROPOUT_CLONES void philox_blocks(std::uint64_t key, std::uint64_t counter0, std::uint32_t stream, std::uint32_t* out) {
  constexpr std::uint64_t kMulA = 0xD2511F53u, kMulB = 0xCD9E8D57u;
  constexpr std::uint32_t kBumpA = 0x9E3779B9u, kBumpB = 0xBB67AE85u;  // key schedule (Weyl)
  std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (std::int64_t g = 0; g < kLanes; ++g) {
    const std::uint64_t ctr = counter0 + static_cast<std::uint64_t>(g);
    c0[g] = static_cast<std::uint32_t>(ctr);
    c1[g] = static_cast<std::uint32_t>(ctr >> 32);
    c2[g] = stream;
    c3[g] = 0;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (std::int64_t g = 0; g < kLanes; ++g) {
      const std::uint64_t pa = kMulA * c0[g], pb = kMulB * c2[g];
      const std::uint32_t n0 = static_cast<std::uint32_t>(pb >> 32) ^ c1[g] ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(pa >> 32) ^ c3[g] ^ k1;
      c1[g] = static_cast<std::uint32_t>(pb);
      c3[g] = static_cast<std::uint32_t>(pa);
      c0[g] = n0;
      c2[g] = n2;
    }
    k0 += kBumpA;
    k1 += kBumpB;
  }
  for (std::int64_t g = 0; g < kLanes; ++g) {
    out[4 * g] = c0[g];
    out[4 * g + 1] = c1[g];
    out[4 * g + 2] = c2[g];
    out[4 * g + 3] = c3[g];
  }
}

}  // namespace

template <class T>
void dropout(std::int64_t n, const T* x, std::uint64_t key, std::uint64_t counter, std::uint32_t stream,
             std::uint32_t threshold, T scale, T* y, T* mask) {
  const std::int64_t blocks = (n + 3) / 4;  // four words (elements) per Philox block
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;  // T's bits
  const T* xp = x;
  T* yp = y;
  T* mp = mask;
  parallel_for(blocks, kParallelGrain / 4, [&](std::int64_t b0, std::int64_t b1) {
    std::uint32_t words[4 * kLanes];
    for (std::int64_t b = b0; b < b1; b += kLanes) {
      // Blocks past b1 in the last group are computed and ignored (each is a pure function
      // of its index, so this changes nothing).
      philox_blocks(key, counter + static_cast<std::uint64_t>(b), stream, words);
      const std::int64_t first = 4 * b;
      const std::int64_t count = std::min(4 * std::min(kLanes, b1 - b), n - first);
      const T* xs = xp + first;
      T* ys = yp + first;
      // Branch-free selects on the bits (the mask is random, so a branch would mispredict
      // half the time, and GCC will not vectorise a floating-point ?: under trapping math):
      // all-ones keeps the value, zero gives +0.0 -- also for a dropped NaN or Inf, as with
      // tf.where rather than x * mask.
#pragma omp simd
      for (std::int64_t k = 0; k < count; ++k) {
        const U keep = U(0) - static_cast<U>(words[k] >= threshold);
        ys[k] = std::bit_cast<T>(std::bit_cast<U>(xs[k] * scale) & keep);
      }
      if (mp) {
        T* ms = mp + first;
#pragma omp simd
        for (std::int64_t k = 0; k < count; ++k) {
          const U keep = U(0) - static_cast<U>(words[k] >= threshold);
          ms[k] = std::bit_cast<T>(std::bit_cast<U>(scale) & keep);
        }
      }
    }
  });
}

template void dropout<float>(std::int64_t, const float*, std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t,
                             float, float*, float*);
template void dropout<double>(std::int64_t, const double*, std::uint64_t, std::uint64_t, std::uint32_t,
                              std::uint32_t, double, double*, double*);

}  // namespace keel::cpu
