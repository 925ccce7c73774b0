#pragma once
// batch_norm's passes over rows of `cols` channels, and the per-column sums that layer_norm's
// parameter gradients take too, written against xsimd (included by kernels_impl.hpp). Lanes run
// along the columns, so every column's additions keep the order of the scalar loops they replaced
// and every SIMD level gives the same bits.
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include <immintrin.h>

#include "cpu/kernels.hpp"
#include "cpu/simd/store_stream.hpp"

namespace keel::cpu::simd_impl {

// Column strips of up to kColumnBatches registers go through a block of rows together: their
// accumulators' chains of additions then overlap (one strip of 16 columns waits 4 cycles a row).
inline constexpr int kColumnBatches = 4;

// Adds one element's (or one batch of columns') two terms of column_pair_sums (cpu/kernels.hpp).
template <ColumnPair K, class V, class T>
inline void add_pair(const V& x, const V& g, const V& ref, T row_mean, T row_rstd, V& a1, V& a2) {
  if constexpr (K == ColumnPair::moments) {
    const V d = x - ref;
    a1 += d;
    a2 += d * d;
  } else if constexpr (K == ColumnPair::bn_grad) {
    a1 += g;
    a2 += g * (x - ref);
  } else {
    a1 += g * ((x - row_mean) * row_rstd);
    a2 += g;
  }
}

template <ColumnPair K, class A, class T>
void column_pair_sums_of(const T* x, const T* g, const T* ref, const T* row_mean, const T* row_rstd,
                         std::int64_t rows, std::int64_t cols, std::int64_t block_rows, double* s1, double* s2) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const auto row_values = [&](std::int64_t r) -> std::pair<T, T> {
    if constexpr (K == ColumnPair::ln_grad) return {row_mean[r], row_rstd[r]};
    return {T(0), T(0)};
  };
  for (std::int64_t b = 0; b < rows; b += block_rows) {
    const std::int64_t e = std::min(rows, b + block_rows);
    // NB registers of columns from c0: each summed over the block in T, then added in double.
    const auto strip = [&]<int NB>(std::int64_t c0) {
      B a1[NB], a2[NB];
      for (int k = 0; k < NB; ++k) a1[k] = a2[k] = B(T(0));
      for (std::int64_t r = b; r < e; ++r) {
        const auto [rm, rs] = row_values(r);
        const T* xr = x + r * cols + c0;
        const T* gr = K == ColumnPair::moments ? nullptr : g + r * cols + c0;
#pragma GCC unroll 4
        for (int k = 0; k < NB; ++k) {
          const B gv = K == ColumnPair::moments ? B(T(0)) : B::load_unaligned(gr + k * W);
          const B rv = K == ColumnPair::ln_grad ? B(T(0)) : B::load_unaligned(ref + c0 + k * W);
          add_pair<K>(B::load_unaligned(xr + k * W), gv, rv, rm, rs, a1[k], a2[k]);
        }
      }
      alignas(64) T l1[W], l2[W];
      for (int k = 0; k < NB; ++k) {
        a1[k].store_aligned(l1);
        a2[k].store_aligned(l2);
        for (std::int64_t j = 0; j < W; ++j) {
          s1[c0 + k * W + j] += static_cast<double>(l1[j]);
          s2[c0 + k * W + j] += static_cast<double>(l2[j]);
        }
      }
    };
    std::int64_t c0 = 0;
    for (; c0 + kColumnBatches * W <= cols; c0 += kColumnBatches * W) strip.template operator()<kColumnBatches>(c0);
    for (; c0 + W <= cols; c0 += W) strip.template operator()<1>(c0);
    for (std::int64_t c = c0; c < cols; ++c) {  // the last columns, one at a time
      T a1 = 0, a2 = 0;
      for (std::int64_t r = b; r < e; ++r) {
        const auto [rm, rs] = row_values(r);
        add_pair<K>(x[r * cols + c], K == ColumnPair::moments ? T(0) : g[r * cols + c],
                    K == ColumnPair::ln_grad ? T(0) : ref[c], rm, rs, a1, a2);
      }
      s1[c] += static_cast<double>(a1);
      s2[c] += static_cast<double>(a2);
    }
  }
}

template <class A, class T>
void column_pair_sums(ColumnPair kind, const T* x, const T* g, const T* ref, const T* row_mean, const T* row_rstd,
                      std::int64_t rows, std::int64_t cols, std::int64_t block_rows, double* s1, double* s2) {
  switch (kind) {
    case ColumnPair::moments:
      return column_pair_sums_of<ColumnPair::moments, A, T>(x, g, ref, row_mean, row_rstd, rows, cols, block_rows,
                                                            s1, s2);
    case ColumnPair::bn_grad:
      return column_pair_sums_of<ColumnPair::bn_grad, A, T>(x, g, ref, row_mean, row_rstd, rows, cols, block_rows,
                                                            s1, s2);
    case ColumnPair::ln_grad:
      return column_pair_sums_of<ColumnPair::ln_grad, A, T>(x, g, ref, row_mean, row_rstd, rows, cols, block_rows,
                                                            s1, s2);
  }
}

// Writes y[i] for i = r * cols + c, r < rows, c < cols, from f(i, r, c) (a batch of columns
// c..c+W) and one(i, r, c) (column c alone). With `stream`, the batches go out with streaming
// stores from the first aligned column of each row (the columns before it one at a time: the
// same bits).
template <class A, class T, class F, class One>
inline void write_rows(T* y, std::int64_t rows, std::int64_t cols, bool stream, F f, One one) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  if (!stream) {  // a loop of its own: with the stream test inside, short rows ran 1.4x slower
    for (std::int64_t r = 0, i = 0; r < rows; ++r) {
      std::int64_t c = 0;
      for (; c + W <= cols; c += W, i += W) f(i, r, c).store_unaligned(y + i);
      for (; c < cols; ++c, ++i) y[i] = one(i, r, c);
    }
    return;
  }
  for (std::int64_t r = 0, i = 0; r < rows; ++r) {
    std::int64_t c = 0;
    for (; c < cols && reinterpret_cast<std::uintptr_t>(y + i) % sizeof(B) != 0; ++c, ++i) y[i] = one(i, r, c);
    for (; c + W <= cols; c += W, i += W) store_stream(f(i, r, c), y + i);
    for (; c < cols; ++c, ++i) y[i] = one(i, r, c);
  }
  _mm_sfence();
}

// Rows of one to four batches (batch_norm over 16-64 channels) with the per-column parameters
// `params` kept in registers: loaded beside the stores to y (which might alias them), they came
// back every row, 1.4x slower. y[k..k+W) = f(k, p), p[q] parameter q's batch of those columns.
// False, and nothing written, for other rows or with `stream`.
template <class A, class T, std::size_t P, class F>
bool short_rows(std::int64_t rows, std::int64_t cols, bool stream, const std::array<const T*, P>& params, T* y, F f) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const std::int64_t nb = cols / W;
  if (stream || cols % W != 0 || nb < 1 || nb > 4) return false;
  const auto run = [&]<int N>() {
    std::array<B, P> p[N];
    for (int j = 0; j < N; ++j)
      for (std::size_t q = 0; q < P; ++q) p[j][q] = B::load_unaligned(params[q] + j * W);
    for (std::int64_t i = 0; i < rows * cols; i += N * W)
      for (int j = 0; j < N; ++j) f(i + j * W, p[j]).store_unaligned(y + i + j * W);
  };
  if (nb == 1) run.template operator()<1>();
  else if (nb == 2) run.template operator()<2>();
  else if (nb == 3) run.template operator()<3>();
  else run.template operator()<4>();
  return true;
}

// y = (x - center) * scale + offset, left to right, the three per column (batch_norm_rows) or, with
// PerRow, per row (row_affine: moments' gradient over trailing axes).
template <bool PerRow, class A, class T>
void affine_rows(const T* x, std::int64_t rows, std::int64_t cols, const T* center, const T* scale, const T* offset,
                 T* y, bool stream) {
  using B = xsimd::batch<T, A>;
  if constexpr (!PerRow) {
    const auto f = [x](std::int64_t k, const auto& p) { return (B::load_unaligned(x + k) - p[0]) * p[1] + p[2]; };
    if (short_rows<A, T, 3>(rows, cols, stream, {center, scale, offset}, y, f)) return;
  }
  const auto at = [](const T* p, std::int64_t r, std::int64_t c) {
    if constexpr (PerRow) return B(p[r]);
    else return B::load_unaligned(p + c);
  };
  write_rows<A, T>(
      y, rows, cols, stream,
      [=](std::int64_t i, std::int64_t r, std::int64_t c) {
        return (B::load_unaligned(x + i) - at(center, r, c)) * at(scale, r, c) + at(offset, r, c);
      },
      [=](std::int64_t i, std::int64_t r, std::int64_t c) {
        const std::int64_t k = PerRow ? r : c;
        return (x[i] - center[k]) * scale[k] + offset[k];
      });
}

// dx = a * dy + b * (x - mean) + e, per column, left to right.
template <class A, class T>
void batch_norm_grad_rows(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* mean, const T* a,
                          const T* b, const T* e, T* dx, bool stream) {
  using B = xsimd::batch<T, A>;
  const auto f = [x, dy](std::int64_t k, const auto& p) {
    const B ag = p[1] * B::load_unaligned(dy + k);
    const B bx = p[2] * (B::load_unaligned(x + k) - p[0]);
    return ag + bx + p[3];
  };
  if (short_rows<A, T, 4>(rows, cols, stream, {mean, a, b, e}, dx, f)) return;
  write_rows<A, T>(
      dx, rows, cols, stream,
      [=](std::int64_t i, std::int64_t, std::int64_t c) {
        const B ag = B::load_unaligned(a + c) * B::load_unaligned(dy + i);
        const B bx = B::load_unaligned(b + c) * (B::load_unaligned(x + i) - B::load_unaligned(mean + c));
        return ag + bx + B::load_unaligned(e + c);
      },
      [=](std::int64_t i, std::int64_t, std::int64_t c) { return a[c] * dy[i] + b[c] * (x[i] - mean[c]) + e[c]; });
}

}  // namespace keel::cpu::simd_impl
