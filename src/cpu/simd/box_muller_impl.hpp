#pragma once
// random::normal's Box-Muller transform a SIMD batch of pairs at a time (included by
// kernels_impl.hpp). log, sin and cos are fdlibm's polynomials (as musl has them) in double,
// written with plain multiplies and adds: no fused multiply-add, whose single rounding would give
// other bits on a processor that has it, so a seed draws the same numbers on every machine and at
// every SIMD level. The angle 2 pi u is reduced exactly in u: q = round(4u), v = 4u - q, and
// 2 pi u = q pi/2 + v pi/2 with |v pi/2| <= pi/4.
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>

namespace keel::cpu::simd_impl {

// log(x) for positive normal x (fdlibm's e_log: x = 2^k m, m in [sqrt(2)/2, sqrt(2)), f = m - 1,
// s = f / (2 + f), log m = f - f^2/2 + s (f^2/2 + R(s^2))).
template <class D>
inline D log_positive(const D& x) {
  using U = xsimd::batch<std::uint64_t, typename D::arch_type>;
  const U bits = xsimd::bitwise_cast<U>(x);
  // The biased exponent as a double: its bits under 2^52's exponent, less 2^52.
  const D biased = xsimd::bitwise_cast<D>((bits >> 52) | U(0x4330000000000000ull)) - D(0x1.0p52);
  D m = xsimd::bitwise_cast<D>((bits & U(0x000FFFFFFFFFFFFFull)) | U(0x3FF0000000000000ull));  // [1, 2)
  const auto high = m > D(1.4142135623730951);
  m = xsimd::select(high, m * D(0.5), m);
  const D k = biased - D(1023.0) + xsimd::select(high, D(1.0), D(0.0));
  const D f = m - D(1.0);
  const D lg1(6.666666666666735130e-01), lg2(3.999999999940941908e-01), lg3(2.857142874366239149e-01),
      lg4(2.222219843214978396e-01), lg5(1.818357216161805012e-01), lg6(1.531383769920937332e-01),
      lg7(1.479819860511658591e-01);
  const D hfsq = D(0.5) * f * f, s = f / (D(2.0) + f), z = s * s, w = z * z;
  const D t1 = w * (lg2 + w * (lg4 + w * lg6));
  const D t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
  const D r = t2 + t1;
  return s * (hfsq + r) + k * D(1.90821492927058770002e-10) - hfsq + f + k * D(6.93147180369123816490e-01);
}

// sin and cos of a, |a| <= pi/4 (fdlibm's __kernel_sin and __kernel_cos, as musl's __sin, __cos).
template <class D>
inline void sincos_reduced(const D& a, D& s, D& c) {
  const D s1(-1.66666666666666324348e-01), s2(8.33333333332248946124e-03), s3(-1.98412698298579493134e-04),
      s4(2.75573137070700676789e-06), s5(-2.50507602534068634195e-08), s6(1.58969099521155010221e-10);
  const D c1(4.16666666666666019037e-02), c2(-1.38888888888741095749e-03), c3(2.48015872894767294178e-05),
      c4(-2.75573143513906633035e-07), c5(2.08757232129817482790e-09), c6(-1.13596475577881948265e-11);
  const D z = a * a, w = z * z;
  const D rs = s2 + z * (s3 + z * s4) + z * w * (s5 + z * s6);
  s = a + z * a * (s1 + z * rs);
  const D rc = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
  const D hz = D(0.5) * z, one_hz = D(1.0) - hz;
  c = one_hz + (((D(1.0) - one_hz) - hz) + z * rc);
}

// One batch of pairs: the normals r cos(2 pi u) and r sin(2 pi u), r = sqrt(-2 log(u_open)).
template <class D>
inline void box_muller_batch(const D& u_open, const D& u, D& z_cos, D& z_sin) {
  const D r = xsimd::sqrt(D(-2.0) * log_positive(u_open));
  const D four_u = D(4.0) * u;
  const D q = xsimd::nearbyint(four_u);                        // 0..4
  const D quadrant = q - D(4.0) * xsimd::floor(q * D(0.25));  // q mod 4
  D s, c;
  sincos_reduced((four_u - q) * D(1.5707963267948966), s, c);
  // sin(q pi/2 + a), cos(q pi/2 + a) for q mod 4 = 0, 1, 2, 3: (s, c), (c, -s), (-s, -c), (-c, s).
  const auto odd = quadrant == D(1.0) || quadrant == D(3.0);
  const auto sin_negative = quadrant >= D(2.0), cos_negative = quadrant == D(1.0) || quadrant == D(2.0);
  const D sin_t = xsimd::select(odd, c, s), cos_t = xsimd::select(odd, s, c);
  z_cos = r * xsimd::select(cos_negative, -cos_t, cos_t);
  z_sin = r * xsimd::select(sin_negative, -sin_t, sin_t);
}

// out[2l] = c[l], out[2l+1] = s[l] for the lanes l of a batch (xsimd 8.1's zip_lo / zip_hi
// interleave within 128-bit lanes at AVX-512).
template <class D>
inline void store_interleaved(const D& c, const D& s, double* out) {
  if constexpr (D::size == 8) {
#ifdef __AVX512F__
    const __m512i lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    _mm512_storeu_pd(out, _mm512_permutex2var_pd(c, lo, s));
    _mm512_storeu_pd(out + 8, _mm512_permutex2var_pd(c, hi, s));
#endif
  } else if constexpr (D::size == 4) {
#ifdef __AVX__
    const __m256d lo = _mm256_unpacklo_pd(c, s), hi = _mm256_unpackhi_pd(c, s);  // pairs 0, 2 and 1, 3
    _mm256_storeu_pd(out, _mm256_permute2f128_pd(lo, hi, 0x20));
    _mm256_storeu_pd(out + 4, _mm256_permute2f128_pd(lo, hi, 0x31));
#endif
  } else {
    static_assert(D::size == 2);
    _mm_storeu_pd(out, _mm_unpacklo_pd(c, s));
    _mm_storeu_pd(out + 2, _mm_unpackhi_pd(c, s));
  }
}

// z[2j] = sqrt(-2 log(u_open[j])) cos(2 pi u[j]) and z[2j+1] the same with sin, j < n; u_open in
// (0, 1], u in [0, 1).
template <class A>
void box_muller_batches(const double* u_open, const double* u, std::int64_t n, double* z) {
  using D = xsimd::batch<double, A>;
  constexpr std::int64_t W = D::size;
  D zc, zs;
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    box_muller_batch(D::load_unaligned(u_open + j), D::load_unaligned(u + j), zc, zs);
    store_interleaved(zc, zs, z + 2 * j);
  }
  if (j == n) return;
  alignas(64) double uo[W], uu[W], out[2 * W];  // the last pairs, padded with u_open = 1, u = 0
  for (std::int64_t l = 0; l < W; ++l) {
    uo[l] = j + l < n ? u_open[j + l] : 1.0;
    uu[l] = j + l < n ? u[j + l] : 0.0;
  }
  box_muller_batch(D::load_aligned(uo), D::load_aligned(uu), zc, zs);
  store_interleaved(zc, zs, out);
  std::copy(out, out + 2 * (n - j), z + 2 * j);
}

}  // namespace keel::cpu::simd_impl
