#pragma once
// The direct convolution's register tiles, one table per instruction set (direct_avx2.cpp,
// direct_avx512.cpp, compiled with their -m flags); cpu/conv_direct.cpp picks a table and runs
// the tiles over rows of a zero-padded image.
#include <cstdint>

namespace keel::cpu::direct {

using i64 = std::int64_t;

// Steps through the padded image, in floats.
struct DirectSteps {
  i64 c, o, kh, kw;
  i64 pixel;  // sw * c: from one output pixel's window to the next
  i64 row;    // dh * padded width * c: between tap rows
  i64 tap;    // dw * c: between taps of a row
};

// What a forward tile does to its sums in registers before it stores them: nothing (bias null),
// or out = sum + bias[0:o], then max(0, out) with `relu` (the bits of the bias_unary kernel that
// would otherwise pass over the stored rows: graph mode's fused Conv2D + BiasAdd + Relu).
struct TileBias {
  const float* bias = nullptr;
  bool relu = false;
};

// Output pixels [p0, p1) of one padded image, pixel p = oh*wo + ow, its window starting at
// image + oh*row_step + ow*pixel; out points at pixel p0's outputs (o floats per pixel):
//   out[p, 0:o] = sum over taps (i, j) and channels ch of
//     window(p)[i*row + j*tap + ch] * w[((i*kw + j)*c + ch)*o + 0:o],  then `bias` applied.
// Tiles run across the ends of output rows, so a narrow image (8 pixels wide) leaves no short tiles.
using ForwardPixels = void (*)(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1,
                               const float* w, float* out, const TileBias& bias);
// The narrow tiles' forward (below): out as ForwardPixels' before its bias. Their sums end in a
// horizontal add whose operand order the compiler may swap, so a NaN's sign could differ from
// the unfused kernel's; their bias goes on in a pass over the stored rows.
using NarrowPixels = void (*)(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1,
                              const float* w, float* out);
// dk[k, 0:o] += sum over pixels p in [p0, p1) of window(p)[offset(k)] * dy[p, 0:o] for the
// K = kh*kw*c kernel rows k = (i*kw + j)*c + ch, offset(k) = i*row + j*tap + ch; dy points at
// pixel p0's gradient.
using FilterPixels = void (*)(const DirectSteps& st, const float* image, i64 row_step, i64 wo, i64 p0, i64 p1,
                              const float* dy, float* dk);

// The forward and kernel gradient for few output channels (o <= kMaxNarrow) and input channels c
// a multiple of the vector width. The forward's outputs are dot products along the channels,
// with the weights laid out [run][o][the run's inputs] (out as for ForwardPixels): a run is a tap
// row, w[((i*o + oc)*kw + j)*c + ch], when its taps' inputs are consecutive (dw*c == c), else one
// tap, w[((i*kw + j)*o + oc)*c + ch]. The kernel gradient is FilterPixels', vectorised along the
// kernel rows.
constexpr i64 kMaxNarrow = 7;

// Channels: o (c for the narrow tiles) a multiple of the table's vector width.
struct DirectKernels {
  ForwardPixels forward;
  FilterPixels filter;
  NarrowPixels narrow;
  FilterPixels narrow_filter;
};

const DirectKernels& direct_avx2();
const DirectKernels& direct_avx512();

}  // namespace keel::cpu::direct
