#pragma once
// Kernel bodies written once against xsimd's batch type; each arch TU instantiates them.
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/simd/batch_norm_impl.hpp"
#include "cpu/simd/box_muller_impl.hpp"
#include "cpu/simd/kernels_math_impl.hpp"
#include "cpu/simd/nan_minmax.hpp"
#include "cpu/simd/normalization_impl.hpp"
#include "cpu/simd/optimizer_impl.hpp"
#include "cpu/simd/philox_impl.hpp"
#include "cpu/simd/pooling_impl.hpp"
#include "cpu/simd/program_impl.hpp"
#include "cpu/simd/recurrent_impl.hpp"
#include "cpu/simd/store_stream.hpp"

namespace keel::cpu::simd_impl {

// ---- pow with C99's special cases ----------------------------------------------------------------
// xsimd 8.1's pow is exp(y log|x|) with a sign fix: pow(0, y) is 0 for every y (NaN and y < 0
// included), and 0 * inf turns pow(x, 0) with infinite x, pow(1, inf) and pow(-1, inf) into NaN.
// std::pow, CUDA's pow and TensorFlow (Eigen) follow C99 Annex F; so does this, case by case.
template <class B>
inline B pow_c99(const B& x, const B& y) {
  using T = typename B::value_type;
  const B zero(T(0)), one(T(1)), inf(std::numeric_limits<T>::infinity());
  B z = xsimd::pow(x, y);
  // x = +-0 or +-inf: inf when (x = 0, y < 0) or (x = inf, y > 0), else 0; an odd integer y
  // keeps x's sign (pow(-0, -1) = -inf, pow(-inf, 3) = -inf).
  const auto x_zero = x == zero, x_inf = xsimd::isinf(x);
  B edge = xsimd::select((x_zero && y < zero) || (x_inf && y > zero), inf, zero);
  edge = xsimd::select(xsimd::is_odd(y), xsimd::copysign(edge, x), edge);
  z = xsimd::select(x_zero || x_inf, edge, z);
  // A NaN operand gives NaN (xsimd's x = 0 branch above would say 0 for pow(0, NaN)) ...
  z = xsimd::select(xsimd::isnan(x) || xsimd::isnan(y), x + y, z);
  // ... except the two cases C99 defines as 1 for every other operand, NaN included:
  // pow(x, +-0) = 1 and pow(1, y) = 1; and pow(-1, +-inf) = 1.
  return xsimd::select(y == zero || x == one || (x == -one && xsimd::isinf(y)), one, z);
}

// Outputs this large (bytes) bypass the caches with streaming stores: they would evict the
// inputs anyway, and a streaming store skips the read-for-ownership of the destination line,
// saving a third of an elementwise op's memory traffic.
inline constexpr std::size_t kStreamBytes = kStreamOutputBytes;

// Runs body(i) over full batches: with streaming stores when the output is large and does not
// alias an input, after a head that brings y to the batch alignment.
template <class B, class T, class Body, class Tail>
inline std::int64_t run_batches(T* y, std::int64_t n, bool may_stream, Body body, Tail tail_one) {
  constexpr std::int64_t W = B::size;
  std::int64_t i = 0;
  const bool stream = may_stream && static_cast<std::size_t>(n) * sizeof(T) >= kStreamBytes;
  if (!stream) {
    for (; i + W <= n; i += W) body(i, false);
    return i;
  }
  while (i < n && reinterpret_cast<std::uintptr_t>(y + i) % sizeof(B) != 0) tail_one(i++);
  for (; i + W <= n; i += W) body(i, true);
  _mm_sfence();
  return i;
}

// Applies f to full batches, then to the tail through a padded batch so every element goes
// through the same code (no separate scalar path with different rounding).
template <class A, class T, class F>
inline void map_unary(const T* x, T* y, std::int64_t n, F f) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  // Elements one at a time go through a padded batch: the same code as the full batches.
  auto one = [&](std::int64_t k) {
    alignas(64) T buf[W] = {};
    buf[0] = x[k];
    f(B::load_aligned(buf)).store_aligned(buf);
    y[k] = buf[0];
  };
  std::int64_t i = run_batches<B>(y, n, x != y, [&](std::int64_t k, bool stream) {
    const B r = f(B::load_unaligned(x + k));
    if (stream) store_stream(r, y + k); else r.store_unaligned(y + k);
  }, one);
  if (i < n) {
    alignas(64) T buf[W] = {};
    std::memcpy(buf, x + i, sizeof(T) * static_cast<std::size_t>(n - i));
    f(B::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, sizeof(T) * static_cast<std::size_t>(n - i));
  }
}

template <class A, class T, class F>
inline void map_binary(const T* a, std::int64_t sa, const T* b, std::int64_t sb, T* y,
                       std::int64_t n, F f) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  std::int64_t i = 0;
  const bool may_stream = y != a && y != b;
  auto one = [&](std::int64_t k) {
    alignas(64) T ba[W], bb[W];
    for (std::int64_t j = 0; j < W; ++j) {
      ba[j] = a[k * sa];
      bb[j] = b[k * sb];
    }
    f(B::load_aligned(ba), B::load_aligned(bb)).store_aligned(ba);
    y[k] = ba[0];
  };
  auto put = [&](const B& r, std::int64_t k, bool stream) {
    if (stream) store_stream(r, y + k); else r.store_unaligned(y + k);
  };
  if (sa == 1 && sb == 1) {
    i = run_batches<B>(y, n, may_stream, [&](std::int64_t k, bool st) {
      put(f(B::load_unaligned(a + k), B::load_unaligned(b + k)), k, st);
    }, one);
  } else if (sa == 1) {
    const B bs(b[0]);
    i = run_batches<B>(y, n, may_stream, [&](std::int64_t k, bool st) { put(f(B::load_unaligned(a + k), bs), k, st); }, one);
  } else if (sb == 1) {
    const B as(a[0]);
    i = run_batches<B>(y, n, may_stream, [&](std::int64_t k, bool st) { put(f(as, B::load_unaligned(b + k)), k, st); }, one);
  } else {
    const T v = f(B(a[0]), B(b[0])).get(0);
    for (; i < n; ++i) y[i] = v;
    return;
  }
  if (i < n) {
    alignas(64) T ba[W], bb[W];
    for (std::int64_t k = 0; k < W; ++k) {
      ba[k] = i + k < n ? a[(i + k) * sa] : T(1);
      bb[k] = i + k < n ? b[(i + k) * sb] : T(1);
    }
    f(B::load_aligned(ba), B::load_aligned(bb)).store_aligned(ba);
    std::memcpy(y + i, ba, sizeof(T) * static_cast<std::size_t>(n - i));
  }
}

// y[i] = g(x[i], row[i % c]) with the row repeating every c elements (n a multiple of c): a
// bias, or a binary op's operand broadcast over the leading axes. A row shorter than a batch is
// first repeated into a block of lcm(c, W) elements, so that every batch reads its row with one
// load; rows that are whole batches keep y's alignment, and then a large output goes out with
// streaming stores (a kernel call per row decided that per row: [4096, 1024] * [1024] took 2.1x
// as long as the same product with a scalar).
template <class A, class T, class G>
inline void map_repeat(const T* x, const T* row_in, std::int64_t c, T* y, std::int64_t n, G g) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  alignas(64) T repeated[W * W];
  const T* row = row_in;
  std::int64_t len = c;
  if (c < W) {
    while (len % W != 0) len += c;  // lcm(c, W) <= c * W
    for (std::int64_t j = 0; j < len; ++j) repeated[j] = row_in[j % c];
    row = repeated;
  }
  const bool stream = x != y && len % W == 0 && reinterpret_cast<std::uintptr_t>(y) % sizeof(B) == 0 &&
                      static_cast<std::size_t>(n) * sizeof(T) >= kStreamBytes;
  for (std::int64_t o = 0; o < n; o += len) {
    const std::int64_t m = std::min(len, n - o);
    std::int64_t j = 0;
    for (; j + W <= m; j += W) {
      const B r = g(B::load_unaligned(x + o + j), B::load_unaligned(row + j));
      if (stream) store_stream(r, y + o + j); else r.store_unaligned(y + o + j);
    }
    if (j < m) {  // a row's tail through a padded batch: the same code as the full batches
      alignas(64) T bx[W], bb[W];
      std::fill_n(bx, W, T(1));
      std::fill_n(bb, W, T(1));
      std::memcpy(bx, x + o + j, sizeof(T) * static_cast<std::size_t>(m - j));
      std::memcpy(bb, row + j, sizeof(T) * static_cast<std::size_t>(m - j));
      g(B::load_aligned(bx), B::load_aligned(bb)).store_aligned(bx);
      std::memcpy(y + o + j, bx, sizeof(T) * static_cast<std::size_t>(m - j));
    }
  }
  if (stream) _mm_sfence();
}

// y = f(x + bias) with bias repeating every c elements.
template <class A, class T, class F>
inline void map_bias(const T* x, const T* bias, std::int64_t c, T* y, std::int64_t n, F f) {
  using B = xsimd::batch<T, A>;
  map_repeat<A>(x, bias, c, y, n, [&](B v, B b) { return f(v + b); });
}

template <class A, class T>
bool bias_unary(UnaryOp op, bool linear, const T* x, const T* bias, std::int64_t c, T* y, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  if (linear) {
    map_bias<A>(x, bias, c, y, n, [](B v) { return v; });
    return true;
  }
  switch (op) {
    case UnaryOp::relu: map_bias<A>(x, bias, c, y, n, [](B v) { return relu_batch(v); }); return true;
    case UnaryOp::sigmoid: map_bias<A>(x, bias, c, y, n, [](B v) { return sigmoid_batch(v); }); return true;
    case UnaryOp::tanh: map_bias<A>(x, bias, c, y, n, [](B v) { return xsimd::tanh(v); }); return true;
    case UnaryOp::exp: map_bias<A>(x, bias, c, y, n, [](B v) { return xsimd::exp(v); }); return true;
    default: return false;
  }
}

// Calls visit(f) with f the batch function of op (a batch to a batch): the one definition the
// contiguous kernels (unary below) and the fused programs' register blocks (program_impl.hpp)
// both run, so the two agree bit for bit.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_unary(UnaryOp op, T alpha, Visit&& visit) {
  using B = xsimd::batch<T, A>;
  const B zero(T(0)), one(T(1)), half(T(0.5));
  switch (op) {
    case UnaryOp::neg: return visit([](B v) { return -v; });
    case UnaryOp::abs: return visit([](B v) { return xsimd::abs(v); });
    case UnaryOp::sign:
      return visit([=](B v) {
        const B s = xsimd::select(v > zero, one, xsimd::select(v < zero, -one, zero));
        return xsimd::select(xsimd::isnan(v), v, s);  // tf.sign(NaN) is NaN
      });
    case UnaryOp::square: return visit([](B v) { return v * v; });
    case UnaryOp::sqrt: return visit([](B v) { return xsimd::sqrt(v); });
    case UnaryOp::rsqrt: return visit([=](B v) { return one / xsimd::sqrt(v); });
    case UnaryOp::exp: return visit([](B v) { return xsimd::exp(v); });
    case UnaryOp::log: return visit([](B v) { return xsimd::log(v); });
    case UnaryOp::log1p: return visit([](B v) { return xsimd::log1p(v); });
    case UnaryOp::sin: return visit([](B v) { return xsimd::sin(v); });
    case UnaryOp::cos: return visit([](B v) { return xsimd::cos(v); });
    case UnaryOp::tanh: return visit([](B v) { return xsimd::tanh(v); });
    case UnaryOp::sigmoid: return visit([](B v) { return sigmoid_batch(v); });
    case UnaryOp::relu: return visit([](B v) { return relu_batch(v); });  // see relu_batch
    case UnaryOp::relu6: {
      const B six(T(6));
      return visit([=](B v) { return xsimd::min(six, xsimd::max(zero, v)); });
    }
    case UnaryOp::leaky_relu: {
      const B a(alpha);
      return visit([=](B v) { return xsimd::select(v > zero, v, a * v); });
    }
    case UnaryOp::elu: {
      const B a(alpha);
      return visit([=](B v) { return xsimd::select(v > zero, v, a * xsimd::expm1(v)); });
    }
    case UnaryOp::gelu: {
      const B inv_sqrt2(T(0.70710678118654752440));
      return visit([=](B v) { return half * v * (one + xsimd::erf(v * inv_sqrt2)); });
    }
    case UnaryOp::gelu_tanh: {
      const B c(T(0.79788456080286535588)), k(T(0.044715));
      return visit([=](B v) { return half * v * (one + xsimd::tanh(c * (v + k * v * v * v))); });
    }
    case UnaryOp::softplus:
      // max(0, v) keeps a NaN v (max(v, 0) would give 0 and rely on the log1p term for the NaN).
      return visit([=](B v) {
        return xsimd::max(zero, v) + xsimd::log1p(xsimd::exp(-xsimd::abs(v)));
      });
    case UnaryOp::silu: return visit([=](B v) { return v / (one + xsimd::exp(-v)); });
    case UnaryOp::erf: return visit([](B v) { return xsimd::erf(v); });
    case UnaryOp::floor: case UnaryOp::ceil: case UnaryOp::round: case UnaryOp::tan: case UnaryOp::asin:
    case UnaryOp::acos: case UnaryOp::atan: case UnaryOp::sinh: case UnaryOp::cosh: case UnaryOp::asinh:
    case UnaryOp::acosh: case UnaryOp::atanh: case UnaryOp::expm1: case UnaryOp::log2: case UnaryOp::log10:
    case UnaryOp::reciprocal: case UnaryOp::erfc: case UnaryOp::selu: case UnaryOp::softsign:
    case UnaryOp::hard_sigmoid: case UnaryOp::hard_swish: case UnaryOp::mish:
      return with_unary_math<A, T>(op, visit);
  }
}

template <class A, class T>
void unary(UnaryOp op, const T* x, T* y, std::int64_t n, T alpha) {
  with_unary<A>(op, alpha, [&](auto f) { map_unary<A>(x, y, n, f); });
}

// Calls visit(f) with f the batch function of op (two batches to a batch), as with_unary.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_binary(BinaryOp op, Visit&& visit) {
  using B = xsimd::batch<T, A>;
  switch (op) {
    case BinaryOp::add: return visit([](B u, B v) { return u + v; });
    case BinaryOp::sub: return visit([](B u, B v) { return u - v; });
    case BinaryOp::mul: return visit([](B u, B v) { return u * v; });
    case BinaryOp::div: return visit([](B u, B v) { return u / v; });
    case BinaryOp::pow: return visit([](B u, B v) { return pow_c99(u, v); });
    // NaN if either is NaN, like tf.maximum / tf.minimum; ties give u.
    case BinaryOp::maximum: return visit([](B u, B v) { return max_nan(u, v); });
    case BinaryOp::minimum: return visit([](B u, B v) { return min_nan(u, v); });
    case BinaryOp::relu_grad:
      return visit([](B u, B v) {
        return u * xsimd::select(v > B(T(0)), B(T(1)), B(T(0)));
      });
    case BinaryOp::floor_mod: case BinaryOp::floor_div: case BinaryOp::atan2:
      return with_binary_math<A, T>(op, visit);
  }
}

// pow(x, e) for the exponents whose result one correctly rounded operation gives, as NumPy and
// PyTorch special-case them: C99's pow of those exponents is the same value (x * x is exact
// before its one rounding; pow(+-0, -1) = 1 / +-0 = +-inf; pow(-0, 0.5) = +0 and pow(-inf, 0.5)
// = +inf, where sqrt would give -0 and NaN). False for another exponent.
template <class A, class T>
bool pow_exact(const T* x, T e, T* y, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0)), inf(std::numeric_limits<T>::infinity());
  if (e == T(2)) map_unary<A>(x, y, n, [](B v) { return v * v; });
  else if (e == T(1)) map_unary<A>(x, y, n, [](B v) { return v; });
  else if (e == T(0)) map_unary<A>(x, y, n, [=](B) { return one; });
  else if (e == T(-1)) map_unary<A>(x, y, n, [=](B v) { return one / v; });
  else if (e == T(0.5))
    map_unary<A>(x, y, n, [=](B v) { return xsimd::select(v == -inf, inf, xsimd::sqrt(v) + zero); });
  else return false;
  return true;
}

template <class A, class T>
void binary(BinaryOp op, const T* a, std::int64_t sa, const T* b, std::int64_t sb, T* y, std::int64_t n) {
  if (op == BinaryOp::pow && sa == 1 && sb == 0 && pow_exact<A>(a, *b, y, n)) return;
  with_binary<A, T>(op, [&](auto f) { map_binary<A>(a, sa, b, sb, y, n, f); });
}

// y[i] = g(x[i], column[i / c]) (n a multiple of c): a column of one value per row of c, as
// x / reduce_sum(x, -1, keepdims) reads its sums. Rows of at least a batch broadcast their value
// into a register; shorter rows ([N, 4] over [N, 1]: a kernel call per 4 elements took 20x as
// long as a scalar operand) lay out kColumnTileRows rows of values at a time into a cached tile
// and run over it as over a whole operand. A large output goes out with streaming stores.
template <class A, class T, class G>
inline void map_columns(const T* x, const T* column, std::int64_t c, T* y, std::int64_t n, G g) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const std::int64_t rows = n / c;
  const bool aligned = reinterpret_cast<std::uintptr_t>(y) % sizeof(B) == 0;
  const bool stream = x != y && aligned && static_cast<std::size_t>(n) * sizeof(T) >= kStreamBytes;
  // g over m elements of x and v (v[k] the column value of element k), streaming whole batches when
  // the caller's rows keep y's batch alignment.
  const auto run = [&](const T* xs, const auto& v, T* ys, std::int64_t m, bool st) {
    std::int64_t j = 0;
    for (; j + W <= m; j += W) {
      const B r = g(B::load_unaligned(xs + j), v(j));
      if (st) store_stream(r, ys + j); else r.store_unaligned(ys + j);
    }
    if (j < m) {  // the tail through a padded batch: the same code as the full batches
      alignas(64) T bx[W];
      std::fill_n(bx, W, T(1));
      std::memcpy(bx, xs + j, sizeof(T) * static_cast<std::size_t>(m - j));
      g(B::load_aligned(bx), v(j)).store_aligned(bx);
      std::memcpy(ys + j, bx, sizeof(T) * static_cast<std::size_t>(m - j));
    }
  };
  if (c >= W) {
    const bool st = stream && c % W == 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const B v(column[r]);
      run(x + r * c, [&](std::int64_t) { return v; }, y + r * c, c, st);
    }
    if (st) _mm_sfence();
    return;
  }
  // c < W: a tile holds kColumnTileRows rows. Each row's value goes in as one batch at the row's
  // start, in order, so that the next row's batch overwrites what spills past this row's c.
  alignas(64) T tile[(kColumnTileRows + 1) * W];
  for (std::int64_t r0 = 0; r0 < rows; r0 += kColumnTileRows) {
    const std::int64_t r1 = std::min(rows, r0 + kColumnTileRows), m = (r1 - r0) * c;
    for (std::int64_t r = r0; r < r1; ++r) B(column[r]).store_unaligned(tile + (r - r0) * c);
    for (std::int64_t k = m; k < (m + W - 1) / W * W; ++k) tile[k] = T(1);  // the padded tail's lanes
    // A whole tile is a multiple of W elements (kColumnTileRows is), so y stays batch-aligned.
    run(x + r0 * c, [&](std::int64_t j) { return B::load_aligned(tile + j); }, y + r0 * c, m, stream);
  }
  if (stream) _mm_sfence();
}

template <class A, class T>
void binary_repeat(BinaryOp op, const T* x, const T* row, std::int64_t c, bool row_first, T* y, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  with_binary<A, T>(op, [&](auto f) {
    if (row_first) map_repeat<A>(x, row, c, y, n, [&](B v, B r) { return f(r, v); });
    else map_repeat<A>(x, row, c, y, n, f);
  });
}

template <class A, class T>
void binary_columns(BinaryOp op, const T* x, const T* column, std::int64_t c, bool column_first, T* y,
                    std::int64_t n) {
  using B = xsimd::batch<T, A>;
  with_binary<A, T>(op, [&](auto f) {
    if (column_first) map_columns<A>(x, column, c, y, n, [&](B v, B r) { return f(r, v); });
    else map_columns<A>(x, column, c, y, n, f);
  });
}

// Templates on the element type alone are the same symbol in every arch TU: always inlined, so
// that no TU's copy (built for another instruction set) can be the one the linker keeps.
template <class T>
[[gnu::always_inline]] inline T reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return T(0);
    case ReduceOp::prod: return T(1);
    case ReduceOp::max: return -std::numeric_limits<T>::infinity();
    case ReduceOp::min: return std::numeric_limits<T>::infinity();
  }
  return T(0);
}

template <class A, class T, class F>
inline T fold(const T* x, std::int64_t n, T init, F f) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  // Four independent accumulators hide the add latency.
  B acc0(init), acc1(init), acc2(init), acc3(init);
  std::int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    acc0 = f(acc0, B::load_unaligned(x + i));
    acc1 = f(acc1, B::load_unaligned(x + i + W));
    acc2 = f(acc2, B::load_unaligned(x + i + 2 * W));
    acc3 = f(acc3, B::load_unaligned(x + i + 3 * W));
  }
  for (; i + W <= n; i += W) acc0 = f(acc0, B::load_unaligned(x + i));
  acc0 = f(f(acc0, acc1), f(acc2, acc3));
  alignas(64) T lanes[W];
  acc0.store_aligned(lanes);
  B tail(init);
  if (i < n) {
    alignas(64) T buf[W];
    for (std::int64_t k = 0; k < W; ++k) buf[k] = i + k < n ? x[i + k] : init;
    tail = B::load_aligned(buf);
  }
  alignas(64) T tl[W];
  tail.store_aligned(tl);
  T r = init;
  for (std::int64_t k = 0; k < W; ++k) r = f(B(r), B(f(B(lanes[k]), B(tl[k])).get(0))).get(0);
  return r;
}

// Each of `rows` short rows of `cols` folded left to right from the identity, W rows at a time:
// a tile holds their columns transposed (column k of the W rows as one batch), so the W folds run
// side by side (a reduce() call per row of 4 took 44 ns; gathering the columns straight from the
// rows, 1.2-1.8x as long as the tile). A row shorter than a batch gets the bits reduce() gives
// it, at every level.
template <class A, class T, class F>
inline void fold_rows(const T* x, std::int64_t rows, std::int64_t cols, T init, T* y, F f) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size, kTileCols = 64;
  alignas(64) T tile[kTileCols * W];
  const auto fold_tile = [&](B acc, const T* xr, std::int64_t kn) {
    for (std::int64_t l = 0; l < W; ++l)
      for (std::int64_t k = 0; k < kn; ++k) tile[k * W + l] = xr[l * cols + k];
    for (std::int64_t k = 0; k < kn; ++k) acc = f(acc, B::load_aligned(tile + k * W));
    return acc;
  };
  const auto block = [&](const T* xr, T* out) {
    B acc(init);
    if (cols <= kTileCols) acc = fold_tile(acc, xr, cols);
    else
      for (std::int64_t k0 = 0; k0 < cols; k0 += kTileCols)
        acc = fold_tile(acc, xr + k0, std::min(kTileCols, cols - k0));
    acc.store_unaligned(out);
  };
  std::int64_t r = 0;
  for (; r + W <= rows; r += W) block(x + r * cols, y + r);
  if (r == rows) return;
  std::vector<T> rest(static_cast<std::size_t>(W * cols), init);  // the last rows, padded
  std::copy(x + r * cols, x + rows * cols, rest.begin());
  alignas(64) T out[W];
  block(rest.data(), out);
  std::copy(out, out + (rows - r), y + r);
}

template <class A, class T>
void reduce_rows(ReduceOp op, const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  using B = xsimd::batch<T, A>;
  const T init = reduce_identity<T>(op);
  switch (op) {
    case ReduceOp::sum: return fold_rows<A>(x, rows, cols, init, y, [](B u, B v) { return u + v; });
    case ReduceOp::prod: return fold_rows<A>(x, rows, cols, init, y, [](B u, B v) { return u * v; });
    case ReduceOp::max: return fold_rows<A>(x, rows, cols, init, y, [](B u, B v) { return max_nan(u, v); });
    case ReduceOp::min: return fold_rows<A>(x, rows, cols, init, y, [](B u, B v) { return min_nan(u, v); });
  }
}

template <class A, class T>
T reduce(ReduceOp op, const T* x, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  const T init = reduce_identity<T>(op);
  switch (op) {
    case ReduceOp::sum: {
      // Blocked: float32 sums of millions of values keep their accuracy.
      constexpr std::int64_t kBlock = 4096;
      if (n <= kBlock) return fold<A>(x, n, init, [](B u, B v) { return u + v; });
      T total = 0;
      for (std::int64_t i = 0; i < n; i += kBlock)
        total += fold<A>(x + i, std::min(kBlock, n - i), init, [](B u, B v) { return u + v; });
      return total;
    }
    case ReduceOp::prod: return fold<A>(x, n, init, [](B u, B v) { return u * v; });
    // A NaN anywhere makes the result NaN (tf.reduce_max): once an accumulator lane holds NaN,
    // max_nan keeps it.
    case ReduceOp::max: return fold<A>(x, n, init, [](B u, B v) { return max_nan(u, v); });
    case ReduceOp::min: return fold<A>(x, n, init, [](B u, B v) { return min_nan(u, v); });
  }
  return init;
}

template <class A, class T>
void accumulate(ReduceOp op, T* acc, const T* x, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  switch (op) {
    case ReduceOp::sum: return map_binary<A>(acc, 1, x, 1, acc, n, [](B u, B v) { return u + v; });
    case ReduceOp::prod: return map_binary<A>(acc, 1, x, 1, acc, n, [](B u, B v) { return u * v; });
    case ReduceOp::max: return map_binary<A>(acc, 1, x, 1, acc, n, [](B u, B v) { return max_nan(u, v); });
    case ReduceOp::min: return map_binary<A>(acc, 1, x, 1, acc, n, [](B u, B v) { return min_nan(u, v); });
  }
}

template <class A, class T>
void stream_copy(const T* x, T* y, std::int64_t n) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  std::int64_t i = 0;
  for (; i < n && reinterpret_cast<std::uintptr_t>(y + i) % sizeof(B) != 0; ++i) y[i] = x[i];
  for (; i + W <= n; i += W) store_stream(B::load_unaligned(x + i), y + i);
  for (; i < n; ++i) y[i] = x[i];
  _mm_sfence();
}

// The first i < n with !(x[i] <= threshold) (a larger value, or a NaN on either side), or n: top_k's
// scan for the next value that may enter its heap, a batch of rejections at a time.
template <class A, class T>
std::int64_t next_above(const T* x, std::int64_t n, T threshold) {
  using B = xsimd::batch<T, A>;
  constexpr std::int64_t W = B::size;
  const B t(threshold);
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W)
    if (xsimd::any(!(B::load_unaligned(x + i) <= t) || !(B::load_unaligned(x + i + W) <= t))) break;
  for (; i < n; ++i)
    if (!(x[i] <= threshold)) return i;
  return n;
}

template <class A>
SimdKernels make_kernels(const char* isa) {
  SimdKernels k;
  k.isa = isa;
  k.f32 = {&unary<A, float>, &binary<A, float>, &reduce<A, float>, &accumulate<A, float>, &stream_copy<A, float>,
           &window_max<A, float>, &window_max_grad<A, float>, &window_max_arg<A, float>,
           &window_arg_grad<A, float>, &window_max_gather<A, float>,
           &window_mean<A, float>, &window_mean_grad<A, float>, &bias_unary<A, float>, &program<A, float>,
           &lstm_gates<A, float>, &lstm_gate_grads<A, float>, &gru_gates<A, float>, &gru_gate_grads<A, float>,
           &layer_norm_rows<A, float>, &layer_norm_grad_rows<A, float>, &column_pair_sums<A, float>,
           &affine_rows<false, A, float>, &batch_norm_grad_rows<A, float>, &dropout_select<A, float>,
           &next_above<A, float>, &row_moments<A, float>, &affine_rows<true, A, float>,
           &binary_repeat<A, float>, &binary_columns<A, float>, &reduce_rows<A, float>};
  k.f64 = {&unary<A, double>, &binary<A, double>, &reduce<A, double>, &accumulate<A, double>, &stream_copy<A, double>,
           &window_max<A, double>, &window_max_grad<A, double>, &window_max_arg<A, double>,
           &window_arg_grad<A, double>, &window_max_gather<A, double>,
           &window_mean<A, double>, &window_mean_grad<A, double>, &bias_unary<A, double>, &program<A, double>,
           &lstm_gates<A, double>, &lstm_gate_grads<A, double>, &gru_gates<A, double>,
           &gru_gate_grads<A, double>, &layer_norm_rows<A, double>, &layer_norm_grad_rows<A, double>,
           &column_pair_sums<A, double>, &affine_rows<false, A, double>, &batch_norm_grad_rows<A, double>,
           &dropout_select<A, double>, &next_above<A, double>, &row_moments<A, double>, &affine_rows<true, A, double>,
           &binary_repeat<A, double>, &binary_columns<A, double>, &reduce_rows<A, double>};
  k.optimizer_update = &optimizer_update<A>;
  k.philox_words = &philox_words<A>;
  k.uniform_floats = &uniform_floats<A>;
  k.box_muller = &box_muller_batches<A>;
  return k;
}

}  // namespace keel::cpu::simd_impl
