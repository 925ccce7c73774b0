// Baseline kernels: every x86-64 processor has SSE2.
#include "cpu/simd/kernels_impl.hpp"

namespace keel::cpu {

SimdKernels make_sse2_kernels() { return simd_impl::make_kernels<xsimd::sse2>("sse2"); }

}  // namespace keel::cpu
