#pragma once
// The CPU kernels of contiguous runs, compiled once per instruction set (src/cpu/simd/) and
// picked at start-up by what the processor supports (AVX2+FMA, else SSE2).
#include <cstdint>

namespace keel::cpu {

enum class UnaryOp : std::uint8_t {
  neg, abs, sign, square, sqrt, rsqrt, exp, log, log1p, sin, cos, tanh, sigmoid,
  relu, relu6, leaky_relu, elu, gelu, gelu_tanh, softplus, silu, erf,
};
enum class BinaryOp : std::uint8_t { add, sub, mul, div, pow, maximum, minimum };
enum class ReduceOp : std::uint8_t { sum, max, min, prod };

template <class T>
struct TypedKernels {
  // y[i] = op(x[i]); alpha parameterises leaky_relu and elu.
  void (*unary)(UnaryOp op, const T* x, T* y, std::int64_t n, T alpha);
  // y[i] = op(a[i*sa], b[i*sb]) with sa, sb in {0, 1} (0 broadcasts a scalar). y may alias a or b.
  void (*binary)(BinaryOp op, const T* a, std::int64_t sa, const T* b, std::int64_t sb, T* y,
                 std::int64_t n);
  // Reduces x[0..n) to one value.
  T (*reduce)(ReduceOp op, const T* x, std::int64_t n);
  // acc[j] = op(acc[j], x[j]) for j < n (the rows of a leading-axis reduction).
  void (*accumulate)(ReduceOp op, T* acc, const T* x, std::int64_t n);
};

struct SimdKernels {
  const char* isa;  // "avx2+fma" or "sse2"
  TypedKernels<float> f32;
  TypedKernels<double> f64;
};

const SimdKernels& simd();

template <class T> const TypedKernels<T>& typed_kernels();
template <> inline const TypedKernels<float>& typed_kernels<float>() { return simd().f32; }
template <> inline const TypedKernels<double>& typed_kernels<double>() { return simd().f64; }

}  // namespace keel::cpu
