#include "cpu/kernels.hpp"

namespace keel::cpu {

SimdKernels make_sse2_kernels();
SimdKernels make_avx2_kernels();

const SimdKernels& simd() {
  static const SimdKernels kernels = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return make_avx2_kernels();
    return make_sse2_kernels();
  }();
  return kernels;
}

}  // namespace keel::cpu
