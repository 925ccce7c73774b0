#pragma once
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind keel::random: block b of a reservation {key, counter} in
// `stream` is a pure function of those numbers, the same whatever the number of threads. The
// layout of a reservation is keel::random's (src/ops/random.cpp); the CUDA copy is cuda/philox.cuh.
#include <array>
#include <cstdint>

namespace keel::philox {

using Words = std::array<std::uint32_t, 4>;

inline Words philox4x32_10(Words c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint64_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const std::uint64_t p0 = kMul0 * c[0];
    const std::uint64_t p1 = kMul1 * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
  }
  return c;
}

// Block b of the reservation {key, counter}: the Philox counter {lo32(counter + b),
// hi32(counter + b), stream, 0} under the key's two halves.
inline Words block(std::uint64_t key, std::uint64_t counter, std::uint64_t b, std::uint32_t stream = 0) {
  const std::uint64_t ctr = counter + b;
  return philox4x32_10({static_cast<std::uint32_t>(ctr), static_cast<std::uint32_t>(ctr >> 32), stream, 0},
                       static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
}

}  // namespace keel::philox
