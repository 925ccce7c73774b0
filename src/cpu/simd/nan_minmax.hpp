#pragma once
// NaN-propagating max and min on xsimd batches, shared by the elementwise and reduction kernels
// (kernels_impl.hpp) and the max pool (pooling_impl.hpp).
#include <xsimd/xsimd.hpp>

namespace keel::cpu::simd_impl {

// TensorFlow's max/min-based kernels return NaN when an operand is NaN. x86's maxps(a, b) (which
// xsimd::max(a, b) is on SSE2, AVX and AVX-512) is `a > b ? a : b`: it returns its SECOND operand
// when either is NaN, and on ties. So max(v, u) already carries u's NaN and keeps u on ties
// (ties go to the first operand, as tf.maximum's gradient assumes); one select adds v's NaN.
// Three instructions, where a compare-and-select chain takes six.
//
// NaN tests use xsimd::isnan, never `v != v`: xsimd 8.1 compiles != to the ORDERED not-equal
// (_CMP_NEQ_OQ) on AVX, AVX2 and AVX-512, which is false for NaN; only SSE2's cmpneq is
// unordered. `v != v` thus finds NaNs on one level and none on the others.
template <class B>
inline B max_nan(const B& u, const B& v) {
  return xsimd::select(xsimd::isnan(v), v, xsimd::max(v, u));
}
template <class B>
inline B min_nan(const B& u, const B& v) {
  return xsimd::select(xsimd::isnan(v), v, xsimd::min(v, u));
}

}  // namespace keel::cpu::simd_impl
