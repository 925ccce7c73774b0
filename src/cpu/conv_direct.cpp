// The direct float32 convolution for few taps (AVX2 + FMA), for conv.cpp.
#include "cpu/conv_direct.hpp"

#include <immintrin.h>

#ifdef KEEL_CONV_DIRECT_AVX2

#include <algorithm>
#include <string_view>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/window_kernels.hpp"

namespace keel::cpu::direct {

using namespace window;
// Above this K the im2col + BLAS path is as fast (measured: K = 27 direct 2x faster; K = 144 tied).
constexpr i64 kDirectMaxK = 64;

// The AVX2 kernels run when the active SIMD level (cpu/kernels.hpp, which KEEL_SIMD caps) has
// AVX2: capped at SSE2, convolutions take the im2col path, so that tests cover both.
bool avx2_allowed() { return std::string_view(simd().isa) != "sse2"; }

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
  return g.o % 8 == 0 && g.kh * g.kw * g.c <= kDirectMaxK && avx2_allowed();
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

void direct_forward(const WindowGeom& g, const float* x, const float* k, float* y, const ConvEpilogue& epilogue) {
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
      finish_rows(epilogue, out, g.wo, O);
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



}  // namespace keel::cpu::direct

#endif  // KEEL_CONV_DIRECT_AVX2
