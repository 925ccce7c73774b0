// The fused CPU kernels of batch_norm and layer_norm (src/ops/normalization.cpp records them,
// with their gradients).
#include "cpu/normalization.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/rows.hpp"
#include "cpu/strided.hpp"
#include "cpu/thread_pool.hpp"
#include "keel/core/config.hpp"

namespace keel::cpu {

namespace {

// The values of a small parameter (gamma, beta, statistics), or `fill` repeated when it is absent.
template <class T>
std::vector<T> values_or(const T* p, std::int64_t n, T fill) {
  if (p == nullptr) return std::vector<T>(static_cast<std::size_t>(n), fill);
  return std::vector<T>(p, p + n);
}

// Column sums run over blocks of rows: each block is summed in T (short sums keep the rounding
// error small even in float32) and the block sums are added in double. A block holds about
// kBlockElems elements (it stays in L1 while its column strips are read) and at most kBlockRows.
constexpr std::int64_t kBlockRows = 128;
constexpr std::int64_t kBlockElems = 8192;

// Rows are split into chunks whose boundaries depend only on the shape, never on the thread
// count, so the order of every addition, and the result, is the same with 1 or 16 threads.
std::int64_t column_chunks(std::int64_t rows, std::int64_t cols) {
  const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 64));
  return std::clamp<std::int64_t>(rows * cols / 32768, 1, most);
}

// Two per-column sums over all rows (the table's column_pair_sums, cpu/kernels.hpp), in double,
// one per column each in s1 and s2. Each chunk of rows sums into its own partial rows, added in
// chunk order at the end, so the result does not depend on the threads.
template <class T>
void column_sums(ColumnPair kind, std::int64_t rows, std::int64_t cols, const T* x, const T* g, const T* ref,
                 const T* row_mean, const T* row_rstd, std::vector<double>& s1, std::vector<double>& s2) {
  const std::int64_t chunks = column_chunks(rows, cols);
  const std::int64_t block_rows =
      std::clamp<std::int64_t>(kBlockElems / std::max<std::int64_t>(cols, 1), 1, kBlockRows);
  const auto ucols = static_cast<std::size_t>(cols);
  std::vector<double> partial(static_cast<std::size_t>(chunks) * ucols * 2, 0.0);
  const auto kernel = typed_kernels<T>().column_pair_sums;
  parallel_parts(static_cast<int>(chunks), [&](int part) {
    const auto k = static_cast<std::int64_t>(part);
    double* p1 = partial.data() + static_cast<std::size_t>(k) * ucols * 2;
    const std::int64_t r0 = rows * k / chunks, r1 = rows * (k + 1) / chunks;
    const std::int64_t at = r0 * cols;
    kernel(kind, x + at, g == nullptr ? nullptr : g + at, ref, row_mean == nullptr ? nullptr : row_mean + r0,
           row_rstd == nullptr ? nullptr : row_rstd + r0, r1 - r0, cols, block_rows, p1, p1 + ucols);
  });
  s1.assign(ucols, 0.0);
  s2.assign(ucols, 0.0);
  for (std::int64_t k = 0; k < chunks; ++k) {
    const double* p1 = partial.data() + static_cast<std::size_t>(k) * ucols * 2;
    for (std::size_t c = 0; c < ucols; ++c) {
      s1[c] += p1[c];
      s2[c] += p1[ucols + c];
    }
  }
}

// Whether an output of n elements of T is written with streaming stores: from 8 MB, twice the
// elementwise kernels' threshold (cpu/kernels.hpp). Measured on batch_norm's passes at 1 thread:
// inference on 16 MB of float32 1.06-1.41 ms streamed, 2.0-2.2 read for ownership; on 8 MB
// 0.37-0.50 against 0.55-1.0; but on 4 MB 0.20 against 0.14, where the next op finds y in cache.
template <class T>
bool streams(std::int64_t n) {
  return static_cast<std::size_t>(n) * sizeof(T) >= 2 * kStreamOutputBytes;
}

// fn(i, r0, r1) over the rows of `slices` consecutive [rows, cols] matrices, split between threads
// by rows and at the matrices' ends: r0 and r1 count rows from the first matrix's first.
template <class F>
void rows_by_slice(std::int64_t slices, std::int64_t rows, std::int64_t cols, F fn) {
  parallel_for(slices * rows, row_grain(cols), [&](std::int64_t b, std::int64_t e) {
    while (b < e) {
      const std::int64_t i = b / rows, end = std::min(e, (i + 1) * rows);
      fn(i, b, end);
      b = end;
    }
  });
}

// y[r, c] = (x[r, c] - center[c]) * scale[c] + offset[c]
template <class T>
void normalize_columns(const T* x, T* y, std::int64_t rows, std::int64_t cols, const T* center,
                       const T* scale, const T* offset) {
  const auto kernel = typed_kernels<T>().batch_norm_rows;
  const bool stream = streams<T>(rows * cols) && x != y;
  parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    kernel(x + r0 * cols, r1 - r0, cols, center, scale, offset, y + r0 * cols, stream);
  });
}

// Batch mean and biased variance of each column. The sums are taken of x minus the first row
// (the "shifted data" algorithm): the shift is a sample, so it lies within a few standard
// deviations of the mean, and sum((x-k)^2)/n - (sum(x-k)/n)^2 loses no digits to cancellation
// even when the mean is far from zero; one pass over x, no second pass for the variance.
template <class T>
void column_moments(const T* x, std::int64_t rows, std::int64_t cols, std::vector<double>& mean,
                    std::vector<double>& var) {
  const T* shift = x;
  std::vector<double> s, q;
  column_sums<T>(ColumnPair::moments, rows, cols, x, nullptr, shift, nullptr, nullptr, s, q);
  const auto n = static_cast<double>(rows);
  mean.resize(s.size());
  var.resize(s.size());
  for (std::size_t c = 0; c < s.size(); ++c) {
    const double dm = s[c] / n;
    mean[c] = static_cast<double>(shift[c]) + dm;
    var[c] = std::max(q[c] / n - dm * dm, 0.0);  // rounding can go below 0; NaN stays NaN
  }
}

}  // namespace

// ---- batch norm ------------------------------------------------------------------------------

template <class T>
void batch_norm_train(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                      const T* moving_mean, const T* moving_variance, double momentum, double epsilon, T* y,
                      T* mean, T* rstd, T* new_moving_mean, T* new_moving_variance) {
  const auto uc = static_cast<std::size_t>(cols);
  const std::vector<T> ga = values_or<T>(gamma, cols, T(1));
  const std::vector<T> be = values_or<T>(beta, cols, T(0));
  std::vector<T> center(uc), scale(uc);
  std::vector<double> bm, bv;
  column_moments<T>(x, rows, cols, bm, bv);
  std::vector<T> var_t(uc);
  for (std::size_t c = 0; c < uc; ++c) {
    mean[c] = static_cast<T>(bm[c]);
    var_t[c] = static_cast<T>(bv[c]);
    const double r = 1.0 / std::sqrt(bv[c] + epsilon);
    rstd[c] = static_cast<T>(r);
    center[c] = mean[c];
    scale[c] = static_cast<T>(static_cast<double>(ga[c]) * r);
  }
  // Keras: moving = moving * momentum + batch * (1 - momentum), with the biased batch
  // variance (keras.ops.moments) for the moving variance too.
  auto update = [&](const T* moving, const T* batch, T* out) {
    if (moving == nullptr) return;
    for (std::size_t c = 0; c < uc; ++c)
      out[c] = static_cast<T>(static_cast<double>(moving[c]) * momentum + static_cast<double>(batch[c]) * (1 - momentum));
  };
  update(moving_mean, mean, new_moving_mean);
  update(moving_variance, var_t.data(), new_moving_variance);
  normalize_columns<T>(x, y, rows, cols, center.data(), scale.data(), be.data());
}

template <class T>
void batch_norm_inference(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                          const T* moving_mean, const T* moving_variance, double epsilon, T* y) {
  const auto uc = static_cast<std::size_t>(cols);
  const std::vector<T> ga = values_or<T>(gamma, cols, T(1));
  const std::vector<T> be = values_or<T>(beta, cols, T(0));
  const std::vector<T> mm = values_or<T>(moving_mean, cols, T(0));
  const std::vector<T> mv = values_or<T>(moving_variance, cols, T(1));
  std::vector<T> center(uc), scale(uc);
  for (std::size_t c = 0; c < uc; ++c) {
    center[c] = mm[c];
    scale[c] = static_cast<T>(static_cast<double>(ga[c]) / std::sqrt(static_cast<double>(mv[c]) + epsilon));
  }
  normalize_columns<T>(x, y, rows, cols, center.data(), scale.data(), be.data());
}

// The kernel evaluates dx = a*g + b*(x - mean) + e with per-channel a, b, e.
template <class T>
void batch_norm_train_backward(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                               const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta) {
  const std::int64_t C = cols, M = rows;
  const T* xp = x;
  const T* gp = dy;
  const T* m = mean;
  const T* rs = rstd;
  const std::vector<T> ga = values_or<T>(gamma, C, T(1));
  std::vector<double> gsum, gxc;  // sum(g), sum(g * (x - mean))
  column_sums<T>(ColumnPair::bn_grad, M, C, xp, gp, m, nullptr, nullptr, gsum, gxc);
  const auto uc = static_cast<std::size_t>(C);
  if (dgamma != nullptr)
    for (std::size_t c = 0; c < uc; ++c) dgamma[c] = static_cast<T>(gxc[c] * static_cast<double>(rs[c]));
  if (dbeta != nullptr)
    for (std::size_t c = 0; c < uc; ++c) dbeta[c] = static_cast<T>(gsum[c]);
  if (dx != nullptr) {
    std::vector<T> a(uc), b(uc), e(uc);
    const auto n = static_cast<double>(M);
    for (std::size_t c = 0; c < uc; ++c) {
      const double r = rs[c], ac = static_cast<double>(ga[c]) * r;
      a[c] = static_cast<T>(ac);
      b[c] = static_cast<T>(-ac * r * r * gxc[c] / n);
      e[c] = static_cast<T>(-ac * gsum[c] / n);
    }
    const auto kernel = typed_kernels<T>().batch_norm_grad_rows;
    const bool stream = streams<T>(M * C);
    parallel_for(M, row_grain(C), [&](std::int64_t r0, std::int64_t r1) {
      kernel(xp + r0 * C, gp + r0 * C, r1 - r0, C, m, a.data(), b.data(), e.data(), dx + r0 * C, stream);
    });
  }
}

// ---- layer norm ----------------------------------------------------------------------------------

// Per row: mean and 1/sqrt(var + eps) (two passes over the row, which is in cache after the
// first), then y = (x - mean) * rstd * gamma + beta: the kernel table's layer_norm_rows.
template <class T>
void layer_norm(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma_in, const T* beta_in,
                double epsilon, T* y, T* mean_out, T* rstd_out) {
  if (cols == 0) return;
  const std::vector<T> ga = values_or<T>(gamma_in, cols, T(1));
  const std::vector<T> be = values_or<T>(beta_in, cols, T(0));
  const auto kernel = typed_kernels<T>().layer_norm_rows;
  parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    kernel(x + r0 * cols, r1 - r0, cols, ga.data(), be.data(), epsilon, y + r0 * cols, mean_out + r0, rstd_out + r0);
  });
}

template <class T>
void layer_norm_backward(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                         const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta) {
  const T* xp = x;
  const T* gp = dy;
  const T* mp = mean;
  const T* rp = rstd;
  if (dx != nullptr) {
    const std::vector<T> ga = values_or<T>(gamma, cols, T(1));
    const auto kernel = typed_kernels<T>().layer_norm_grad_rows;
    parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
      kernel(x + r0 * cols, dy + r0 * cols, r1 - r0, cols, ga.data(), mean + r0, rstd + r0, dx + r0 * cols);
    });
  }
  if (dgamma != nullptr || dbeta != nullptr) {
    std::vector<double> dg, db;
    column_sums<T>(ColumnPair::ln_grad, rows, cols, xp, gp, nullptr, mp, rp, dg, db);
    if (dgamma != nullptr) std::copy(dg.begin(), dg.end(), dgamma);
    if (dbeta != nullptr) std::copy(db.begin(), db.end(), dbeta);
  }
}

// ---- moments ----------------------------------------------------------------------------------

// Over the middle axis of [outer, rows, inner]: rows of a contiguous run (inner 1) take the kernel
// table's row_moments; otherwise each of the outer slices is a [rows, inner] matrix whose columns
// take batch_norm's column_moments (one pass, shifted data).
template <class T>
void moments(const T* x, std::int64_t outer, std::int64_t rows, std::int64_t inner, T* mean, T* variance) {
  const std::int64_t stats = outer * inner;
  if (rows == 0) {  // the mean of nothing, as reduce_mean gives it
    std::fill(mean, mean + stats, std::numeric_limits<T>::quiet_NaN());
    std::fill(variance, variance + stats, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  if (inner == 1) {
    const auto kernel = typed_kernels<T>().row_moments;
    parallel_for(outer, row_grain(rows), [&](std::int64_t r0, std::int64_t r1) {
      kernel(x + r0 * rows, r1 - r0, rows, mean + r0, variance + r0);
    });
    return;
  }
  const std::int64_t slice = rows * inner;
  parallel_for(outer, row_grain(slice), [&](std::int64_t o0, std::int64_t o1) {
    std::vector<double> m, v;
    for (std::int64_t o = o0; o < o1; ++o) {
      column_moments<T>(x + o * slice, rows, inner, m, v);
      for (std::int64_t i = 0; i < inner; ++i) {
        mean[o * inner + i] = static_cast<T>(m[static_cast<std::size_t>(i)]);
        variance[o * inner + i] = static_cast<T>(v[static_cast<std::size_t>(i)]);
      }
    }
  });
}

// dx = (x - mean) * (2 g_var / rows) + g_mean / rows, the two factors per statistic in double
// rounded to T: the table's row_affine over rows of a contiguous run (inner 1), else
// batch_norm_rows over [rows, inner] matrices.
template <class T>
void moments_backward(const T* x, std::int64_t outer, std::int64_t rows, std::int64_t inner, const T* mean,
                      const T* g_mean, const T* g_var, T* dx) {
  const std::int64_t stats = outer * inner;
  const auto n = static_cast<double>(rows);
  std::vector<T> scale(static_cast<std::size_t>(stats)), offset(scale.size());
  for (std::size_t k = 0; k < scale.size(); ++k) {
    scale[k] = static_cast<T>(2.0 * static_cast<double>(g_var[k]) / n);
    offset[k] = static_cast<T>(static_cast<double>(g_mean[k]) / n);
  }
  const bool stream = streams<T>(outer * rows * inner);
  if (inner == 1) {
    const auto kernel = typed_kernels<T>().row_affine;
    parallel_for(outer, row_grain(rows), [&](std::int64_t r0, std::int64_t r1) {
      kernel(x + r0 * rows, r1 - r0, rows, mean + r0, scale.data() + r0, offset.data() + r0, dx + r0 * rows, stream);
    });
    return;
  }
  const auto kernel = typed_kernels<T>().batch_norm_rows;
  rows_by_slice(outer, rows, inner, [&](std::int64_t o, std::int64_t r0, std::int64_t r1) {
    kernel(x + r0 * inner, r1 - r0, inner, mean + o * inner, scale.data() + o * inner, offset.data() + o * inner,
           dx + r0 * inner, stream);
  });
}

// ---- group norm -------------------------------------------------------------------------------

// Each image is a [hw, c] matrix; its per-channel sums come from batch_norm's column_sums and a
// group's statistics from its channels' (they hold hw elements each). The statistics run over the
// images in parallel (one image's rows split between threads when there are few), then one pass
// over every row normalises it with its image's per-channel center and scale.
template <class T>
void group_norm(const T* x, std::int64_t n, std::int64_t hw, std::int64_t c, std::int64_t groups, const T* gamma,
                const T* beta, double epsilon, T* y, T* mean, T* rstd) {
  if (hw == 0) {  // images without pixels: no y to write, the statistics of nothing
    std::fill(mean, mean + n * groups, std::numeric_limits<T>::quiet_NaN());
    std::fill(rstd, rstd + n * groups, std::numeric_limits<T>::quiet_NaN());
    return;
  }
  const std::int64_t cg = c / groups;
  const auto uc = static_cast<std::size_t>(c);
  const std::vector<T> ga = values_or<T>(gamma, c, T(1)), be = values_or<T>(beta, c, T(0));
  std::vector<T> center(static_cast<std::size_t>(n) * uc), scale(center.size());
  parallel_for(n, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(hw * c, 1)),
               [&](std::int64_t i0, std::int64_t i1) {
    std::vector<double> cm, cv;
    for (std::int64_t i = i0; i < i1; ++i) {
      column_moments<T>(x + i * hw * c, hw, c, cm, cv);
      for (std::int64_t g = 0; g < groups; ++g) {
        // The channels' means and variances (hw elements each) combined: the mean of the means,
        // and the mean of (variance + (channel mean - group mean)^2).
        double mu = 0, var = 0;
        for (std::int64_t k = g * cg; k < (g + 1) * cg; ++k) mu += cm[static_cast<std::size_t>(k)];
        mu /= static_cast<double>(cg);
        for (std::int64_t k = g * cg; k < (g + 1) * cg; ++k) {
          const double d = cm[static_cast<std::size_t>(k)] - mu;
          var += cv[static_cast<std::size_t>(k)] + d * d;
        }
        var /= static_cast<double>(cg);
        const double r = 1.0 / std::sqrt(var + epsilon);
        mean[i * groups + g] = static_cast<T>(mu);
        rstd[i * groups + g] = static_cast<T>(r);
        for (std::int64_t k = g * cg; k < (g + 1) * cg; ++k) {
          const std::size_t at = static_cast<std::size_t>(i) * uc + static_cast<std::size_t>(k);
          center[at] = static_cast<T>(mu);
          scale[at] = static_cast<T>(r * static_cast<double>(ga[static_cast<std::size_t>(k)]));
        }
      }
    }
  });
  const auto kernel = typed_kernels<T>().batch_norm_rows;
  const bool stream = streams<T>(n * hw * c) && x != y;
  rows_by_slice(n, hw, c, [&](std::int64_t i, std::int64_t r0, std::int64_t r1) {
    kernel(x + r0 * c, r1 - r0, c, center.data() + i * c, scale.data() + i * c, be.data(), y + r0 * c, stream);
  });
}

// With h = dy * gamma, xhat = (x - mean) * rstd and the group means of h and h * xhat over its
// m = hw * c / groups elements: dx = rstd * (h - mean(h) - xhat * mean(h * xhat)), as batch norm's
// dx = a * dy + b * (x - mean) + e with per-channel a = rstd * gamma, b = -rstd^3 * sum(h * (x -
// mean)) / m, e = -rstd * sum(h) / m; dgamma = sum(dy * xhat), dbeta = sum(dy) over every image,
// added in image order.
template <class T>
void group_norm_backward(const T* x, const T* dy, std::int64_t n, std::int64_t hw, std::int64_t c,
                         std::int64_t groups, const T* gamma, const T* mean, const T* rstd, T* dx, T* dgamma,
                         T* dbeta) {
  if (hw == 0) {  // sums over nothing
    if (dgamma != nullptr) std::fill(dgamma, dgamma + c, T(0));
    if (dbeta != nullptr) std::fill(dbeta, dbeta + c, T(0));
    return;
  }
  const std::int64_t cg = c / groups;
  const auto uc = static_cast<std::size_t>(c);
  const std::vector<T> ga = values_or<T>(gamma, c, T(1));
  // Per image and channel: sum(dy), sum(dy * (x - mean)), and dx's center, a, b and e.
  std::vector<double> gsum(static_cast<std::size_t>(n) * uc), gxc(gsum.size());
  std::vector<T> ref(gsum.size()), a(gsum.size()), b(gsum.size()), e(gsum.size());
  const auto m = static_cast<double>(hw * cg);
  parallel_for(n, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(hw * c, 1)),
               [&](std::int64_t i0, std::int64_t i1) {
    std::vector<double> s1, s2;
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::size_t at = static_cast<std::size_t>(i) * uc;
      for (std::int64_t k = 0; k < c; ++k) ref[at + static_cast<std::size_t>(k)] = mean[i * groups + k / cg];
      column_sums<T>(ColumnPair::bn_grad, hw, c, x + i * hw * c, dy + i * hw * c, ref.data() + at, nullptr, nullptr,
                     s1, s2);
      std::copy(s1.begin(), s1.end(), gsum.begin() + static_cast<std::ptrdiff_t>(at));
      std::copy(s2.begin(), s2.end(), gxc.begin() + static_cast<std::ptrdiff_t>(at));
      for (std::int64_t g = 0; g < groups; ++g) {
        double sh = 0, shx = 0;
        for (std::int64_t k = g * cg; k < (g + 1) * cg; ++k) {
          const auto uk = static_cast<std::size_t>(k);
          sh += static_cast<double>(ga[uk]) * s1[uk];
          shx += static_cast<double>(ga[uk]) * s2[uk];
        }
        const double r = rstd[i * groups + g];
        for (std::int64_t k = g * cg; k < (g + 1) * cg; ++k) {
          const auto uk = static_cast<std::size_t>(k);
          a[at + uk] = static_cast<T>(r * static_cast<double>(ga[uk]));
          b[at + uk] = static_cast<T>(-r * r * r * shx / m);
          e[at + uk] = static_cast<T>(-r * sh / m);
        }
      }
    }
  });
  if (dx != nullptr) {
    const auto kernel = typed_kernels<T>().batch_norm_grad_rows;
    const bool stream = streams<T>(n * hw * c);
    rows_by_slice(n, hw, c, [&](std::int64_t i, std::int64_t r0, std::int64_t r1) {
      const std::int64_t at = i * c;
      kernel(x + r0 * c, dy + r0 * c, r1 - r0, c, ref.data() + at, a.data() + at, b.data() + at, e.data() + at,
             dx + r0 * c, stream);
    });
  }
  for (std::size_t k = 0; k < uc; ++k) {
    double dg = 0, db = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t at = static_cast<std::size_t>(i) * uc + k;
      dg += gxc[at] * static_cast<double>(rstd[i * groups + static_cast<std::int64_t>(k) / cg]);
      db += gsum[at];
    }
    if (dgamma != nullptr) dgamma[k] = static_cast<T>(dg);
    if (dbeta != nullptr) dbeta[k] = static_cast<T>(db);
  }
}

#define KEEL_NORMALIZATION_KERNELS(T)                                                                         \
  template void batch_norm_train<T>(const T*, std::int64_t, std::int64_t, const T*, const T*, const T*,       \
                                    const T*, double, double, T*, T*, T*, T*, T*);                            \
  template void batch_norm_inference<T>(const T*, std::int64_t, std::int64_t, const T*, const T*, const T*,   \
                                        const T*, double, T*);                                                \
  template void batch_norm_train_backward<T>(const T*, const T*, std::int64_t, std::int64_t, const T*,        \
                                             const T*, const T*, T*, T*, T*);                                 \
  template void layer_norm<T>(const T*, std::int64_t, std::int64_t, const T*, const T*, double, T*, T*, T*);  \
  template void layer_norm_backward<T>(const T*, const T*, std::int64_t, std::int64_t, const T*, const T*,    \
                                       const T*, T*, T*, T*);                                                 \
  template void moments<T>(const T*, std::int64_t, std::int64_t, std::int64_t, T*, T*);                      \
  template void group_norm<T>(const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*,     \
                              const T*, double, T*, T*, T*);                                                  \
  template void group_norm_backward<T>(const T*, const T*, std::int64_t, std::int64_t, std::int64_t,          \
                                       std::int64_t, const T*, const T*, const T*, T*, T*, T*);               \
  template void moments_backward<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const T*, const T*,   \
                                    const T*, T*);
KEEL_NORMALIZATION_KERNELS(float)
KEEL_NORMALIZATION_KERNELS(double)
#undef KEEL_NORMALIZATION_KERNELS

}  // namespace keel::cpu
