// Selecting the CPU kernels' SIMD level: every level this processor runs can be made the active
// one (by name, or by KEEL_SIMD at start-up), best first, with SSE2 always last.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdlib>
#include <string>

#include "cpu/kernels.hpp"
#include "simd_levels.hpp"

using namespace keel;
using testing::LevelRestorer;

TEST_CASE("every SIMD level this processor runs can be selected", "[simd]") {
  const std::string start = cpu::simd().isa;
  const auto& levels = cpu::simd_levels();
  REQUIRE_FALSE(levels.empty());
  // The best level, unless KEEL_SIMD=sse2|avx2|avx512 (read once, at the first kernel call) names
  // another that this processor runs.
  const char* env = std::getenv("KEEL_SIMD");
  bool env_known = false;
  for (const auto& level : levels) env_known |= env != nullptr && *env != '\0' && std::string(level.isa).rfind(env, 0) == 0;
  if (env_known) CHECK(start.rfind(env, 0) == 0);
  else CHECK(start == levels.front().isa);
  CHECK(std::string(levels.back().isa) == "sse2");  // the baseline, always present
  LevelRestorer restore;
  for (const auto& level : levels) {
    CHECK(cpu::set_simd_level(level.isa));
    CHECK(std::string(cpu::simd().isa) == level.isa);
  }
  CHECK_FALSE(cpu::set_simd_level("no-such-level"));
  if (std::string(levels.front().isa) == "avx2+fma") {
    CHECK(cpu::set_simd_level("avx2"));  // the level's short name, as KEEL_SIMD=avx2
    CHECK(std::string(cpu::simd().isa) == "avx2+fma");
  }
  if (std::string(levels.front().isa) == "avx512bw") {
    CHECK(cpu::set_simd_level("avx512"));  // KEEL_SIMD=avx512
    CHECK(std::string(cpu::simd().isa) == "avx512bw");
    CHECK(levels.size() == 3);  // a processor with AVX-512 BW has AVX2 and FMA too
  }
}
