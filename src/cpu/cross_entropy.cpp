// The fused CPU kernels of the cross-entropies with logits, and softmax over rows.
#include "cpu/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/rows.hpp"
#include "cpu/strided.hpp"

namespace keel::cpu {

namespace {

// Rows of logits go kRowBlock elements at a time (a block of short rows, or one long row), each
// step one kernel call over the block.
constexpr std::int64_t kRowBlock = 4096;

// Runs f(r, row, shift, logsum) for every row of logits [rows, k] in parallel over blocks of rows,
// with log(sum(exp(row))) = shift + logsum: the shift is the row max (the SIMD max, NaN if the
// row has one), so every exponent is <= 0 and the sum (in double) is >= 1. As in TensorFlow's
// SoftmaxCrossEntropyWithLogits kernel (and softmax), the max is taken as it is: a NaN logit
// makes it NaN, and a +inf logit or a row of -inf gives inf - inf; either way the row's loss is
// NaN, as TensorFlow's. (A scalar max loop with its NaN test took 87% of the loss of [4096, 1024];
// a few kernel calls per row of 4, 66 ms for [1048576, 4].)
template <class T, class F>
void for_rows_logsumexp(std::int64_t rows, std::int64_t k, const T* logits, F f) {
  const std::int64_t block = std::max<std::int64_t>(1, kRowBlock / std::max<std::int64_t>(k, 1));
  parallel_for(rows, std::max(block, row_grain(k)), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    std::vector<T> buf(static_cast<std::size_t>(block * k)), shift(static_cast<std::size_t>(block));
    std::vector<double> logsum(static_cast<std::size_t>(block));
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min(block, r1 - b), len = n * k;
      const T* xb = logits + b * k;
      reduce_each_row<T>(ReduceOp::max, xb, n, k, shift.data());
      kern.binary_columns(BinaryOp::sub, xb, shift.data(), k, false, buf.data(), len);
      kern.unary(UnaryOp::exp, buf.data(), buf.data(), len, T(0));
      // The sums in double; a vectorised reduction's setup per row cost more than a short row.
      for (std::int64_t r = 0; r < n; ++r) {
        const T* e = buf.data() + r * k;
        double sum = 0;
        if (k < kShortReduceRow)
          for (std::int64_t j = 0; j < k; ++j) sum += static_cast<double>(e[j]);
        else
#pragma omp simd reduction(+ : sum)
          for (std::int64_t j = 0; j < k; ++j) sum += static_cast<double>(e[j]);
        logsum[static_cast<std::size_t>(r)] = sum;
      }
      typed_kernels<double>().unary(UnaryOp::log, logsum.data(), logsum.data(), n, 0.0);
      for (std::int64_t r = 0; r < n; ++r)
        f(b + r, xb + r * k, shift[static_cast<std::size_t>(r)], logsum[static_cast<std::size_t>(r)]);
    }
  });
}

}  // namespace

template <class T>
void softmax_cross_entropy(std::int64_t rows, std::int64_t k, const T* labels, const T* logits, T* loss) {
  for_rows_logsumexp(rows, k, logits, [=](std::int64_t r, const T* x, T m, double logsum) {
    const T* z = labels + r * k;
    // lse - x_j = logsum - (x_j - m): both terms are small, nothing large cancels. A -inf logit
    // (x_j - m = -inf) counts as the lowest double, so that a zero label still adds 0 and any
    // other gives a term that rounds to an infinite loss; a select of values, which the loop
    // vectorises (a test of the label before the product kept it scalar: 61% of the loss).
    constexpr double lowest = std::numeric_limits<double>::lowest();
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < k; ++j) {
      const double d = static_cast<double>(x[j] - m);
      s += static_cast<double>(z[j]) * (logsum - (d < lowest ? lowest : d));
    }
    loss[r] = static_cast<T>(s);
  });
}

template <class T, class I>
void sparse_softmax_cross_entropy(std::int64_t rows, std::int64_t k, const I* labels, const T* logits, T* loss) {
  for_rows_logsumexp(rows, k, logits, [=](std::int64_t r, const T* x, T m, double logsum) {
    // lse - x[label] = (m - x[label]) + logsum
    loss[r] = static_cast<T>(static_cast<double>(m - x[static_cast<std::int64_t>(labels[r])]) + logsum);
  });
}

// One pass per block instead of the composite's five ops over the whole [rows, k] (softmax, the
// one-hot labels or the label sums, a difference and a product): with the same kernels in the same
// order, so the same bits.
template <class T, class I>
void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t k, const T* logits, const T* g, const T* labels,
                                    const I* ids, T* dx) {
  const std::int64_t block = std::max<std::int64_t>(1, kRowBlock / std::max<std::int64_t>(k, 1));
  parallel_for(rows, std::max(block, row_grain(k)), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    std::vector<T> sums(labels != nullptr ? static_cast<std::size_t>(block) : 0);
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min(block, r1 - b), len = n * k;
      T* d = dx + b * k;
      softmax_rows<T>(n, k, logits + b * k, d, false);  // a block: one part, on this thread
      if (labels != nullptr) {
        const T* z = labels + b * k;
        reduce_each_row<T>(ReduceOp::sum, z, n, k, sums.data());
        kern.binary_columns(BinaryOp::mul, d, sums.data(), k, false, d, len);
        kern.binary(BinaryOp::sub, d, 1, z, 1, d, len);
      } else {
        for (std::int64_t r = 0; r < n; ++r) d[r * k + static_cast<std::int64_t>(ids[b + r])] -= T(1);
      }
      kern.binary_columns(BinaryOp::mul, d, g + b, k, true, d, len);
    }
  });
}

template <class T>
void sigmoid_cross_entropy(std::int64_t n, const T* labels, const T* logits, T* loss) {
  const T* xp = logits;
  const T* zp = labels;
  T* out = loss;
  constexpr std::int64_t kChunk = 1024;  // a stack buffer for the SIMD exp and log1p
  parallel_for(n, kParallelGrain, [&](std::int64_t i0, std::int64_t i1) {
    T buf[kChunk];
    const auto& kern = typed_kernels<T>();
    for (std::int64_t b = i0; b < i1; b += kChunk) {
      const std::int64_t len = std::min(kChunk, i1 - b);
      const T* x = xp + b;
      const T* z = zp + b;
      // max(x, 0) - x z + log(1 + exp(-|x|)): the exponent is never positive, so exp
      // cannot overflow, and log1p keeps the tail accurate when exp(-|x|) is tiny.
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) buf[i] = -std::abs(x[i]);
      kern.unary(UnaryOp::exp, buf, buf, len, T(0));
      kern.unary(UnaryOp::log1p, buf, buf, len, T(0));
      T* o = out + b;
      // (A NaN logit drops out of the max term, but not out of buf = log1p(exp(-|NaN|)) = NaN.)
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) o[i] = (x[i] > T(0) ? x[i] : T(0)) - x[i] * z[i] + buf[i];
    }
  });
}

// The steps of ops/nn.cpp's composite (x minus the row max; exp; divided by the row sum; for
// log_softmax, minus the log of the sum of the exps) with the same SIMD kernels, the max and
// the sum by the reductions that reduce_max and reduce_sum run on a row, but a row at a time
// while it is in L1: the composite made five passes over memory (softmax of [4096, 1024]
// floats 4.2 ms at one thread).
namespace {

// Rows shorter than kShortReduceRow go kRowBlock elements of rows at a time, each step one kernel
// call over the block (reduce_rows, binary_columns): five calls per row of 8 took 85 ms for
// [524288, 8].
template <class T>
void softmax_short_rows(std::int64_t rows, std::int64_t k, const T* x, T* y, bool log) {
  const std::int64_t block = std::max<std::int64_t>(1, kRowBlock / k);
  parallel_for(rows, std::max(block, row_grain(k)), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    std::vector<T> stats(static_cast<std::size_t>(block)), exps(log ? static_cast<std::size_t>(block * k) : 0);
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min(block, r1 - b), len = n * k;
      const T* xb = x + b * k;
      T* yb = y + b * k;
      kern.reduce_rows(ReduceOp::max, xb, n, k, stats.data());
      kern.binary_columns(BinaryOp::sub, xb, stats.data(), k, false, yb, len);
      T* e = log ? exps.data() : yb;
      kern.unary(UnaryOp::exp, yb, e, len, T(0));
      kern.reduce_rows(ReduceOp::sum, e, n, k, stats.data());
      if (log) kern.unary(UnaryOp::log, stats.data(), stats.data(), n, T(0));
      kern.binary_columns(log ? BinaryOp::sub : BinaryOp::div, yb, stats.data(), k, false, yb, len);
    }
  });
}

template <class T>
void softmax_short_rows_backward(std::int64_t rows, std::int64_t k, const T* y, const T* g, T* dx, bool log) {
  const std::int64_t block = std::max<std::int64_t>(1, kRowBlock / k);
  parallel_for(rows, std::max(block, row_grain(k)), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    std::vector<T> sums(static_cast<std::size_t>(block));
    for (std::int64_t b = r0; b < r1; b += block) {
      const std::int64_t n = std::min(block, r1 - b), len = n * k;
      const T* yb = y + b * k;
      const T* gb = g + b * k;
      T* db = dx + b * k;
      if (!log) {
        kern.binary(BinaryOp::mul, gb, 1, yb, 1, db, len);
        kern.reduce_rows(ReduceOp::sum, db, n, k, sums.data());
        kern.binary_columns(BinaryOp::sub, gb, sums.data(), k, false, db, len);
        kern.binary(BinaryOp::mul, yb, 1, db, 1, db, len);
      } else {
        kern.reduce_rows(ReduceOp::sum, gb, n, k, sums.data());
        kern.unary(UnaryOp::exp, yb, db, len, T(0));
        kern.binary_columns(BinaryOp::mul, db, sums.data(), k, false, db, len);
        kern.binary(BinaryOp::sub, gb, 1, db, 1, db, len);
      }
    }
  });
}

}  // namespace

template <class T>
void softmax_rows(std::int64_t rows, std::int64_t k, const T* x, T* y, bool log) {
  if (k < kShortReduceRow) return softmax_short_rows(rows, k, x, y, log);
  parallel_for(rows, row_grain(k), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    std::vector<T> exps(log ? static_cast<std::size_t>(k) : 0);
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * k;
      T* yr = y + r * k;
      const T m = kern.reduce(ReduceOp::max, xr, k);
      kern.binary(BinaryOp::sub, xr, 1, &m, 0, yr, k);
      if (!log) {
        kern.unary(UnaryOp::exp, yr, yr, k, T(0));
        const T s = kern.reduce(ReduceOp::sum, yr, k);
        kern.binary(BinaryOp::div, yr, 1, &s, 0, yr, k);
      } else {
        kern.unary(UnaryOp::exp, yr, exps.data(), k, T(0));
        T s = kern.reduce(ReduceOp::sum, exps.data(), k);
        kern.unary(UnaryOp::log, &s, &s, 1, T(0));
        kern.binary(BinaryOp::sub, yr, 1, &s, 0, yr, k);
      }
    }
  });
}

// The composite gradients of ops/nn.cpp the same way: softmax's y * (g - sum(g * y)), log_softmax's
// g - exp(y) * sum(g), with the same kernels and row sums, a row at a time.
template <class T>
void softmax_rows_backward(std::int64_t rows, std::int64_t k, const T* y, const T* g, T* dx, bool log) {
  if (k < kShortReduceRow) return softmax_short_rows_backward(rows, k, y, g, dx, log);
  parallel_for(rows, row_grain(k), [&](std::int64_t r0, std::int64_t r1) {
    const auto& kern = typed_kernels<T>();
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * k;
      const T* gr = g + r * k;
      T* dr = dx + r * k;
      if (!log) {
        kern.binary(BinaryOp::mul, gr, 1, yr, 1, dr, k);
        const T s = kern.reduce(ReduceOp::sum, dr, k);
        kern.binary(BinaryOp::sub, gr, 1, &s, 0, dr, k);
        kern.binary(BinaryOp::mul, yr, 1, dr, 1, dr, k);
      } else {
        const T s = kern.reduce(ReduceOp::sum, gr, k);
        kern.unary(UnaryOp::exp, yr, dr, k, T(0));
        kern.binary(BinaryOp::mul, dr, 1, &s, 0, dr, k);
        kern.binary(BinaryOp::sub, gr, 1, dr, 1, dr, k);
      }
    }
  });
}

template void softmax_rows_backward<float>(std::int64_t, std::int64_t, const float*, const float*, float*, bool);
template void softmax_rows_backward<double>(std::int64_t, std::int64_t, const double*, const double*, double*, bool);
template void softmax_rows<float>(std::int64_t, std::int64_t, const float*, float*, bool);
template void softmax_rows<double>(std::int64_t, std::int64_t, const double*, double*, bool);
template void softmax_cross_entropy<float>(std::int64_t, std::int64_t, const float*, const float*, float*);
template void softmax_cross_entropy<double>(std::int64_t, std::int64_t, const double*, const double*, double*);
template void sparse_softmax_cross_entropy<float, std::int32_t>(std::int64_t, std::int64_t, const std::int32_t*,
                                                                 const float*, float*);
template void sparse_softmax_cross_entropy<float, std::int64_t>(std::int64_t, std::int64_t, const std::int64_t*,
                                                                 const float*, float*);
template void sparse_softmax_cross_entropy<double, std::int32_t>(std::int64_t, std::int64_t, const std::int32_t*,
                                                                  const double*, double*);
template void sparse_softmax_cross_entropy<double, std::int64_t>(std::int64_t, std::int64_t, const std::int64_t*,
                                                                  const double*, double*);
template void softmax_cross_entropy_backward<float, std::int32_t>(std::int64_t, std::int64_t, const float*,
                                                                   const float*, const float*, const std::int32_t*,
                                                                   float*);
template void softmax_cross_entropy_backward<float, std::int64_t>(std::int64_t, std::int64_t, const float*,
                                                                   const float*, const float*, const std::int64_t*,
                                                                   float*);
template void softmax_cross_entropy_backward<double, std::int32_t>(std::int64_t, std::int64_t, const double*,
                                                                    const double*, const double*,
                                                                    const std::int32_t*, double*);
template void softmax_cross_entropy_backward<double, std::int64_t>(std::int64_t, std::int64_t, const double*,
                                                                    const double*, const double*,
                                                                    const std::int64_t*, double*);
template void sigmoid_cross_entropy<float>(std::int64_t, const float*, const float*, float*);
template void sigmoid_cross_entropy<double>(std::int64_t, const double*, const double*, double*);

}  // namespace keel::cpu
