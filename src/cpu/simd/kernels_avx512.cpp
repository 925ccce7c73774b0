// AVX-512 kernels (xsimd's avx512bw level: F, CD, DQ and BW); this file alone is compiled with
// the AVX-512 flags and only called after a run-time check of the processor.
#include "cpu/simd/kernels_impl.hpp"

namespace keel::cpu {

SimdKernels make_avx512_kernels() { return simd_impl::make_kernels<xsimd::avx512bw>("avx512bw"); }

}  // namespace keel::cpu
