#pragma once
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) for device
// code. It must give, word for word, what the CPU's src/core/philox.hpp and src/cpu/dropout.cpp
// give, so that one seed drops the same elements on either device: the same multipliers, the
// same Weyl key schedule, and the same counter layout. Block b of a reservation {key, counter} is the
// Philox block of counter words {lo32(counter + b), hi32(counter + b), stream, 0} under the key
// {lo32(key), hi32(key)}.
//
// Plain C++ outside nvcc (the qualifiers vanish), so a host program can check it against the
// CPU's generator.
#include <cstdint>

#if defined(__CUDACC__)
#define KEEL_PHILOX_FN __host__ __device__ __forceinline__
#else
#define KEEL_PHILOX_FN inline
#endif

namespace keel::cuda::philox {

struct Words {
  std::uint32_t w[4];
};

// Ten rounds on the counter c under the key {k0, k1}; the key is bumped between rounds.
KEEL_PHILOX_FN Words rounds(Words c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint64_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    // 32x32 -> 64-bit products: one wide multiply each on the GPU.
    const std::uint64_t p0 = kMul0 * c.w[0];
    const std::uint64_t p1 = kMul1 * c.w[2];
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c.w[1] ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c.w[3] ^ k1;
    c.w[1] = static_cast<std::uint32_t>(p1);
    c.w[3] = static_cast<std::uint32_t>(p0);
    c.w[0] = n0;
    c.w[2] = n2;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

// Block b of the reservation {key, counter} in Philox stream word `stream`.
KEEL_PHILOX_FN Words block(std::uint64_t key, std::uint64_t counter, std::uint64_t b,
                           std::uint32_t stream) {
  const std::uint64_t ctr = counter + b;  // wraps modulo 2^64, as on the CPU
  Words c;
  c.w[0] = static_cast<std::uint32_t>(ctr);
  c.w[1] = static_cast<std::uint32_t>(ctr >> 32);
  c.w[2] = stream;
  c.w[3] = 0;
  return rounds(c, static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
}

}  // namespace keel::cuda::philox

#undef KEEL_PHILOX_FN
