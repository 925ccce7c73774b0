// int8 GEMM: packing, the portable reference level, run-time dispatch and activation
// quantization (the micro-kernels are in cpu/int8/).
#include "cpu/int8_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "cpu/thread_pool.hpp"
#include "keel/core/config.hpp"

namespace keel::cpu::int8 {

void gemm_rows_avx2(const std::uint8_t* a, std::int64_t lda, std::int64_t r0, std::int64_t r1, const PackedWeights& w,
                    const Epilogue& e, float* out, std::int64_t ldo);
void gemm_rows_avx512vnni(const std::uint8_t* a, std::int64_t lda, std::int64_t r0, std::int64_t r1,
                          const PackedWeights& w, const Epilogue& e, float* out, std::int64_t ldo);

namespace {

using i64 = std::int64_t;
using RowsFn = void (*)(const std::uint8_t*, i64, i64, i64, const PackedWeights&, const Epilogue&, float*, i64);

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
      v.push_back({"avx512vnni", gemm_rows_avx512vnni});
    if (has_avx2() && cap != "sse2") v.push_back({"avx2", gemm_rows_avx2});
    v.push_back({"scalar", gemm_rows_scalar});
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

void gemm(const std::uint8_t* a, i64 lda, i64 m, const PackedWeights& w, const Epilogue& e, float* out, i64 ldo) {
  if (m <= 0 || w.n <= 0) return;
  const RowsFn fn = active().load(std::memory_order_relaxed)->fn;
  // Row ranges of at least 2^18 multiply-adds each go to the pool's threads.
  const double work = static_cast<double>(m) * static_cast<double>(w.n16) * static_cast<double>(w.k4);
  const int parts = static_cast<int>(std::min<double>({work / (1 << 18), static_cast<double>(config::num_threads()),
                                                       static_cast<double>((m + 5) / 6)}));
  if (parts <= 1) return fn(a, lda, 0, m, w, e, out, ldo);
  // Ranges in multiples of 6 rows, so that each keeps whole micro-tiles.
  const i64 tiles = (m + 5) / 6;
  parallel_ranges(tiles, parts, [&](i64 t0, i64 t1) { fn(a, lda, t0 * 6, std::min(m, t1 * 6), w, e, out, ldo); });
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

bool quantize_rows(const float* x, i64 rows, i64 cols, i64 ldx, ActivationParams p, std::uint8_t* q, i64 ldq) {
  const float inv = 1.0f / p.scale;
  const float zp = static_cast<float>(p.zero_point);
  bool finite = true;
  for (i64 i = 0; i < rows; ++i) {
    const float* xr = x + i * ldx;
    std::uint8_t* qr = q + i * ldq;
    for (i64 j = 0; j < cols; ++j) {
      const float v = xr[j];
      finite &= std::isfinite(v);
      // Limited first (comparisons that send NaN to the lower end), then rounded to nearest even
      // by the 1.5 * 2^23 addition, which unlike nearbyint() needs no library call per value.
      float t = v * inv;
      t = t > -256.0f ? (t < 256.0f ? t : 256.0f) : -256.0f;
      const float r = (t + 12582912.0f) - 12582912.0f + zp;
      qr[j] = static_cast<std::uint8_t>(r > 0.0f ? (r < 127.0f ? r : 127.0f) : 0.0f);
    }
  }
  return finite;
}

}  // namespace keel::cpu::int8
