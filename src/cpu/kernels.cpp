#include "cpu/kernels.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace keel::cpu {

SimdKernels make_sse2_kernels();
SimdKernels make_avx2_kernels();
SimdKernels make_avx512_kernels();

namespace {

bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// What xsimd's avx512bw level uses (libgcc's check includes the OS's saving of the ZMM state).
bool has_avx512bw() {
  __builtin_cpu_init();
  return has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

// "avx2" names the "avx2+fma" table (the level, without the extensions it carries), and
// "avx512" the "avx512bw" one.
bool names_level(std::string_view wanted, const char* isa) {
  const std::string_view name(isa);
  return wanted == name || wanted == name.substr(0, name.find('+')) ||
         (wanted == "avx512" && name.rfind("avx512", 0) == 0);
}

const SimdKernels* find_level(std::string_view isa) {
  for (const SimdKernels& k : simd_levels())
    if (names_level(isa, k.isa)) return &k;
  return nullptr;
}

// The best table, or the one KEEL_SIMD names. A wrong name is a setup mistake of whoever runs
// the tests, not a user error: warn and go on with the best table rather than throw from here.
const SimdKernels* initial_level() {
  const char* env = std::getenv("KEEL_SIMD");
  if (env == nullptr || *env == '\0') return &simd_levels().front();
  if (const SimdKernels* k = find_level(env)) return k;
  std::string have;
  for (const SimdKernels& k : simd_levels()) have += std::string(have.empty() ? "" : ", ") + k.isa;
  std::fprintf(stderr, "keel: KEEL_SIMD=%s is not available here (have %s); using %s\n", env, have.c_str(),
               simd_levels().front().isa);
  return &simd_levels().front();
}

// An atomic pointer rather than a plain static so set_simd_level() can switch it; a relaxed
// load costs what the old function-local static's guard check did.
std::atomic<const SimdKernels*>& active() {
  static std::atomic<const SimdKernels*> level{initial_level()};
  return level;
}

}  // namespace

const std::vector<SimdKernels>& simd_levels() {
  static const std::vector<SimdKernels> levels = [] {
    std::vector<SimdKernels> v;
    if (has_avx512bw()) v.push_back(make_avx512_kernels());
    if (has_avx2_fma()) v.push_back(make_avx2_kernels());
    v.push_back(make_sse2_kernels());
    return v;
  }();
  return levels;
}

const SimdKernels& simd() { return *active().load(std::memory_order_relaxed); }

bool set_simd_level(std::string_view isa) {
  const SimdKernels* k = find_level(isa);
  if (k == nullptr) return false;
  active().store(k, std::memory_order_relaxed);
  return true;
}

}  // namespace keel::cpu
