#pragma once
// layer_norm's forward over rows, written against xsimd (included by kernels_impl.hpp). It keeps
// the bits of the portable loops it replaced: every sum takes the same order of additions.
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace keel::cpu::simd_impl {

// The lanes of a row sum: lane k adds the elements j = k mod 16 of a block of 1024.
inline constexpr std::int64_t kSumLanes = 16;
inline constexpr std::int64_t kSumBlock = 1024;
// Rows whose statistics are taken together: each step runs over the whole group before the next
// starts, so one row's chain of dependent operations overlaps the others', and a group stays in L1.
inline constexpr std::int64_t kNormGroup = 64;
// f(first, count) for each group of rows.
template <class F>
inline void for_each_row_group(std::int64_t rows, std::int64_t cols, F f) {
  const std::int64_t group = std::clamp<std::int64_t>(4096 / std::max<std::int64_t>(cols, 1), 1, kNormGroup);
  for (std::int64_t g0 = 0; g0 < rows; g0 += group) f(g0, std::min(group, rows - g0));
}

// The pairwise steps inside one register, lane k += lane k + w for w = half the lanes down to 1:
// lane 0 at the end, the bits of the same steps on an array.
inline float fold_lanes(__m128 v) {
  const __m128 t = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}
inline double fold_lanes(__m128d v) { return _mm_cvtsd_f64(_mm_add_sd(v, _mm_unpackhi_pd(v, v))); }
#ifdef __AVX__
inline float fold_lanes(__m256 v) {
  return fold_lanes(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}
inline double fold_lanes(__m256d v) {
  return fold_lanes(_mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1)));
}
#endif
#ifdef __AVX512F__
inline float fold_lanes(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return fold_lanes(_mm256_add_ps(lo, hi));
}
inline double fold_lanes(__m512d v) {
  return fold_lanes(_mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1)));
}
#endif

// sum over j < n of a value vec(j) gives a batch of (elements j, j + 1, ...) and one(j) gives
// alone: each block of kSumBlock in kSumLanes lanes of T, the lanes added pairwise (lane k +=
// lane k + w for w = 8, 4, 2, 1), a block's leftover elements one by one, and the block sums
// added in double.
template <class A, class T, class Vec, class One>
inline double row_sum_lanes(std::int64_t n, Vec vec, One one) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size, N = kSumLanes / W;  // batches holding the lanes
  static_assert(N >= 1 && kSumLanes % W == 0);
  double total = 0;
  for (std::int64_t b = 0; b < n; b += kSumBlock) {
    const std::int64_t e = std::min(n, b + kSumBlock);
    B acc[N];
    for (auto& a : acc) a = B(T(0));
    std::int64_t j = b;
    for (; j + kSumLanes <= e; j += kSumLanes)
      for (std::int64_t k = 0; k < N; ++k) acc[k] += vec(j + k * W);
    T tail = 0;
    for (; j < e; ++j) tail += one(j);
    // The pairwise steps whose partner lanes lie in another batch, then the ones inside a batch.
    for (std::int64_t w = N / 2; w > 0; w /= 2)
      for (std::int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
    const T folded = fold_lanes(static_cast<typename B::register_type>(acc[0]));
    total += static_cast<double>(folded) + static_cast<double>(tail);
  }
  return total;
}

// The statistics of the rows [g0, g0 + len) of `cols`, len <= kNormGroup: mean[g0 + i] (the
// double sum / n rounded to T) and var[i] (double), the mean of (x - mean)^2 corrected for the
// rounded mean. Each step runs over the whole group before the next starts.
template <class A, class T>
void row_group_moments(const T* x, std::int64_t g0, std::int64_t len, std::int64_t cols, T* mean, double* var) {
  using B = xsimd::batch<T, A>;
  const auto n = static_cast<double>(cols);
  double mu[kNormGroup];
  for (std::int64_t i = 0; i < len; ++i) {
    const T* xr = x + (g0 + i) * cols;
    mu[i] = row_sum_lanes<A, T>(cols, [xr](std::int64_t j) { return B::load_unaligned(xr + j); },
                                [xr](std::int64_t j) { return xr[j]; });
  }
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i) {
    mu[i] /= n;
    mean[g0 + i] = static_cast<T>(mu[i]);
  }
  for (std::int64_t i = 0; i < len; ++i) {
    const T* xr = x + (g0 + i) * cols;
    const T m = mean[g0 + i];
    const auto square = [m](const auto& v) {
      const auto d = v - m;
      return d * d;
    };
    var[i] = row_sum_lanes<A, T>(cols, [=](std::int64_t j) { return square(B::load_unaligned(xr + j)); },
                                 [=](std::int64_t j) { return square(xr[j]); });
  }
#pragma omp simd
  for (std::int64_t i = 0; i < len; ++i) {
    // Centred on the rounded mean m: sum((x - m)^2) / n = var + (mu - m)^2.
    const double dm = mu[i] - static_cast<double>(mean[g0 + i]);
    var[i] = std::max(var[i] / n - dm * dm, 0.0);  // NaN stays NaN
  }
}

// The mean and biased variance of each of `rows` rows of `cols` (moments over trailing axes),
// both rounded to T.
template <class A, class T>
void row_moments(const T* x, std::int64_t rows, std::int64_t cols, T* mean, T* variance) {
  for_each_row_group(rows, cols, [&](std::int64_t g0, std::int64_t len) {
    double var[kNormGroup];
    row_group_moments<A, T>(x, g0, len, cols, mean, var);
    for (std::int64_t i = 0; i < len; ++i) variance[g0 + i] = static_cast<T>(var[i]);
  });
}

// layer_norm over `rows` rows of `cols`: the rows' moments as above and rstd =
// 1 / sqrt(var + epsilon); then y = (x - mean) * rstd * gamma + beta, left to right.
template <class A, class T>
void layer_norm_rows(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                     double epsilon, T* y, T* mean, T* rstd) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  for_each_row_group(rows, cols, [&](std::int64_t g0, std::int64_t len) {
    double var[kNormGroup];
    row_group_moments<A, T>(x, g0, len, cols, mean, var);
#pragma omp simd
    for (std::int64_t i = 0; i < len; ++i) rstd[g0 + i] = static_cast<T>(1.0 / std::sqrt(var[i] + epsilon));
    for (std::int64_t i = 0; i < len; ++i) {
      const T* xr = x + (g0 + i) * cols;
      T* yr = y + (g0 + i) * cols;
      const T m = mean[g0 + i], rt = rstd[g0 + i];
      const B bm(m), brt(rt);
      std::int64_t c = 0;
      for (; c + W <= cols; c += W)
        ((B::load_unaligned(xr + c) - bm) * brt * B::load_unaligned(gamma + c) + B::load_unaligned(beta + c))
            .store_unaligned(yr + c);
      for (; c < cols; ++c) yr[c] = (xr[c] - m) * rt * gamma[c] + beta[c];
    }
  });
}

// layer_norm's gradient wrt x over `rows` rows, with h = dy * gamma and xhat = (x - mean) * rstd:
// dx = rstd * (h - mean(h) - xhat * mean(h * xhat)), the means rounded to T, each product left to
// right as written.
template <class A, class T>
void layer_norm_grad_rows(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                          const T* mean, const T* rstd, T* dx) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const auto n = static_cast<double>(cols);
  for_each_row_group(rows, cols, [&](std::int64_t g0, std::int64_t len) {
    double sum_h[kNormGroup], sum_hx[kNormGroup];
    for (std::int64_t i = 0; i < len; ++i) {
      const T* xr = x + (g0 + i) * cols;
      const T* gr = dy + (g0 + i) * cols;
      const T m = mean[g0 + i], rs = rstd[g0 + i];
      sum_h[i] = row_sum_lanes<A, T>(
          cols, [=](std::int64_t j) { return B::load_unaligned(gr + j) * B::load_unaligned(gamma + j); },
          [=](std::int64_t j) { return gr[j] * gamma[j]; });
      sum_hx[i] = row_sum_lanes<A, T>(
          cols,
          [=](std::int64_t j) {
            return B::load_unaligned(gr + j) * B::load_unaligned(gamma + j) * ((B::load_unaligned(xr + j) - m) * rs);
          },
          [=](std::int64_t j) { return gr[j] * gamma[j] * ((xr[j] - m) * rs); });
    }
    for (std::int64_t i = 0; i < len; ++i) {
      const T* xr = x + (g0 + i) * cols;
      const T* gr = dy + (g0 + i) * cols;
      T* dr = dx + (g0 + i) * cols;
      const T m = mean[g0 + i], rs = rstd[g0 + i];
      const T a = static_cast<T>(sum_h[i] / n), b = static_cast<T>(sum_hx[i] / n);
      const B bm(m), brs(rs), ba(a), bb(b);
      std::int64_t j = 0;
      for (; j + W <= cols; j += W) {
        const B h = B::load_unaligned(gr + j) * B::load_unaligned(gamma + j);
        (brs * (h - ba - (B::load_unaligned(xr + j) - bm) * brs * bb)).store_unaligned(dr + j);
      }
      for (; j < cols; ++j) dr[j] = rs * (gr[j] * gamma[j] - a - (xr[j] - m) * rs * b);
    }
  });
}

}  // namespace keel::cpu::simd_impl
