#pragma once
// The tf.math functions and Keras 3 activations among the unary and binary kernels (the later
// UnaryOp / BinaryOp values): written once against xsimd's batch type like kernels_impl.hpp,
// which includes this header and sends those ops here.
#include <immintrin.h>
#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "cpu/kernels.hpp"

namespace keel::cpu::simd_impl {

// The activations bias_unary fuses (kernels_impl.hpp), defined once for it, unary() and the
// recurrent cells (recurrent_impl.hpp): the same bits each way.
// Always inlined: as templates on the batch alone they were exported symbols, called through the
// PLT once per batch.
// maxps(0, v) is `0 > v ? 0 : v`: one instruction that keeps a NaN v (tf.nn.relu(NaN) is NaN)
// and, like TensorFlow's Eigen max, relu(-0) = -0.
template <class B>
[[gnu::always_inline]] inline B relu_batch(B v) {
  return xsimd::max(B(typename B::value_type(0)), v);
}
template <class B>
[[gnu::always_inline]] inline B sigmoid_batch(B v) {
  const B one(typename B::value_type(1));
  return one / (one + xsimd::exp(-v));
}

// Keras 3's selu constants (keras.activations.selu).
inline constexpr double kSeluAlpha = 1.67326324235437728481704299;
inline constexpr double kSeluScale = 1.05070098735548049341933498;

// TensorFlow's FloorMod of floats (Eigen's google_floor_fmod): fmod, moved by y when it has the
// other sign, so the result takes the divisor's sign. std::fmod is exact; xsimd's fmod is
// x - trunc(x / y) * y, which loses the remainder when x / y rounds.
// Always inlined: a template on T alone is one symbol across the arch TUs (see reduce_identity).
template <class T>
[[gnu::always_inline]] inline T floor_fmod(T x, T y) {
  const T r = std::fmod(x, y);
  return r != T(0) && ((y < T(0)) != (r < T(0))) ? r + y : r;
}

// u - q v rounded once, on the levels with FMA (the 32-byte batches are AVX2+FMA's, the 64-byte
// ones AVX-512's; SSE2 has none: kHasFma is false there). xsimd 8.1's fnma is two roundings on
// AVX-512, so the instructions are named directly.
template <class B>
inline constexpr bool kHasFma = sizeof(B) >= 32;
template <class B>
inline B fnma_once(const B& q, const B& v, const B& u) {
  using T = typename B::value_type;
  if constexpr (sizeof(B) == 64 && std::is_same_v<T, float>) return _mm512_fnmadd_ps(q, v, u);
  else if constexpr (sizeof(B) == 64) return _mm512_fnmadd_pd(q, v, u);
  else if constexpr (std::is_same_v<T, float>) return _mm256_fnmadd_ps(q, v, u);
  else return _mm256_fnmadd_pd(q, v, u);
}

// floor_fmod on a batch. With q = trunc(u / v), u - q v rounded once is fmod's exact remainder
// whenever q is the true truncated quotient, and q is exactly when that remainder lies in
// (-|v|, |v|) with u's sign (the true quotient is the one integer that puts it there; a
// remainder outside cannot round into that range, as it is a multiple of the smaller of the
// operands' last bits). Batches that fail the test (a quotient past the mantissa, inf, NaN, a
// zero divisor) take std::fmod lane by lane.
template <class B>
inline B floor_fmod_batch(const B& u, const B& v) {
  using T = typename B::value_type;
  const B zero(T(0)), one(T(1));
  const B r = fnma_once(xsimd::trunc(u / v), v, u);
  const auto valid = (r == zero || xsimd::copysign(one, r) == xsimd::copysign(one, u)) && xsimd::abs(r) < xsimd::abs(v);
  if (!xsimd::all(valid)) {
    alignas(64) T ua[B::size], va[B::size];
    u.store_aligned(ua);
    v.store_aligned(va);
    for (std::size_t k = 0; k < B::size; ++k) ua[k] = floor_fmod(ua[k], va[k]);
    return B::load_aligned(ua);
  }
  const B t = xsimd::copysign(r, u);  // an exact zero remainder has u's sign, as fmod's
  return xsimd::select(t != zero && xsimd::copysign(one, t) != xsimd::copysign(one, v), t + v, t);
}

// visit(f) with f the batch function of op, for kernels_impl.hpp's with_unary.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_unary_math(UnaryOp op, Visit&& visit) {
  using B = xsimd::batch<T, A>;
  const B zero(T(0)), one(T(1)), three(T(3)), six(T(6));
  // relu6 as kernels_impl.hpp has it: maxps(0, v) keeps a NaN v.
  const auto relu6 = [=](B v) { return xsimd::min(six, xsimd::max(zero, v)); };
  switch (op) {
    // xsimd's SSE2 floor/ceil go through an integer conversion that loses the sign of a zero
    // result (floor(-0.0), ceil(-0.5) must be -0): the result always has the input's sign, so
    // copysign restores it (and leaves NaN NaN).
    case UnaryOp::floor: return visit([](B v) { return xsimd::copysign(xsimd::floor(v), v); });
    case UnaryOp::ceil: return visit([](B v) { return xsimd::copysign(xsimd::ceil(v), v); });
    // nearbyint rounds in the default mode, to nearest with ties to even: tf.math.round.
    case UnaryOp::round:
      return visit([](B v) { return xsimd::copysign(xsimd::nearbyint(v), v); });
    case UnaryOp::tan: return visit([](B v) { return xsimd::tan(v); });
    case UnaryOp::asin: return visit([](B v) { return xsimd::asin(v); });
    case UnaryOp::acos: return visit([](B v) { return xsimd::acos(v); });
    case UnaryOp::atan: return visit([](B v) { return xsimd::atan(v); });
    case UnaryOp::sinh: return visit([](B v) { return xsimd::sinh(v); });
    case UnaryOp::cosh: return visit([](B v) { return xsimd::cosh(v); });
    case UnaryOp::asinh: return visit([](B v) { return xsimd::asinh(v); });
    case UnaryOp::acosh: return visit([](B v) { return xsimd::acosh(v); });
    case UnaryOp::atanh: return visit([](B v) { return xsimd::atanh(v); });
    case UnaryOp::expm1: return visit([](B v) { return xsimd::expm1(v); });
    case UnaryOp::log2: return visit([](B v) { return xsimd::log2(v); });
    case UnaryOp::log10: return visit([](B v) { return xsimd::log10(v); });
    case UnaryOp::reciprocal: return visit([=](B v) { return one / v; });
    case UnaryOp::erfc: return visit([](B v) { return xsimd::erfc(v); });
    case UnaryOp::selu: {
      const B scale(static_cast<T>(kSeluScale)), alpha(static_cast<T>(kSeluAlpha));
      return visit([=](B v) { return scale * xsimd::select(v > zero, v, alpha * xsimd::expm1(v)); });
    }
    // x / (|x| + 1), as TensorFlow's Softsign computes it (so +-inf gives NaN there too).
    case UnaryOp::softsign: return visit([=](B v) { return v / (xsimd::abs(v) + one); });
    case UnaryOp::hard_sigmoid: return visit([=](B v) { return relu6(v + three) / six; });
    case UnaryOp::hard_swish: return visit([=](B v) { return v * (relu6(v + three) / six); });
    case UnaryOp::mish: {
      // tanh(log(1 + e^v)) = m / (m + 2) with m = e^v (e^v + 2): one exp instead of exp, log1p
      // and tanh, with no cancellation for negative v. Past v = 20, m / (m + 2) is 1 in double
      // and float (and m would overflow float past 44), so the result is v.
      const B two(T(2)), big(T(20));
      return visit([=](B v) {
        const B e = xsimd::exp(v), m = e * (e + two);
        return xsimd::select(v > big, v, v * (m / (m + two)));
      });
    }
    default: return;  // the earlier ops live in kernels_impl.hpp
  }
}

// visit(f) with f the batch function of op, for kernels_impl.hpp's with_binary.
template <class A, class T, class Visit>
[[gnu::always_inline]] inline void with_binary_math(BinaryOp op, Visit&& visit) {
  using B = xsimd::batch<T, A>;
  switch (op) {
    case BinaryOp::floor_mod:
      if constexpr (kHasFma<B>) {
        return visit([](B u, B v) { return floor_fmod_batch(u, v); });
      } else {
        // No exact u - q v without FMA: std::fmod lane by lane.
        return visit([](B u, B v) {
          alignas(64) T ua[B::size], va[B::size];
          u.store_aligned(ua);
          v.store_aligned(va);
          for (std::size_t k = 0; k < B::size; ++k) ua[k] = floor_fmod(ua[k], va[k]);
          return B::load_aligned(ua);
        });
      }
    // tf.math.floordiv of floats is floor(x / y) (Eigen's google_floor_div_real).
    case BinaryOp::floor_div:
      return visit([](B u, B v) { return xsimd::copysign(xsimd::floor(u / v), u / v); });
    // xsimd::atan2(y, x) takes the numerator first, as std::atan2. It computes atan(|y / x|), so
    // y / x = 0 / 0 and inf / inf come out NaN: those get C99's values, angles of the signed
    // zeros (0 or pi) and of the diagonals (pi/4 or 3pi/4), with y's sign.
    case BinaryOp::atan2: {
      const B zero(T(0)), one(T(1)), pi(std::numbers::pi_v<T>), quarter(std::numbers::pi_v<T> / 4),
          three_quarters(3 * std::numbers::pi_v<T> / 4);
      return visit([=](B u, B v) {
        const auto x_negative = xsimd::copysign(one, v) < zero;  // -0 included
        B r = xsimd::atan2(u, v);
        r = xsimd::select(u == zero && v == zero, xsimd::copysign(xsimd::select(x_negative, pi, zero), u), r);
        return xsimd::select(xsimd::isinf(u) && xsimd::isinf(v),
                             xsimd::copysign(xsimd::select(x_negative, three_quarters, quarter), u), r);
      });
    }
    default: return;  // the earlier ops live in kernels_impl.hpp
  }
}

}  // namespace keel::cpu::simd_impl
