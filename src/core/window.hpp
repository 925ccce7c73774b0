#pragma once
// TensorFlow's sliding-window geometry (convolution and pooling over NHWC images): plain data
// that the ops compute once, and the CPU and CUDA kernels read. No dependencies but <algorithm>,
// so that nvcc reads it too.
#include <algorithm>
#include <cstdint>

namespace keel::kernel {

enum class Padding { valid, same, causal };

struct AxisWindow {
  std::int64_t out;         // output size
  std::int64_t pad_before;  // padding before the first input element
};

// Output size and padding of a window of `k` taps `dilation` apart moved by `stride` over `in`
// elements. valid: out = ceil((in - k_eff + 1) / stride) (0 when k_eff > in), no padding.
// same: out = ceil(in / stride), pad_total = max((out-1)*stride + k_eff - in, 0), pad_before =
// pad_total / 2 (the odd one goes after). causal: pad_before = k_eff - 1, out = ceil(in / stride).
inline AxisWindow window_axis(std::int64_t in, std::int64_t k, std::int64_t stride,
                              std::int64_t dilation, Padding padding) {
  const std::int64_t k_eff = (k - 1) * dilation + 1;
  switch (padding) {
    case Padding::valid:
      return {in >= k_eff ? (in - k_eff) / stride + 1 : 0, 0};
    case Padding::same: {
      const std::int64_t out = (in + stride - 1) / stride;
      const std::int64_t total = std::max<std::int64_t>((out - 1) * stride + k_eff - in, 0);
      return {out, total / 2};
    }
    case Padding::causal:
      return {(in + stride - 1) / stride, k_eff - 1};
  }
  return {0, 0};
}

// One sliding-window op. The window of output pixel (oh, ow) covers input rows
// oh*sh - pad_top + i*dh (i < kh) and columns ow*sw - pad_left + j*dw (j < kw); positions outside
// [0, h) x [0, w) are padding (zeros for convolution, skipped by pooling).
struct WindowGeom {
  std::int64_t n = 0, h = 0, w = 0, c = 0;  // input [n, h, w, c]
  std::int64_t kh = 1, kw = 1;              // window size in taps
  std::int64_t sh = 1, sw = 1;              // strides
  std::int64_t dh = 1, dw = 1;              // dilation (1 for pooling)
  std::int64_t pad_top = 0, pad_left = 0;   // padding before; what comes after is implied by ho, wo
  std::int64_t ho = 0, wo = 0;              // output rows and columns
  std::int64_t o = 0;                       // output channels: conv kernel's out, depthwise c*multiplier, pooling c
};

// Sets g's output size and padding before (ho, wo, pad_top, pad_left) from its input size,
// window, strides and dilation.
inline void place_windows(WindowGeom& g, Padding padding) {
  const AxisWindow ah = window_axis(g.h, g.kh, g.sh, g.dh, padding);
  const AxisWindow aw = window_axis(g.w, g.kw, g.sw, g.dw, padding);
  g.ho = ah.out;
  g.pad_top = ah.pad_before;
  g.wo = aw.out;
  g.pad_left = aw.pad_before;
}

}  // namespace keel::kernel
