// Elementwise kernels: unary and binary arithmetic, comparisons, logic, where and the float
// tests. One kernel per storage type with the op chosen by a switch inside it (the switch is
// uniform across the grid, so it costs a few instructions, and keeps the number of template
// instances, and compile time, small). The formulas are the CPU kernels' (src/cpu/simd/ and
// src/cpu/elementwise.cpp); float16 and bfloat16 are computed in float32 and rounded once.
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/element_types.cuh"

namespace keel::cuda {

namespace {

using namespace elem;

const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::abs: return "abs";
    case UnaryOp::sign: return "sign";
    case UnaryOp::square: return "square";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::log1p: return "log1p";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::sigmoid: return "sigmoid";
    case UnaryOp::relu: return "relu";
    case UnaryOp::relu6: return "relu6";
    case UnaryOp::leaky_relu: return "leaky_relu";
    case UnaryOp::elu: return "elu";
    case UnaryOp::gelu: return "gelu";
    case UnaryOp::gelu_tanh: return "gelu_tanh";
    case UnaryOp::softplus: return "softplus";
    case UnaryOp::silu: return "silu";
    case UnaryOp::erf: return "erf";
    case UnaryOp::floor: return "floor";
    case UnaryOp::ceil: return "ceil";
    case UnaryOp::round: return "round";
    case UnaryOp::tan: return "tan";
    case UnaryOp::asin: return "asin";
    case UnaryOp::acos: return "acos";
    case UnaryOp::atan: return "atan";
    case UnaryOp::sinh: return "sinh";
    case UnaryOp::cosh: return "cosh";
    case UnaryOp::asinh: return "asinh";
    case UnaryOp::acosh: return "acosh";
    case UnaryOp::atanh: return "atanh";
    case UnaryOp::expm1: return "expm1";
    case UnaryOp::log2: return "log2";
    case UnaryOp::log10: return "log10";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::erfc: return "erfc";
    case UnaryOp::selu: return "selu";
    case UnaryOp::softsign: return "softsign";
    case UnaryOp::hard_sigmoid: return "hard_sigmoid";
    case UnaryOp::hard_swish: return "hard_swish";
    case UnaryOp::mish: return "mish";
  }
  return "unary";
}

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::relu_grad: return "relu_grad";
    case BinaryOp::floor_mod: return "floormod";
    case BinaryOp::floor_div: return "floordiv";
    case BinaryOp::atan2: return "atan2";
  }
  return "binary";
}

// The unary ops integers take (the op layer sends no others for them).
bool integer_unary(UnaryOp op) {
  return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sign || op == UnaryOp::square ||
         op == UnaryOp::relu;
}

// ---- the formulas ------------------------------------------------------------------------------

// The math library functions element_types.cuh does not wrap, with the same no-promotion rule.
#define KEEL_EW_MATH1(name, ffn, dfn)                               \
  __device__ __forceinline__ float name(float v) { return ffn(v); } \
  __device__ __forceinline__ double name(double v) { return dfn(v); }
KEEL_EW_MATH1(m_floor, floorf, floor)
KEEL_EW_MATH1(m_ceil, ceilf, ceil)
KEEL_EW_MATH1(m_rint, rintf, rint)  // to nearest, ties to even: tf.math.round
KEEL_EW_MATH1(m_tan, tanf, tan)
KEEL_EW_MATH1(m_asin, asinf, asin)
KEEL_EW_MATH1(m_acos, acosf, acos)
KEEL_EW_MATH1(m_atan, atanf, atan)
KEEL_EW_MATH1(m_sinh, sinhf, sinh)
KEEL_EW_MATH1(m_cosh, coshf, cosh)
KEEL_EW_MATH1(m_asinh, asinhf, asinh)
KEEL_EW_MATH1(m_acosh, acoshf, acosh)
KEEL_EW_MATH1(m_atanh, atanhf, atanh)
KEEL_EW_MATH1(m_log2, log2f, log2)
KEEL_EW_MATH1(m_log10, log10f, log10)
KEEL_EW_MATH1(m_erfc, erfcf, erfc)
#undef KEEL_EW_MATH1
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float m_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double m_atan2(double a, double b) { return atan2(a, b); }

// max(0, v) as x86's maxps(0, v) computes it on the CPU: `0 > v ? 0 : v`, which keeps a NaN v.
template <class C>
__device__ __forceinline__ C relu_of(C v) {
  return C(0) > v ? C(0) : v;
}

template <class C>
__device__ __forceinline__ C unary_float(UnaryOp op, C v, C alpha) {
  const C zero = C(0), one = C(1), half = C(0.5);
  switch (op) {
    case UnaryOp::neg: return -v;
    case UnaryOp::abs: return m_abs(v);
    case UnaryOp::sign: return v != v ? v : (v > zero ? one : (v < zero ? -one : zero));  // sign(NaN) is NaN
    case UnaryOp::square: return v * v;
    case UnaryOp::sqrt: return m_sqrt(v);
    case UnaryOp::rsqrt: return one / m_sqrt(v);  // correctly rounded, unlike rsqrtf
    case UnaryOp::exp: return m_exp(v);
    case UnaryOp::log: return m_log(v);
    case UnaryOp::log1p: return m_log1p(v);
    case UnaryOp::sin: return m_sin(v);
    case UnaryOp::cos: return m_cos(v);
    case UnaryOp::tanh: return m_tanh(v);
    case UnaryOp::sigmoid: return one / (one + m_exp(-v));
    // The CPU's maxps(0, v) and minps(6, r): NaN stays NaN (tf.nn.relu), relu(-0) = -0.
    case UnaryOp::relu: return relu_of(v);
    case UnaryOp::relu6: return C(6) < relu_of(v) ? C(6) : relu_of(v);
    case UnaryOp::leaky_relu: return v > zero ? v : alpha * v;
    case UnaryOp::elu: return v > zero ? v : alpha * m_expm1(v);
    case UnaryOp::gelu: return half * v * (one + m_erf(v * C(0.70710678118654752440)));
    case UnaryOp::gelu_tanh:
      return half * v * (one + m_tanh(C(0.79788456080286535588) * (v + C(0.044715) * v * v * v)));
    case UnaryOp::softplus:  // stable for large |v|
      return relu_of(v) + m_log1p(m_exp(-m_abs(v)));
    case UnaryOp::silu: return v / (one + m_exp(-v));
    case UnaryOp::erf: return m_erf(v);
    case UnaryOp::floor: return m_floor(v);
    case UnaryOp::ceil: return m_ceil(v);
    case UnaryOp::round: return m_rint(v);
    case UnaryOp::tan: return m_tan(v);
    case UnaryOp::asin: return m_asin(v);
    case UnaryOp::acos: return m_acos(v);
    case UnaryOp::atan: return m_atan(v);
    case UnaryOp::sinh: return m_sinh(v);
    case UnaryOp::cosh: return m_cosh(v);
    case UnaryOp::asinh: return m_asinh(v);
    case UnaryOp::acosh: return m_acosh(v);
    case UnaryOp::atanh: return m_atanh(v);
    case UnaryOp::expm1: return m_expm1(v);
    case UnaryOp::log2: return m_log2(v);
    case UnaryOp::log10: return m_log10(v);
    case UnaryOp::reciprocal: return one / v;
    case UnaryOp::erfc: return m_erfc(v);
    // Keras 3's selu constants (keras.activations.selu).
    case UnaryOp::selu:
      return C(1.05070098735548049341933498) * (v > zero ? v : C(1.67326324235437728481704299) * m_expm1(v));
    case UnaryOp::softsign: return v / (m_abs(v) + one);  // TensorFlow's formula: +-inf gives NaN
    case UnaryOp::hard_sigmoid: {
      const C r = relu_of(v + C(3));
      return (C(6) < r ? C(6) : r) / C(6);
    }
    case UnaryOp::hard_swish: {
      const C r = relu_of(v + C(3));
      return v * ((C(6) < r ? C(6) : r) / C(6));
    }
    case UnaryOp::mish: {  // v tanh(softplus(v)) = v m / (m + 2), m = e^v (e^v + 2), as the CPU
      const C e = m_exp(v), m = e * (e + C(2));
      return v > C(20) ? v : v * (m / (m + C(2)));
    }
  }
  return v;
}

template <class T>
__device__ __forceinline__ bool negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  else return false;  // uint8
}

template <class T>
__device__ __forceinline__ T unary_int(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::neg: return wrap_sub(T(0), x);
    case UnaryOp::abs: return negative(x) ? wrap_sub(T(0), x) : x;
    case UnaryOp::sign: return static_cast<T>(int{x > T(0)} - int{negative(x)});
    case UnaryOp::square: return wrap_mul(x, x);
    case UnaryOp::relu: return x > T(0) ? x : T(0);
    default: return x;
  }
}

template <class C>
__device__ __forceinline__ C apply_unary(UnaryOp op, C v, C alpha) {
  if constexpr (std::is_floating_point_v<C>) return unary_float(op, v, alpha);
  else return unary_int(op, v);
}

template <class C>
__device__ __forceinline__ C binary_float(BinaryOp op, C u, C v) {
  switch (op) {
    case BinaryOp::add: return u + v;
    case BinaryOp::sub: return u - v;
    case BinaryOp::mul: return u * v;
    case BinaryOp::div: return u / v;
    case BinaryOp::pow: return m_pow(u, v);
    case BinaryOp::maximum:  // NaN propagates, like tf.maximum
      return u != u ? u : (v != v ? v : (u >= v ? u : v));
    case BinaryOp::minimum: return u != u ? u : (v != v ? v : (u <= v ? u : v));
    case BinaryOp::relu_grad: return u * (v > C(0) ? C(1) : C(0));
    // TensorFlow's FloorMod of floats: fmod, moved by the divisor when the signs differ.
    case BinaryOp::floor_mod: {
      const C r = m_fmod(u, v);
      return r != C(0) && ((v < C(0)) != (r < C(0))) ? r + v : r;
    }
    case BinaryOp::floor_div: return m_floor(u / v);  // Eigen's google_floor_div_real
    case BinaryOp::atan2: return m_atan2(u, v);
  }
  return u;
}

template <class T>
__device__ __forceinline__ T binary_int(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::add: return wrap_add(a, b);
    case BinaryOp::sub: return wrap_sub(a, b);
    case BinaryOp::mul: return wrap_mul(a, b);
    case BinaryOp::div:
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return wrap_sub(T(0), a);  // lowest / -1 wraps instead of trapping
      }
      return static_cast<T>(a / b);
    case BinaryOp::pow: {
      if constexpr (std::is_signed_v<T>) {
        if (b < T(0)) return a == T(1) ? T(1) : T(0);
      }
      T r = 1, base = a;
      for (T e = b; e > T(0); e = static_cast<T>(e >> 1)) {
        if (e & T(1)) r = wrap_mul(r, base);
        base = wrap_mul(base, base);
      }
      return r;
    }
    case BinaryOp::maximum: return a > b ? a : b;
    case BinaryOp::minimum: return a < b ? a : b;
    case BinaryOp::relu_grad: return b > T(0) ? a : T(0);
    // TensorFlow's FloorDiv / FloorMod of integers (the op layer rejects a zero divisor).
    case BinaryOp::floor_div: {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return wrap_sub(T(0), a);
      }
      const T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
      return r != T(0) && negative(r) != negative(b) ? static_cast<T>(q - T(1)) : q;
    }
    case BinaryOp::floor_mod: {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return T(0);
      }
      const T r = static_cast<T>(a % b);
      return r != T(0) && negative(r) != negative(b) ? wrap_add(r, b) : r;
    }
    case BinaryOp::atan2: return a;  // float only: the op layer sends no integers
  }
  return a;
}

template <class C>
__device__ __forceinline__ C apply_binary(BinaryOp op, C u, C v) {
  if constexpr (std::is_floating_point_v<C>) return binary_float(op, u, v);
  else return binary_int(op, u, v);
}

template <class C>
__device__ __forceinline__ bool apply_compare(int op, C a, C b) {
  switch (op) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    case 3: return a <= b;
    case 4: return a > b;
    default: return a >= b;
  }
}

// ---- kernels -----------------------------------------------------------------------------------

// `vec4`: float32 with x and y contiguous and 16-byte aligned, moved four at a time.
template <class S>
__global__ void __launch_bounds__(kThreads)
    unary_kernel(UnaryOp op, const S* x, S* y, Strided<1> ix, std::int64_t n, double alpha, bool vec4) {
  using C = Compute<S>;
  const C a = static_cast<C>(alpha);
  const std::int64_t first = thread_index(), step = thread_count();
  if constexpr (std::is_same_v<S, float>) {
    if (vec4) {
      const std::int64_t n4 = n / 4;
      const auto* x4 = reinterpret_cast<const float4*>(x);
      auto* y4 = reinterpret_cast<float4*>(y);
      for (std::int64_t i = first; i < n4; i += step) {
        float4 v = x4[i];
        v.x = apply_unary(op, v.x, a);
        v.y = apply_unary(op, v.y, a);
        v.z = apply_unary(op, v.z, a);
        v.w = apply_unary(op, v.w, a);
        y4[i] = v;
      }
      for (std::int64_t i = n4 * 4 + first; i < n; i += step) y[i] = apply_unary(op, x[i], a);
      return;
    }
  }
  for (std::int64_t i = first; i < n; i += step) {
    std::int64_t off[1];
    ix.offsets(i, off);
    Elem<S>::store(y, i, apply_unary(op, Elem<S>::load(x, off[0]), a));
  }
}

// `vec4`: float32 with each input contiguous (step 1) or a scalar (step 0), all aligned.
template <class S>
__global__ void __launch_bounds__(kThreads)
    binary_kernel(BinaryOp op, const S* a, const S* b, S* y, Strided<2> ix, std::int64_t n, bool vec4) {
  const std::int64_t first = thread_index(), step = thread_count();
  if constexpr (std::is_same_v<S, float>) {
    if (vec4) {
      const std::int64_t n4 = n / 4;
      const bool sa = ix.strides[0][0] != 0, sb = ix.strides[1][0] != 0;
      const float a0 = a[0], b0 = b[0];
      for (std::int64_t i = first; i < n4; i += step) {
        const float4 u = sa ? reinterpret_cast<const float4*>(a)[i] : make_float4(a0, a0, a0, a0);
        const float4 v = sb ? reinterpret_cast<const float4*>(b)[i] : make_float4(b0, b0, b0, b0);
        float4 r;
        r.x = binary_float(op, u.x, v.x);
        r.y = binary_float(op, u.y, v.y);
        r.z = binary_float(op, u.z, v.z);
        r.w = binary_float(op, u.w, v.w);
        reinterpret_cast<float4*>(y)[i] = r;
      }
      for (std::int64_t i = n4 * 4 + first; i < n; i += step)
        y[i] = binary_float(op, sa ? a[i] : a0, sb ? b[i] : b0);
      return;
    }
  }
  for (std::int64_t i = first; i < n; i += step) {
    std::int64_t off[2];
    ix.offsets(i, off);
    Elem<S>::store(y, i, apply_binary(op, Elem<S>::load(a, off[0]), Elem<S>::load(b, off[1])));
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    compare_kernel(int op, const S* a, const S* b, std::uint8_t* y, Strided<2> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[2];
    ix.offsets(i, off);
    y[i] = apply_compare(op, Elem<S>::load(a, off[0]), Elem<S>::load(b, off[1])) ? 1 : 0;
  }
}

// op: LogicalOp's value (and, or, xor).
__global__ void __launch_bounds__(kThreads)
    logical_kernel(int op, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                   Strided<2> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[2];
    ix.offsets(i, off);
    const bool u = a[off[0]] != 0, v = b[off[1]] != 0;
    y[i] = (op == 0 ? (u && v) : op == 1 ? (u || v) : (u != v)) ? 1 : 0;
  }
}

__global__ void __launch_bounds__(kThreads)
    logical_not_kernel(const std::uint8_t* x, std::uint8_t* y, Strided<1> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[1];
    ix.offsets(i, off);
    y[i] = x[off[0]] == 0 ? 1 : 0;
  }
}

// where only moves values, so it runs on the unsigned integer of the dtype's width.
template <class W>
__global__ void __launch_bounds__(kThreads)
    where_kernel(const std::uint8_t* cond, const W* a, const W* b, W* y, Strided<3> ix, std::int64_t n) {
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[3];
    ix.offsets(i, off);
    y[i] = cond[off[0]] != 0 ? a[off[1]] : b[off[2]];
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    is_finite_kernel(const S* x, std::uint8_t* y, Strided<1> ix, std::int64_t n, int test) {
  using C = Compute<S>;
  for (std::int64_t i = thread_index(), step = thread_count(); i < n; i += step) {
    std::int64_t off[1];
    ix.offsets(i, off);
    const C v = Elem<S>::load(x, off[0]);
    // |v| <= max is false for NaN and for the infinities; |v| > max only for the infinities.
    const C big = std::numeric_limits<C>::max();
    y[i] = (test == 1 ? v != v : test == 2 ? m_abs(v) > big : m_abs(v) <= big) ? 1 : 0;
  }
}

// ---- host side ---------------------------------------------------------------------------------

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void check_out(const View& out, DType want, const char* op) {
  check_rank(out, op);
  if (out.dtype != want)
    throw DTypeError(std::string(op) + ": output " + describe(out) + " should be " + std::string(name(want)));
  // The kernels write element i of the result at out[i].
  if (!is_contiguous(out)) throw DeviceError(std::string(op) + ": the output view must be contiguous");
}

// The two value operands of binary, compare and where: shaped like `out`, of one dtype.
void check_pair(const View& a, const View& b, const View& out, const char* op) {
  check_operand(a, out, op);
  check_operand(b, out, op);
  if (b.dtype != a.dtype)
    throw DTypeError(std::string(op) + ": operands " + describe(a) + " and " + describe(b) + " differ in dtype");
}

}  // namespace

void unary(UnaryOp op, const View& x, const View& out, double alpha) {
  const char* opname = unary_name(op);
  check_out(out, x.dtype, opname);
  check_operand(x, out, opname);
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[1] = {&x};
  const Strided<1> ix = make_strided<1>(out, ops);
  const int device = out.device;
  auto run = [&](auto tag) {
    using S = typename decltype(tag)::type;
    const bool vec4 = std::is_same_v<S, float> && ix.linear_step(0) == 1 && aligned16(x.data) && aligned16(out.data);
    use_device(device);
    unary_kernel<S><<<blocks_for(vec4 ? (n + 3) / 4 : n, device), kThreads, 0, stream(device)>>>(
        op, static_cast<const S*>(x.data), static_cast<S*>(out.data), ix, n, alpha, vec4);
    check_launch(opname, device);
  };
  const bool ok = integer_unary(op) ? dispatch_numeric(x.dtype, true, run) : dispatch_float(x.dtype, run);
  if (!ok)
    unsupported(opname, x, integer_unary(op) ? "a float or integer dtype" : "float16, bfloat16, float32 or float64");
}

void binary(BinaryOp op, const View& a, const View& b, const View& out) {
  const char* opname = binary_name(op);
  check_out(out, a.dtype, opname);
  check_pair(a, b, out, opname);
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[2] = {&a, &b};
  const Strided<2> ix = make_strided<2>(out, ops);
  const int device = out.device;
  const bool ok = dispatch_numeric(a.dtype, true, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const std::int64_t sa = ix.linear_step(0), sb = ix.linear_step(1);
    const bool vec4 = std::is_same_v<S, float> && (sa == 0 || sa == 1) && (sb == 0 || sb == 1) &&
                      (sa == 0 || aligned16(a.data)) && (sb == 0 || aligned16(b.data)) && aligned16(out.data);
    use_device(device);
    binary_kernel<S><<<blocks_for(vec4 ? (n + 3) / 4 : n, device), kThreads, 0, stream(device)>>>(
        op, static_cast<const S*>(a.data), static_cast<const S*>(b.data), static_cast<S*>(out.data), ix, n, vec4);
    check_launch(opname, device);
  });
  if (!ok) unsupported(opname, a, "a float or integer dtype");
}

void compare(CompareOp kind, const View& a, const View& b, const View& out) {
  static const char* const names[] = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"};
  const int op = static_cast<int>(kind);  // the device code's index, in CompareOp's order
  if (op < 0 || op > 5) throw ValueError("compare: unknown comparison " + std::to_string(op));
  const char* opname = names[op];
  check_out(out, DType::bool_, opname);
  check_pair(a, b, out, opname);
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[2] = {&a, &b};
  const Strided<2> ix = make_strided<2>(out, ops);
  const int device = out.device;
  auto run = [&](auto tag) {
    using S = typename decltype(tag)::type;
    use_device(device);
    compare_kernel<S><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
        op, static_cast<const S*>(a.data), static_cast<const S*>(b.data), static_cast<std::uint8_t*>(out.data), ix, n);
    check_launch(opname, device);
  };
  // bool compares its bytes, as the CPU does.
  if (a.dtype == DType::bool_) run(Tag<std::uint8_t>{});
  else if (!dispatch_numeric(a.dtype, true, run)) unsupported(opname, a, "a float, integer or bool dtype");
}

void logical(LogicalOp op, const View& a, const View& b, const View& out) {
  const int kind = static_cast<int>(op);  // the device code's index, in LogicalOp's order
  const char* opname = op == LogicalOp::and_ ? "logical_and" : op == LogicalOp::or_ ? "logical_or" : "logical_xor";
  check_out(out, DType::bool_, opname);
  check_operand(a, out, opname);
  check_operand(b, out, opname);
  if (a.dtype != DType::bool_) unsupported(opname, a, "bool");
  if (b.dtype != DType::bool_) unsupported(opname, b, "bool");
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[2] = {&a, &b};
  const Strided<2> ix = make_strided<2>(out, ops);
  const int device = out.device;
  use_device(device);
  logical_kernel<<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
      kind, static_cast<const std::uint8_t*>(a.data), static_cast<const std::uint8_t*>(b.data),
      static_cast<std::uint8_t*>(out.data), ix, n);
  check_launch(opname, device);
}

void logical_not(const View& x, const View& out) {
  check_out(out, DType::bool_, "logical_not");
  check_operand(x, out, "logical_not");
  if (x.dtype != DType::bool_) unsupported("logical_not", x, "bool");
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[1] = {&x};
  const Strided<1> ix = make_strided<1>(out, ops);
  const int device = out.device;
  use_device(device);
  logical_not_kernel<<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
      static_cast<const std::uint8_t*>(x.data), static_cast<std::uint8_t*>(out.data), ix, n);
  check_launch("logical_not", device);
}

void where(const View& cond, const View& a, const View& b, const View& out) {
  check_out(out, a.dtype, "where");
  check_operand(cond, out, "where");
  check_pair(a, b, out, "where");
  if (cond.dtype != DType::bool_) unsupported("where", cond, "a bool condition");
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[3] = {&cond, &a, &b};
  const Strided<3> ix = make_strided<3>(out, ops);
  const int device = out.device;
  dispatch_width(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    use_device(device);
    where_kernel<W><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
        static_cast<const std::uint8_t*>(cond.data), static_cast<const W*>(a.data), static_cast<const W*>(b.data),
        static_cast<W*>(out.data), ix, n);
    check_launch("where", device);
  });
}

void float_test(FloatTest test, const View& x, const View& out) {
  const int kind = static_cast<int>(test);  // the device code's index, in FloatTest's order
  const char* opname = test == FloatTest::nan ? "is_nan" : test == FloatTest::inf ? "is_inf" : "is_finite";
  check_out(out, DType::bool_, opname);
  check_operand(x, out, opname);
  const std::int64_t n = numel(out);
  if (n == 0) return;
  const View* ops[1] = {&x};
  const Strided<1> ix = make_strided<1>(out, ops);
  const int device = out.device;
  const bool ok = dispatch_float(x.dtype, [&](auto tag) {
    using S = typename decltype(tag)::type;
    use_device(device);
    is_finite_kernel<S><<<blocks_for(n, device), kThreads, 0, stream(device)>>>(
        static_cast<const S*>(x.data), static_cast<std::uint8_t*>(out.data), ix, n, kind);
    check_launch(opname, device);
  });
  if (!ok) unsupported(opname, x, "float16, bfloat16, float32 or float64");
}

}  // namespace keel::cuda
