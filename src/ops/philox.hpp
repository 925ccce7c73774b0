#pragma once
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the
// counter-based generator behind keel::random and every op with its own randomness (dropout,
// shuffles). Block b of a reservation from random::reserve() uses the Philox counter
// {lo32(counter + b), hi32(counter + b), stream, 0} and the key's two halves, so a value is a
// pure function of (key, counter, b, stream): the same whatever the number of threads.
#include <array>
#include <cstdint>

#include "keel/ops/creation.hpp"

namespace keel::random::philox {

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

inline Words block(const PhiloxState& s, std::uint64_t b, std::uint32_t stream = 0) {
  const std::uint64_t ctr = s.counter + b;
  return philox4x32_10({static_cast<std::uint32_t>(ctr), static_cast<std::uint32_t>(ctr >> 32), stream, 0},
                       static_cast<std::uint32_t>(s.key), static_cast<std::uint32_t>(s.key >> 32));
}


// A uniform float in [0, 1) from one 32-bit word (24 random bits: exactly representable).
inline float unit_float(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1.0p-24f; }

}  // namespace keel::random::philox
