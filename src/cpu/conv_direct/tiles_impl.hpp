#pragma once
// The direct convolution's tiles, written once over a vector type V (direct_avx2.cpp and
// direct_avx512.cpp instantiate them under their own -m flags). V gives:
//   reg, W (floats per register), zero(), load(p), store(p, v), bcast(p), fma(a, b, c) = a*b + c;
//   kForwardRows[b] / kFilterRows[b]: the tile height for a block of 2^b registers of channels,
//   chosen so that the accumulators, that block's weights and one broadcast fill the registers.
//   kMaxBlockLog2: the widest block, 2^kMaxBlockLog2 registers.
#include <algorithm>

#include "cpu/conv_direct/direct_kernels.hpp"

namespace keel::cpu::direct::tiles {

// Walks pixels p = oh*wo + ow of an image: the start of each one's window.
struct PixelWalk {
  const float* row;  // the window of (oh, 0)
  i64 ow, wo, pixel, row_step;
  PixelWalk(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p)
      : row(image + (p / wo) * row_step), ow(p % wo), wo(wo), pixel(st.pixel), row_step(row_step) {}
  const float* window() const { return row + ow * pixel; }
  void next() {
    if (++ow == wo) {
      ow = 0;
      row += row_step;
    }
  }
};

// Runs of consecutive kernel rows k: consecutive in a window, in the weights and in dk, so a tile
// reads its inputs at one pointer plus constants.
// Without dilation along the width a tap row's kw*c inputs are one run; else each tap's c.
struct Runs {
  bool contiguous;
  i64 count, length;
  explicit Runs(const DirectSteps& st)
      : contiguous(st.tap == st.c), count(contiguous ? st.kh : st.kh * st.kw),
        length(contiguous ? st.kw * st.c : st.c) {}
  i64 at(const DirectSteps& st, i64 q) const {  // the run's first input, from a window's start
    return contiguous ? q * st.row : (q / st.kw) * st.row + (q % st.kw) * st.tap;
  }
};

// A tile's R x NB accumulators from / to rows of `stride` floats.
template <class V, int R, int NB>
void load_tile(typename V::reg (&acc)[R][NB], const float* p, i64 stride) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[r][b] = V::load(p + r * stride + V::W * b);
}
template <class V, int R, int NB>
void store_tile(typename V::reg (&acc)[R][NB], float* p, i64 stride) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) V::store(p + r * stride + V::W * b, acc[r][b]);
}

// R output pixels (windows s[r]) x NB registers of channels, accumulated in registers over all taps.
template <class V, int R, int NB>
void forward_tile(const DirectSteps& st, const float* const* s, const float* w, float* out) {
  typename V::reg acc[R][NB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[r][b] = V::zero();
  // One loop per run of consecutive inputs (with 3 channels, a loop of 3 per tap ran at half
  // the rate of one of 9 per tap row).
  const Runs runs(st);
  const float* wk = w;
  for (i64 q = 0; q < runs.count; ++q) {
    const i64 at = runs.at(st, q);
    for (i64 ch = 0; ch < runs.length; ++ch, wk += st.o) {
      typename V::reg wv[NB];
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) wv[b] = V::load(wk + V::W * b);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const typename V::reg xv = V::bcast(s[r] + at + ch);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) acc[r][b] = V::fma(xv, wv[b], acc[r][b]);
      }
    }
  }
  store_tile<V>(acc, out, st.o);
}

// The last n < R pixels.
template <class V, int R, int NB>
void forward_tail(i64 n, const DirectSteps& st, const float* const* s, const float* w, float* out) {
  if constexpr (R > 0) {
    if (n == R)
      forward_tile<V, R, NB>(st, s, w, out);
    else
      forward_tail<V, R - 1, NB>(n, st, s, w, out);
  }
}

// Pixels [p0, p1) for the channels [0, NB*W) of w and out.
template <class V, int NB>
void forward_block(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
                   float* out) {
  constexpr int R = V::kForwardRows[NB == 1 ? 0 : NB == 2 ? 1 : 2];
  PixelWalk walk(st, image, row_step, wo, p0);
  const float* s[R];
  for (i64 p = p0; p < p1; p += R, out += R * st.o) {
    const i64 n = std::min<i64>(R, p1 - p);
    for (i64 r = 0; r < n; ++r, walk.next()) s[r] = walk.window();
    if (n == R)
      forward_tile<V, R, NB>(st, s, w, out);
    else
      forward_tail<V, R - 1, NB>(n, st, s, w, out);
  }
}

template <class V>
void forward(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
             float* out) {
  for (i64 ob = 0; ob < st.o;) {
    const i64 left = (st.o - ob) / V::W;
    if (V::kMaxBlockLog2 >= 2 && left >= 4) {
      forward_block<V, 4>(st, image, row_step, wo, p0, p1, w + ob, out + ob);
      ob += 4 * V::W;
    } else if (left >= 2) {
      forward_block<V, 2>(st, image, row_step, wo, p0, p1, w + ob, out + ob);
      ob += 2 * V::W;
    } else {
      forward_block<V, 1>(st, image, row_step, wo, p0, p1, w + ob, out + ob);
      ob += V::W;
    }
  }
}

// KT consecutive kernel rows (inputs window + at + t) x NB registers of channels of dk,
// accumulated in registers over the pixels.
template <class V, int KT, int NB>
void filter_tile(const DirectSteps& st, PixelWalk walk, i64 count, i64 at, const float* dy, float* dk) {
  typename V::reg acc[KT][NB];
  load_tile<V>(acc, dk, st.o);
  for (i64 p = 0; p < count; ++p, walk.next(), dy += st.o) {
    const float* src = walk.window() + at;
    typename V::reg gv[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) gv[b] = V::load(dy + V::W * b);
#pragma GCC unroll 16
    for (int t = 0; t < KT; ++t) {
      const typename V::reg xv = V::bcast(src + t);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) acc[t][b] = V::fma(xv, gv[b], acc[t][b]);
    }
  }
  store_tile<V>(acc, dk, st.o);
}

template <class V, int KT, int NB>
void filter_tail(i64 n, const DirectSteps& st, const PixelWalk& walk, i64 count, i64 at, const float* dy, float* dk) {
  if constexpr (KT > 0) {
    if (n == KT)
      filter_tile<V, KT, NB>(st, walk, count, at, dy, dk);
    else
      filter_tail<V, KT - 1, NB>(n, st, walk, count, at, dy, dk);
  }
}

// All kernel rows for the channels [0, NB*W) of dy and dk.
template <class V, int NB>
void filter_block(const DirectSteps& st, const PixelWalk& walk, i64 count, const float* dy, float* dk) {
  constexpr int KT = V::kFilterRows[NB == 1 ? 0 : NB == 2 ? 1 : 2];
  const Runs runs(st);
  for (i64 q = 0; q < runs.count; ++q) {
    const i64 at = runs.at(st, q);
    float* dk_run = dk + q * runs.length * st.o;
    i64 t0 = 0;
    for (; t0 + KT <= runs.length; t0 += KT) filter_tile<V, KT, NB>(st, walk, count, at + t0, dy, dk_run + t0 * st.o);
    filter_tail<V, KT - 1, NB>(runs.length - t0, st, walk, count, at + t0, dy, dk_run + t0 * st.o);
  }
}

template <class V>
void filter(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* dy,
            float* dk) {
  const PixelWalk walk(st, image, row_step, wo, p0);
  for (i64 ob = 0; ob < st.o;) {
    const i64 left = (st.o - ob) / V::W;
    if (V::kMaxBlockLog2 >= 2 && left >= 4) {
      filter_block<V, 4>(st, walk, p1 - p0, dy + ob, dk + ob);
      ob += 4 * V::W;
    } else if (left >= 2) {
      filter_block<V, 2>(st, walk, p1 - p0, dy + ob, dk + ob);
      ob += 2 * V::W;
    } else {
      filter_block<V, 1>(st, walk, p1 - p0, dy + ob, dk + ob);
      ob += V::W;
    }
  }
}

template <class V>
const DirectKernels& table() {
  static const DirectKernels kernels{V::W, forward<V>, filter<V>};
  return kernels;
}

}  // namespace keel::cpu::direct::tiles
