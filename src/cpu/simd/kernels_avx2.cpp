// AVX2 + FMA kernels; this file alone is compiled with -mavx2 -mfma and only called after a
// run-time check of the processor.
#include "cpu/simd/kernels_impl.hpp"

namespace keel::cpu {

SimdKernels make_avx2_kernels() { return simd_impl::make_kernels<xsimd::fma3<xsimd::avx2>>("avx2+fma"); }

}  // namespace keel::cpu
