// Convolution and pooling kernels on NHWC images.
//
// conv2d is im2col + GEMM. In NHWC the output [n*ho*wo, o] is the product of the im2col matrix
// [n*ho*wo, kh*kw*c] (row = output pixel, column = (tap, channel)) and the kernel, whose
// [kh, kw, c, o] layout already is that [kh*kw*c, o] matrix. Any range of output rows can thus be
// computed on its own: rows are handled in small blocks whose im2col slice is still in cache when
// BLAS packs it (the whole im2col matrix of a batch would be 9x the input), and the rows are split
// into one contiguous range per thread. Inside those OpenMP regions OpenBLAS (the OpenMP build,
// see TOOLCHAIN.md) runs single-threaded: it detects the enclosing region (checked: a gemm called
// from a 2-thread region starts no further threads), so BLAS and keel never oversubscribe the
// cores. When a call is too small to split, BLAS runs on the calling thread and may use its own
// threads.
//
// The input gradient is a scatter (col2im) and is split by images so that no two threads add into
// the same pixel; the kernel gradient sums over rows, so each thread sums its rows into its own
// copy and the copies are added at the end.
//
// float32 convolutions with few taps (kh*kw*c <= 64, e.g. a first layer on RGB images) skip
// im2col and BLAS on CPUs with AVX2: see "direct float32 convolution" below.
//
// Depthwise convolution and pooling do O(1) work per loaded element: loops over the contiguous
// channel axis, vectorised by the compiler, or by hand where it does not (the max's argmax).
#include "cpu/conv.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#if defined(__GNUC__) && defined(__x86_64__)
#define KEEL_CONV_DIRECT_AVX2 1
#include <immintrin.h>
#endif

#include "core/dispatch.hpp"
#include "keel/core/config.hpp"
#include "keel/core/error.hpp"

namespace keel::cpu {

Padding parse_padding(std::string_view padding, const char* op, bool allow_causal) {
  // Keras spells the modes in lower case, tf.nn in upper case: accept both.
  std::string lower(padding);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "valid") return Padding::valid;
  if (lower == "same") return Padding::same;
  if (allow_causal && lower == "causal") return Padding::causal;
  throw ValueError(fmt::format("{}: padding must be \"valid\"{} or \"same\", got \"{}\"", op,
                               allow_causal ? ", \"causal\"" : "", padding));
}

namespace {

using i64 = std::int64_t;

// ---- BLAS with beta (cpu::gemm always overwrites; the kernel gradient accumulates) ------------

void gemm_rm(bool ta, bool tb, i64 m, i64 n, i64 k, const float* a, i64 lda, const float* b,
             i64 ldb, float beta, float* c, i64 ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void gemm_rm(bool ta, bool tb, i64 m, i64 n, i64 k, const double* a, i64 lda, const double* b,
             i64 ldb, double beta, double* c, i64 ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// ---- threading ---------------------------------------------------------------------------------

// Below this much work (multiply-adds, or elements touched by the loop kernels) per thread a
// kernel stays on the calling thread: starting an OpenMP region costs microseconds.
constexpr double kMinWorkPerThread = 1 << 17;

// How many contiguous parts to split `items` into: at most config::num_threads(), and only as
// many as there is work for.
int plan_parts(i64 items, double work_per_item) {
  const int threads = config::num_threads();
  if (threads <= 1 || items < 2) return 1;
  const double by_work = static_cast<double>(items) * work_per_item / kMinWorkPerThread;
  const double parts = std::min({by_work, static_cast<double>(items), static_cast<double>(threads)});
  return parts < 2 ? 1 : static_cast<int>(parts);
}

// fn(part, begin, end) for each part of [0, items); parts > 1 run on parallel threads.
template <class F>
void run_parts(int parts, i64 items, F&& fn) {
  if (parts <= 1) {
    fn(0, i64{0}, items);
    return;
  }
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int p = 0; p < parts; ++p) fn(p, items * p / parts, items * (p + 1) / parts);
}

// ---- short runs along the channel axis (often tiny: 3 channels x 3 taps = 9 values) -------------
// im2col spends its time here. A memcpy call or a vectorised loop's prologue and epilogue cost more
// than copying 9 floats, so copies move fixed 32- or 16-byte chunks (constant-size memcpy compiles
// to plain vector moves), the last chunk overlapping the one before instead of a scalar tail.

template <class T>
inline void copy_run(const T* __restrict src, i64 len, T* __restrict dst) {
  constexpr i64 wide = 32 / sizeof(T), narrow = 16 / sizeof(T);
  if (len >= wide) {
    i64 t = 0;
    for (; t + wide <= len; t += wide) std::memcpy(dst + t, src + t, 32);
    if (t < len) std::memcpy(dst + len - wide, src + len - wide, 32);
  } else if (len >= narrow) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + len - narrow, src + len - narrow, 16);
  } else {
    for (i64 t = 0; t < len; ++t) dst[t] = src[t];
  }
}
template <class T>
inline void zero_run(i64 len, T* dst) {
  constexpr i64 wide = 32 / sizeof(T);
  static constexpr T zeros[wide] = {};
  if (len >= wide) {
    i64 t = 0;
    for (; t + wide <= len; t += wide) std::memcpy(dst + t, zeros, 32);
    if (t < len) std::memcpy(dst + len - wide, zeros, 32);
  } else {
    for (i64 t = 0; t < len; ++t) dst[t] = T(0);
  }
}
// ---- the max pool's NaN-propagating maximum ------------------------------------------------------
// maxps(x, o) is `x > o ? x : o`: ties keep the earlier tap and a NaN already in o stays, but a NaN
// x is dropped. OR-ing in x where x is NaN puts it back: a NaN's all-ones exponent and non-zero
// mantissa survive an OR with any value. (g++ compiles the scalar `x > o ? x : o` to maxps, which
// drops a NaN x; its NaN test would add a compare and a three-instruction blend.)
inline __m128 max_nan(__m128 x, __m128 o) { return _mm_or_ps(_mm_max_ps(x, o), _mm_and_ps(_mm_cmpunord_ps(x, x), x)); }
inline __m128d max_nan(__m128d x, __m128d o) {
  return _mm_or_pd(_mm_max_pd(x, o), _mm_and_pd(_mm_cmpunord_pd(x, x), x));
}
inline __m128 load_sse(const float* p) { return _mm_loadu_ps(p); }
inline __m128d load_sse(const double* p) { return _mm_loadu_pd(p); }
inline void store_sse(float* p, __m128 v) { _mm_storeu_ps(p, v); }
inline void store_sse(double* p, __m128d v) { _mm_storeu_pd(p, v); }
inline __m128 max_sse(__m128 x, __m128 o) { return _mm_max_ps(x, o); }
inline __m128d max_sse(__m128d x, __m128d o) { return _mm_max_pd(x, o); }
inline __m128 add_sse(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
inline __m128d add_sse(__m128d a, __m128d b) { return _mm_add_pd(a, b); }
inline bool has_nan(__m128 v) { return _mm_movemask_ps(_mm_cmpunord_ps(v, v)) != 0; }
inline bool has_nan(__m128d v) { return _mm_movemask_pd(_mm_cmpunord_pd(v, v)) != 0; }
template <class T>
using SseOf = decltype(load_sse(static_cast<const T*>(nullptr)));  // __m128 or __m128d

template <class T>
inline void add_run(const T* __restrict src, i64 len, T* __restrict dst) {
  for (i64 t = 0; t < len; ++t) dst[t] += src[t];
}

// ---- SSE-width vectors ---------------------------------------------------------------------------

// The max pool keeps tap indices in an integer as wide as T so that comparisons of values and of
// tap indices give masks of one width (a branch per channel on random data mispredicts half the
// time).
template <class T>
using TapIndex = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;

// 16-byte vectors through the compiler's vector extensions (GCC, Clang), for loops that g++ 12
// leaves scalar: the max pool's compare-and-select (it unrolls it but does not vectorise a float
// select on an integer mask) and the depthwise kernels' per-channel-block accumulators (kept in
// registers across taps). Blends are written with bit operations so that they need only SSE2,
// the library's baseline.
template <class T>
struct Vec {
  using I = TapIndex<T>;
  typedef T V __attribute__((vector_size(16)));
  typedef I M __attribute__((vector_size(16)));
  static constexpr i64 lanes = 16 / sizeof(T);
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static M load(const I* p) {
    M v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
  static void store(I* p, M v) { std::memcpy(p, &v, sizeof v); }
  static M splat(I i) { return M{} + i; }
  static V select(M mask, V a, V b) { return (V)(((M)a & mask) | ((M)b & ~mask)); }
  static M select(M mask, M a, M b) { return (a & mask) | (b & ~mask); }
  // maxps: `x > o ? x : o` in one instruction (g++ makes a compare and a blend of the select).
  static V max(V x, V o) {
    if constexpr (std::is_same_v<T, float>) return (V)_mm_max_ps((__m128)x, (__m128)o);
    else return (V)_mm_max_pd((__m128d)x, (__m128d)o);
  }
  static bool any(M m) {
    std::uint64_t w[2];
    std::memcpy(w, &m, sizeof w);
    return (w[0] | w[1]) != 0;
  }
};

// ---- geometry helpers --------------------------------------------------------------------------

// A 1x1 kernel with stride 1 and no padding: the input [n*h*w, c] already is the im2col matrix.
bool pointwise(const WindowGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.ho == g.h && g.wo == g.w;
}

// Rows per im2col block. Measured on the CIFAR layers (1 thread): blocks of about 64 KB (at least
// 128 rows, so that packing the kernel and each BLAS call's fixed cost are spread over many rows)
// beat 256 KB-4 MB blocks by up to 25% on 16->32 @16x16 and tie elsewhere: the block is still in
// L1/L2 when BLAS packs it.
i64 block_rows(i64 k, std::size_t itemsize) {
  constexpr i64 kTargetBytes = 64 << 10;
  return std::clamp<i64>(kTargetBytes / (k * static_cast<i64>(itemsize)), 128, 2048);
}

// Rows per BLAS call on the pointwise path (no buffer; only keeps each call's sizes in int range).
constexpr i64 kPointwiseRows = 1 << 16;

// ---- im2col / col2im ---------------------------------------------------------------------------

// Calls fn(n, oh, ow_begin, ow_end, first_row) for each run of rows [r0, r1) that lies in one
// output row (n, oh) of the image; rows are (n, oh, ow) in row-major order.
template <class F>
void for_each_output_row(const WindowGeom& g, i64 r0, i64 r1, F&& fn) {
  i64 r = r0;
  while (r < r1) {
    const i64 n = r / (g.ho * g.wo), oh = (r / g.wo) % g.ho, ow0 = r % g.wo;
    const i64 ow1 = std::min(g.wo, ow0 + (r1 - r));
    fn(n, oh, ow0, ow1, r);
    r += ow1 - ow0;
  }
}

// Rows [r0, r1) of the im2col matrix: column (i, j, ch) of row (n, oh, ow) is
// x[n, oh*sh - pad_top + i*dh, ow*sw - pad_left + j*dw, ch], or 0 in the padding.
// Within one output row, each tap row i reads one input row, so the loop over ow is innermost:
// the source row stays in L1 and the per-pixel work is one short copy.
template <class T>
void im2col(const WindowGeom& g, const T* x, i64 r0, i64 r1, T* col) {
  const i64 C = g.c, run = g.kw * C, K = g.kh * run;
  for_each_output_row(g, r0, r1, [&](i64 n, i64 oh, i64 ow0, i64 ow1, i64 first) {
    const T* img = x + n * g.h * g.w * C;
    T* row_col = col + (first - r0) * K;
    for (i64 i = 0; i < g.kh; ++i) {
      const i64 ih = oh * g.sh - g.pad_top + i * g.dh;
      T* dst = row_col + i * run;
      if (ih < 0 || ih >= g.h) {
        for (i64 ow = ow0; ow < ow1; ++ow, dst += K) zero_run(run, dst);
        continue;
      }
      const T* src = img + ih * g.w * C;
      for (i64 ow = ow0; ow < ow1; ++ow, dst += K) {
        const i64 iw0 = ow * g.sw - g.pad_left;
        if (g.dw == 1 && iw0 >= 0 && iw0 + g.kw <= g.w) {  // all kw taps inside: one contiguous run
          copy_run(src + iw0 * C, run, dst);
          continue;
        }
        for (i64 j = 0; j < g.kw; ++j) {
          const i64 iw = iw0 + j * g.dw;
          if (iw < 0 || iw >= g.w)
            zero_run(C, dst + j * C);
          else
            copy_run(src + iw * C, C, dst + j * C);
        }
      }
    }
  });
}

// The A operand for output rows [r0, r1): on the pointwise path x's own rows (K == c), else
// those rows of the im2col matrix, written to col.
template <class T>
const T* im2col_rows(const WindowGeom& g, const T* x, i64 r0, i64 r1, bool pointwise_path, T* col) {
  if (pointwise_path) return x + r0 * g.c;
  im2col(g, x, r0, r1, col);
  return col;
}

// The adjoint of im2col: adds each column of rows [r0, r1) back into its input pixel.
template <class T>
void col2im_add(const WindowGeom& g, const T* col, i64 r0, i64 r1, T* x) {
  const i64 C = g.c, run = g.kw * C, K = g.kh * run;
  for_each_output_row(g, r0, r1, [&](i64 n, i64 oh, i64 ow0, i64 ow1, i64 first) {
    T* img = x + n * g.h * g.w * C;
    const T* row_col = col + (first - r0) * K;
    for (i64 i = 0; i < g.kh; ++i) {
      const i64 ih = oh * g.sh - g.pad_top + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      T* dst = img + ih * g.w * C;
      const T* src = row_col + i * run;
      for (i64 ow = ow0; ow < ow1; ++ow, src += K) {
        const i64 iw0 = ow * g.sw - g.pad_left;
        if (g.dw == 1 && iw0 >= 0 && iw0 + g.kw <= g.w) {
          add_run(src, run, dst + iw0 * C);
          continue;
        }
        for (i64 j = 0; j < g.kw; ++j) {
          const i64 iw = iw0 + j * g.dw;
          if (iw >= 0 && iw < g.w) add_run(src + j * C, C, dst + iw * C);
        }
      }
    }
  });
}

// ---- direct float32 convolution for few taps (AVX2 + FMA) ---------------------------------------
// With K = kh*kw*c small (an image model's first layer: 3x3x3 = 27) the im2col GEMM is skinny:
// OpenBLAS spends about as long packing the im2col block as multiplying it, after im2col has
// spent as long writing it (3->16 @32x32 ran at 0.56x the GEMM rate). This kernel reads a
// zero-padded copy of the image instead: a tile of 6 output pixels x 16 output channels stays in
// 12 AVX registers while it runs over the K taps. It is compiled for AVX2+FMA through a target
// attribute (the library's baseline is SSE2) and used only where the CPU has them.
#ifdef KEEL_CONV_DIRECT_AVX2

// Above this K the im2col + BLAS path is as fast (measured: K = 27 direct 2x faster; K = 144 tied).
constexpr i64 kDirectMaxK = 64;

bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

// Steps through the padded image, in floats.
struct DirectSteps {
  i64 c, o, kh, kw;
  i64 pixel;  // sw * c: from one output pixel's window to the next
  i64 row;    // dh * padded width * c: between tap rows
  i64 tap;    // dw * c: between taps of a row
};

// out[r, 0:8*NB] = sum over taps (i, j) and channels ch of
//   src[r*pixel + i*row + j*tap + ch] * w[((i*kw + j)*c + ch)*o + 0:8*NB]   for r < R.
template <int R, int NB>
__attribute__((target("avx2,fma"))) void direct_tile(const DirectSteps& st, const float* src,
                                                     const float* w, float* out) {
  __m256 acc[R][NB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm256_setzero_ps();
  const float* wk = w;
  for (i64 i = 0; i < st.kh; ++i)
    for (i64 j = 0; j < st.kw; ++j) {
      const float* s = src + i * st.row + j * st.tap;
      for (i64 ch = 0; ch < st.c; ++ch, wk += st.o) {
        __m256 wv[NB];
#pragma GCC unroll 2
        for (int b = 0; b < NB; ++b) wv[b] = _mm256_loadu_ps(wk + 8 * b);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256 xv = _mm256_broadcast_ss(s + r * st.pixel + ch);
#pragma GCC unroll 2
          for (int b = 0; b < NB; ++b) acc[r][b] = _mm256_fmadd_ps(xv, wv[b], acc[r][b]);
        }
      }
    }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) _mm256_storeu_ps(out + r * st.o + 8 * b, acc[r][b]);
}

// One output row: wo pixels, output channels [0, 8*NB) of w and out.
template <int NB>
void direct_row(const DirectSteps& st, const float* src, i64 wo, const float* w, float* out) {
  constexpr int R = 6;
  i64 ow = 0;
  for (; ow + R <= wo; ow += R) direct_tile<R, NB>(st, src + ow * st.pixel, w, out + ow * st.o);
  src += ow * st.pixel;
  out += ow * st.o;
  switch (wo - ow) {
    case 5: direct_tile<5, NB>(st, src, w, out); break;
    case 4: direct_tile<4, NB>(st, src, w, out); break;
    case 3: direct_tile<3, NB>(st, src, w, out); break;
    case 2: direct_tile<2, NB>(st, src, w, out); break;
    case 1: direct_tile<1, NB>(st, src, w, out); break;
    default: break;
  }
}

bool direct_fits(const WindowGeom& g) {
  return g.o % 8 == 0 && g.kh * g.kw * g.c <= kDirectMaxK && cpu_has_avx2_fma();
}

// A zero-padded copy of one image spanning every row and column that some window touches.
struct PaddedImage {
  i64 hp, wp, size;
  explicit PaddedImage(const WindowGeom& g)
      : hp(std::max(g.pad_top + g.h, (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1)),
        wp(std::max(g.pad_left + g.w, (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1)),
        size(hp * wp * g.c) {}
  void load(const WindowGeom& g, const float* x, i64 n, float* dst) const {
    std::fill(dst, dst + size, 0.0f);
    const i64 C = g.c;
    for (i64 ih = 0; ih < g.h; ++ih)
      copy_run(x + (n * g.h + ih) * g.w * C, g.w * C, dst + ((ih + g.pad_top) * wp + g.pad_left) * C);
  }
  DirectSteps steps(const WindowGeom& g) const {
    return {g.c, g.o, g.kh, g.kw, g.sw * g.c, g.dh * wp * g.c, g.dw * g.c};
  }
};

void direct_forward(const WindowGeom& g, const float* x, const float* k, float* y) {
  const PaddedImage pad(g);
  const DirectSteps st = pad.steps(g);
  const i64 C = g.c, O = g.o, rows = g.n * g.ho;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C * O));
  std::vector<float> padded(static_cast<std::size_t>(parts * pad.size));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    float* xp = padded.data() + p * pad.size;
    i64 loaded = -1;  // the image now in xp
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      if (n != loaded) pad.load(g, x, loaded = n, xp);
      const float* src = xp + oh * g.sh * pad.wp * C;
      float* out = y + r * g.wo * O;
      for (i64 ob = 0; ob < O; ob += 16) {
        if (O - ob >= 16)
          direct_row<2>(st, src, g.wo, k + ob, out + ob);
        else
          direct_row<1>(st, src, g.wo, k + ob, out + ob);
      }
    }
  });
}

// The kernel gradient the same way round: a tile of KT kernel rows (taps x channels) x 16 output
// channels of dkernel stays in registers while it runs over the pixels of an output row:
//   dk[k0 + kk, 0:8*NB] += sum_ow src[ow*pixel + offset[kk]] * dy[ow, 0:8*NB].
template <int KT, int NB>
__attribute__((target("avx2,fma"))) void direct_filter_tile(const DirectSteps& st, const float* src, i64 wo,
                                                            const i64* offset, const float* dy, float* dk) {
  __m256 acc[KT][NB];
#pragma GCC unroll 8
  for (int t = 0; t < KT; ++t)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) acc[t][b] = _mm256_loadu_ps(dk + t * st.o + 8 * b);
  for (i64 ow = 0; ow < wo; ++ow, src += st.pixel, dy += st.o) {
    __m256 gv[NB];
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) gv[b] = _mm256_loadu_ps(dy + 8 * b);
#pragma GCC unroll 8
    for (int t = 0; t < KT; ++t) {
      const __m256 xv = _mm256_broadcast_ss(src + offset[t]);
#pragma GCC unroll 2
      for (int b = 0; b < NB; ++b) acc[t][b] = _mm256_fmadd_ps(xv, gv[b], acc[t][b]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < KT; ++t)
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) _mm256_storeu_ps(dk + t * st.o + 8 * b, acc[t][b]);
}

template <int NB>
void direct_filter_rows(const DirectSteps& st, const float* src, i64 wo, const i64* offset, i64 kt,
                        const float* dy, float* dk) {
  switch (kt) {
    case 6: direct_filter_tile<6, NB>(st, src, wo, offset, dy, dk); break;
    case 5: direct_filter_tile<5, NB>(st, src, wo, offset, dy, dk); break;
    case 4: direct_filter_tile<4, NB>(st, src, wo, offset, dy, dk); break;
    case 3: direct_filter_tile<3, NB>(st, src, wo, offset, dy, dk); break;
    case 2: direct_filter_tile<2, NB>(st, src, wo, offset, dy, dk); break;
    case 1: direct_filter_tile<1, NB>(st, src, wo, offset, dy, dk); break;
    default: break;
  }
}

void direct_backward_filter(const WindowGeom& g, const float* x, const float* dy, float* dk) {
  const PaddedImage pad(g);
  const DirectSteps st = pad.steps(g);
  const i64 C = g.c, O = g.o, K = g.kh * g.kw * C, rows = g.n * g.ho;
  // Offset of kernel row k = (i*kw + j)*c + ch from a window's first element.
  std::vector<i64> offset(static_cast<std::size_t>(K));
  for (i64 i = 0; i < g.kh; ++i)
    for (i64 j = 0; j < g.kw; ++j)
      for (i64 ch = 0; ch < C; ++ch) offset[static_cast<std::size_t>((i * g.kw + j) * C + ch)] = i * st.row + j * st.tap + ch;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * K * O));
  // Part 0 sums into dk; the others into their own zeroed copies, added below.
  std::vector<float> padded(static_cast<std::size_t>(parts * pad.size));
  std::vector<float> partial(static_cast<std::size_t>((parts - 1) * K * O));
  std::fill(dk, dk + K * O, 0.0f);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    float* xp = padded.data() + p * pad.size;
    float* acc = p == 0 ? dk : partial.data() + (p - 1) * K * O;
    constexpr i64 kTile = 6;
    i64 loaded = -1;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      if (n != loaded) pad.load(g, x, loaded = n, xp);
      const float* src = xp + oh * g.sh * pad.wp * C;
      const float* grow = dy + r * g.wo * O;
      for (i64 k0 = 0; k0 < K; k0 += kTile) {
        const i64 kt = std::min(kTile, K - k0);
        for (i64 ob = 0; ob < O; ob += 16) {
          if (O - ob >= 16)
            direct_filter_rows<2>(st, src, g.wo, offset.data() + k0, kt, grow + ob, acc + k0 * O + ob);
          else
            direct_filter_rows<1>(st, src, g.wo, offset.data() + k0, kt, grow + ob, acc + k0 * O + ob);
        }
      }
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial.data() + (p - 1) * K * O, K * O, dk);
}

#endif  // KEEL_CONV_DIRECT_AVX2

// ---- conv2d --------------------------------------------------------------------------------------

template <class T>
void conv_forward_t(const WindowGeom& g, const T* x, const T* k, T* y) {
  const i64 M = g.n * g.ho * g.wo, K = g.kh * g.kw * g.c, O = g.o;
  if (M == 0 || O == 0) return;
  if (K == 0) {
    std::fill(y, y + M * O, T(0));
    return;
  }
#ifdef KEEL_CONV_DIRECT_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise(g) && direct_fits(g)) {
      direct_forward(g, x, k, y);
      return;
    }
  }
#endif
  const bool direct = pointwise(g);
  const i64 block = direct ? kPointwiseRows : block_rows(K, sizeof(T));
  const int parts = plan_parts(M, static_cast<double>(K * O));
  // One im2col buffer per part, allocated here so that a failed allocation throws on this thread.
  std::vector<T> buffer(direct ? 0 : static_cast<std::size_t>(parts * std::min(block, M) * K));
  run_parts(parts, M, [&](int p, i64 begin, i64 end) {
    T* col = direct ? nullptr : buffer.data() + p * std::min(block, M) * K;
    for (i64 b = begin; b < end; b += block) {
      const i64 e = std::min(b + block, end);
      gemm_rm(false, false, e - b, O, K, im2col_rows(g, x, b, e, direct, col), K, k, O, T(0), y + b * O, O);
    }
  });
}

template <class T>
void conv_backward_input_t(const WindowGeom& g, const T* dy, const T* k, T* dx) {
  const i64 hw = g.ho * g.wo, M = g.n * hw, K = g.kh * g.kw * g.c, O = g.o;
  const i64 image = g.h * g.w * g.c;
  if (g.n * image == 0) return;
  if (M == 0 || O == 0) {
    std::fill(dx, dx + g.n * image, T(0));
    return;
  }
  if (pointwise(g)) {  // dx [n*h*w, c] = dy [n*h*w, o] @ kernel[c, o]^T
    const int parts = plan_parts(M, static_cast<double>(K * O));
    run_parts(parts, M, [&](int, i64 begin, i64 end) {
      for (i64 b = begin; b < end; b += kPointwiseRows) {
        const i64 e = std::min(b + kPointwiseRows, end);
        gemm_rm(false, true, e - b, K, O, dy + b * O, O, k, O, T(0), dx + b * K, K);
      }
    });
    return;
  }
  const i64 block = block_rows(K, sizeof(T));
  const int parts = plan_parts(g.n, static_cast<double>(hw * K * O));
  std::vector<T> buffer(static_cast<std::size_t>(parts * std::min(block, M) * K));
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    T* col = buffer.data() + p * std::min(block, M) * K;
    for (i64 b = n0 * hw; b < n1 * hw; b += block) {
      const i64 e = std::min(b + block, n1 * hw);
      gemm_rm(false, true, e - b, K, O, dy + b * O, O, k, O, T(0), col, K);
      col2im_add(g, col, b, e, dx);
    }
  });
}

template <class T>
void conv_backward_filter_t(const WindowGeom& g, const T* x, const T* dy, T* dk) {
  const i64 M = g.n * g.ho * g.wo, K = g.kh * g.kw * g.c, O = g.o;
  std::fill(dk, dk + K * O, T(0));
  if (M == 0 || K == 0 || O == 0) return;
#ifdef KEEL_CONV_DIRECT_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise(g) && direct_fits(g)) {
      direct_backward_filter(g, x, dy, dk);
      return;
    }
  }
#endif
  const bool direct = pointwise(g);
  const i64 block = direct ? kPointwiseRows : block_rows(K, sizeof(T));
  const int parts = plan_parts(M, static_cast<double>(K * O));
  const i64 col_size = direct ? 0 : std::min(block, M) * K;
  // Part 0 sums into dk; the others into their own zeroed copies, added below.
  std::vector<T> buffer(static_cast<std::size_t>(parts * col_size + (parts - 1) * K * O));
  T* partial = buffer.data() + parts * col_size;
  run_parts(parts, M, [&](int p, i64 begin, i64 end) {
    T* acc = p == 0 ? dk : partial + (p - 1) * K * O;
    T* col = buffer.data() + p * col_size;
    for (i64 b = begin; b < end; b += block) {
      const i64 e = std::min(b + block, end);
      gemm_rm(true, false, K, O, e - b, im2col_rows(g, x, b, e, direct, col), K, dy + b * O, O, T(1), acc, O);
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial + (p - 1) * K * O, K * O, dk);
}

// ---- depthwise -----------------------------------------------------------------------------------
// Kernel [kh, kw, c, m] flattened per tap is [c*m] = [o]: output channel c*m + j reads input
// channel c. All three kernels work with multiplier 1 over the o output channels: for m > 1 the
// input's channels are first repeated m times (per image, into a per-thread buffer), and the
// input gradient of the repeated channels is summed back in groups of m. Per output pixel, blocks
// of channels accumulate in vector registers across the window's taps.

// First and one-past-last tap along an axis whose taps at start + t*d lie inside [0, size).
struct TapRange {
  i64 begin, end;
};
inline TapRange taps_inside(i64 start, i64 taps, i64 d, i64 size) {
  i64 b = 0, e = taps;
  if (start < 0) b = (-start + d - 1) / d;
  if (start + (taps - 1) * d >= size) e = size - start <= 0 ? 0 : (size - start - 1) / d + 1;
  return {b, std::max(b, e)};
}

// out[c] = sum over the listed taps of a[a_off[t] + c] * b[b_off[t] + c], for c < channels.
template <class T>
void sum_of_products(const T* a, const i64* a_off, const T* b, const i64* b_off, i64 taps, i64 channels,
                     T* out) {
  using S = Vec<T>;
  constexpr i64 nv = 4, width = nv * S::lanes;
  i64 c0 = 0;
  for (; c0 + width <= channels; c0 += width) {
    typename S::V acc[nv] = {};
    for (i64 t = 0; t < taps; ++t) {
      const T* ap = a + a_off[t] + c0;
      const T* bp = b + b_off[t] + c0;
      for (i64 v = 0; v < nv; ++v) acc[v] += S::load(ap + v * S::lanes) * S::load(bp + v * S::lanes);
    }
    for (i64 v = 0; v < nv; ++v) S::store(out + c0 + v * S::lanes, acc[v]);
  }
  for (i64 c = c0; c < channels; ++c) {
    T acc = 0;
    for (i64 t = 0; t < taps; ++t) acc += a[a_off[t] + c] * b[b_off[t] + c];
    out[c] = acc;
  }
}

// The depthwise input of image n with o channels: x itself when the multiplier is 1, else x's
// channels each repeated m times, built in `buffer` (h*w*o values) when n changes.
template <class T>
class DepthwiseImage {
 public:
  DepthwiseImage(const WindowGeom& g, const T* x, T* buffer) : g_(g), x_(x), buffer_(buffer) {}
  const T* get(i64 n) {
    const i64 C = g_.c, mult = g_.o / C;
    const T* img = x_ + n * g_.h * g_.w * C;
    if (mult == 1) return img;
    if (n != loaded_) {
      for (i64 p = 0; p < g_.h * g_.w; ++p)
        for (i64 c = 0; c < C; ++c)
          for (i64 m = 0; m < mult; ++m) buffer_[(p * C + c) * mult + m] = img[p * C + c];
      loaded_ = n;
    }
    return buffer_;
  }

 private:
  const WindowGeom& g_;
  const T* x_;
  T* buffer_;
  i64 loaded_ = -1;
};

template <class T>
void depthwise_forward_t(const WindowGeom& g, const T* x, const T* k, T* y) {
  const i64 O = g.o, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || O == 0) return;
  const bool repeat = O != g.c;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  const std::size_t image = static_cast<std::size_t>(g.h * g.w * O);
  std::vector<T> repeated(repeat ? parts * image : 0);
  std::vector<i64> offsets(static_cast<std::size_t>(parts * 2 * g.kh * g.kw));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    DepthwiseImage<T> input(g, x, repeated.data() + (repeat ? p * image : 0));
    i64* x_off = offsets.data() + p * 2 * g.kh * g.kw;
    i64* k_off = x_off + g.kh * g.kw;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = input.get(n);
      const i64 ih0 = oh * g.sh - g.pad_top;
      const TapRange ti = taps_inside(ih0, g.kh, g.dh, g.h);
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, g.dw, g.w);
        i64 taps = 0;
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j, ++taps) {
            x_off[taps] = ((ih0 + i * g.dh) * g.w + iw0 + j * g.dw) * O;
            k_off[taps] = (i * g.kw + j) * O;
          }
        sum_of_products(img, x_off, k, k_off, taps, O, y + (r * g.wo + ow) * O);
      }
    }
  });
}

// Written as a gather: input pixel (ih, iw) sums dy * kernel over the output pixels whose window
// tap (i, j) lands on it (oh*sh - pad_top + i*dh = ih, likewise for columns). Each input pixel is
// written once, so the rows of dx split across threads with no zero-fill and no conflicts.
template <class T>
void depthwise_backward_input_t(const WindowGeom& g, const T* dy, const T* k, T* dx) {
  const i64 C = g.c, O = g.o, mult = C == 0 ? 0 : O / C, rows = g.n * g.h;
  if (rows == 0 || g.w == 0 || C == 0) return;
  // Taps that land on input column iw: (j, ow) with ow*sw - pad_left + j*dw == iw. Computed once
  // (they do not depend on the row) to keep divisions out of the pixel loop.
  std::vector<i64> col_count(static_cast<std::size_t>(g.w), 0), col_j(static_cast<std::size_t>(g.w * g.kw)),
      col_ow(static_cast<std::size_t>(g.w * g.kw));
  for (i64 iw = 0; iw < g.w; ++iw)
    for (i64 j = 0; j < g.kw; ++j) {
      const i64 tw = iw + g.pad_left - j * g.dw;  // = ow * sw
      if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.wo) continue;
      const auto at = static_cast<std::size_t>(iw * g.kw + col_count[static_cast<std::size_t>(iw)]++);
      col_j[at] = j;
      col_ow[at] = tw / g.sw;
    }
  const int parts = plan_parts(rows, static_cast<double>(g.w * g.kh * g.kw * O));
  // With a multiplier, each pixel's o sums go to a scratch row and are added up in groups of m.
  std::vector<T> sums(mult > 1 ? static_cast<std::size_t>(parts * O) : 0);
  std::vector<i64> offsets(static_cast<std::size_t>(parts * 2 * g.kh * g.kw + parts * 2 * g.kh));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    i64* g_off = offsets.data() + p * 2 * (g.kh * g.kw + g.kh);
    i64* k_off = g_off + g.kh * g.kw;
    i64* row_i = k_off + g.kh * g.kw;
    i64* row_oh = row_i + g.kh;
    T* sum = mult > 1 ? sums.data() + p * O : nullptr;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.h, ih = r % g.h;
      i64 row_taps = 0;
      for (i64 i = 0; i < g.kh; ++i) {
        const i64 th = ih + g.pad_top - i * g.dh;  // = oh * sh
        if (th < 0 || th % g.sh != 0 || th / g.sh >= g.ho) continue;
        row_i[row_taps] = i;
        row_oh[row_taps++] = th / g.sh;
      }
      for (i64 iw = 0; iw < g.w; ++iw) {
        i64 taps = 0;
        const auto col = static_cast<std::size_t>(iw * g.kw);
        for (i64 a = 0; a < row_taps; ++a)
          for (i64 b = 0; b < col_count[static_cast<std::size_t>(iw)]; ++b) {
            g_off[taps] = ((n * g.ho + row_oh[a]) * g.wo + col_ow[col + static_cast<std::size_t>(b)]) * O;
            k_off[taps++] = (row_i[a] * g.kw + col_j[col + static_cast<std::size_t>(b)]) * O;
          }
        T* out = dx + (r * g.w + iw) * C;
        if (mult == 1) {
          sum_of_products(dy, g_off, k, k_off, taps, O, out);
        } else {
          sum_of_products(dy, g_off, k, k_off, taps, O, sum);
          for (i64 c = 0; c < C; ++c) {
            T s = 0;
            for (i64 m = 0; m < mult; ++m) s += sum[c * mult + m];
            out[c] = s;
          }
        }
      }
    }
  });
}

// dk[i, j, :] = sum over output pixels of x(window tap (i, j)) * dy, for multiplier 1 over o
// channels. Per output row and tap, the pixels whose tap lies inside the image form one range of
// ow; a block of channels sums over that range in registers before it is added to dk.
template <class T>
void depthwise_backward_filter_t(const WindowGeom& g, const T* x, const T* dy, T* dk) {
  using S = Vec<T>;
  const i64 O = g.o, rows = g.n * g.ho, ksize = g.kh * g.kw * O;
  std::fill(dk, dk + ksize, T(0));
  if (rows == 0 || g.wo == 0 || ksize == 0) return;
  const bool repeat = O != g.c;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  const std::size_t image = static_cast<std::size_t>(g.h * g.w * O);
  std::vector<T> repeated(repeat ? parts * image : 0);
  std::vector<T> partial(static_cast<std::size_t>((parts - 1) * ksize));  // zeroed
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    DepthwiseImage<T> input(g, x, repeated.data() + (repeat ? p * image : 0));
    T* acc = p == 0 ? dk : partial.data() + (p - 1) * ksize;
    constexpr i64 nv = 4, width = nv * S::lanes;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = input.get(n);
      const T* grow = dy + r * g.wo * O;
      for (i64 i = 0; i < g.kh; ++i) {
        const i64 ih = oh * g.sh - g.pad_top + i * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (i64 j = 0; j < g.kw; ++j) {
          // Output columns whose tap j falls inside the row: 0 <= ow*sw - pad_left + j*dw < w.
          const i64 shift = g.pad_left - j * g.dw;  // iw = ow*sw - shift
          const i64 ow0 = shift <= 0 ? 0 : (shift + g.sw - 1) / g.sw;
          const i64 ow1 = std::min(g.wo, g.w + shift <= 0 ? 0 : (g.w + shift - 1) / g.sw + 1);
          if (ow0 >= ow1) continue;
          const T* xrow = img + (ih * g.w + ow0 * g.sw - shift) * O;
          const T* grow0 = grow + ow0 * O;
          const i64 xstep = g.sw * O;
          T* ap = acc + (i * g.kw + j) * O;
          i64 c0 = 0;
          for (; c0 + width <= O; c0 += width) {
            typename S::V sum[nv] = {};
            const T* xp = xrow + c0;
            const T* gp = grow0 + c0;
            for (i64 ow = ow0; ow < ow1; ++ow, xp += xstep, gp += O)
              for (i64 v = 0; v < nv; ++v) sum[v] += S::load(xp + v * S::lanes) * S::load(gp + v * S::lanes);
            for (i64 v = 0; v < nv; ++v)
              S::store(ap + c0 + v * S::lanes, S::load(ap + c0 + v * S::lanes) + sum[v]);
          }
          for (i64 c = c0; c < O; ++c) {
            T sum = 0;
            const T* xp = xrow + c;
            const T* gp = grow0 + c;
            for (i64 ow = ow0; ow < ow1; ++ow, xp += xstep, gp += O) sum += *xp * *gp;
            ap[c] += sum;
          }
        }
      }
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial.data() + (p - 1) * ksize, ksize, dk);
}

// ---- pooling -------------------------------------------------------------------------------------

// Whether tap value v replaces the window's running maximum `best`: when strictly greater (ties
// keep the earlier tap), or when v is the window's first NaN. The max of a window with a NaN is
// NaN (tf.nn.max_pool), and its gradient goes to that NaN, as argmax picks the first NaN.
template <class T>
inline bool replaces_max(T v, T best) {
  return v > best || (v != v && best == best);
}

// window_argmax on channels [c0, c0 + nv * lanes), the running maxima and their taps in
// registers. The fast version assumes no NaN: a strict compare finds the first maximum and maxps
// keeps the value (six instructions a vector and tap with the sum below; the exact version's NaN
// rule takes nine). It also sums the taps, and when a sum is NaN (a NaN tap, or +inf and -inf)
// returns false without writing: the exact version then redoes the block.
template <class T, int nv>
bool argmax_block_fast(const T* x, const i64* offset, TapIndex<T> taps, i64 c0, TapIndex<T>* tap) {
  using S = Vec<T>;
  typename S::V best[nv], sum[nv];
  typename S::M arg[nv];
  for (int v = 0; v < nv; ++v) {
    best[v] = sum[v] = S::load(x + offset[0] + c0 + v * S::lanes);
    arg[v] = S::splat(0);
  }
  for (TapIndex<T> t = 1; t < taps; ++t) {
    const typename S::M tv = S::splat(t);
    for (int v = 0; v < nv; ++v) {
      const typename S::V xv = S::load(x + offset[t] + c0 + v * S::lanes);
      arg[v] = S::select(best[v] < xv, tv, arg[v]);  // strict: ties keep the earlier tap
      best[v] = S::max(xv, best[v]);
      sum[v] += xv;
    }
  }
  typename S::M nan{};
  for (int v = 0; v < nv; ++v) nan |= sum[v] != sum[v];
  if (S::any(nan)) return false;
  for (int v = 0; v < nv; ++v) S::store(tap + c0 + v * S::lanes, arg[v]);
  return true;
}

template <class T, int nv>
void argmax_block_exact(const T* x, const i64* offset, TapIndex<T> taps, i64 c0, TapIndex<T>* tap) {
  using S = Vec<T>;
  typename S::V best[nv];
  typename S::M arg[nv];
  for (int v = 0; v < nv; ++v) {
    best[v] = S::load(x + offset[0] + c0 + v * S::lanes);
    arg[v] = S::splat(0);
  }
  for (TapIndex<T> t = 1; t < taps; ++t) {
    const typename S::M tv = S::splat(t);
    for (int v = 0; v < nv; ++v) {
      const typename S::V xv = S::load(x + offset[t] + c0 + v * S::lanes);
      // replaces_max, lane by lane: !(xv <= best) is xv > best or either NaN; best == best
      // then rules out a NaN best (the first NaN stays).
      const typename S::M greater = ~(xv <= best[v]) & (best[v] == best[v]);
      best[v] = S::select(greater, xv, best[v]);
      arg[v] = S::select(greater, tv, arg[v]);
    }
  }
  for (int v = 0; v < nv; ++v) S::store(tap + c0 + v * S::lanes, arg[v]);
}

// The first maximum of each channel in the window of output pixel (n, oh, ow), taps visited in
// row-major order (see replaces_max): channel c's maximum is x[offset[tap[c]] + c]. tap[] holds
// c entries, offset[] kh*kw. Returns the number of taps inside the image.
template <class T>
TapIndex<T> window_argmax(const WindowGeom& g, const T* x, i64 n, i64 oh, i64 ow, TapIndex<T>* tap,
                          i64* offset) {
  using I = TapIndex<T>;
  const i64 C = g.c;
  const i64 ih0 = oh * g.sh - g.pad_top, iw0 = ow * g.sw - g.pad_left;
  const TapRange ti = taps_inside(ih0, g.kh, 1, g.h), tj = taps_inside(iw0, g.kw, 1, g.w);
  I taps = 0;
  for (i64 i = ti.begin; i < ti.end; ++i)
    for (i64 j = tj.begin; j < tj.end; ++j) offset[taps++] = ((n * g.h + ih0 + i) * g.w + iw0 + j) * C;
  // Four vectors of channels at a time.
  constexpr int nv = 4;
  constexpr i64 width = nv * Vec<T>::lanes;
  i64 c0 = 0;
  for (; c0 + width <= C; c0 += width)
    if (!argmax_block_fast<T, nv>(x, offset, taps, c0, tap)) argmax_block_exact<T, nv>(x, offset, taps, c0, tap);
  for (i64 c = c0; c < C; ++c) {
    T best = x[offset[0] + c];
    I arg = 0;
    for (I t = 1; t < taps; ++t)
      if (replaces_max(x[offset[t] + c], best)) {
        best = x[offset[t] + c];
        arg = t;
      }
    tap[c] = arg;
  }
  return taps;
}

// Per-thread scratch of window_argmax.
template <class T>
struct ArgmaxScratch {
  std::vector<TapIndex<T>> tap;
  std::vector<i64> offset;
  ArgmaxScratch(const WindowGeom& g, int parts)
      : tap(static_cast<std::size_t>(parts * g.c)), offset(static_cast<std::size_t>(parts * g.kh * g.kw)) {}
};

// The pooling forwards: pixel(out, img, ih0, iw0, ti, tj) computes the C channels of one output
// pixel from image img, whose window starts at (ih0, iw0) and has taps ti x tj inside it.
template <class T, class Pixel>
void pool_forward(const WindowGeom& g, const T* x, T* y, Pixel&& pixel) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  run_parts(parts, rows, [&](int, i64 r0, i64 r1) {
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = x + n * g.h * g.w * C;
      const i64 ih0 = oh * g.sh - g.pad_top;
      const TapRange ti = taps_inside(ih0, g.kh, 1, g.h);
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const i64 iw0 = ow * g.sw - g.pad_left;
        pixel(y + (r * g.wo + ow) * C, img, ih0, iw0, ti, taps_inside(iw0, g.kw, 1, g.w));
      }
    }
  });
}

// Channels [c, c + nv * lanes) of one max-pool output pixel, the maxima of the taps in registers
// and stored once. The running maximum is maxps (`x > o ? x : o`, one instruction, as g++ makes of
// the scalar form), which drops a NaN tap; a running sum of the taps tells whether one was NaN.
// Only then (or when +inf and -inf meet in the sum) is the block redone with max_nan: a NaN-free
// window costs two instructions a vector and tap, where max_nan costs four.
template <class T, int nv, class Tap>
inline void max_pool_channels(T* out, i64 c, TapRange ti, TapRange tj, const Tap& tap) {
  constexpr i64 lanes = 16 / sizeof(T);
  constexpr int ns = nv < 2 ? nv : 2;  // sums shared by the vectors: few registers, short chains
  SseOf<T> acc[nv], sum[ns];
  const T* first = tap(ti.begin, tj.begin) + c;
  for (int v = 0; v < nv; ++v) acc[v] = load_sse(first + v * lanes);
  for (int v = 0; v < ns; ++v) sum[v] = acc[v];
  for (int v = ns; v < nv; ++v) sum[v % ns] = add_sse(sum[v % ns], acc[v]);
  for (i64 i = ti.begin; i < ti.end; ++i)
    for (i64 j = tj.begin + (i == ti.begin); j < tj.end; ++j) {
      const T* p = tap(i, j) + c;
      for (int v = 0; v < nv; ++v) {
        const SseOf<T> x = load_sse(p + v * lanes);
        acc[v] = max_sse(x, acc[v]);
        sum[v % ns] = add_sse(sum[v % ns], x);
      }
    }
  bool nan = false;
  for (int v = 0; v < ns; ++v) nan |= has_nan(sum[v]);
  if (nan) {
    for (int v = 0; v < nv; ++v) acc[v] = load_sse(first + v * lanes);
    for (i64 i = ti.begin; i < ti.end; ++i)
      for (i64 j = tj.begin; j < tj.end; ++j)
        for (int v = 0; v < nv; ++v) acc[v] = max_nan(load_sse(tap(i, j) + c + v * lanes), acc[v]);
  }
  for (int v = 0; v < nv; ++v) store_sse(out + c + v * lanes, acc[v]);
}

// The max of a window is NaN if a tap is NaN (tf.nn.max_pool), else the largest tap.
template <class T>
void max_pool_forward_t(const WindowGeom& g, const T* x, T* y) {
  const i64 C = g.c;
  constexpr i64 lanes = 16 / sizeof(T);
  pool_forward(g, x, y, [&](T* out, const T* img, i64 ih0, i64 iw0, TapRange ti, TapRange tj) {
    const auto tap = [&](i64 i, i64 j) { return img + ((ih0 + i) * g.w + iw0 + j) * C; };
    i64 c = 0;
    for (; c + 8 * lanes <= C; c += 8 * lanes) max_pool_channels<T, 8>(out, c, ti, tj, tap);
    for (; c + 4 * lanes <= C; c += 4 * lanes) max_pool_channels<T, 4>(out, c, ti, tj, tap);
    for (; c + lanes <= C; c += lanes) max_pool_channels<T, 1>(out, c, ti, tj, tap);
    for (; c < C; ++c) {
      T best = tap(ti.begin, tj.begin)[c];
      for (i64 i = ti.begin; i < ti.end; ++i)
        for (i64 j = tj.begin; j < tj.end; ++j) {
          const T v = tap(i, j)[c];
          best = v > best || v != v ? v : best;
        }
      out[c] = best;
    }
  });
}

// Pooling windows that do not overlap (stride >= pool, the usual 2x2/2) own their pixels, so the
// backward kernels write each pixel's gradient once instead of zero-filling and adding into it.
bool disjoint_windows(const WindowGeom& g) { return g.sh >= g.kh && g.sw >= g.kw; }
// ... and when they also tile the whole image, no pixel is left to zero.
bool windows_cover(const WindowGeom& g) {
  return g.sh == g.kh && g.sw == g.kw && (g.ho - 1) * g.sh - g.pad_top + g.kh >= g.h &&
         (g.wo - 1) * g.sw - g.pad_left + g.kw >= g.w;
}

template <class T>
void max_pool_backward_t(const WindowGeom& g, const T* x, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const bool disjoint = disjoint_windows(g), covers = windows_cover(g);
  // A scatter into dx: split by images.
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  ArgmaxScratch<T> scratch(g, parts);
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    if (!(disjoint && covers)) std::fill(dx + n0 * image, dx + n1 * image, T(0));
    TapIndex<T>* tap = scratch.tap.data() + p * C;
    i64* offset = scratch.offset.data() + p * g.kh * g.kw;
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh)
        for (i64 ow = 0; ow < g.wo; ++ow) {
          const TapIndex<T> taps = window_argmax(g, x, n, oh, ow, tap, offset);
          const T* gp = dy + ((n * g.ho + oh) * g.wo + ow) * C;
          if (disjoint) {
            using S = Vec<T>;
            for (TapIndex<T> t = 0; t < taps; ++t) {
              T* dp = dx + offset[t];
              const typename S::M tv = S::splat(t);
              i64 c = 0;
              for (; c + S::lanes <= C; c += S::lanes)
                S::store(dp + c, S::select(S::load(tap + c) == tv, S::load(gp + c), typename S::V{}));
              for (; c < C; ++c) dp[c] = tap[c] == t ? gp[c] : T(0);
            }
          } else {
            for (i64 c = 0; c < C; ++c) dx[offset[tap[c]] + c] += gp[c];
          }
        }
  });
}

template <class T>
void max_pool_gather_t(const WindowGeom& g, const T* x, const T* dx, T* out) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  ArgmaxScratch<T> scratch(g, parts);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    TapIndex<T>* tap = scratch.tap.data() + p * C;
    i64* offset = scratch.offset.data() + p * g.kh * g.kw;
    for (i64 r = r0; r < r1; ++r)
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const TapIndex<T> taps = window_argmax(g, x, r / g.ho, r % g.ho, ow, tap, offset);
        T* op = out + (r * g.wo + ow) * C;
        // A select per tap rather than an indexed load per channel: it vectorises.
        using S = Vec<T>;
        i64 c = 0;
        for (; c + S::lanes <= C; c += S::lanes) {
          const typename S::M arg = S::load(tap + c);
          typename S::V acc{};
          for (TapIndex<T> t = 0; t < taps; ++t)
            acc = S::select(arg == S::splat(t), S::load(dx + offset[t] + c), acc);
          S::store(op + c, acc);
        }
        for (; c < C; ++c) op[c] = dx[offset[tap[c]] + c];
      }
  });
}

template <class T>
void avg_pool_forward_t(const WindowGeom& g, const T* x, T* y) {
  const i64 C = g.c;
  pool_forward(g, x, y, [&](T* out, const T* img, i64 ih0, i64 iw0, TapRange ti, TapRange tj) {
    zero_run(C, out);
    for (i64 i = ti.begin; i < ti.end; ++i)
      for (i64 j = tj.begin; j < tj.end; ++j) add_run(img + ((ih0 + i) * g.w + iw0 + j) * C, C, out);
    // Only the pixels inside the image count (TensorFlow's avg_pool excludes the padding).
    const T scale = T(1) / static_cast<T>((ti.end - ti.begin) * (tj.end - tj.begin));
    for (i64 c = 0; c < C; ++c) out[c] *= scale;
  });
}

template <class T>
void avg_pool_backward_t(const WindowGeom& g, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const bool disjoint = disjoint_windows(g), covers = windows_cover(g);
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  std::vector<T> scaled(static_cast<std::size_t>(parts * C));
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    if (!(disjoint && covers)) std::fill(dx + n0 * image, dx + n1 * image, T(0));
    T* sp = scaled.data() + p * C;
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh) {
        const i64 ih0 = oh * g.sh - g.pad_top;
        const TapRange ti = taps_inside(ih0, g.kh, 1, g.h);
        for (i64 ow = 0; ow < g.wo; ++ow) {
          const i64 iw0 = ow * g.sw - g.pad_left;
          const TapRange tj = taps_inside(iw0, g.kw, 1, g.w);
          const T scale = T(1) / static_cast<T>((ti.end - ti.begin) * (tj.end - tj.begin));
          const T* gp = dy + ((n * g.ho + oh) * g.wo + ow) * C;
          for (i64 c = 0; c < C; ++c) sp[c] = gp[c] * scale;
          for (i64 i = ti.begin; i < ti.end; ++i)
            for (i64 j = tj.begin; j < tj.end; ++j) {
              T* dp = dx + ((n * g.h + ih0 + i) * g.w + iw0 + j) * C;
              if (disjoint)
                copy_run(sp, C, dp);
              else
                add_run(sp, C, dp);
            }
        }
      }
  });
}

template <class T>
const T* in(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* out(void* p) {
  return static_cast<T*>(p);
}

}  // namespace

void conv2d_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y) {
  detail::dispatch_float(dtype, "conv2d", [&]<class T>() {
    conv_forward_t<T>(g, in<T>(x), in<T>(kernel), out<T>(y));
  });
}

void conv2d_backward_input(DType dtype, const WindowGeom& g, const void* dy, const void* kernel,
                           void* dx) {
  detail::dispatch_float(dtype, "conv2d_backprop_input", [&]<class T>() {
    conv_backward_input_t<T>(g, in<T>(dy), in<T>(kernel), out<T>(dx));
  });
}

void conv2d_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                            void* dkernel) {
  detail::dispatch_float(dtype, "conv2d_backprop_filter", [&]<class T>() {
    conv_backward_filter_t<T>(g, in<T>(x), in<T>(dy), out<T>(dkernel));
  });
}

void depthwise_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y) {
  detail::dispatch_float(dtype, "depthwise_conv2d", [&]<class T>() {
    depthwise_forward_t<T>(g, in<T>(x), in<T>(kernel), out<T>(y));
  });
}

void depthwise_backward_input(DType dtype, const WindowGeom& g, const void* dy, const void* kernel,
                              void* dx) {
  detail::dispatch_float(dtype, "depthwise_conv2d_backprop_input", [&]<class T>() {
    depthwise_backward_input_t<T>(g, in<T>(dy), in<T>(kernel), out<T>(dx));
  });
}

void depthwise_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                               void* dkernel) {
  detail::dispatch_float(dtype, "depthwise_conv2d_backprop_filter", [&]<class T>() {
    depthwise_backward_filter_t<T>(g, in<T>(x), in<T>(dy), out<T>(dkernel));
  });
}

void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y) {
  detail::dispatch_float(dtype, "max_pool2d", [&]<class T>() { max_pool_forward_t<T>(g, in<T>(x), out<T>(y)); });
}

void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "max_pool2d_grad", [&]<class T>() {
    max_pool_backward_t<T>(g, in<T>(x), in<T>(dy), out<T>(dx));
  });
}

void max_pool_gather(DType dtype, const WindowGeom& g, const void* x, const void* dx, void* o) {
  detail::dispatch_float(dtype, "max_pool2d_grad_grad", [&]<class T>() {
    max_pool_gather_t<T>(g, in<T>(x), in<T>(dx), out<T>(o));
  });
}

void avg_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y) {
  detail::dispatch_float(dtype, "avg_pool2d", [&]<class T>() { avg_pool_forward_t<T>(g, in<T>(x), out<T>(y)); });
}

void avg_pool_backward(DType dtype, const WindowGeom& g, const void* dy, void* dx) {
  detail::dispatch_float(dtype, "avg_pool2d_grad", [&]<class T>() {
    avg_pool_backward_t<T>(g, in<T>(dy), out<T>(dx));
  });
}

}  // namespace keel::cpu
