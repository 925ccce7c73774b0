#pragma once
// Philox-4x32-10 blocks a SIMD batch at a time (included by kernels_impl.hpp): the words of
// core/philox.hpp's philox::block, lane l of a batch computing block g + l.
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/philox.hpp"
#include "cpu/simd/store_stream.hpp"

namespace keel::cpu::simd_impl {

// hi and lo of the 32 x 32 -> 64-bit products a * m in every 32-bit lane (m repeated in each).
// The multiply takes the even lanes; the odd ones are shifted down for a second multiply.
inline void mul_hi_lo(__m128i a, __m128i m, __m128i& hi, __m128i& lo) {
  const __m128i even = _mm_mul_epu32(a, m), odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m);
  const __m128i low = _mm_set1_epi64x(0xFFFFFFFF);
  lo = _mm_or_si128(_mm_and_si128(even, low), _mm_slli_epi64(odd, 32));
  hi = _mm_or_si128(_mm_srli_epi64(even, 32), _mm_andnot_si128(low, odd));
}
#ifdef __AVX2__
inline void mul_hi_lo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  const __m256i low = _mm256_set1_epi64x(0xFFFFFFFF);
  lo = _mm256_or_si256(_mm256_and_si256(even, low), _mm256_slli_epi64(odd, 32));
  hi = _mm256_or_si256(_mm256_srli_epi64(even, 32), _mm256_andnot_si256(low, odd));
}
#endif
#ifdef __AVX512F__
inline void mul_hi_lo(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  constexpr __mmask16 kOdd = 0xAAAA;  // the high 32 bits of every 64-bit lane
  lo = _mm512_mask_blend_epi32(kOdd, even, _mm512_slli_epi64(odd, 32));
  hi = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(even, 32), odd);
}
#endif

// Stores the words of a batch of blocks in block order: c0..c3 hold words 0..3 of blocks l < W in
// lane l; o[4 l + k] = ck[l]. Per 128-bit lane, two rounds of unpacks give each block's four
// words (u_j holds block 4 L + j in lane L); wider registers then reorder whole 128-bit lanes.
inline void store_blocks(__m128i c0, __m128i c1, __m128i c2, __m128i c3, std::uint32_t* o) {
  const __m128i t0 = _mm_unpacklo_epi32(c0, c1), t1 = _mm_unpackhi_epi32(c0, c1);
  const __m128i t2 = _mm_unpacklo_epi32(c2, c3), t3 = _mm_unpackhi_epi32(c2, c3);
  auto* out = reinterpret_cast<__m128i*>(o);
  _mm_storeu_si128(out, _mm_unpacklo_epi64(t0, t2));
  _mm_storeu_si128(out + 1, _mm_unpackhi_epi64(t0, t2));
  _mm_storeu_si128(out + 2, _mm_unpacklo_epi64(t1, t3));
  _mm_storeu_si128(out + 3, _mm_unpackhi_epi64(t1, t3));
}
#ifdef __AVX2__
inline void store_blocks(__m256i c0, __m256i c1, __m256i c2, __m256i c3, std::uint32_t* o) {
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  auto* out = reinterpret_cast<__m256i*>(o);
  _mm256_storeu_si256(out, _mm256_permute2x128_si256(u0, u1, 0x20));      // blocks 0, 1
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(u2, u3, 0x20));  // blocks 2, 3
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(u0, u1, 0x31));  // blocks 4, 5
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(u2, u3, 0x31));  // blocks 6, 7
}
#endif
#ifdef __AVX512F__
inline void store_blocks(__m512i c0, __m512i c1, __m512i c2, __m512i c3, std::uint32_t* o) {
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  // v0 = [u0.L0, u0.L1, u1.L0, u1.L1], v1 = the same of u2, u3; v2, v3 their lanes 2 and 3.
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(o, _mm512_shuffle_i32x4(v0, v1, 0x88));       // blocks 0..3
  _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // blocks 4..7
  _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));  // blocks 8..11
  _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // blocks 12..15
}
#endif

// out[4 g + k] = word k of philox::block(key, counter, g, stream), for g < blocks.
template <class A>
void philox_words(std::uint64_t key, std::uint64_t counter, std::uint32_t stream, std::int64_t blocks,
                  std::uint32_t* out) {
  using B = xsimd::batch<std::uint32_t, A>;
  using R = typename B::register_type;
  constexpr std::int64_t W = B::size;
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  const R m0 = static_cast<R>(B(kMul0)), m1 = static_cast<R>(B(kMul1));
  // kSets batches of blocks at a time: a round is a chain of dependent multiplies, blends and
  // xors, and at 4 or 8 lanes a second batch fills its latency (at 16 lanes it measured slower).
  constexpr int kSets = W >= 16 ? 1 : 2;
  std::int64_t g = 0;
  for (; g + kSets * W <= blocks; g += kSets * W) {
    B c0[kSets], c1[kSets], c2[kSets], c3[kSets];
    for (int s = 0; s < kSets; ++s) {
      alignas(64) std::uint32_t lo[W], hi[W];
      for (std::int64_t l = 0; l < W; ++l) {
        const std::uint64_t ctr = counter + static_cast<std::uint64_t>(g + s * W + l);
        lo[l] = static_cast<std::uint32_t>(ctr);
        hi[l] = static_cast<std::uint32_t>(ctr >> 32);
      }
      c0[s] = B::load_aligned(lo);
      c1[s] = B::load_aligned(hi);
      c2[s] = B(stream);
      c3[s] = B(0u);
    }
    auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += kWeyl0;
        k1 += kWeyl1;
      }
      const B bk0(k0), bk1(k1);
      for (int s = 0; s < kSets; ++s) {
        R h0, l0, h1, l1;
        mul_hi_lo(static_cast<R>(c0[s]), m0, h0, l0);
        mul_hi_lo(static_cast<R>(c2[s]), m1, h1, l1);
        c0[s] = B(h1) ^ c1[s] ^ bk0;
        c1[s] = B(l1);
        c2[s] = B(h0) ^ c3[s] ^ bk1;
        c3[s] = B(l0);
      }
    }
    for (int s = 0; s < kSets; ++s)
      store_blocks(static_cast<R>(c0[s]), static_cast<R>(c1[s]), static_cast<R>(c2[s]), static_cast<R>(c3[s]),
                   out + 4 * (g + s * W));
  }
  for (; g < blocks; ++g) {
    const philox::Words w = philox::block(key, counter, static_cast<std::uint64_t>(g), stream);
    for (int k = 0; k < 4; ++k) out[4 * g + k] = w[static_cast<std::size_t>(k)];
  }
}

// dropout's select after its words: y[k] = x[k] * scale where words[k] >= threshold, else +0.0
// (also for a dropped NaN or Inf, as tf.where gives), and mask[k] = scale or +0.0 when mask is
// not null. The unsigned comparison runs as a signed one on words with the sign bit flipped.
// With `stream`, y is written with streaming stores where it is aligned.
template <class A, class T>
void dropout_select(const std::uint32_t* words, std::uint32_t threshold, const T* x, T scale, T* y, T* mask,
                    std::int64_t n, bool stream) {
  std::int64_t k = 0;
  if constexpr (std::is_same_v<T, float>) {
    using B = xsimd::batch<float, A>;
    using I = xsimd::batch<std::int32_t, A>;
    constexpr std::int64_t W = B::size;
    const I flip(std::int32_t(0x80000000u)), th(static_cast<std::int32_t>(threshold ^ 0x80000000u)), none(0);
    const B s(scale);
    const I s_bits = xsimd::bitwise_cast<I>(s);
    stream = stream && reinterpret_cast<std::uintptr_t>(y) % sizeof(B) == 0;
    for (; k + W <= n; k += W) {
      const auto keep = (I::load_unaligned(reinterpret_cast<const std::int32_t*>(words + k)) ^ flip) >= th;
      const I bits = xsimd::select(keep, xsimd::bitwise_cast<I>(B::load_unaligned(x + k) * s), none);
      const B kept = xsimd::bitwise_cast<B>(bits);
      if (stream) store_stream(kept, y + k);
      else kept.store_unaligned(y + k);
      if (mask != nullptr) xsimd::bitwise_cast<B>(xsimd::select(keep, s_bits, none)).store_unaligned(mask + k);
    }
    if (stream) _mm_sfence();
  }
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;  // T's bits
  for (; k < n; ++k) {
    const U keep = U(0) - static_cast<U>(words[k] >= threshold);
    y[k] = std::bit_cast<T>(std::bit_cast<U>(x[k] * scale) & keep);
    if (mask != nullptr) mask[k] = std::bit_cast<T>(std::bit_cast<U>(scale) & keep);
  }
}

// random::uniform's float32 values from Philox words, cpu/random.cpp's rule with its bits:
// p[k] = float(minval + (maxval - minval) * u), u = (words[k] >> 8) * 2^-24, in double; where that
// rounds to hi or above (the interval is half-open), below_hi. Branch-free, so that it vectorises.
template <class A>
void uniform_floats(const std::uint32_t* words, std::int64_t n, double minval, double maxval, float hi,
                    float below_hi, float* p) {
  const double span = maxval - minval;
  const auto below = std::bit_cast<std::uint32_t>(below_hi);
#pragma omp simd
  for (std::int64_t k = 0; k < n; ++k) {
    const double u = static_cast<double>(static_cast<std::int32_t>(words[k] >> 8)) * 0x1.0p-24;
    const auto v = static_cast<float>(minval + span * u);
    const std::uint32_t keep = 0u - static_cast<std::uint32_t>(v < hi);
    p[k] = std::bit_cast<float>((std::bit_cast<std::uint32_t>(v) & keep) | (below & ~keep));
  }
}

}  // namespace keel::cpu::simd_impl
