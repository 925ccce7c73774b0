#pragma once
// Philox blocks of a reservation from random::reserve() (core/philox.hpp has the generator),
// for the ops and pipelines with their own randomness (shuffles, augmentation).
#include <cstdint>

#include "core/philox.hpp"
#include "keel/ops/creation.hpp"

namespace keel::random::philox {

using keel::philox::philox4x32_10;
using keel::philox::Words;

inline Words block(const PhiloxState& s, std::uint64_t b, std::uint32_t stream = 0) {
  return keel::philox::block(s.key, s.counter, b, stream);
}

// A uniform float in [0, 1) from one 32-bit word (24 random bits: exactly representable).
inline float unit_float(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1.0p-24f; }

}  // namespace keel::random::philox
