// The direct float32 convolution (cpu/conv_direct.hpp): the drivers over rows of a zero-padded
// image; the register tiles are in cpu/conv_direct/, one table per instruction set.
#include "cpu/conv_direct.hpp"

#ifdef KEEL_CONV_DIRECT

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cpu/conv_direct/direct_kernels.hpp"
#include "cpu/kernels.hpp"
#include "cpu/window_kernels.hpp"

namespace keel::cpu::direct {

using namespace window;

namespace {

// The largest K = kh*kw*c the direct kernels take, per instruction set and pass, measured
// against im2col + GEMM (oneDNN) at one thread, 3x3 "same" convolutions:
// - AVX2 (12 accumulators, the shape of an AVX2 GEMM's own micro-kernel): K = 27 ran 2x faster;
//   K = 144-576 1.0-1.4x faster over three rounds with both sides capped at AVX2 on an AVX-512
//   machine (KEEL_SIMD=avx2, DNNL_MAX_CPU_ISA=AVX2), K = 1152 0.9-1.0x.
// - AVX-512 (24 accumulators, twice the width), on the seed CNN's layers (K = 27-576) and
//   128-512 channels at 28x28-7x7 (K = 1152-4608): the forward and the input gradient 1.1-1.5x
//   faster up to K = 1152, 0.9x at 2304 and 0.4-0.7x at 4608, where a tile's weights no longer
//   stay in L2; the kernel gradient, whose tiles keep their sums in registers over all pixels,
//   1.1-1.5x faster at every K measured.
constexpr i64 kAvx2MaxK = 576;
constexpr i64 kAvx512MaxK = 1152;
constexpr i64 kAvx512FilterMaxK = 4608;

// The tiles for this pass of a convolution at the active SIMD level (cpu/kernels.hpp, which
// KEEL_SIMD caps), or none: capped at SSE2, convolutions take the im2col path, so that tests
// cover both. g is the geometry the tiles run: for the input gradient, its own forward's. A
// forward with fewer output channels than a register (an RGB image out, or the input gradient
// of a first layer), and its kernel gradient, run the narrow tiles where the input channels fill
// whole registers.
struct Plan {
  const DirectKernels* tiles = nullptr;
  bool narrow = false;
};
Plan plan(const WindowGeom& g, Pass pass) {
  const std::string_view isa = simd().isa;
  const i64 K = g.kh * g.kw * g.c;
  const bool few = g.o <= kMaxNarrow;
  if (isa.rfind("avx512", 0) == 0 && K <= (pass == Pass::filter ? kAvx512FilterMaxK : kAvx512MaxK)) {
    if (g.o % 16 == 0) return {&direct_avx512(), false};
    if (few && g.c % 16 == 0) return {&direct_avx512(), true};
  }
  if (isa == "sse2") return {};
  if (g.o % 8 == 0 && K <= kAvx2MaxK) return {&direct_avx2(), false};
  if (few && g.c % 8 == 0 && K <= kAvx2MaxK) return {&direct_avx2(), true};
  return {};
}

// The padded input copy a part holds: at most this many bytes (or one output row's inputs),
// so that it stays in L2 beside the weights and does not grow with the image (a whole 1024x1024
// image of 64 channels would be 256 MB).
constexpr i64 kBandBytes = 256 << 10;

// A zero-padded copy of the input rows that a band of output rows [oh0, oh1) of one image reads,
// over every column that some window touches: output row oh's windows start at band row
// (oh - oh0) * sh.
struct PaddedBand {
  i64 wp, reach, rows, size;  // padded width; input rows one window spans; output rows per band; floats
  explicit PaddedBand(const WindowGeom& g)
      : wp(std::max(g.pad_left + g.w, (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1)),
        reach((g.kh - 1) * g.dh + 1),
        rows(std::clamp<i64>((kBandBytes / static_cast<i64>(sizeof(float) * wp * g.c) - reach) / g.sh + 1, 1,
                             g.ho)),
        size(((rows - 1) * g.sh + reach) * wp * g.c) {}
  void load(const WindowGeom& g, const float* x, i64 n, i64 oh0, i64 oh1, float* dst) const {
    const i64 C = g.c, height = (oh1 - oh0 - 1) * g.sh + reach, first = oh0 * g.sh - g.pad_top;
    const i64 left = g.pad_left * C, width = g.w * C, row = wp * C;
    // Only the padding is zeroed: filling the whole band first wrote the 16-channel input
    // gradient's bands twice and took a fifth of its time.
    for (i64 r = 0; r < height; ++r, dst += row) {
      if (first + r < 0 || first + r >= g.h) {
        std::fill(dst, dst + row, 0.0f);
        continue;
      }
      std::fill(dst, dst + left, 0.0f);
      copy_run(x + (n * g.h + first + r) * width, width, dst + left);
      std::fill(dst + left + width, dst + row, 0.0f);
    }
  }
  DirectSteps steps(const WindowGeom& g) const {
    return {g.c, g.o, g.kh, g.kw, g.sw * g.c, g.dh * wp * g.c, g.dw * g.c};
  }
  // fn(n, oh0, oh1) for each band of output rows [r0, r1) (rows n*ho + oh), within one image.
  template <class F>
  void for_each(const WindowGeom& g, i64 r0, i64 r1, F&& fn) const {
    for (i64 r = r0; r < r1;) {
      const i64 n = r / g.ho, oh = r - n * g.ho, end = std::min({r1, (n + 1) * g.ho, r + rows});
      fn(n, oh, end - n * g.ho);
      r = end;
    }
  }
};

// The bands of all parts, each starting on a 64-byte line (a band's windows then start on lines
// too when the channels fill whole AVX-512 registers; unaligned, every narrow tile's load
// crossed two lines).
class BandBuffers {
 public:
  BandBuffers(int parts, i64 band_size)
      : stride_((band_size + kLine - 1) / kLine * kLine), data_(static_cast<std::size_t>(parts * stride_ + kLine)) {}
  float* part(int p) {
    const auto base = reinterpret_cast<std::uintptr_t>(data_.data());
    const std::uintptr_t skip = (kLine * sizeof(float) - base % (kLine * sizeof(float))) % (kLine * sizeof(float));
    return data_.data() + skip / sizeof(float) + p * stride_;
  }

 private:
  static constexpr i64 kLine = 16;  // floats per 64-byte line
  i64 stride_;
  std::vector<float> data_;
};

// The input gradient of a stride-1 convolution is itself a stride-1 convolution (a correlation)
// of dy with the kernel turned by 180 degrees and its channel axes swapped:
//   dx[h, w, c] = sum_{i,j,o} dy[h - pt' + i*dh, w - pl' + j*dw, o] * k[kh-1-i, kw-1-j, c, o],
// pt' = (kh-1)*dh - pad_top (pl' likewise), whose windows cover exactly dx's h x w pixels.
WindowGeom input_gradient_geom(const WindowGeom& g) {
  WindowGeom a = g;
  a.h = g.ho;
  a.w = g.wo;
  a.c = g.o;
  a.ho = g.h;
  a.wo = g.w;
  a.o = g.c;
  a.pad_top = (g.kh - 1) * g.dh - g.pad_top;
  a.pad_left = (g.kw - 1) * g.dw - g.pad_left;
  return a;
}

}  // namespace

bool direct_fits(const WindowGeom& g, Pass pass) {
  if (pass != Pass::input) return plan(g, pass).tiles != nullptr;
  return g.sh == 1 && g.sw == 1 && g.pad_top <= (g.kh - 1) * g.dh && g.pad_left <= (g.kw - 1) * g.dw &&
         plan(input_gradient_geom(g), pass).tiles != nullptr;
}

namespace {

// Runs the forward-shaped convolution g with weights w in the plan's layout: [tap][c][o] for the
// wide tiles, [tap][o][c] for the narrow ones.
void run_forward(const WindowGeom& g, const Plan& plan, const float* x, const float* w, float* y,
                 const ConvEpilogue& epilogue) {
  const PaddedBand band(g);
  const DirectSteps st = band.steps(g);
  const i64 C = g.c, O = g.o, rows = g.n * g.ho;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * g.kh * g.kw * C * O));
  // A bias, and a ReLU, go on in the wide tiles' registers; other activations, and the narrow
  // tiles' bias, pass over each band.
  const bool in_tiles = epilogue.bias != nullptr && !plan.narrow &&
                        (epilogue.linear || epilogue.op == kernel::UnaryOp::relu);
  const TileBias tile_bias{in_tiles ? static_cast<const float*>(epilogue.bias) : nullptr, !epilogue.linear};
  BandBuffers padded(parts, band.size);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    float* xp = padded.part(p);
    band.for_each(g, r0, r1, [&](i64 n, i64 oh0, i64 oh1) {
      band.load(g, x, n, oh0, oh1, xp);
      float* out = y + (n * g.ho + oh0) * g.wo * O;
      const i64 pixels = (oh1 - oh0) * g.wo;
      if (plan.narrow) plan.tiles->narrow(st, xp, g.sh * band.wp * C, g.wo, 0, pixels, w, out);
      else plan.tiles->forward(st, xp, g.sh * band.wp * C, g.wo, 0, pixels, w, out, tile_bias);
      if (!in_tiles) finish_rows(epilogue, out, pixels, O);
    });
  });
}

// The kernel k [kh, kw, c, o] as the weights of the forward-shaped convolution `a` that the tiles
// run (in = a.c, out = a.o channels): k itself (a == g), or for the input gradient (turn) its taps
// turned by 180 degrees (tap t is k's taps-1-t: i -> kh-1-i and j -> kw-1-j at once) and its
// channel axes swapped. Wide tiles take [tap][in][out]; narrow ones [run][out][the run's inputs]
// (cpu/conv_direct/direct_kernels.hpp).
std::vector<float> arrange(const WindowGeom& g, const WindowGeom& a, const float* k, bool turn, bool narrow) {
  const i64 C = g.c, O = g.o, taps = g.kh * g.kw, in = a.c, out = a.o;
  const bool row_runs = a.dw == 1;  // DirectSteps::tap == c
  std::vector<float> dst(static_cast<std::size_t>(taps * C * O));
  for (i64 t = 0; t < taps; ++t) {
    const float* src = k + (turn ? taps - 1 - t : t) * C * O;  // [c, o]
    const i64 i = t / a.kw, j = t % a.kw;
    for (i64 ci = 0; ci < in; ++ci)
      for (i64 co = 0; co < out; ++co) {
        const float v = turn ? src[co * O + ci] : src[ci * O + co];
        const i64 at = !narrow ? (t * in + ci) * out + co
                       : row_runs ? ((i * out + co) * a.kw + j) * in + ci
                                  : (t * out + co) * in + ci;
        dst[static_cast<std::size_t>(at)] = v;
      }
  }
  return dst;
}

}  // namespace

void direct_forward(const WindowGeom& g, const float* x, const float* k, float* y, const ConvEpilogue& epilogue) {
  const Plan p = plan(g, Pass::forward);
  if (!p.narrow) return run_forward(g, p, x, k, y, epilogue);
  run_forward(g, p, x, arrange(g, g, k, false, true).data(), y, epilogue);
}

void direct_backward_input(const WindowGeom& g, const float* dy, const float* k, float* dx) {
  const WindowGeom a = input_gradient_geom(g);
  const Plan p = plan(a, Pass::input);
  run_forward(a, p, dy, arrange(g, a, k, true, p.narrow).data(), dx, ConvEpilogue{});
}

void direct_backward_filter(const WindowGeom& g, const float* x, const float* dy, float* dk) {
  const Plan pl = plan(g, Pass::filter);
  const FilterPixels tiles = pl.narrow ? pl.tiles->narrow_filter : pl.tiles->filter;
  const PaddedBand band(g);
  const DirectSteps st = band.steps(g);
  const i64 C = g.c, O = g.o, K = g.kh * g.kw * C, rows = g.n * g.ho;
  const int parts = plan_parts(rows, static_cast<double>(g.wo * K * O));
  // Part 0 sums into dk; the others into their own zeroed copies, added below.
  BandBuffers padded(parts, band.size);
  std::vector<float> partial(static_cast<std::size_t>((parts - 1) * K * O));
  std::fill(dk, dk + K * O, 0.0f);
  run_parts(parts, rows, [&](int p, i64 r0, i64 r1) {
    float* xp = padded.part(p);
    float* acc = p == 0 ? dk : partial.data() + (p - 1) * K * O;
    band.for_each(g, r0, r1, [&](i64 n, i64 oh0, i64 oh1) {
      band.load(g, x, n, oh0, oh1, xp);
      tiles(st, xp, g.sh * band.wp * C, g.wo, 0, (oh1 - oh0) * g.wo, dy + (n * g.ho + oh0) * g.wo * O, acc);
    });
  });
  for (int p = 1; p < parts; ++p) add_run(partial.data() + (p - 1) * K * O, K * O, dk);
}

}  // namespace keel::cpu::direct

#endif  // KEEL_CONV_DIRECT
