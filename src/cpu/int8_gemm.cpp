// int8 GEMM: packing, the portable reference level, run-time dispatch and activation
// quantization (the micro-kernels are in cpu/int8/).
#include "cpu/int8_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <string_view>

#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "cpu/window_kernels.hpp"
#include "keel/core/config.hpp"

// The portable level's activation quantization: the levels' loop, compiled here.
#define KEEL_INT8_LEVEL portable
#include "cpu/int8/quantize_impl.hpp"
#undef KEEL_INT8_LEVEL

namespace keel::cpu::int8 {

void gemm_rows_avx2(const std::uint8_t* a, std::int64_t lda, std::int64_t r0, std::int64_t r1, const PackedWeights& w,
                    const Epilogue& e, float* out, std::int64_t ldo);
void gemm_rows_avx512vnni(const std::uint8_t* a, std::int64_t lda, std::int64_t r0, std::int64_t r1,
                          const PackedWeights& w, const Epilogue& e, float* out, std::int64_t ldo);
bool quantize_rows_avx2(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, float inv_scale,
                        float zero_point, std::uint8_t* q, std::int64_t ldq);
bool quantize_rows_avx512vnni(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, float inv_scale,
                              float zero_point, std::uint8_t* q, std::int64_t ldq);
void value_range_avx2(const float* x, std::int64_t n, float& lo, float& hi);
void value_range_avx512vnni(const float* x, std::int64_t n, float& lo, float& hi);

namespace {

using i64 = std::int64_t;
using RowsFn = void (*)(const std::uint8_t*, i64, i64, i64, const PackedWeights&, const Epilogue&, float*, i64);
using QuantizeFn = bool (*)(const float*, i64, i64, i64, float, float, std::uint8_t*, i64);
using RangeFn = void (*)(const float*, i64, float&, float&);

// The reference: the same integers and the same float epilogue as the micro-kernels.
void gemm_rows_scalar(const std::uint8_t* a, i64 lda, i64 r0, i64 r1, const PackedWeights& w, const Epilogue& e,
                      float* out, i64 ldo) {
  for (i64 i = r0; i < r1; ++i) {
    for (i64 j = 0; j < w.n; ++j) {
      const std::int8_t* col = w.data.data() + (j / 16) * w.k4 * 16 + (j % 16) * 4;
      std::int32_t acc = 0;
      for (i64 s = 0; s < w.k4 / 4; ++s)
        for (int t = 0; t < 4; ++t) acc += std::int32_t{a[i * lda + 4 * s + t]} * std::int32_t{col[64 * s + t]};
      const std::int32_t corrected = acc - e.a_zero_point * w.colsum[static_cast<std::size_t>(j)];
      const float scale = e.a_scale * (e.per_channel ? e.w_scale[j] : e.w_scale[0]);
      float y = static_cast<float>(corrected) * scale;
      if (e.bias) y += e.bias[j];
      if (e.relu && y < 0) y = 0;
      out[i * ldo + j] = y;
    }
  }
}

struct Level {
  std::string name;
  RowsFn fn;
  QuantizeFn quantize;
  RangeFn range;
};

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
bool has_avx512vnni() {
  __builtin_cpu_init();
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

const std::vector<Level>& all_levels() {
  static const std::vector<Level> levels = [] {
    // KEEL_SIMD (the float kernels' cap) caps these too: avx2 drops VNNI, sse2 leaves the reference.
    const char* env = std::getenv("KEEL_SIMD");
    const std::string_view cap = env ? env : "";
    std::vector<Level> v;
    if (has_avx512vnni() && (cap.empty() || cap.rfind("avx512", 0) == 0))
      v.push_back({"avx512vnni", gemm_rows_avx512vnni, quantize_rows_avx512vnni, value_range_avx512vnni});
    if (has_avx2() && cap != "sse2") v.push_back({"avx2", gemm_rows_avx2, quantize_rows_avx2, value_range_avx2});
    v.push_back({"scalar", gemm_rows_scalar, portable::quantize_scalar, portable::range_scalar});
    return v;
  }();
  return levels;
}

std::atomic<const Level*>& active() {
  static std::atomic<const Level*> level{&all_levels().front()};
  return level;
}

}  // namespace

PackedWeights pack(const std::int8_t* q, i64 k, i64 n) {
  PackedWeights w;
  w.k = k;
  w.n = n;
  w.k4 = (k + 3) / 4 * 4;
  w.n16 = (n + 15) / 16 * 16;
  w.data.assign(static_cast<std::size_t>(w.k4 * w.n16), 0);
  w.colsum.assign(static_cast<std::size_t>(w.n16), 0);
  for (i64 kk = 0; kk < k; ++kk)
    for (i64 j = 0; j < n; ++j) {
      const std::int8_t v = q[kk * n + j];
      w.data[static_cast<std::size_t>((j / 16) * w.k4 * 16 + (kk / 4) * 64 + (j % 16) * 4 + kk % 4)] = v;
      w.colsum[static_cast<std::size_t>(j)] += v;
    }
  return w;
}

void activate(const Epilogue& e, float* y, i64 n) {
  if (e.activate) typed_kernels<float>().unary(e.activation, y, y, n, e.alpha);
}

namespace {

// Rows [r0, r1) of the output through the micro-kernels, then through the epilogue's other
// activation while they are in cache.
void rows_with_activation(RowsFn fn, const std::uint8_t* a, i64 lda, i64 r0, i64 r1, const PackedWeights& w,
                          const Epilogue& e, float* out, i64 ldo) {
  fn(a, lda, r0, r1, w, e, out, ldo);
  if (!e.activate) return;
  if (ldo == w.n) return activate(e, out + r0 * ldo, (r1 - r0) * w.n);
  for (i64 r = r0; r < r1; ++r) activate(e, out + r * ldo, w.n);
}

}  // namespace

void gemm(const std::uint8_t* a, i64 lda, i64 m, const PackedWeights& w, const Epilogue& e, float* out, i64 ldo) {
  if (m <= 0 || w.n <= 0) return;
  const RowsFn fn = active().load(std::memory_order_relaxed)->fn;
  // Ranges in multiples of 6 rows, so that each keeps whole micro-tiles; threads only where the
  // work pays for them (the loop kernels' rule).
  const i64 tiles = (m + 5) / 6;
  const int parts = window::plan_parts(tiles, 6.0 * static_cast<double>(w.n16) * static_cast<double>(w.k4));
  // Blocks of at most 48 rows keep an activation's pass over them in L1/L2.
  constexpr i64 kActivationTiles = 8;
  const i64 step = e.activate ? kActivationTiles : tiles;  // without one: each range in one call
  const auto run = [&](i64 t0, i64 t1) {
    for (i64 t = t0; t < t1; t += step)
      rows_with_activation(fn, a, lda, t * 6, std::min(m, std::min(t1, t + step) * 6), w, e, out, ldo);
  };
  if (parts <= 1) return run(0, tiles);
  parallel_ranges(tiles, parts, run);
}

namespace {

// n bytes (a channel run of an im2col row): fixed-size copies the compiler inlines, overlapping
// at the end, instead of a memcpy call per run.
inline void copy_run(std::uint8_t* dst, const std::uint8_t* src, i64 n) {
  if (n >= 16) {
    i64 i = 0;
    for (; i + 16 <= n; i += 16) std::memcpy(dst + i, src + i, 16);
    if (i < n) std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n >= 2) {
    std::memcpy(dst, src, 2);
    std::memcpy(dst + n - 2, src + n - 2, 2);
  } else if (n == 1) {
    dst[0] = src[0];
  }
}

// Bytes the rows buffer of im2col_rows needs past its last row: the 8-byte stores of short runs.
constexpr i64 kRowsSlack = 8;

// The im2col rows of output pixels [p0, p1) into rows (k4 bytes each, and kRowsSlack more after
// the last). Every window lies inside the input: conv2d pads the codes first (pad_codes), so no
// tap is checked. Pixels are walked in order, the input offset advancing by a stride (no
// divisions or multiplications per row). Runs of at most 8 bytes (a first layer: 3 taps of 1-3
// channels) move as one 8-byte load and store each: the store's extra bytes land in the next run,
// rewritten after it, or past the row's k bytes, set to the zero point after; the load's stay
// inside the input (`bytes`) or the pixel copies run by run. The sizes are locals: the byte
// stores may alias anything reached through memory, and fields were reloaded after each.
void im2col_rows(const std::uint8_t* xq, i64 bytes, const ConvShape& s, std::uint8_t zp, i64 k4, i64 p0, i64 p1,
                 std::uint8_t* rows) {
  const i64 c = s.c, kh = s.kh, kw = s.kw, out_w = s.out_w, out_h = s.out_h;
  const i64 k = kh * kw * c, run = kw * c, row_step = s.dh * s.w * c, tap_step = s.dw * c;
  const i64 pixel_step = s.sw * c, line_step = s.sh * s.w * c, image_step = s.h * s.w * c;
  const bool contiguous = s.dw == 1, short_runs = contiguous && run <= 8;
  const i64 last_safe = bytes - 8 - (kh - 1) * row_step;  // an 8-byte run load from at most here
  const std::uint32_t zp4 = 0x01010101u * zp;
  i64 ox = p0 % out_w, oy = (p0 / out_w) % out_h, b = p0 / (out_w * out_h);
  i64 line = b * image_step + oy * line_step;  // the input offset of this output row's first window
  i64 at = line + ox * pixel_step;
  for (i64 p = p0; p < p1; ++p) {
    std::uint8_t* row = rows + (p - p0) * k4;
    if (short_runs && at <= last_safe) {
      for (i64 ky = 0; ky < kh; ++ky) {
        std::uint64_t v;
        std::memcpy(&v, xq + at + ky * row_step, 8);
        std::memcpy(row + ky * run, &v, 8);
      }
    } else if (contiguous) {
      for (i64 ky = 0; ky < kh; ++ky) copy_run(row + ky * run, xq + at + ky * row_step, run);
    } else {
      for (i64 ky = 0; ky < kh; ++ky)
        for (i64 kx = 0; kx < kw; ++kx) copy_run(row + ky * run + kx * c, xq + at + ky * row_step + kx * tap_step, c);
    }
    // The at most 3 bytes past k: one 4-byte store (a loop here became a memset call per row);
    // its extra bytes land in the next row, written after it, or in the buffer's slack.
    if (k < k4) std::memcpy(row + k, &zp4, 4);
    at += pixel_step;
    if (++ox == out_w) {
      ox = 0;
      line += line_step;
      if (++oy == out_h) {
        oy = 0;
        ++b;
        line = b * image_step;
      }
      at = line;
    }
  }
}

}  // namespace

namespace {

// The padding as codes: xq copied into a buffer with pad_top / pad_left rows and columns of the
// zero point before each image's rows and columns and what the last windows reach after, so that
// every window lies inside and im2col checks no tap (the border pixels' checked path, with its
// memsets of a few bytes, took half of a 1-channel first layer's im2col). Returns s's shape for
// the padded input, with no padding.
ConvShape pad_codes(const std::uint8_t* xq, const ConvShape& s, std::uint8_t zp, std::vector<std::uint8_t>& buffer) {
  ConvShape p = s;
  const i64 bottom = std::max<i64>(0, (s.out_h - 1) * s.sh + (s.kh - 1) * s.dh + 1 - s.h - s.pad_top);
  const i64 right = std::max<i64>(0, (s.out_w - 1) * s.sw + (s.kw - 1) * s.dw + 1 - s.w - s.pad_left);
  p.h = s.pad_top + s.h + bottom;
  p.w = s.pad_left + s.w + right;
  p.pad_top = p.pad_left = 0;
  buffer.assign(static_cast<std::size_t>(p.n * p.h * p.w * p.c), zp);
  const i64 row = s.w * s.c;
  for (i64 b = 0; b < s.n; ++b)
    for (i64 y = 0; y < s.h; ++y)
      std::memcpy(buffer.data() + ((b * p.h + y + s.pad_top) * p.w + s.pad_left) * p.c, xq + (b * s.h + y) * row,
                  static_cast<std::size_t>(row));
  return p;
}

}  // namespace

void conv2d(const std::uint8_t* codes, const ConvShape& shape, const PackedWeights& w, const Epilogue& e, float* out) {
  const i64 pixels = shape.n * shape.out_h * shape.out_w;
  if (pixels <= 0 || w.n <= 0) return;
  const RowsFn fn = active().load(std::memory_order_relaxed)->fn;
  const auto zp = static_cast<std::uint8_t>(e.a_zero_point);
  thread_local std::vector<std::uint8_t> padded;
  const bool pad = shape.pad_top > 0 || shape.pad_left > 0 ||
                   (shape.out_h - 1) * shape.sh + (shape.kh - 1) * shape.dh >= shape.h ||
                   (shape.out_w - 1) * shape.sw + (shape.kw - 1) * shape.dw >= shape.w;
  const ConvShape s = pad ? pad_codes(codes, shape, zp, padded) : shape;
  const std::uint8_t* xq = pad ? padded.data() : codes;
  // Blocks of 192 pixels (a multiple of the 6-row tile): their rows stay in L2 between im2col
  // and the GEMM.
  constexpr i64 kBlock = 192;
  const i64 blocks = (pixels + kBlock - 1) / kBlock;
  const int parts =
      window::plan_parts(blocks, static_cast<double>(kBlock) * static_cast<double>(w.n16) * static_cast<double>(w.k4));
  parallel_ranges(blocks, parts, [&](i64 b0, i64 b1) {
    std::vector<std::uint8_t> rows(static_cast<std::size_t>(kBlock * w.k4 + kRowsSlack));
    for (i64 blk = b0; blk < b1; ++blk) {
      const i64 p0 = blk * kBlock, p1 = std::min(pixels, p0 + kBlock);
      im2col_rows(xq, s.n * s.h * s.w * s.c, s, zp, w.k4, p0, p1, rows.data());
      rows_with_activation(fn, rows.data(), w.k4, 0, p1 - p0, w, e, out + p0 * w.n, w.n);
    }
  });
}

const std::vector<std::string>& levels() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Level& l : all_levels()) v.push_back(l.name);
    return v;
  }();
  return names;
}

const std::string& active_level() { return active().load()->name; }

bool set_level(const std::string& level) {
  for (const Level& l : all_levels())
    if (l.name == level) {
      active().store(&l);
      return true;
    }
  return false;
}

ActivationParams params_for_range(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  ActivationParams p;
  p.scale = hi > lo ? (hi - lo) / 127.0f : 1.0f;
  p.zero_point = static_cast<std::int32_t>(std::clamp(std::nearbyint(-lo / p.scale), 0.0f, 127.0f));
  return p;
}

void value_range(const float* x, i64 n, float& lo, float& hi) {
  active().load(std::memory_order_relaxed)->range(x, n, lo, hi);
}

bool quantize_rows(const float* x, i64 rows, i64 cols, i64 ldx, ActivationParams p, std::uint8_t* q, i64 ldq) {
  return active().load(std::memory_order_relaxed)->quantize(x, rows, cols, ldx, 1.0f / p.scale,
                                                             static_cast<float>(p.zero_point), q, ldq);
}

}  // namespace keel::cpu::int8
