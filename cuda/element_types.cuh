#pragma once
// What the elementwise, copy and reduction kernels share: how each keel dtype is loaded into the
// type it is computed in and stored back (float16 and bfloat16 through float32, with conversions
// bit-identical to keel's CPU ones), the math of each float type, the index arithmetic of strided
// views, and the host-side checks of the views a call receives. Included by .cu files only.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "cuda/runtime.cuh"
#include "keel/core/error.hpp"

namespace keel::cuda::elem {

// ---- float16 and bfloat16 bits ------------------------------------------------------------------

// The hardware conversions round to nearest even exactly as keel's do; only NaNs differ (the
// hardware makes them canonical), so NaNs take keel's path: the payload is kept on widening and
// a quiet NaN of the same sign is made on narrowing.
__device__ __forceinline__ float half_to_float(std::uint16_t b) {
  if ((b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0)
    return __uint_as_float((static_cast<std::uint32_t>(b & 0x8000u) << 16) | 0x7F800000u |
                           (static_cast<std::uint32_t>(b & 0x3FFu) << 13));
  return __half2float(__ushort_as_half(b));
}

__device__ __forceinline__ std::uint16_t float_to_half(float f) {
  if (f != f) return static_cast<std::uint16_t>(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7E00u);
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float bfloat16_to_float(std::uint16_t b) {
  return __uint_as_float(static_cast<std::uint32_t>(b) << 16);
}

// Round to nearest even on the upper 16 bits; NaN stays NaN (quiet bit set), as on the CPU.
__device__ __forceinline__ std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = __float_as_uint(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// ---- storage type -> computation type -----------------------------------------------------------

// Elem<S>::C is the type an element stored as S is computed in: float for the three float types
// of 32 bits or less, double for float64, the integer itself for integers. bool is stored as a
// byte and travels as std::uint8_t (any non-zero byte is true).
template <class S>
struct Elem {
  using C = S;
  static __device__ __forceinline__ C load(const S* p, std::int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(S* p, std::int64_t i, C v) { p[i] = v; }
};

template <>
struct Elem<float16_t> {
  using C = float;
  static __device__ __forceinline__ float load(const float16_t* p, std::int64_t i) {
    return half_to_float(p[i].bits);
  }
  static __device__ __forceinline__ void store(float16_t* p, std::int64_t i, float v) {
    p[i].bits = float_to_half(v);
  }
};

template <>
struct Elem<bfloat16_t> {
  using C = float;
  static __device__ __forceinline__ float load(const bfloat16_t* p, std::int64_t i) {
    return bfloat16_to_float(p[i].bits);
  }
  static __device__ __forceinline__ void store(bfloat16_t* p, std::int64_t i, float v) {
    p[i].bits = float_to_bfloat16(v);
  }
};

template <class S>
using Compute = typename Elem<S>::C;

// ---- math of float and double -------------------------------------------------------------------
// Overloads that never promote float to double (the CUDA math library's single-precision
// functions for float).
#define KEEL_CUDA_MATH1(name, ffn, dfn)                                    \
  __device__ __forceinline__ float name(float v) { return ffn(v); }       \
  __device__ __forceinline__ double name(double v) { return dfn(v); }
KEEL_CUDA_MATH1(m_abs, fabsf, fabs)
KEEL_CUDA_MATH1(m_sqrt, sqrtf, sqrt)
KEEL_CUDA_MATH1(m_exp, expf, exp)
KEEL_CUDA_MATH1(m_expm1, expm1f, expm1)
KEEL_CUDA_MATH1(m_log, logf, log)
KEEL_CUDA_MATH1(m_log1p, log1pf, log1p)
KEEL_CUDA_MATH1(m_sin, sinf, sin)
KEEL_CUDA_MATH1(m_cos, cosf, cos)
KEEL_CUDA_MATH1(m_tanh, tanhf, tanh)
KEEL_CUDA_MATH1(m_erf, erff, erf)
#undef KEEL_CUDA_MATH1
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }

template <class T>
__device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// Integer arithmetic that wraps (two's complement) instead of overflowing, as the CPU's does in
// practice: computed in the unsigned type of the same width.
template <class T>
__device__ __forceinline__ T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
__device__ __forceinline__ T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
__device__ __forceinline__ T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, U>;  // no int promotion
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

// ---- strided index math ------------------------------------------------------------------------

// Offset of linear (row-major) index i in a view of `rank` axes. `narrow` (every index below
// 2^32) lets the divisions run in 32 bits, several times cheaper than 64-bit ones.
__device__ __forceinline__ std::int64_t strided_offset(std::int64_t i, int rank,
                                                       const std::int64_t* shape,
                                                       const std::int64_t* strides, bool narrow) {
  if (rank <= 1) return rank == 1 ? i * strides[0] : 0;
  std::int64_t off = 0;
  if (narrow) {
    auto r = static_cast<std::uint32_t>(i);
    for (int d = rank - 1; d > 0; --d) {
      const auto s = static_cast<std::uint32_t>(shape[d]);
      const std::uint32_t q = r / s;
      off += static_cast<std::int64_t>(r - q * s) * strides[d];
      r = q;
    }
    return off + static_cast<std::int64_t>(r) * strides[0];
  }
  for (int d = rank - 1; d > 0; --d) {
    const std::int64_t q = i / shape[d];
    off += (i - q * shape[d]) * strides[d];
    i = q;
  }
  return off + i * strides[0];
}

// K operands walked in the row-major order of one shape. Axes of size 1 are dropped and axes
// contiguous in every operand merged, so contiguous and scalar operands end at rank <= 1 and
// their offsets are i * stride with no division at all.
template <int K>
struct Strided {
  int rank = 0;
  bool narrow = true;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[K][kMaxDims] = {};

  __device__ __forceinline__ void offsets(std::int64_t i, std::int64_t (&off)[K]) const {
    if (rank <= 1) {
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] = i * strides[k][0];
      return;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = 0;
    if (narrow) {
      auto r = static_cast<std::uint32_t>(i);
      for (int d = rank - 1; d > 0; --d) {
        const auto s = static_cast<std::uint32_t>(shape[d]);
        const std::uint32_t q = r / s;
        const auto c = static_cast<std::int64_t>(r - q * s);
#pragma unroll
        for (int k = 0; k < K; ++k) off[k] += c * strides[k][d];
        r = q;
      }
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += static_cast<std::int64_t>(r) * strides[k][0];
      return;
    }
    for (int d = rank - 1; d > 0; --d) {
      const std::int64_t q = i / shape[d];
      const std::int64_t c = i - q * shape[d];
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += c * strides[k][d];
      i = q;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += i * strides[k][0];
  }

  // Stride of operand k on the linear path (rank <= 1): 1 contiguous, 0 broadcast scalar.
  std::int64_t linear_step(int k) const { return rank <= 1 ? strides[k][0] : -1; }
};

// ---- host-side checks and plans ----------------------------------------------------------------

inline std::string shape_string(const View& v) {
  std::string s = "[";
  for (int i = 0; i < v.rank && i < kMaxDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(v.shape[i]);
  }
  return s + "]";
}

inline std::string describe(const View& v) {
  return std::string(name(v.dtype)) + " " + shape_string(v) + " on cuda:" + std::to_string(v.device);
}

inline void check_rank(const View& v, const char* op) {
  if (v.rank < 0 || v.rank > kMaxDims)
    throw DeviceError(std::string(op) + ": CUDA kernels take at most " + std::to_string(kMaxDims) +
                      " axes, got a view of rank " + std::to_string(v.rank));
  for (int i = 0; i < v.rank; ++i)
    if (v.shape[i] < 0) throw ShapeError(std::string(op) + ": negative extent in " + shape_string(v));
}

inline std::int64_t numel(const View& v) {
  std::int64_t n = 1;
  for (int i = 0; i < v.rank; ++i) n *= v.shape[i];
  return n;
}

// Whether v is row-major without gaps (size-1 axes may have any stride).
inline bool is_contiguous(const View& v) {
  std::int64_t expected = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return true;
}

// Every operand of an elementwise call has the output's shape (broadcast axes have stride 0)
// and lives on the output's device.
inline void check_operand(const View& x, const View& out, const char* op) {
  check_rank(x, op);
  bool same = x.rank == out.rank;
  for (int i = 0; same && i < x.rank; ++i) same = x.shape[i] == out.shape[i];
  if (!same)
    throw ShapeError(std::string(op) + ": operand " + describe(x) + " does not match the output " +
                     describe(out));
  if (x.device != out.device)
    throw DeviceError(std::string(op) + ": operand " + describe(x) + " and output " + describe(out) +
                      " are on different devices");
}

[[noreturn]] inline void unsupported(const char* op, const View& v, const char* wanted) {
  throw DTypeError(std::string(op) + ": unsupported dtype " + std::string(name(v.dtype)) + " on CUDA (expected " +
                   wanted + ")");
}

// The plan of K operands over `shape`: size-1 axes dropped, axes contiguous in all operands
// merged (the same rule as the CPU's run plans).
template <int K>
Strided<K> make_strided(const View& shape, const View* const (&ops)[K]) {
  Strided<K> p;
  for (int d = 0; d < shape.rank; ++d) {
    const std::int64_t n = shape.shape[d];
    if (n == 1) continue;
    bool merge = p.rank > 0;
    for (int k = 0; merge && k < K; ++k)
      merge = p.strides[k][p.rank - 1] == ops[k]->strides[d] * n;
    if (merge) {
      p.shape[p.rank - 1] *= n;
      for (int k = 0; k < K; ++k) p.strides[k][p.rank - 1] = ops[k]->strides[d];
    } else {
      p.shape[p.rank] = n;
      for (int k = 0; k < K; ++k) p.strides[k][p.rank] = ops[k]->strides[d];
      ++p.rank;
    }
  }
  p.narrow = numel(shape) <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
  return p;
}

// Calls f(Tag<S>{}) with the storage type of dt; returns false for dtypes not in the list.
template <class T>
struct Tag {
  using type = T;
};

template <class F>
bool dispatch_numeric(DType dt, bool with_half, F&& f) {
  switch (dt) {
    case DType::float32: f(Tag<float>{}); return true;
    case DType::float64: f(Tag<double>{}); return true;
    case DType::int32: f(Tag<std::int32_t>{}); return true;
    case DType::int64: f(Tag<std::int64_t>{}); return true;
    case DType::uint8: f(Tag<std::uint8_t>{}); return true;
    case DType::float16: if (with_half) { f(Tag<float16_t>{}); return true; } return false;
    case DType::bfloat16: if (with_half) { f(Tag<bfloat16_t>{}); return true; } return false;
    default: return false;
  }
}

template <class F>
bool dispatch_float(DType dt, F&& f) {
  switch (dt) {
    case DType::float32: f(Tag<float>{}); return true;
    case DType::float64: f(Tag<double>{}); return true;
    case DType::float16: f(Tag<float16_t>{}); return true;
    case DType::bfloat16: f(Tag<bfloat16_t>{}); return true;
    default: return false;
  }
}

// Calls f(Tag<W>{}) with the unsigned integer of dt's width: for kernels that only move bits.
template <class F>
void dispatch_width(DType dt, F&& f) {
  switch (itemsize(dt)) {
    case 1: f(Tag<std::uint8_t>{}); break;
    case 2: f(Tag<std::uint16_t>{}); break;
    case 4: f(Tag<std::uint32_t>{}); break;
    default: f(Tag<std::uint64_t>{}); break;
  }
}

// Grid-stride loop bounds of the calling thread.
__device__ __forceinline__ std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace keel::cuda::elem
