#include "cpu/copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include <emmintrin.h>

#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/strided.hpp"

namespace keel::cpu {

namespace {

// The size-N value at s, stored at d, d + N, ... (n times).
template <std::size_t N>
void repeat(const char* s, std::int64_t n, char* d) {
  char v[N];
  std::memcpy(v, s, N);
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * static_cast<std::int64_t>(N), v, N);
}

// A run read backwards (reverse along the last axis): d[i] = s[-i] for i < n, in elements of U,
// which the compiler vectorises with a lane permutation.
template <class U>
void reversed(const char* s, std::int64_t n, char* d) {
  const auto* __restrict from = reinterpret_cast<const U*>(s);
  auto* __restrict to = reinterpret_cast<U*>(d);
  for (std::int64_t i = 0; i < n; ++i) to[i] = from[-i];
}
// Bytes eight at a time: the eight that end at s - i, byte-swapped (a byte loop does not vectorise
// at the baseline level, which has no byte shuffle).
template <>
void reversed<std::uint8_t>(const char* s, std::int64_t n, char* d) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, s - i - 7, 8);
    v = __builtin_bswap64(v);
    std::memcpy(d + i, &v, 8);
  }
  for (; i < n; ++i) d[i] = s[-i];
}

// Elements per side of a transposed copy's tiles (see copy_tiled).
constexpr std::int64_t kTransposeTile = 32;

// Four rows of 4 elements of 4 bytes, transposed in SSE registers (bits copied as they are).
inline void transpose4(const std::uint32_t* s, std::int64_t s_row, std::uint32_t* d, std::int64_t d_row) {
  __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(s));
  __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(s + s_row));
  __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 2 * s_row));
  __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(s + 3 * s_row));
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(reinterpret_cast<float*>(d), r0);
  _mm_storeu_ps(reinterpret_cast<float*>(d + d_row), r1);
  _mm_storeu_ps(reinterpret_cast<float*>(d + 2 * d_row), r2);
  _mm_storeu_ps(reinterpret_cast<float*>(d + 3 * d_row), r3);
}

// A copy whose innermost destination dimension is strided in the source while another dimension
// is contiguous there (a transpose, a permute that moves the last axis). Element by element that
// read one value per cache line: [4096, 1024] float32 transposed took 18-32 ms, 0.02-0.04x a
// memcpy of its bytes. Here in square tiles of kTransposeTile, split over the threads; 4-byte
// elements go through 4 x 4 transposes in registers. U: an unsigned type of the element's size.
// a is the run (the destination's stride-1 dimension after merging), b a dimension the source
// reads with stride 1.
template <class U>
void copy_tiled(const RunPlan<2>& p, std::size_t b, const char* src, char* dst) {
  const std::size_t nd = p.shape.size(), a = nd - 1;
  const std::int64_t na = p.shape[a], nb = p.shape[b];
  const std::int64_t src_a = p.strides[1][a], dst_b = p.strides[0][b];
  const std::int64_t b_tiles = (nb + kTransposeTile - 1) / kTransposeTile;
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < a; ++d)
    if (d != b) outer *= p.shape[d];
  parallel_for(outer * b_tiles, std::max<std::int64_t>(1, kParallelGrain / (kTransposeTile * na)),
               [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      // The task's outer index, decoded over the dimensions other than a and b.
      std::int64_t rest = t / b_tiles, off_d = 0, off_s = 0;
      for (std::size_t d = a; d-- > 0;) {
        if (d == b) continue;
        const std::int64_t i = rest % p.shape[d];
        rest /= p.shape[d];
        off_d += i * p.strides[0][d];
        off_s += i * p.strides[1][d];
      }
      const std::int64_t b0 = (t % b_tiles) * kTransposeTile, b1 = std::min(nb, b0 + kTransposeTile);
      const U* s = reinterpret_cast<const U*>(src) + off_s;
      U* o = reinterpret_cast<U*>(dst) + off_d;
      for (std::int64_t a0 = 0; a0 < na; a0 += kTransposeTile) {
        const std::int64_t a1 = std::min(na, a0 + kTransposeTile);
        std::int64_t j = b0;
        if constexpr (sizeof(U) == 4) {
          for (; j + 4 <= b1; j += 4) {
            std::int64_t i = a0;
            for (; i + 4 <= a1; i += 4) transpose4(s + i * src_a + j, src_a, o + j * dst_b + i, dst_b);
            for (; i < a1; ++i)
              for (std::int64_t jj = j; jj < j + 4; ++jj) o[jj * dst_b + i] = s[i * src_a + jj];
          }
        }
        for (; j < b1; ++j) {
          const U* sj = s + j;
          U* oj = o + j * dst_b;
          for (std::int64_t i = a0; i < a1; ++i) oj[i] = sj[i * src_a];
        }
      }
    }
  });
}

// copy_tiled's case, or false: elements of 1, 2, 4 or 8 bytes; the destination's innermost run
// contiguous and at least a tile's side long; the source strided along it but contiguous along
// another dimension of at least a tile's side.
// p: the copy's plan, operand 0 the destination.
bool copy_transposed(const RunPlan<2>& p, const char* src, char* dst, std::size_t itemsize) {
  if (itemsize != 1 && itemsize != 2 && itemsize != 4 && itemsize != 8) return false;
  const std::size_t a = p.shape.size() - 1;
  if (p.strides[0][a] != 1 || p.strides[1][a] == 1 || p.strides[1][a] == 0 || p.shape[a] < kTransposeTile) return false;
  std::size_t b = a;
  for (std::size_t d = 0; d < a; ++d)
    if (p.strides[1][d] == 1 && p.shape[d] >= kTransposeTile) b = d;
  if (b == a) return false;
  switch (itemsize) {
    case 1: copy_tiled<std::uint8_t>(p, b, src, dst); break;
    case 2: copy_tiled<std::uint16_t>(p, b, src, dst); break;
    case 4: copy_tiled<std::uint32_t>(p, b, src, dst); break;
    default: copy_tiled<std::uint64_t>(p, b, src, dst);
  }
  return true;
}

// Runs of at most this many bytes, contiguous on both sides and one stride apart (a slice of a
// few columns, a concat along a short last axis), go as fixed-size moves in one loop: a memcpy
// call per run and the odometer between runs took 4.4 ms to take [1048576, 2] out of
// [1048576, 4], 12x the time of the same bytes in long rows.
constexpr std::int64_t kShortRunBytes = 128;

template <std::size_t N>
void short_runs(const char* s, std::int64_t s_step, char* d, std::int64_t d_step, std::int64_t b, std::int64_t e) {
  for (std::int64_t r = b; r < e; ++r) std::memcpy(d + r * d_step, s + r * s_step, N);
}

using ShortRuns = void (*)(const char*, std::int64_t, char*, std::int64_t, std::int64_t, std::int64_t);

// short_runs<N> for the run sizes it is instantiated for (null for another size).
template <std::size_t... N>
ShortRuns short_runs_of(std::int64_t bytes) {
  ShortRuns f = nullptr;
  ((bytes == static_cast<std::int64_t>(N) ? (f = &short_runs<N>) : f), ...);
  return f;
}

bool copy_short_runs(const RunPlan<2>& p, const char* src, char* dst, std::int64_t itemsize) {
  const std::int64_t bytes = p.inner * itemsize;
  if (p.shape.size() != 2 || bytes > kShortRunBytes || p.strides[0][1] != 1 || p.strides[1][1] != 1) return false;
  const std::int64_t ds = p.strides[0][0] * itemsize, ss = p.strides[1][0] * itemsize;
  const ShortRuns fixed = short_runs_of<1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128>(bytes);
  parallel_for(p.outer, std::max<std::int64_t>(1, kParallelGrain / p.inner), [&](std::int64_t b, std::int64_t e) {
    if (fixed != nullptr) return fixed(src, ss, dst, ds, b, e);
    for (std::int64_t r = b; r < e; ++r) std::memcpy(dst + r * ds, src + r * ss, static_cast<std::size_t>(bytes));
  });
  return true;
}

}  // namespace

void copy_strided(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& src_strides,
                  const char* src, const std::vector<std::int64_t>& dst_strides, char* dst,
                  std::size_t itemsize) {
  for (auto d : shape)
    if (d == 0) return;
  // One plan for both paths: it is built on every strided copy, small ones included.
  const RunPlan<2> plan = make_plan<2>(shape, {&dst_strides, &src_strides});
  if (copy_transposed(plan, src, dst, itemsize)) return;
  const auto is = static_cast<std::int64_t>(itemsize);
  if (copy_short_runs(plan, src, dst, is)) return;
  for_each_run(plan, [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                         const std::array<std::int64_t, 2>& st) {
                    char* d = dst + off[0] * is;
                    const char* s = src + off[1] * is;
                    if (st[0] == 1 && st[1] == 1) {
                      std::memcpy(d, s, static_cast<std::size_t>(n * is));
                      return;
                    }
                    if (st[0] == 1 && st[1] == 0 && (itemsize == 4 || itemsize == 8)) {
                      // One value repeated (a broadcast view): the same bytes stored n times,
                      // which the compiler turns into wide stores.
                      if (itemsize == 4) repeat<4>(s, n, d);
                      else repeat<8>(s, n, d);
                      return;
                    }
                    if (st[0] == 1 && st[1] == -1) {
                      switch (itemsize) {
                        case 1: return reversed<std::uint8_t>(s, n, d);
                        case 2: return reversed<std::uint16_t>(s, n, d);
                        case 4: return reversed<std::uint32_t>(s, n, d);
                        case 8: return reversed<std::uint64_t>(s, n, d);
                        default: break;
                      }
                    }
                    switch (itemsize) {  // fixed-size moves the compiler can inline
                      case 1: for (std::int64_t i = 0; i < n; ++i) d[i * st[0]] = s[i * st[1]]; break;
                      case 2:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 2, s + i * st[1] * 2, 2);
                        break;
                      case 4:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 4, s + i * st[1] * 4, 4);
                        break;
                      case 8:
                        for (std::int64_t i = 0; i < n; ++i) std::memcpy(d + i * st[0] * 8, s + i * st[1] * 8, 8);
                        break;
                      default:
                        for (std::int64_t i = 0; i < n; ++i)
                          std::memcpy(d + i * st[0] * is, s + i * st[1] * is, itemsize);
                    }
                  });
}

void copy_to_contiguous(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, const char* src, char* dst,
                        std::size_t itemsize) {
  std::vector<std::int64_t> dst_strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    dst_strides[i] = s;
    s *= shape[i];
  }
  copy_strided(shape, strides, src, dst_strides, dst, itemsize);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = detail::empty_tensor(x.shape(), x.dtype(), x.device(), "contiguous");
  copy_to_contiguous(x.shape().dims(), x.strides(), static_cast<const char*>(x.raw_data()),
                     static_cast<char*>(out.raw_data()), itemsize(x.dtype()));
  return out;
}

Tensor compact_broadcast(const Tensor& x) {
  std::vector<std::int64_t> dims = x.shape().dims();
  bool repeated = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (x.strides()[i] != 0 || dims[i] <= 1) continue;
    dims[i] = 1;
    repeated = true;
  }
  return repeated ? detail::make_view(x, Shape(std::move(dims)), x.strides(), x.offset()) : x;
}

namespace {

template <class T> float to_float(T v) { return static_cast<float>(v); }
template <> float to_float<float16_t>(float16_t v) { return half_to_float(v); }
template <> float to_float<bfloat16_t>(bfloat16_t v) { return bfloat16_to_float(v); }

// Converts one value; the half types travel through float (or double for float64 targets).
template <class From, class To>
To convert_one(From v) {
  if constexpr (std::is_same_v<To, float16_t>) {
    if constexpr (std::is_same_v<From, float16_t>) return v;
    else return float_to_half(to_float(v));
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    if constexpr (std::is_same_v<From, bfloat16_t>) return v;
    else return float_to_bfloat16(to_float(v));
  } else if constexpr (std::is_same_v<From, float16_t> || std::is_same_v<From, bfloat16_t>) {
    return convert_one<float, To>(to_float(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Out-of-range float-to-int is undefined in C++: NaN gives 0 and the ends saturate, as
    // detail::convert and the CUDA cast do.
    if (v != v) return To{0};
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

namespace {

// float32 <-> float16 / bfloat16 with the bits of core/dtype.cpp's float_to_half, half_to_float
// and float_to_bfloat16 (compared over every float32 and every float16), written without
// branches or calls so that the loops below vectorise: one out-of-line call per element made a
// cast of 4M floats to float16 take 36-42 ms at one thread. float_to_half's cases: |x| from 2^16 * (2 - 2^-11)
// on infinity (NaN: a quiet one), below 2^-14 a subnormal or zero, rounded to nearest even by
// adding 0.5f (whose ulp is the half subnormals' step; the sum's low bits are the mantissa),
// else the exponent rebased and the 13 dropped bits rounded to nearest even.
// All ones where c holds, else zero; and a where mask is all ones, else b. Selections written
// as masks: with ?: the compiler kept branches, and the loops did not vectorise.
inline std::uint32_t mask_if(bool c) { return 0u - static_cast<std::uint32_t>(c); }
inline std::uint32_t pick(std::uint32_t mask, std::uint32_t a, std::uint32_t b) { return (a & mask) | (b & ~mask); }

inline std::uint16_t half_of(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const std::uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
  float af;
  std::memcpy(&af, &a, sizeof af);
  const float shifted = af + 0.5f;
  std::uint32_t sb;
  std::memcpy(&sb, &shifted, sizeof sb);
  const std::uint32_t subnormal = sb - 0x3F000000u;
  const std::uint32_t normal = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
  const std::uint32_t big = 0x7C00u | (static_cast<std::uint32_t>(a > 0x7F800000u) << 9);  // inf, or a quiet NaN
  const std::uint32_t tiny = mask_if(a < 0x38800000u), huge = mask_if(a >= 0x47800000u);
  return static_cast<std::uint16_t>(pick(huge, big, pick(tiny, subnormal, normal)) | sign);
}

// half_to_float: a subnormal half is its 10 bits times 2^-24 (exact, and through normal floats
// only, so a flush-to-zero mode cannot touch it); infinity and NaN keep their payload.
inline float float_of_half(std::uint16_t h) {
  const std::uint32_t em = h & 0x7FFFu, sign = static_cast<std::uint32_t>(h & 0x8000u) << 16, e = em >> 10;
  const float sub = static_cast<float>(static_cast<std::int32_t>(h & 0x3FFu)) * 0x1p-24f;
  std::uint32_t sub_bits;
  std::memcpy(&sub_bits, &sub, sizeof sub_bits);
  const std::uint32_t finite = pick(mask_if(e == 0), sub_bits, (em << 13) + (112u << 23));
  const std::uint32_t bits = pick(mask_if(e == 0x1Fu), (em << 13) | 0x7F800000u, finite) | sign;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline std::uint16_t bfloat16_of(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return static_cast<std::uint16_t>(
      pick(mask_if((x & 0x7FFFFFFFu) > 0x7F800000u), (x >> 16) | 0x40u, (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16));
}

inline float float_of_bfloat16(std::uint16_t b) {
  const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float32 -> int32 four at a time with convert_one's values: the truncating conversion gives
// 0x80000000 for NaN and for values out of range; those >= 2^31 then become INT32_MAX (0x80000000
// with every bit flipped) and NaN 0. (convert_one's branches kept the loop scalar: 0.4x memcpy.)
void int32_of_float(const float* s, std::int32_t* d, std::int64_t n) {
  const __m128 top = _mm_set1_ps(2147483648.0f);
  std::int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(s + i);
    __m128i t = _mm_xor_si128(_mm_cvttps_epi32(v), _mm_castps_si128(_mm_cmpge_ps(v, top)));
    t = _mm_andnot_si128(_mm_castps_si128(_mm_cmpunord_ps(v, v)), t);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), t);
  }
  for (; i < n; ++i) d[i] = convert_one<float, std::int32_t>(s[i]);
}

// dst[i] = fn(src[i]) over n elements, split over the threads.
template <class From, class To, class Fn>
void convert_with(const void* src, void* dst, std::int64_t n, Fn fn) {
  const From* s = static_cast<const From*>(src);
  To* d = static_cast<To*>(dst);
  parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) d[i] = fn(s[i]);
  });
}

}  // namespace

void convert(DType from, const void* src, DType to, void* dst, std::int64_t n) {
  if (n == 0) return;  // empty tensors may have null buffers, which memcpy must not see
  if (from == to) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * itemsize(from));
    return;
  }
  // The half types' own conversions with float32 (mixed precision casts both ways every step).
  if (from == DType::float32 && to == DType::float16)
    return convert_with<float, float16_t>(src, dst, n, [](float f) { return float16_t{half_of(f)}; });
  if (from == DType::float16 && to == DType::float32)
    return convert_with<float16_t, float>(src, dst, n, [](float16_t h) { return float_of_half(h.bits); });
  if (from == DType::float32 && to == DType::bfloat16)
    return convert_with<float, bfloat16_t>(src, dst, n, [](float f) { return bfloat16_t{bfloat16_of(f)}; });
  if (from == DType::bfloat16 && to == DType::float32)
    return convert_with<bfloat16_t, float>(src, dst, n, [](bfloat16_t b) { return float_of_bfloat16(b.bits); });
  if (from == DType::float32 && to == DType::int32) {
    const auto* s = static_cast<const float*>(src);
    auto* d = static_cast<std::int32_t*>(dst);
    return parallel_for(n, kParallelGrain,
                        [&](std::int64_t b, std::int64_t e) { int32_of_float(s + b, d + b, e - b); });
  }
  detail::dispatch_all(from, "cast", [&]<class F>() {
    detail::dispatch_all(to, "cast", [&]<class T>() {
      const F* s = static_cast<const F*>(src);
      T* d = static_cast<T*>(dst);
      parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
        if constexpr (std::is_same_v<F, bool>) {
          // Read bool bytes as bytes: any non-zero byte is true (a bool object holding another
          // value would be undefined behaviour).
          const auto* bytes = static_cast<const std::uint8_t*>(src);
          for (std::int64_t i = b; i < e; ++i) d[i] = convert_one<bool, T>(bytes[i] != 0);
        } else {
          for (std::int64_t i = b; i < e; ++i) d[i] = convert_one<F, T>(s[i]);
        }
      });
    });
  });
}

}  // namespace keel::cpu
