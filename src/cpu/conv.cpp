// Convolution kernels on NHWC images (depthwise.cpp and pooling.cpp hold the other window ops).
//
// conv2d is im2col + GEMM. In NHWC the output [n*ho*wo, o] is the product of the im2col matrix
// [n*ho*wo, kh*kw*c] (row = output pixel, column = (tap, channel)) and the kernel, whose
// [kh, kw, c, o] layout already is that [kh*kw*c, o] matrix. Any range of output rows can thus be
// computed on its own: rows are handled in small blocks whose im2col slice is still in cache when
// BLAS packs it (the whole im2col matrix of a batch would be 9x the input), and the rows are split
// into one contiguous range per thread. Inside those OpenMP regions each GEMM runs on its
// calling thread (cpu/blas.hpp), so BLAS and keel never oversubscribe the cores. When a call is
// too small to split, the GEMM runs on the calling thread and may use its own threads.
//
// The input gradient is a scatter (col2im) and is split by images so that no two threads add into
// the same pixel; the kernel gradient sums over rows, so each thread sums its rows into its own
// copy and the copies are added at the end.
//
// float32 convolutions whose channels fill whole vector registers skip im2col and BLAS on CPUs
// with AVX2 or AVX-512, up to a size of kernel (forward, kernel gradient, and the input gradient
// at stride 1): see cpu/conv_direct.hpp.
#include "cpu/conv.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "cpu/window_kernels.hpp"
#include "cpu/conv_direct.hpp"
#include "keel/core/error.hpp"

namespace keel::cpu {

namespace {

using namespace window;

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

// Rows per block of the kernel gradient, whose products [k, rows] x [rows, o] reduce over the
// rows into a small [k, o] result: there a short block makes a product that is mostly packing and
// reads and writes the result once per block. Measured on the CIFAR layers 16->32 @16x16 and
// 32->64 @8x8 (batch 64): the forward's 64 KB blocks (128 rows) tied at 1 thread and ran 1.2-1.4x
// slower at 2 threads than blocks of 512-1024 rows (about 0.5-1 MB); 4096 rows lost again.
i64 filter_block_rows(i64 k, std::size_t itemsize) {
  constexpr i64 kTargetBytes = 576 << 10;
  return std::clamp<i64>(kTargetBytes / (k * static_cast<i64>(itemsize)), 256, 2048);
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

// ---- conv2d --------------------------------------------------------------------------------------

template <class T>
void conv_forward_t(const WindowGeom& g, const T* x, const T* k, T* y, const ConvEpilogue& ep) {
  const i64 M = g.n * g.ho * g.wo, K = g.kh * g.kw * g.c, O = g.o;
  if (M == 0 || O == 0) return;
  // An empty call asks the kernel whether it fuses this activation, before any part runs.
  const auto* bias = static_cast<const T*>(ep.bias);
  if (bias != nullptr && !typed_kernels<T>().bias_unary(ep.op, ep.linear, y, bias, O, y, 0))
    throw ValueError(fmt::format("conv2d: unary kernel {} is not one it fuses (relu, sigmoid, tanh, exp)",
                                 static_cast<int>(ep.op)));
  if (K == 0) {
    std::fill(y, y + M * O, T(0));
    finish_rows(ep, y, M, O);
    return;
  }
#ifdef KEEL_CONV_DIRECT
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise(g) && direct::direct_fits(g, direct::Pass::forward)) {
      direct::direct_forward(g, x, k, y, ep);
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
      finish_rows(ep, y + b * O, e - b, O);
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
#ifdef KEEL_CONV_DIRECT
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise(g) && direct::direct_fits(g, direct::Pass::input)) {
      direct::direct_backward_input(g, dy, k, dx);
      return;
    }
  }
#endif
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
#ifdef KEEL_CONV_DIRECT
  if constexpr (std::is_same_v<T, float>) {
    if (!pointwise(g) && direct::direct_fits(g, direct::Pass::filter)) {
      direct::direct_backward_filter(g, x, dy, dk);
      return;
    }
  }
#endif
  const bool direct = pointwise(g);
  const i64 block = direct ? kPointwiseRows : filter_block_rows(K, sizeof(T));
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


}  // namespace

void conv2d_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y,
                    const ConvEpilogue& epilogue) {
  detail::dispatch_float(dtype, "conv2d", [&]<class T>() {
    conv_forward_t<T>(g, in<T>(x), in<T>(kernel), out<T>(y), epilogue);
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

}  // namespace keel::cpu
