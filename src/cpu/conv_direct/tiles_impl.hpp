#pragma once
// The direct convolution's tiles, written once over a vector type V (direct_avx2.cpp and
// direct_avx512.cpp instantiate them under their own -m flags). V gives:
//   reg, W (floats per register), zero(), load(p), store(p, v), bcast(p), fma(a, b, c) = a*b + c,
//   add(a, b), relu(v) = max(0, v) with max's operand order of the bias_unary kernel (a NaN or a
//   -0 passes through);
//   kForwardRows[b] / kFilterRows[b]: the tile height for a block of 2^b registers of channels,
//   chosen so that the accumulators, that block's weights and one broadcast fill the registers.
//   kMaxBlockLog2: the widest block, 2^kMaxBlockLog2 registers;
//   hsum(v): the sum of v's lanes; sums(v, out): out[0:W] = the lane sums of v[0:W];
//   kNarrowRegisters: the registers a narrow tile may fill.
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

// A tile's R x NB accumulators set to zero, or from / to rows of `stride` floats.
template <class V, int R, int NB>
void zero_tile(typename V::reg (&acc)[R][NB]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) acc[r][b] = V::zero();
}
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

// f.template operator()<N>() for the N == n, n in [1, MAX]: a run-time count (the pixels or
// rows left for a last tile, the output channels) as a template argument.
template <int MAX, class F>
void with_count(i64 n, F&& f) {
  if constexpr (MAX > 0) {
    if (n == MAX)
      f.template operator()<MAX>();
    else
      with_count<MAX - 1>(n, f);
  }
}

// tile.template operator()<N>(windows, out) over pixels [p0, p1) in tiles of R pixels (N = R but
// for a shorter last one), out moving on by out_step floats a pixel.
template <int R, class Tile>
void over_tiles(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, float* out,
                i64 out_step, Tile&& tile) {
  PixelWalk walk(st, image, row_step, wo, p0);
  const float* s[R];
  for (i64 p = p0; p < p1; p += R, out += R * out_step) {
    const i64 n = std::min<i64>(R, p1 - p);
    for (i64 r = 0; r < n; ++r, walk.next()) s[r] = walk.window();
    with_count<R>(n, [&]<int N>() { tile.template operator()<N>(s, out); });
  }
}

// The tile's bias and activation (TileBias) on R x NB accumulators, channels [0, NB*W) of bias.
template <class V, int R, int NB>
void bias_tile(typename V::reg (&acc)[R][NB], const TileBias& tb) {
  if (tb.bias == nullptr) return;
  typename V::reg bv[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) bv[b] = V::load(tb.bias + V::W * b);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[r][b] = tb.relu ? V::relu(V::add(acc[r][b], bv[b])) : V::add(acc[r][b], bv[b]);
}

// R output pixels (windows s[r]) x NB registers of channels, accumulated in registers over all taps.
template <class V, int R, int NB>
void forward_tile(const DirectSteps& st, const float* const* s, const float* w, float* out, const TileBias& tb) {
  typename V::reg acc[R][NB];
  zero_tile<V>(acc);
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
  bias_tile<V>(acc, tb);
  store_tile<V>(acc, out, st.o);
}

// Pixels [p0, p1) for the channels [0, NB*W) of w and out.
template <class V, int NB>
void forward_block(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
                   float* out, const TileBias& tb) {
  constexpr int R = V::kForwardRows[NB == 1 ? 0 : NB == 2 ? 1 : 2];
  over_tiles<R>(st, image, row_step, wo, p0, p1, out, st.o,
                [&]<int N>(const float* const* s, float* o) { forward_tile<V, N, NB>(st, s, w, o, tb); });
}

// f.template operator()<NB>(ob) for the blocks of NB registers of channels [ob, ob + NB*W) that
// cover o channels (a multiple of W): the widest block the registers allow first.
template <class V, class F>
void over_blocks(i64 o, F&& f) {
  for (i64 ob = 0; ob < o;) {
    const i64 left = (o - ob) / V::W;
    if (V::kMaxBlockLog2 >= 2 && left >= 4) {
      f.template operator()<4>(ob);
      ob += 4 * V::W;
    } else if (left >= 2) {
      f.template operator()<2>(ob);
      ob += 2 * V::W;
    } else {
      f.template operator()<1>(ob);
      ob += V::W;
    }
  }
}

template <class V>
void forward(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
             float* out, const TileBias& tb) {
  over_blocks<V>(st.o, [&]<int NB>(i64 ob) {
    const TileBias block{tb.bias == nullptr ? nullptr : tb.bias + ob, tb.relu};
    forward_block<V, NB>(st, image, row_step, wo, p0, p1, w + ob, out + ob, block);
  });
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
    with_count<KT - 1>(runs.length - t0, [&]<int N>() {
      filter_tile<V, N, NB>(st, walk, count, at + t0, dy, dk_run + t0 * st.o);
    });
  }
}

template <class V>
void filter(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* dy,
            float* dk) {
  const PixelWalk walk(st, image, row_step, wo, p0);
  over_blocks<V>(st.o, [&]<int NB>(i64 ob) { filter_block<V, NB>(st, walk, p1 - p0, dy + ob, dk + ob); });
}

// ---- few output channels ------------------------------------------------------------------------

// R pixels x NO output channels, each a register of partial sums along the input channels, added
// across its lanes at the end: per tap and register of channels, R inputs and one weight register
// per output channel.
// out[0:N] = the lane sums of v[0:N]: W at a time through V::sums, one transposing tree that
// takes 3 instructions a sum where a horizontal add takes 8 (AVX-512; 5 on AVX2), the rest one by one.
template <class V, int N>
[[gnu::always_inline]] inline void store_sums(const typename V::reg* v, float* out) {
  int i = 0;
#pragma GCC unroll 4
  for (; i + V::W <= N; i += V::W) V::sums(v + i, out + i);
#pragma GCC unroll 16
  for (; i < N; ++i) out[i] = V::hsum(v[i]);
}

// R output pixels x NO output channels, each a dot product along the input channels summed in
// a register over all runs of inputs, added across its lanes at the end.
template <class V, int R, int NO>
void narrow_tile(const DirectSteps& st, const float* const* s, const float* w, float* out) {
  typename V::reg acc[R][NO];
  zero_tile<V>(acc);
  // One loop per run, as in forward_tile: a loop per tap, its offset worked out with a division,
  // ran at half the rate at 16 channels.
  const Runs runs(st);
  for (i64 q = 0; q < runs.count; ++q, w += NO * runs.length) {
    const i64 at = runs.at(st, q);
    for (i64 u = 0; u < runs.length; u += V::W) {
      typename V::reg xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = V::load(s[r] + at + u);
#pragma GCC unroll 8
      for (int oc = 0; oc < NO; ++oc) {
        const typename V::reg wv = V::load(w + oc * runs.length + u);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][oc] = V::fma(xv[r], wv, acc[r][oc]);
      }
    }
  }
  store_sums<V, R * NO>(&acc[0][0], out);  // out[r*NO + oc]: the accumulators' own order
}

template <class V, int NO>
void narrow_pixels(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
                   float* out) {
  // Accumulators, inputs and one weight register within the budget, at most 8 pixels.
  constexpr int R = std::clamp((V::kNarrowRegisters - 1) / (NO + 1), 1, 8);
  over_tiles<R>(st, image, row_step, wo, p0, p1, out, NO,
                [&]<int N>(const float* const* s, float* o) { narrow_tile<V, N, NO>(st, s, w, o); });
}

template <class V>
void narrow(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* w,
            float* out) {
  with_count<kMaxNarrow>(st.o, [&]<int NO>() { narrow_pixels<V, NO>(st, image, row_step, wo, p0, p1, w, out); });
}

// The kernel gradient for few output channels: KV registers of consecutive kernel rows (along
// the input channels of a run) x NO output channels, accumulated over the pixels with dy's NO
// values broadcast, then added into dk's rows k, column oc.
template <class V, int KV, int NO>
void narrow_filter_tile(const DirectSteps& st, PixelWalk walk, i64 count, i64 at, const float* dy, float* dk) {
  typename V::reg acc[KV][NO];
  zero_tile<V>(acc);
  for (i64 p = 0; p < count; ++p, walk.next(), dy += NO) {
    const float* src = walk.window() + at;
    typename V::reg gv[NO];
#pragma GCC unroll 8
    for (int oc = 0; oc < NO; ++oc) gv[oc] = V::bcast(dy + oc);
#pragma GCC unroll 8
    for (int v = 0; v < KV; ++v) {
      const typename V::reg xv = V::load(src + v * V::W);
#pragma GCC unroll 8
      for (int oc = 0; oc < NO; ++oc) acc[v][oc] = V::fma(xv, gv[oc], acc[v][oc]);
    }
  }
  float lanes[V::W];
#pragma GCC unroll 8
  for (int v = 0; v < KV; ++v)
#pragma GCC unroll 8
    for (int oc = 0; oc < NO; ++oc) {
      V::store(lanes, acc[v][oc]);
      for (int l = 0; l < V::W; ++l) dk[(v * V::W + l) * NO + oc] += lanes[l];
    }
}

template <class V, int NO>
void narrow_filter_pixels(const DirectSteps& st, const PixelWalk& walk, i64 count, const float* dy, float* dk) {
  constexpr int KV = std::clamp((V::kNarrowRegisters - 1 - NO) / NO, 1, 8);
  const Runs runs(st);
  const i64 registers = runs.length / V::W;  // per run: its length is a multiple of W
  for (i64 q = 0; q < runs.count; ++q) {
    const i64 at = runs.at(st, q);
    float* dk_run = dk + q * runs.length * NO;
    i64 v0 = 0;
    for (; v0 + KV <= registers; v0 += KV)
      narrow_filter_tile<V, KV, NO>(st, walk, count, at + v0 * V::W, dy, dk_run + v0 * V::W * NO);
    with_count<KV - 1>(registers - v0, [&]<int N>() {
      narrow_filter_tile<V, N, NO>(st, walk, count, at + v0 * V::W, dy, dk_run + v0 * V::W * NO);
    });
  }
}

template <class V>
void narrow_filter(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1, const float* dy,
                   float* dk) {
  with_count<kMaxNarrow>(st.o, [&]<int NO>() {
    narrow_filter_pixels<V, NO>(st, PixelWalk(st, image, row_step, wo, p0), p1 - p0, dy, dk);
  });
}

template <class V>
const DirectKernels& table() {
  static const DirectKernels kernels{forward<V>, filter<V>, narrow<V>, narrow_filter<V>};
  return kernels;
}

}  // namespace keel::cpu::direct::tiles
