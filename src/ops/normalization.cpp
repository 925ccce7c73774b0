// Normalisation: moments, batch_norm, layer_norm.
//
// batch_norm and layer_norm (over trailing axes) are hot paths, so each forward is a fused CPU
// kernel recorded as ONE tape node with the closed-form gradient (the pattern of softmax in
// nn.cpp). Their backward functions come in two forms that compute the same numbers:
//  * no tape is recording the backward itself (the usual first-order case): fused kernels that
//    reuse the statistics saved by the forward;
//  * an outer tape is recording it (second derivatives, gradient penalties): the same formula
//    written with differentiable ops, with the statistics recomputed from x by differentiable ops
//    so the outer tape sees how they depend on x. (The saved statistics were computed by the
//    kernel, so no tape knows where they came from.)
// moments and layer_norm over non-trailing axes are composites of other ops.
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/strided.hpp"
#include "keel/core/config.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

void check_epsilon(double epsilon, const char* op) {
  if (!std::isfinite(epsilon) || epsilon < 0)
    throw ValueError(fmt::format("{}: epsilon must be finite and >= 0, got {}", op, epsilon));
}

std::vector<int> leading_axes(std::int64_t count) {
  std::vector<int> axes(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) axes[static_cast<std::size_t>(i)] = static_cast<int>(i);
  return axes;
}

// reduce_sum over `axes`, where an empty list means "no axis" (reduce_sum's empty list means
// every axis).
Tensor sum_over(const Tensor& t, const std::vector<int>& axes, bool keepdims) {
  return axes.empty() ? t : reduce_sum(t, axes, keepdims);
}

// The values of a small parameter tensor (gamma, beta, statistics) as T, or `fill` repeated
// when it is undefined.
template <class T>
std::vector<T> values_or(const Tensor& t, std::int64_t n, T fill) {
  if (!t.defined()) return std::vector<T>(static_cast<std::size_t>(n), fill);
  const Tensor c = t.contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + n);
}

template <class T>
Tensor vector_tensor(const std::vector<T>& v, const Tensor& like) {
  Tensor t = detail::empty_tensor(Shape{static_cast<std::int64_t>(v.size())}, like.dtype(), like.device());
  std::copy(v.begin(), v.end(), static_cast<T*>(t.raw_data()));
  return t;
}

// ---- CPU kernels on a row-major [rows, cols] matrix ------------------------------------------

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

// Two per-column sums over all rows: elem(r, c, a1, a2) adds element (r, c)'s contributions to
// the accumulators a1 and a2. Results in s1, s2 (double, one per column).
//
// The loops run over strips of W columns, rows inside: the 2 W accumulators of a strip stay
// in registers for the whole block (a row-by-row loop would load and store every accumulator
// for every row, which costs more than the arithmetic when rows are short, as C = 16 is).
template <class T, class Elem>
void column_sums(std::int64_t rows, std::int64_t cols, Elem elem, std::vector<double>& s1,
                 std::vector<double>& s2) {
  constexpr std::int64_t W = 64 / sizeof(T);  // four SSE vectors per accumulator
  const std::int64_t chunks = column_chunks(rows, cols);
  const std::int64_t block_rows = std::clamp<std::int64_t>(kBlockElems / std::max<std::int64_t>(cols, 1), 1, kBlockRows);
  const auto ucols = static_cast<std::size_t>(cols);
  std::vector<double> partial(static_cast<std::size_t>(chunks) * ucols * 2, 0.0);
  [[maybe_unused]] const int nt = std::max(1, config::num_threads());
  [[maybe_unused]] const bool par = nt > 1 && chunks > 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (par)
  for (std::int64_t k = 0; k < chunks; ++k) {
    double* p1 = partial.data() + static_cast<std::size_t>(k) * ucols * 2;
    double* p2 = p1 + ucols;
    const std::int64_t r0 = rows * k / chunks, r1 = rows * (k + 1) / chunks;
    for (std::int64_t b = r0; b < r1; b += block_rows) {
      const std::int64_t e = std::min(r1, b + block_rows);
      std::int64_t c0 = 0;
      for (; c0 + W <= cols; c0 += W) {
        T a1[W] = {}, a2[W] = {};
        for (std::int64_t r = b; r < e; ++r)
#pragma omp simd
          for (std::int64_t j = 0; j < W; ++j) elem(r, c0 + j, a1[j], a2[j]);
        for (std::int64_t j = 0; j < W; ++j) {
          p1[c0 + j] += static_cast<double>(a1[j]);
          p2[c0 + j] += static_cast<double>(a2[j]);
        }
      }
      if (c0 < cols) {  // the last, narrower strip
        const std::int64_t w = cols - c0;
        T a1[W] = {}, a2[W] = {};
        for (std::int64_t r = b; r < e; ++r)
          for (std::int64_t j = 0; j < w; ++j) elem(r, c0 + j, a1[j], a2[j]);
        for (std::int64_t j = 0; j < w; ++j) {
          p1[c0 + j] += static_cast<double>(a1[j]);
          p2[c0 + j] += static_cast<double>(a2[j]);
        }
      }
    }
  }
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

// sum of f(j) for j < n, for a row in cache: 16 independent T lanes (no single long chain of
// dependent additions) over blocks of 1024 elements, the block sums added in double.
template <class T, class F>
double row_sum(std::int64_t n, F f) {
  constexpr std::int64_t L = 16;
  double total = 0;
  for (std::int64_t b = 0; b < n; b += 1024) {
    const std::int64_t e = std::min(n, b + 1024);
    T acc[L] = {};
    std::int64_t j = b;
    for (; j + L <= e; j += L)
#pragma omp simd
      for (std::int64_t k = 0; k < L; ++k) acc[k] += f(j + k);
    T tail = 0;
    for (; j < e; ++j) tail += f(j);
    // Pairwise across the lanes: four dependent steps instead of a chain of sixteen.
    for (std::int64_t w = L / 2; w > 0; w /= 2)
      for (std::int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
    total += static_cast<double>(acc[0]) + static_cast<double>(tail);
  }
  return total;
}

// Rows per parallel task so that a task touches about kParallelGrain elements.
std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, cpu::kParallelGrain / std::max<std::int64_t>(cols, 1));
}

// y[r, c] = (x[r, c] - center[c]) * scale[c] + offset[c]
template <class T>
void normalize_columns(const T* x, T* y, std::int64_t rows, std::int64_t cols, const T* center,
                       const T* scale, const T* offset) {
  cpu::parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - center[c]) * scale[c] + offset[c];
    }
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
  column_sums<T>(rows, cols, [=](std::int64_t r, std::int64_t c, T& a1, T& a2) {
    const T d = x[r * cols + c] - shift[c];
    a1 += d;
    a2 += d * d;
  }, s, q);
  const auto n = static_cast<double>(rows);
  mean.resize(s.size());
  var.resize(s.size());
  for (std::size_t c = 0; c < s.size(); ++c) {
    const double dm = s[c] / n;
    mean[c] = static_cast<double>(shift[c]) + dm;
    var[c] = std::max(q[c] / n - dm * dm, 0.0);  // rounding can go below 0; NaN stays NaN
  }
}

// ---- batch norm ------------------------------------------------------------------------------

// gamma, beta and the moving statistics: [C], x's dtype and device; `required` ones defined.
void check_channel_param(const Tensor& p, const Tensor& x, std::int64_t channels, const char* what,
                         bool required) {
  if (!p.defined()) {
    if (required)
      throw ValueError(fmt::format("batch_norm: {} is required in inference mode (training = false)", what));
    return;
  }
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("batch_norm: {} has dtype {}, x has {}", what, name(p.dtype()), name(x.dtype())));
  detail::check_same_device(p, x, "batch_norm");
  if (p.shape() != Shape{channels})
    throw ShapeError(fmt::format("batch_norm: {} has shape {}, expected [{}] (the last axis of x {})", what,
                                 p.shape().to_string(), channels, x.shape().to_string()));
}

// Closed-form training gradient with fused kernels (the first-order case). With
// xhat = (x - mean) * rstd, per channel over the M rows:
//   dbeta = sum(g),  dgamma = sum(g * xhat),
//   dx = gamma * rstd * (g - dbeta / M - xhat * dgamma / M)
// which the kernel evaluates as dx = a*g + b*(x - mean) + e with per-channel a, b, e.
Grads bn_train_backward_fused(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, const Needs& need) {
  const std::int64_t C = x.shape()[x.rank() - 1];
  const std::int64_t M = C == 0 ? 0 : x.size() / C;
  const Tensor xc = x.contiguous();
  const Tensor gc = dy.contiguous();
  Grads out(5);
  detail::dispatch_float(x.dtype(), "batch_norm", [&]<class T>() {
    const T* xp = xc.data<T>();
    const T* gp = gc.data<T>();
    const std::vector<T> mu = values_or<T>(mean, C, T(0));
    const std::vector<T> rs = values_or<T>(rstd, C, T(1));
    const std::vector<T> ga = values_or<T>(gamma, C, T(1));
    std::vector<double> gsum, gxc;  // sum(g), sum(g * (x - mean))
    const T* m = mu.data();
    column_sums<T>(M, C, [=](std::int64_t r, std::int64_t c, T& a1, T& a2) {
      const T g = gp[r * C + c];
      a1 += g;
      a2 += g * (xp[r * C + c] - m[c]);
    }, gsum, gxc);
    const auto uc = static_cast<std::size_t>(C);
    if (need[1]) {
      std::vector<T> dg(uc);
      for (std::size_t c = 0; c < uc; ++c) dg[c] = static_cast<T>(gxc[c] * static_cast<double>(rs[c]));
      out[1] = vector_tensor(dg, x);
    }
    if (need[2]) {
      std::vector<T> db(uc);
      for (std::size_t c = 0; c < uc; ++c) db[c] = static_cast<T>(gsum[c]);
      out[2] = vector_tensor(db, x);
    }
    if (need[0]) {
      std::vector<T> a(uc), b(uc), e(uc);
      const auto n = static_cast<double>(M);
      for (std::size_t c = 0; c < uc; ++c) {
        const double r = rs[c], ac = static_cast<double>(ga[c]) * r;
        a[c] = static_cast<T>(ac);
        b[c] = static_cast<T>(-ac * r * r * gxc[c] / n);
        e[c] = static_cast<T>(-ac * gsum[c] / n);
      }
      Tensor dx = detail::empty_tensor(x.shape(), x.dtype(), x.device());
      T* dp = static_cast<T*>(dx.raw_data());
      cpu::parallel_for(M, row_grain(C), [&](std::int64_t r0, std::int64_t r1) {
        const T *pa = a.data(), *pb = b.data(), *pe = e.data();
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* xr = xp + r * C;
          const T* gr = gp + r * C;
          T* dr = dp + r * C;
#pragma omp simd
          for (std::int64_t c = 0; c < C; ++c) dr[c] = pa[c] * gr[c] + pb[c] * (xr[c] - m[c]) + pe[c];
        }
      });
      out[0] = dx;
    }
  });
  return out;
}

// The same gradient with differentiable ops and the statistics recomputed from x, for when an
// outer tape records the backward (second derivatives).
Grads bn_train_backward_composite(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                  double epsilon, const Needs& need) {
  const std::int64_t C = x.shape()[x.rank() - 1];
  const std::vector<int> lead = leading_axes(x.rank() - 1);
  const auto n = static_cast<double>(C == 0 ? 0 : x.size() / C);
  const Tensor mean = reduce_mean(x, lead, true);
  const Tensor xc = sub(x, mean);
  const Tensor var = reduce_mean(square(xc), lead, true);
  const Tensor rstd = rsqrt(add(var, scalar_like(var, epsilon)));
  const Tensor xhat = mul(xc, rstd);
  const Tensor gsum = reduce_sum(dy, lead, true);
  const Tensor gx = reduce_sum(mul(dy, xhat), lead, true);
  Grads out(5);
  if (need[0]) {
    const Tensor a = gamma.defined() ? mul(gamma, rstd) : rstd;
    out[0] = mul(a, sub(dy, div(add(gsum, mul(xhat, gx)), scalar_like(gx, n))));
  }
  if (need[1]) out[1] = reshape(gx, Shape{C});
  if (need[2]) out[2] = reshape(gsum, Shape{C});
  return out;
}

// Inference: y = (x - mm) * gamma / sqrt(mv + eps) + beta, an affine map per channel, so its
// gradient is a handful of ops (and differentiable as written).
Grads bn_inference_backward(const Tensor& x, const Tensor& gamma, const Tensor& mm,
                            const Tensor& mv, const Tensor& dy, double epsilon, const Needs& need) {
  const std::vector<int> lead = leading_axes(x.rank() - 1);
  const Tensor rinv = rsqrt(add(mv, scalar_like(mv, epsilon)));
  const Tensor scale = gamma.defined() ? mul(gamma, rinv) : rinv;
  Grads out(5);
  if (need[0]) out[0] = mul(dy, scale);
  Tensor gsum, gxc;
  if (need[2] || need[3]) gsum = reduce_sum(dy, lead);
  if (need[1] || need[4]) gxc = reduce_sum(mul(dy, sub(x, mm)), lead);  // sum(g * (x - mm))
  if (need[1]) out[1] = mul(gxc, rinv);
  if (need[2]) out[2] = gsum;
  if (need[3]) out[3] = neg(mul(gsum, scale));
  // d/dv (v + eps)^(-1/2) = -(v + eps)^(-3/2) / 2
  if (need[4]) out[4] = mul(mul(gxc, scale), mul(square(rinv), scalar_like(rinv, -0.5)));
  return out;
}

}  // namespace

// ---- moments -----------------------------------------------------------------------------------

std::pair<Tensor, Tensor> moments(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::check_float(x, "moments", "x");
  const std::vector<int> ax = detail::normalize_axes(axes, x.rank(), "moments");
  const Tensor mean = reduce_mean(x, ax, true);
  // Biased variance, as tf.nn.moments. No stop_gradient on the mean (TensorFlow has one): the
  // first derivative is the same either way, but the second is only right without it.
  const Tensor var = reduce_mean(square(sub(x, mean)), ax, keepdims);
  if (keepdims) return {mean, var};
  return {reshape(mean, var.shape()), var};
}

// ---- batch norm ----------------------------------------------------------------------------------

namespace {
// Batch norm written with ops, for the GPU: the moments are two reductions per channel and the
// normalisation one broadcasting kernel per op; the gradients come from the ops. The same
// formulas as the fused CPU kernel below (biased batch variance, Keras' momentum rule).
BatchNormResult batch_norm_composite(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& moving_mean, const Tensor& moving_variance, bool training,
                                     double momentum, double epsilon) {
  std::vector<int> batch_axes;
  for (int d = 0; d + 1 < x.rank(); ++d) batch_axes.push_back(d);
  BatchNormResult result;
  Tensor center, var;
  if (training) {
    std::tie(center, var) = moments(x, batch_axes);
    autograd::NoRecordScope no_record;  // the moving statistics carry no gradient
    const auto update = [&](const Tensor& moving, const Tensor& batch) {
      if (!moving.defined()) return Tensor();
      return add(mul(moving, scalar_like(moving, momentum)), mul(batch, scalar_like(batch, 1 - momentum)));
    };
    result.moving_mean = update(moving_mean, center);
    result.moving_variance = update(moving_variance, var);
  } else {
    center = moving_mean.defined() ? moving_mean : Tensor();
    var = moving_variance;
    result.moving_mean = moving_mean;
    result.moving_variance = moving_variance;
  }
  Tensor scale = rsqrt(add(var, scalar_like(var, epsilon)));
  if (gamma.defined()) scale = mul(scale, gamma);
  Tensor y = mul(center.defined() ? sub(x, center) : x, scale);
  if (beta.defined()) y = add(y, beta);
  result.y = y;
  return result;
}
}  // namespace

BatchNormResult batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& moving_mean, const Tensor& moving_variance, bool training,
                           double momentum, double epsilon) {
  constexpr const char* op = "batch_norm";
  detail::check_float(x, op, "x");
  if (x.rank() < 2)
    throw ValueError(fmt::format("batch_norm: x must have rank >= 2 (batch..., channels), got shape {}",
                                 x.shape().to_string()));
  const std::int64_t C = x.shape()[x.rank() - 1];
  std::int64_t M = 1;
  for (std::int64_t d = 0; d + 1 < x.rank(); ++d) M *= x.shape()[d];
  check_channel_param(gamma, x, C, "gamma", false);
  check_channel_param(beta, x, C, "beta", false);
  check_channel_param(moving_mean, x, C, "moving_mean", !training);
  check_channel_param(moving_variance, x, C, "moving_variance", !training);
  check_epsilon(epsilon, op);
  if (!std::isfinite(momentum) || momentum < 0 || momentum > 1)
    throw ValueError(fmt::format("batch_norm: momentum must be in [0, 1], got {}", momentum));
  if (training && M == 0)
    throw ValueError(fmt::format("batch_norm: no batch statistics for an empty batch: x has shape {}",
                                 x.shape().to_string()));

  if (x.device().is_cuda())
    return batch_norm_composite(x, gamma, beta, moving_mean, moving_variance, training, momentum, epsilon);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  BatchNormResult result;
  Tensor mean, rstd;  // [C], the batch statistics the training backward reuses
  detail::dispatch_float(x.dtype(), op, [&]<class T>() {
    const T* xp = xc.data<T>();
    const auto uc = static_cast<std::size_t>(C);
    const std::vector<T> ga = values_or<T>(gamma, C, T(1));
    const std::vector<T> be = values_or<T>(beta, C, T(0));
    std::vector<T> center(uc), scale(uc);
    if (training) {
      std::vector<double> bm, bv;
      column_moments<T>(xp, M, C, bm, bv);
      std::vector<T> mean_t(uc), var_t(uc), rstd_t(uc);
      for (std::size_t c = 0; c < uc; ++c) {
        mean_t[c] = static_cast<T>(bm[c]);
        var_t[c] = static_cast<T>(bv[c]);
        const double r = 1.0 / std::sqrt(bv[c] + epsilon);
        rstd_t[c] = static_cast<T>(r);
        center[c] = mean_t[c];
        scale[c] = static_cast<T>(static_cast<double>(ga[c]) * r);
      }
      mean = vector_tensor(mean_t, x);
      rstd = vector_tensor(rstd_t, x);
      // Keras: moving = moving * momentum + batch * (1 - momentum), with the biased batch
      // variance (keras.ops.moments) for the moving variance too.
      auto update = [&](const Tensor& moving, const std::vector<T>& batch) {
        if (!moving.defined()) return Tensor();
        std::vector<T> m = values_or<T>(moving, C, T(0));
        for (std::size_t c = 0; c < uc; ++c)
          m[c] = static_cast<T>(static_cast<double>(m[c]) * momentum + static_cast<double>(batch[c]) * (1 - momentum));
        return vector_tensor(m, x);
      };
      result.moving_mean = update(moving_mean, mean_t);
      result.moving_variance = update(moving_variance, var_t);
    } else {
      const std::vector<T> mm = values_or<T>(moving_mean, C, T(0));
      const std::vector<T> mv = values_or<T>(moving_variance, C, T(1));
      for (std::size_t c = 0; c < uc; ++c) {
        center[c] = mm[c];
        scale[c] = static_cast<T>(static_cast<double>(ga[c]) / std::sqrt(static_cast<double>(mv[c]) + epsilon));
      }
      result.moving_mean = moving_mean;
      result.moving_variance = moving_variance;
    }
    normalize_columns<T>(xp, static_cast<T*>(y.raw_data()), M, C, center.data(), scale.data(), be.data());
  });
  result.y = y;

  if (autograd::recording()) {
    const std::vector<Tensor> inputs{x, gamma, beta, moving_mean, moving_variance};
    if (training) {
      autograd::record(op, inputs, {y}, [x, gamma, mean, rstd, epsilon](const Grads& g, const Needs& n) {
        if (autograd::recording()) return bn_train_backward_composite(x, gamma, g[0], epsilon, n);
        return bn_train_backward_fused(x, gamma, mean, rstd, g[0], n);
      }, {x, gamma});
    } else {
      autograd::record(op, inputs, {y},
                       [x, gamma, moving_mean, moving_variance, epsilon](const Grads& g, const Needs& n) {
                         return bn_inference_backward(x, gamma, moving_mean, moving_variance, g[0], epsilon, n);
                       },
                       {x, gamma, moving_mean, moving_variance});
    }
  }
  return result;
}

// ---- layer norm ----------------------------------------------------------------------------------

namespace {

// Rows handled together by the layer-norm loops: each step (sums, then square roots, then the
// output) runs over the whole group before the next starts, so the long chain of dependent
// operations of one row (sum -> mean -> centred sum -> sqrt -> divide) overlaps with those of
// the other rows instead of stalling every short row. A group stays within L1.
std::int64_t row_group(std::int64_t cols) { return std::clamp<std::int64_t>(4096 / std::max<std::int64_t>(cols, 1), 1, 64); }

// Per row of a [rows, cols] matrix: mean and 1/sqrt(var + eps) (two passes over the row, which
// is in cache after the first), then y = (x - mean) * rstd * gamma + beta.
template <class T>
void layer_norm_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols, const T* gamma,
                     const T* beta, double epsilon, T* mean_out, T* rstd_out) {
  if (cols == 0) return;
  const auto n = static_cast<double>(cols);
  const std::int64_t group = row_group(cols);
  cpu::parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    double mu[64], q[64];
    for (std::int64_t g0 = r0; g0 < r1; g0 += group) {
      const std::int64_t len = std::min(group, r1 - g0);
      for (std::int64_t i = 0; i < len; ++i) {
        const T* xr = x + (g0 + i) * cols;
        mu[i] = row_sum<T>(cols, [xr](std::int64_t j) { return xr[j]; }) / n;
        mean_out[g0 + i] = static_cast<T>(mu[i]);
      }
      for (std::int64_t i = 0; i < len; ++i) {
        const T* xr = x + (g0 + i) * cols;
        const T m = mean_out[g0 + i];
        q[i] = row_sum<T>(cols, [xr, m](std::int64_t j) {
          const T d = xr[j] - m;
          return d * d;
        });
      }
      for (std::int64_t i = 0; i < len; ++i) {
        // Centred on the rounded mean m: sum((x - m)^2) / n = var + (mu - m)^2.
        const double dm = mu[i] - static_cast<double>(mean_out[g0 + i]);
        const double var = std::max(q[i] / n - dm * dm, 0.0);  // NaN stays NaN
        rstd_out[g0 + i] = static_cast<T>(1.0 / std::sqrt(var + epsilon));
      }
      for (std::int64_t i = 0; i < len; ++i) {
        const T* xr = x + (g0 + i) * cols;
        T* yr = y + (g0 + i) * cols;
        const T m = mean_out[g0 + i], rt = rstd_out[g0 + i];
#pragma omp simd
        for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rt * gamma[c] + beta[c];
      }
    }
  });
}

// Closed-form layer-norm gradient with fused loops (the first-order case). Per row, with
// xhat = (x - mean) * rstd and h = g * gamma:
//   dx = rstd * (h - sum(h) / n - xhat * sum(h * xhat) / n)
// and over the rows: dgamma = sum(g * xhat), dbeta = sum(g).
Grads layer_norm_backward_fused(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                const Tensor& mean, const Tensor& rstd, const Tensor& dy,
                                std::int64_t rows, std::int64_t cols, const Needs& need) {
  const Tensor xc = x.contiguous(), gc = dy.contiguous();
  Grads out(3);
  detail::dispatch_float(x.dtype(), "layer_norm", [&]<class T>() {
    const T* xp = xc.data<T>();
    const T* gp = gc.data<T>();
    const T* mp = mean.data<T>();
    const T* rp = rstd.data<T>();
    if (need[0]) {
      const std::vector<T> ga = values_or<T>(gamma, cols, T(1));
      const T* gm = ga.data();
      Tensor dx = detail::empty_tensor(x.shape(), x.dtype(), x.device());
      T* dp = static_cast<T*>(dx.raw_data());
      const auto n = static_cast<double>(cols);
      const std::int64_t group = row_group(cols);
      cpu::parallel_for(rows, row_grain(cols), [&](std::int64_t r0, std::int64_t r1) {
        T mean_h[64], mean_hx[64];  // per row of the group: mean(h), mean(h * xhat)
        for (std::int64_t g0 = r0; g0 < r1; g0 += group) {
          const std::int64_t len = std::min(group, r1 - g0);
          for (std::int64_t i = 0; i < len; ++i) {
            const std::int64_t r = g0 + i;
            const T* xr = xp + r * cols;
            const T* gr = gp + r * cols;
            const T m = mp[r], rs = rp[r];
            mean_h[i] = static_cast<T>(row_sum<T>(cols, [=](std::int64_t j) { return gr[j] * gm[j]; }) / n);
            mean_hx[i] = static_cast<T>(
                row_sum<T>(cols, [=](std::int64_t j) { return gr[j] * gm[j] * ((xr[j] - m) * rs); }) / n);
          }
          for (std::int64_t i = 0; i < len; ++i) {
            const std::int64_t r = g0 + i;
            const T* xr = xp + r * cols;
            const T* gr = gp + r * cols;
            T* dr = dp + r * cols;
            const T m = mp[r], rs = rp[r], a = mean_h[i], b = mean_hx[i];
#pragma omp simd
            for (std::int64_t j = 0; j < cols; ++j) dr[j] = rs * (gr[j] * gm[j] - a - (xr[j] - m) * rs * b);
          }
        }
      });
      out[0] = dx;
    }
    if (need[1] || need[2]) {
      std::vector<double> dg, db;
      column_sums<T>(rows, cols, [=](std::int64_t r, std::int64_t c, T& a1, T& a2) {
        const T g = gp[r * cols + c];
        a1 += g * ((xp[r * cols + c] - mp[r]) * rp[r]);
        a2 += g;
      }, dg, db);
      auto as_param = [&](const std::vector<double>& v, const Tensor& p) {
        Tensor t = detail::empty_tensor(p.shape(), x.dtype(), x.device());
        std::copy(v.begin(), v.end(), static_cast<T*>(t.raw_data()));
        return t;
      };
      if (need[1]) out[1] = as_param(dg, gamma);
      if (need[2]) out[2] = as_param(db, beta);
    }
  });
  return out;
}

// gamma/beta of layer_norm: shaped like the normalised axes (`param`), or already in the
// broadcast form (x's rank, 1 on the other axes).
void check_ln_param(const Tensor& p, const Tensor& x, const Shape& param, const Shape& bcast,
                    const char* what) {
  if (!p.defined()) return;
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("layer_norm: {} has dtype {}, x has {}", what, name(p.dtype()), name(x.dtype())));
  detail::check_same_device(p, x, "layer_norm");
  if (p.shape() != param && p.shape() != bcast)
    throw ShapeError(fmt::format("layer_norm: {} has shape {}, expected {} (the normalised axes of x {})", what,
                                 p.shape().to_string(), param.to_string(), x.shape().to_string()));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, std::vector<int> axes,
                  double epsilon) {
  constexpr const char* op = "layer_norm";
  detail::check_float(x, op, "x");
  const std::vector<int> ax = detail::normalize_axes(axes, x.rank(), op, false);
  if (ax.empty()) throw ValueError("layer_norm: axes must name at least one axis");
  check_epsilon(epsilon, op);
  std::vector<std::int64_t> pdims, bdims = x.shape().dims();
  {
    std::size_t k = 0;
    for (std::int64_t d = 0; d < x.rank(); ++d) {
      if (k < ax.size() && ax[k] == d) {
        pdims.push_back(x.shape()[d]);
        ++k;
      } else {
        bdims[static_cast<std::size_t>(d)] = 1;
      }
    }
  }
  const Shape pshape(pdims), bshape(bdims);
  check_ln_param(gamma, x, pshape, bshape, "gamma");
  check_ln_param(beta, x, pshape, bshape, "beta");

  const auto lead_count = static_cast<std::int64_t>(x.rank()) - static_cast<std::int64_t>(ax.size());
  const bool trailing = ax.front() == lead_count;  // sorted and unique, so a trailing block
  if (!trailing || x.device().is_cuda()) {
    // Normalised axes in the middle, or on a GPU: a composite of differentiable ops (there, the
    // moments are reductions and the rest one elementwise kernel per op).
    const auto [mean, var] = moments(x, ax, true);
    Tensor y = mul(sub(x, mean), rsqrt(add(var, scalar_like(var, epsilon))));
    if (gamma.defined()) y = mul(y, reshape(gamma, bshape));
    if (beta.defined()) y = add(y, reshape(beta, bshape));
    return y;
  }

  std::int64_t rows = 1, cols = 1;
  for (std::int64_t d = 0; d < x.rank(); ++d) (d < lead_count ? rows : cols) *= x.shape()[d];
  std::vector<std::int64_t> kept = x.shape().dims();
  for (int a : ax) kept[static_cast<std::size_t>(a)] = 1;
  const Shape kept_shape(kept);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  Tensor mean = detail::empty_tensor(kept_shape, x.dtype(), x.device());
  Tensor rstd = detail::empty_tensor(kept_shape, x.dtype(), x.device());
  detail::dispatch_float(x.dtype(), op, [&]<class T>() {
    const std::vector<T> ga = values_or<T>(gamma, cols, T(1));
    const std::vector<T> be = values_or<T>(beta, cols, T(0));
    layer_norm_rows<T>(xc.data<T>(), static_cast<T*>(y.raw_data()), rows, cols, ga.data(), be.data(), epsilon,
                       static_cast<T*>(mean.raw_data()), static_cast<T*>(rstd.raw_data()));
  });

  if (autograd::recording())
    autograd::record(op, {x, gamma, beta}, {y},
                     [x, gamma, beta, mean, rstd, ax, bshape, epsilon, lead_count, rows, cols](const Grads& g,
                                                                                            const Needs& n) {
                       if (!autograd::recording())
                         return layer_norm_backward_fused(x, gamma, beta, mean, rstd, g[0], rows, cols, n);
                       // An outer tape records this backward: the same formula with differentiable
                       // ops, the statistics recomputed from x.
                       const auto mv = moments(x, ax, true);
                       const Tensor r = rsqrt(add(mv.second, scalar_like(mv.second, epsilon)));
                       const Tensor& dy = g[0];
                       const Tensor xhat = mul(sub(x, mv.first), r);
                       const std::vector<int> lead = leading_axes(lead_count);
                       Grads out(3);
                       if (n[0]) {
                         const Tensor h = gamma.defined() ? mul(dy, reshape(gamma, bshape)) : dy;
                         const Tensor centred = sub(h, reduce_mean(h, ax, true));
                         out[0] = mul(r, sub(centred, mul(xhat, reduce_mean(mul(h, xhat), ax, true))));
                       }
                       if (n[1]) out[1] = reshape(sum_over(mul(dy, xhat), lead, false), gamma.shape());
                       if (n[2]) out[2] = reshape(sum_over(dy, lead, false), beta.shape());
                       return out;
                     },
                     {x, gamma});
  return y;
}

}  // namespace keel
