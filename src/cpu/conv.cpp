// Convolution and pooling kernels on NHWC images.
//
// conv2d is im2col + GEMM. In NHWC the output [n*ho*wo, o] is the product of the im2col matrix
// [n*ho*wo, kh*kw*c] (row = output pixel, column = (tap, channel)) and the kernel, whose
// [kh, kw, c, o] layout already is that [kh*kw*c, o] matrix. Any range of output rows can thus be
// computed on its own: rows are handled in blocks whose im2col slice stays in the L2 cache next to
// the GEMM's packed panels (the whole im2col matrix of a batch would be 9x the input), and the
// rows are split into one contiguous range per thread. Inside those OpenMP regions OpenBLAS (the
// OpenMP build, see TOOLCHAIN.md) runs single-threaded because it detects the enclosing region,
// so BLAS and keel never oversubscribe the cores; when a call is too small to split, BLAS runs on
// the calling thread and may use its own threads.
//
// The input gradient is a scatter (col2im) and is split by images so that no two threads add into
// the same pixel; the kernel gradient sums over rows, so each thread sums its rows into its own
// copy and the copies are added at the end.
//
// Depthwise convolution and pooling do O(1) work per loaded element: plain loops over the
// contiguous channel axis, which the compiler vectorises.
#include "cpu/conv.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/core.h>

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

// ---- small runs along the channel axis (lengths are often tiny: 3 channels, 3x3 taps) ----------
// Plain loops rather than memcpy/memset: a library call per 3-element run costs more than the copy.

template <class T>
inline void copy_run(const T* src, i64 len, T* dst) {
  for (i64 t = 0; t < len; ++t) dst[t] = src[t];
}
template <class T>
inline void add_run(const T* src, i64 len, T* dst) {
  for (i64 t = 0; t < len; ++t) dst[t] += src[t];
}
template <class T>
inline void zero_run(i64 len, T* dst) {
  for (i64 t = 0; t < len; ++t) dst[t] = T(0);
}

// ---- geometry helpers --------------------------------------------------------------------------

// Output row r = (n, oh, ow) of a range, advanced one row at a time (no division per row).
struct RowCursor {
  i64 n, oh, ow;
  RowCursor(const WindowGeom& g, i64 r) {
    const i64 hw = g.ho * g.wo;
    n = r / hw;
    oh = (r % hw) / g.wo;
    ow = r % g.wo;
  }
  void next(const WindowGeom& g) {
    if (++ow == g.wo) {
      ow = 0;
      if (++oh == g.ho) {
        oh = 0;
        ++n;
      }
    }
  }
};

// A 1x1 kernel with stride 1 and no padding: the input [n*h*w, c] already is the im2col matrix.
bool pointwise(const WindowGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.ho == g.h && g.wo == g.w;
}

// Rows per im2col block: the block should stay in L2 (1.25-2.5 MB per core on these machines)
// together with the GEMM's packed panels, while being tall enough that the kernel's packing and
// each BLAS call's fixed cost are spread over many rows.
i64 block_rows(i64 k, std::size_t itemsize) {
  constexpr i64 kTargetBytes = 256 << 10;
  return std::clamp<i64>(kTargetBytes / (k * static_cast<i64>(itemsize)), 128, 2048);
}

// Rows per BLAS call on the pointwise path (no buffer; only keeps each call's sizes in int range).
constexpr i64 kPointwiseRows = 1 << 16;

// ---- im2col / col2im ---------------------------------------------------------------------------

// Rows [r0, r1) of the im2col matrix: column (i, j, ch) of row (n, oh, ow) is
// x[n, oh*sh - pad_top + i*dh, ow*sw - pad_left + j*dw, ch], or 0 in the padding.
template <class T>
void im2col(const WindowGeom& g, const T* x, i64 r0, i64 r1, T* col) {
  const i64 C = g.c, run = g.kw * C, K = g.kh * run;
  RowCursor cur(g, r0);
  for (i64 r = r0; r < r1; ++r, col += K, cur.next(g)) {
    const T* img = x + cur.n * g.h * g.w * C;
    const i64 ih0 = cur.oh * g.sh - g.pad_top, iw0 = cur.ow * g.sw - g.pad_left;
    // Undilated windows wholly inside the row copy kw*c contiguous values at once.
    const bool contiguous_taps = g.dw == 1 && iw0 >= 0 && iw0 + g.kw <= g.w;
    T* dst = col;
    for (i64 i = 0; i < g.kh; ++i, dst += run) {
      const i64 ih = ih0 + i * g.dh;
      if (ih < 0 || ih >= g.h) {
        zero_run(run, dst);
        continue;
      }
      const T* src = img + ih * g.w * C;
      if (contiguous_taps) {
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
}

// The adjoint of im2col: adds each column of rows [r0, r1) back into its input pixel.
template <class T>
void col2im_add(const WindowGeom& g, const T* col, i64 r0, i64 r1, T* x) {
  const i64 C = g.c, run = g.kw * C, K = g.kh * run;
  RowCursor cur(g, r0);
  for (i64 r = r0; r < r1; ++r, col += K, cur.next(g)) {
    T* img = x + cur.n * g.h * g.w * C;
    const i64 ih0 = cur.oh * g.sh - g.pad_top, iw0 = cur.ow * g.sw - g.pad_left;
    const bool contiguous_taps = g.dw == 1 && iw0 >= 0 && iw0 + g.kw <= g.w;
    const T* src = col;
    for (i64 i = 0; i < g.kh; ++i, src += run) {
      const i64 ih = ih0 + i * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      T* dst = img + ih * g.w * C;
      if (contiguous_taps) {
        add_run(src, run, dst + iw0 * C);
        continue;
      }
      for (i64 j = 0; j < g.kw; ++j) {
        const i64 iw = iw0 + j * g.dw;
        if (iw >= 0 && iw < g.w) add_run(src + j * C, C, dst + iw * C);
      }
    }
  }
}

// ---- conv2d --------------------------------------------------------------------------------------

template <class T>
void conv_forward_t(const WindowGeom& g, const T* x, const T* k, T* y) {
  const i64 M = g.n * g.ho * g.wo, K = g.kh * g.kw * g.c, O = g.o;
  if (M == 0 || O == 0) return;
  if (K == 0) {
    std::fill(y, y + M * O, T(0));
    return;
  }
  const bool direct = pointwise(g);
  const i64 block = direct ? kPointwiseRows : block_rows(K, sizeof(T));
  const int parts = plan_parts(M, static_cast<double>(K * O));
  // One im2col buffer per part, allocated here so that a failed allocation throws on this thread.
  std::vector<T> buffer(direct ? 0 : static_cast<std::size_t>(parts * std::min(block, M) * K));
  run_parts(parts, M, [&](int p, i64 begin, i64 end) {
    T* col = direct ? nullptr : buffer.data() + p * std::min(block, M) * K;
    for (i64 b = begin; b < end; b += block) {
      const i64 e = std::min(b + block, end);
      const T* a = x + b * K;  // pointwise: K == c, the input rows themselves
      if (!direct) {
        im2col(g, x, b, e, col);
        a = col;
      }
      gemm_rm(false, false, e - b, O, K, a, K, k, O, T(0), y + b * O, O);
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
      const T* a = x + b * K;
      if (!direct) {
        im2col(g, x, b, e, col);
        a = col;
      }
      gemm_rm(true, false, K, O, e - b, a, K, dy + b * O, O, T(1), acc, O);
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial + (p - 1) * K * O, K * O, dk);
}

// ---- depthwise -----------------------------------------------------------------------------------
// Kernel [kh, kw, c, m] flattened per tap is [c*m] = [o]: output channel c*m + j reads input
// channel c, so for m == 1 every tap is one elementwise multiply-add over the channel axis.

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

template <class T>
void depthwise_forward_t(const WindowGeom& g, const T* x, const T* k, T* y) {
  const i64 C = g.c, O = g.o, mult = C == 0 ? 0 : O / C, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || O == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  run_parts(parts, rows, [&](int, i64 r0, i64 r1) {
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = x + n * g.h * g.w * C;
      const i64 ih0 = oh * g.sh - g.pad_top;
      const TapRange ti = taps_inside(ih0, g.kh, g.dh, g.h);
      for (i64 ow = 0; ow < g.wo; ++ow) {
        T* out = y + (r * g.wo + ow) * O;
        zero_run(O, out);
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, g.dw, g.w);
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j) {
            const T* xp = img + ((ih0 + i * g.dh) * g.w + iw0 + j * g.dw) * C;
            const T* kp = k + (i * g.kw + j) * O;
            if (mult == 1) {
              for (i64 c = 0; c < C; ++c) out[c] += xp[c] * kp[c];
            } else {
              for (i64 c = 0; c < C; ++c)
                for (i64 m = 0; m < mult; ++m) out[c * mult + m] += xp[c] * kp[c * mult + m];
            }
          }
      }
    }
  });
}

template <class T>
void depthwise_backward_input_t(const WindowGeom& g, const T* dy, const T* k, T* dx) {
  const i64 C = g.c, O = g.o, mult = C == 0 ? 0 : O / C, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  // A scatter into dx: split by images.
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * O));
  run_parts(parts, g.n, [&](int, i64 n0, i64 n1) {
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    for (i64 n = n0; n < n1; ++n) {
      T* img = dx + n * image;
      for (i64 oh = 0; oh < g.ho; ++oh) {
        const i64 ih0 = oh * g.sh - g.pad_top;
        const TapRange ti = taps_inside(ih0, g.kh, g.dh, g.h);
        for (i64 ow = 0; ow < g.wo; ++ow) {
          const T* gp = dy + ((n * g.ho + oh) * g.wo + ow) * O;
          const i64 iw0 = ow * g.sw - g.pad_left;
          const TapRange tj = taps_inside(iw0, g.kw, g.dw, g.w);
          for (i64 i = ti.begin; i < ti.end; ++i)
            for (i64 j = tj.begin; j < tj.end; ++j) {
              T* xp = img + ((ih0 + i * g.dh) * g.w + iw0 + j * g.dw) * C;
              const T* kp = k + (i * g.kw + j) * O;
              if (mult == 1) {
                for (i64 c = 0; c < C; ++c) xp[c] += gp[c] * kp[c];
              } else {
                for (i64 c = 0; c < C; ++c) {
                  T s = 0;
                  for (i64 m = 0; m < mult; ++m) s += gp[c * mult + m] * kp[c * mult + m];
                  xp[c] += s;
                }
              }
            }
        }
      }
    }
  });
}

template <class T>
void depthwise_backward_filter_t(const WindowGeom& g, const T* x, const T* dy, T* dk) {
  const i64 C = g.c, O = g.o, mult = C == 0 ? 0 : O / C, rows = g.n * g.ho;
  const i64 ksize = g.kh * g.kw * O;
  std::fill(dk, dk + ksize, T(0));
  if (rows == 0 || g.wo == 0 || ksize == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * O));
  std::vector<T> partial(static_cast<std::size_t>((parts - 1) * ksize));  // zeroed
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    T* acc = p == 0 ? dk : partial.data() + (p - 1) * ksize;
    for (i64 r = r0; r < r1; ++r) {
      const i64 n = r / g.ho, oh = r % g.ho;
      const T* img = x + n * g.h * g.w * C;
      const i64 ih0 = oh * g.sh - g.pad_top;
      const TapRange ti = taps_inside(ih0, g.kh, g.dh, g.h);
      for (i64 ow = 0; ow < g.wo; ++ow) {
        const T* gp = dy + (r * g.wo + ow) * O;
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, g.dw, g.w);
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j) {
            const T* xp = img + ((ih0 + i * g.dh) * g.w + iw0 + j * g.dw) * C;
            T* ap = acc + (i * g.kw + j) * O;
            if (mult == 1) {
              for (i64 c = 0; c < C; ++c) ap[c] += xp[c] * gp[c];
            } else {
              for (i64 c = 0; c < C; ++c)
                for (i64 m = 0; m < mult; ++m) ap[c * mult + m] += xp[c] * gp[c * mult + m];
            }
          }
      }
    }
  });
  for (int p = 1; p < parts; ++p) add_run(partial.data() + (p - 1) * ksize, ksize, dk);
}

// ---- pooling -------------------------------------------------------------------------------------

// Index (into x) of the first maximum of each channel in the window of output pixel (n, oh, ow),
// taps visited in row-major order; best[] is scratch of c values.
template <class T>
void window_argmax(const WindowGeom& g, const T* x, i64 n, i64 oh, i64 ow, T* best, i64* arg) {
  const i64 C = g.c;
  const i64 ih0 = oh * g.sh - g.pad_top, iw0 = ow * g.sw - g.pad_left;
  const TapRange ti = taps_inside(ih0, g.kh, 1, g.h), tj = taps_inside(iw0, g.kw, 1, g.w);
  bool first = true;
  for (i64 i = ti.begin; i < ti.end; ++i)
    for (i64 j = tj.begin; j < tj.end; ++j) {
      const i64 base = ((n * g.h + ih0 + i) * g.w + iw0 + j) * C;
      const T* xp = x + base;
      if (first) {
        for (i64 c = 0; c < C; ++c) {
          best[c] = xp[c];
          arg[c] = base + c;
        }
        first = false;
        continue;
      }
      for (i64 c = 0; c < C; ++c)
        if (xp[c] > best[c]) {
          best[c] = xp[c];
          arg[c] = base + c;
        }
    }
}

template <class T>
void max_pool_forward_t(const WindowGeom& g, const T* x, T* y) {
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
        T* out = y + (r * g.wo + ow) * C;
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, 1, g.w);
        bool first = true;
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j) {
            const T* xp = img + ((ih0 + i) * g.w + iw0 + j) * C;
            if (first) {
              copy_run(xp, C, out);
              first = false;
            } else {
              for (i64 c = 0; c < C; ++c) out[c] = xp[c] > out[c] ? xp[c] : out[c];
            }
          }
      }
    }
  });
}

template <class T>
void max_pool_backward_t(const WindowGeom& g, const T* x, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  std::vector<T> best(static_cast<std::size_t>(parts * C));
  std::vector<i64> arg(static_cast<std::size_t>(parts * C));
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    T* bp = best.data() + p * C;
    i64* ap = arg.data() + p * C;
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh)
        for (i64 ow = 0; ow < g.wo; ++ow) {
          window_argmax(g, x, n, oh, ow, bp, ap);
          const T* gp = dy + ((n * g.ho + oh) * g.wo + ow) * C;
          for (i64 c = 0; c < C; ++c) dx[ap[c]] += gp[c];
        }
  });
}

template <class T>
void max_pool_gather_t(const WindowGeom& g, const T* x, const T* dx, T* out) {
  const i64 C = g.c, rows = g.n * g.ho;
  if (rows == 0 || g.wo == 0 || C == 0) return;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C));
  std::vector<T> best(static_cast<std::size_t>(parts * C));
  std::vector<i64> arg(static_cast<std::size_t>(parts * C));
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    T* bp = best.data() + p * C;
    i64* ap = arg.data() + p * C;
    for (i64 r = r0; r < r1; ++r)
      for (i64 ow = 0; ow < g.wo; ++ow) {
        window_argmax(g, x, r / g.ho, r % g.ho, ow, bp, ap);
        T* op = out + (r * g.wo + ow) * C;
        for (i64 c = 0; c < C; ++c) op[c] = dx[ap[c]];
      }
  });
}

template <class T>
void avg_pool_forward_t(const WindowGeom& g, const T* x, T* y) {
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
        T* out = y + (r * g.wo + ow) * C;
        const i64 iw0 = ow * g.sw - g.pad_left;
        const TapRange tj = taps_inside(iw0, g.kw, 1, g.w);
        zero_run(C, out);
        for (i64 i = ti.begin; i < ti.end; ++i)
          for (i64 j = tj.begin; j < tj.end; ++j)
            add_run(img + ((ih0 + i) * g.w + iw0 + j) * C, C, out);
        // Only the pixels inside the image count (TensorFlow's avg_pool excludes the padding).
        const T count = static_cast<T>((ti.end - ti.begin) * (tj.end - tj.begin));
        for (i64 c = 0; c < C; ++c) out[c] /= count;
      }
    }
  });
}

template <class T>
void avg_pool_backward_t(const WindowGeom& g, const T* dy, T* dx) {
  const i64 C = g.c, image = g.h * g.w * C;
  if (g.n * image == 0) return;
  const int parts = plan_parts(g.n, static_cast<double>(g.ho * g.wo * g.kh * g.kw * C));
  std::vector<T> scaled(static_cast<std::size_t>(parts * C));
  run_parts(parts, g.n, [&](int p, i64 n0, i64 n1) {
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    T* sp = scaled.data() + p * C;
    for (i64 n = n0; n < n1; ++n)
      for (i64 oh = 0; oh < g.ho; ++oh) {
        const i64 ih0 = oh * g.sh - g.pad_top;
        const TapRange ti = taps_inside(ih0, g.kh, 1, g.h);
        for (i64 ow = 0; ow < g.wo; ++ow) {
          const i64 iw0 = ow * g.sw - g.pad_left;
          const TapRange tj = taps_inside(iw0, g.kw, 1, g.w);
          const T count = static_cast<T>((ti.end - ti.begin) * (tj.end - tj.begin));
          const T* gp = dy + ((n * g.ho + oh) * g.wo + ow) * C;
          for (i64 c = 0; c < C; ++c) sp[c] = gp[c] / count;
          for (i64 i = ti.begin; i < ti.end; ++i)
            for (i64 j = tj.begin; j < tj.end; ++j)
              add_run(sp, C, dx + ((n * g.h + ih0 + i) * g.w + iw0 + j) * C);
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
