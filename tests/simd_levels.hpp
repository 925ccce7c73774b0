#pragma once
// Runs a test body once at every SIMD level this processor runs (cpu::simd_levels(): AVX-512,
// AVX2+FMA and the SSE2 baseline, as present), so that each kernel path is compared against the
// reference whatever the machine's best level is. Restores the starting level at the end, also
// when an assertion throws.
#include <catch2/catch.hpp>

#include <string>

#include "cpu/kernels.hpp"

namespace keel::testing {

class LevelRestorer {
 public:
  LevelRestorer() : initial_(cpu::simd().isa) {}
  ~LevelRestorer() { cpu::set_simd_level(initial_); }
  LevelRestorer(const LevelRestorer&) = delete;
  LevelRestorer& operator=(const LevelRestorer&) = delete;

 private:
  std::string initial_;
};

// body(isa) at each level.
template <class F>
void at_every_simd_level(F&& body) {
  LevelRestorer restore;
  for (const cpu::SimdKernels& level : cpu::simd_levels()) {
    REQUIRE(cpu::set_simd_level(level.isa));
    REQUIRE(std::string(cpu::simd().isa) == level.isa);
    INFO("SIMD level " << level.isa);
    body(std::string(level.isa));
  }
}

}  // namespace keel::testing
