// Tensor-level int8 kernels (backend/int8.hpp): the host loops around cpu::int8::gemm.
#include "backend/int8.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "keel/ops/creation.hpp"

namespace keel::backend::int8 {

namespace {

using i64 = std::int64_t;

void require_cpu(const Tensor& t, const std::string& who) {
  if (!t.device().is_cpu())
    throw DeviceError(fmt::format("{}: int8 kernels run on the CPU, the input is on {}", who, t.device().to_string()));
}

Tensor host_float(const Tensor& x, const std::string& who) {
  require_cpu(x, who);
  if (x.dtype() != DType::float32)
    throw DTypeError(fmt::format("{}: int8 kernels take float32 inputs, got {}", who, name(x.dtype())));
  return x.contiguous();
}

// (outer, channels, inner) of a weight with its output channels along `axis`.
void split_axis(const Shape& s, int axis, i64& outer, i64& channels, i64& inner) {
  outer = 1;
  inner = 1;
  channels = s[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
}

cpu::int8::ActivationParams activation_params(const float* x, i64 n, const Range& range) {
  if (range.calibrated.defined()) {
    const float* r = range.calibrated.contiguous().data<float>();
    return cpu::int8::params_for_range(r[0], r[1]);
  }
  if (range.fixed) return cpu::int8::params_for_range(range.lo, range.hi);
  float lo = 0, hi = 0;
  cpu::int8::value_range(x, n, lo, hi);  // NaN is skipped here and caught by quantize_rows
  if (!std::isfinite(lo)) lo = -3.4e38f;
  if (!std::isfinite(hi)) hi = 3.4e38f;
  return cpu::int8::params_for_range(lo, hi);
}

// Scratch bytes for activation codes, kept by each thread between calls (slot 0: a layer's codes;
// one call needs one): a fresh allocation of a few hundred KB is an mmap, and page faults, every
// call. It grows to the largest input the thread has quantized.
std::uint8_t* scratch_codes(std::size_t n) {
  thread_local std::vector<std::uint8_t> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

[[noreturn]] void not_finite(const std::string& who) {
  throw ValueError(fmt::format("{}: the input holds NaN or infinity, which int8 activations cannot represent", who));
}

// ReLU goes in the micro-kernels' store; another activation runs after each block of rows.
void set_activation(cpu::int8::Epilogue& e, const Activation& act) {
  if (!act.on) return;
  if (act.op == kernel::UnaryOp::relu) {
    e.relu = true;
    return;
  }
  e.activate = true;
  e.activation = act.op;
  e.alpha = static_cast<float>(act.alpha);
}

cpu::int8::Epilogue epilogue(const Matrix& w, cpu::int8::ActivationParams p, const Tensor& bias, const Activation& act,
                             const std::string& who) {
  cpu::int8::Epilogue e;
  e.a_scale = p.scale;
  e.a_zero_point = p.zero_point;
  e.w_scale = w.scale.data();
  e.per_channel = w.scale.size() > 1;
  if (bias.defined()) {
    if (bias.size() != w.packed.n || bias.dtype() != DType::float32 || !bias.is_contiguous())
      throw ShapeError(fmt::format("{}: bias {} for {} output channels", who, bias.shape().to_string(), w.packed.n));
    e.bias = bias.data<float>();
  }
  set_activation(e, act);
  return e;
}

}  // namespace

std::string kernel_level() { return cpu::int8::active_level(); }

QuantizedWeights quantize_weights(const Tensor& w_in, int axis, bool per_channel) {
  const Tensor w = host_float(w_in, "quantize_weights");
  i64 outer, channels, inner;
  split_axis(w.shape(), axis, outer, channels, inner);
  const float* src = w.data<float>();
  std::vector<float> maxabs(static_cast<std::size_t>(per_channel ? channels : 1), 0.0f);
  for (i64 o = 0; o < outer; ++o)
    for (i64 c = 0; c < channels; ++c)
      for (i64 i = 0; i < inner; ++i) {
        const float v = src[(o * channels + c) * inner + i];
        if (!std::isfinite(v)) throw ValueError("quantize: a weight is NaN or infinite");
        float& m = maxabs[static_cast<std::size_t>(per_channel ? c : 0)];
        m = std::max(m, std::fabs(v));
      }
  std::vector<float> scale(maxabs.size());
  for (std::size_t c = 0; c < scale.size(); ++c) scale[c] = maxabs[c] > 0 ? maxabs[c] / 127.0f : 1.0f;
  Tensor codes = empty(w.shape(), DType::uint8);
  auto* dst = static_cast<std::uint8_t*>(codes.raw_data());
  for (i64 o = 0; o < outer; ++o)
    for (i64 c = 0; c < channels; ++c) {
      const float s = scale[static_cast<std::size_t>(per_channel ? c : 0)];
      for (i64 i = 0; i < inner; ++i) {
        const i64 at = (o * channels + c) * inner + i;
        const float q = std::clamp(std::nearbyint(src[at] / s), -127.0f, 127.0f);
        dst[at] = static_cast<std::uint8_t>(static_cast<int>(q) + 128);
      }
    }
  return {codes, constant(scale, Shape{static_cast<i64>(scale.size())})};
}

Tensor dequantize_weights(const Tensor& codes_in, const Tensor& scale_in, int axis) {
  const Tensor codes = codes_in.contiguous(), scale = scale_in.contiguous();
  i64 outer, channels, inner;
  split_axis(codes.shape(), axis, outer, channels, inner);
  const bool per_channel = scale.size() > 1;
  Tensor out = empty(codes.shape(), DType::float32);
  const auto* c = codes.data<std::uint8_t>();
  const float* s = scale.data<float>();
  auto* o = static_cast<float*>(out.raw_data());
  for (i64 a = 0; a < outer; ++a)
    for (i64 ch = 0; ch < channels; ++ch)
      for (i64 i = 0; i < inner; ++i) {
        const i64 at = (a * channels + ch) * inner + i;
        o[at] = static_cast<float>(int{c[at]} - 128) * s[per_channel ? ch : 0];
      }
  return out;
}

namespace {

// codes [k, ...] as the [k, n] matrix the kernels take, packed.
Matrix make_matrix(const Tensor& codes_in, const Tensor& scale_in, i64 k) {
  const Tensor codes = codes_in.contiguous(), scale = scale_in.contiguous();
  const i64 n = codes.size() / std::max<i64>(k, 1);
  std::vector<std::int8_t> q(static_cast<std::size_t>(codes.size()));
  const auto* c = codes.data<std::uint8_t>();
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(int{c[i]} - 128);
  Matrix m;
  m.packed = cpu::int8::pack(q.data(), k, n);
  m.scale = scale.to_vector<float>();
  return m;
}

}  // namespace

const Matrix& MatrixCache::get(const Tensor& codes, const Tensor& scale, i64 rows) {
  std::lock_guard<std::mutex> lock(mu_);
  const void* storage = codes.impl()->storage.get();
  const std::uint64_t cv = codes.impl()->storage->version(), sv = scale.impl()->storage->version();
  if (storage != codes_storage_ || cv != codes_version_ || sv != scale_version_) {
    matrix_ = make_matrix(codes, scale, rows);
    codes_storage_ = storage;
    codes_version_ = cv;
    scale_version_ = sv;
  }
  return matrix_;
}

void linear(const Tensor& x_in, const Tensor& codes, const Tensor& scale, const std::shared_ptr<MatrixCache>& cache,
            const Tensor& bias, const Range& range, const Activation& act, const std::string& who, const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"int8_linear"}, {&x_in, &codes, &scale, &bias, &range.calibrated}, {&y},
                     [=](const Tensor* t) {
                       Range rr = range;
                       rr.calibrated = t[4];
                       linear(t[0], t[1], t[2], cache, t[3], rr, act, who, t[5]);
                     });
  KernelClock clock;
  const Tensor x = host_float(x_in, who);
  const i64 m = x.shape()[0], k = x.shape()[1];
  const Matrix& w = cache->get(codes, scale, k);
  if (k != w.packed.k)
    throw ShapeError(fmt::format("{}: input {} for a [{}, {}] int8 weight", who, x.shape().to_string(), w.packed.k,
                                 w.packed.n));
  const cpu::int8::ActivationParams p = activation_params(x.data<float>(), x.size(), range);
  // Bytes k..k4 of each row are left as they are: they meet zero weights.
  std::uint8_t* a = scratch_codes(static_cast<std::size_t>(m * w.packed.k4));
  if (!cpu::int8::quantize_rows(x.data<float>(), m, k, k, p, a, w.packed.k4)) not_finite(who);
  cpu::int8::gemm(a, w.packed.k4, m, w.packed, epilogue(w, p, bias, act, who), static_cast<float*>(y.raw_data()),
                  w.packed.n);
}

void plan_axis(const std::string& padding, i64 in, i64 k, i64 stride, i64 dilation, i64& pad_before, i64& out) {
  const i64 span = (k - 1) * dilation + 1;
  if (padding == "valid") {
    pad_before = 0;
    out = in >= span ? (in - span) / stride + 1 : 0;
  } else if (padding == "causal") {
    pad_before = span - 1;
    out = (in - 1) / stride + 1;
  } else {  // "same": TensorFlow puts the odd pixel after
    out = (in + stride - 1) / stride;
    const i64 total = std::max<i64>((out - 1) * stride + span - in, 0);
    pad_before = total / 2;
  }
}

void conv2d(const Tensor& x_in, const Tensor& codes, const Tensor& scale, const std::shared_ptr<MatrixCache>& cache,
            const ConvGeometry& g, const Tensor& bias, const Range& range, const Activation& act, const std::string& who,
            const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"int8_conv2d"}, {&x_in, &codes, &scale, &bias, &range.calibrated}, {&y},
                     [=](const Tensor* t) {
                       Range rr = range;
                       rr.calibrated = t[4];
                       conv2d(t[0], t[1], t[2], cache, g, t[3], rr, act, who, t[5]);
                     });
  KernelClock clock;
  const Tensor x = host_float(x_in, who);
  const i64 n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], c = x.shape()[3];
  const Matrix& w = cache->get(codes, scale, g.kh * g.kw * c);
  if (g.kh * g.kw * c != w.packed.k)
    throw ShapeError(fmt::format("{}: input {} for an int8 kernel of {} rows", who, x.shape().to_string(), w.packed.k));
  const cpu::int8::ActivationParams p = activation_params(x.data<float>(), x.size(), range);
  std::uint8_t* xq = scratch_codes(static_cast<std::size_t>(x.size()));
  if (!cpu::int8::quantize_rows(x.data<float>(), 1, x.size(), x.size(), p, xq, x.size())) not_finite(who);
  cpu::int8::ConvShape cs;
  cs.n = n, cs.h = h, cs.w = wd, cs.c = c, cs.kh = g.kh, cs.kw = g.kw, cs.sh = g.sh, cs.sw = g.sw, cs.dh = g.dh, cs.dw = g.dw;
  cs.pad_top = g.pad_top, cs.pad_left = g.pad_left, cs.out_h = g.out_h, cs.out_w = g.out_w;
  cpu::int8::conv2d(xq, cs, w.packed, epilogue(w, p, bias, act, who), static_cast<float*>(y.raw_data()));
}

void depthwise2d(const Tensor& x_in, const Tensor& codes_in, const Tensor& scale_in, const ConvGeometry& g,
                 const Tensor& bias, const Range& range, const Activation& act, const std::string& who, const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"int8_depthwise2d"}, {&x_in, &codes_in, &scale_in, &bias, &range.calibrated}, {&y},
                     [=](const Tensor* t) {
                       Range rr = range;
                       rr.calibrated = t[4];
                       depthwise2d(t[0], t[1], t[2], g, t[3], rr, act, who, t[5]);
                     });
  KernelClock clock;
  const Tensor x = host_float(x_in, who), codes = codes_in.contiguous(), scale = scale_in.contiguous();
  const i64 n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], c = x.shape()[3];
  const i64 mult = codes.shape()[3], f = c * mult;
  if (codes.shape()[2] != c)
    throw ShapeError(fmt::format("{}: input {} for an int8 depthwise kernel {}", who, x.shape().to_string(),
                                 codes.shape().to_string()));
  const cpu::int8::ActivationParams p = activation_params(x.data<float>(), x.size(), range);
  std::uint8_t* xq = scratch_codes(static_cast<std::size_t>(x.size()));
  if (!cpu::int8::quantize_rows(x.data<float>(), 1, x.size(), x.size(), p, xq, x.size())) not_finite(who);
  const auto* wc = codes.data<std::uint8_t>();
  const float* ws = scale.data<float>();
  const bool per_channel = scale.size() > 1;
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  auto* out = static_cast<float*>(y.raw_data());
  cpu::int8::Epilogue e;
  set_activation(e, act);
  std::vector<std::int32_t> acc(static_cast<std::size_t>(f));
  for (i64 b = 0; b < n; ++b)
    for (i64 oy = 0; oy < g.out_h; ++oy)
      for (i64 ox = 0; ox < g.out_w; ++ox) {
        std::fill(acc.begin(), acc.end(), 0);
        for (i64 ky = 0; ky < g.kh; ++ky) {
          const i64 iy = oy * g.sh + ky * g.dh - g.pad_top;
          for (i64 kx = 0; kx < g.kw; ++kx) {
            const i64 ix = ox * g.sw + kx * g.dw - g.pad_left;
            const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < wd;
            const std::uint8_t* xp = inside ? xq + ((b * h + iy) * wd + ix) * c : nullptr;
            const std::uint8_t* wp = wc + (ky * g.kw + kx) * f;
            for (i64 ch = 0; ch < c; ++ch) {
              const std::int32_t a = (inside ? std::int32_t{xp[ch]} : p.zero_point) - p.zero_point;
              for (i64 m = 0; m < mult; ++m) acc[ch * mult + m] += a * (std::int32_t{wp[ch * mult + m]} - 128);
            }
          }
        }
        float* o = out + ((b * g.out_h + oy) * g.out_w + ox) * f;
        for (i64 j = 0; j < f; ++j) {
          float v = static_cast<float>(acc[j]) * (p.scale * ws[per_channel ? j : 0]);
          if (bp) v += bp[j];
          o[j] = e.relu && v < 0 ? 0.0f : v;
        }
        if (ox + 1 == g.out_w) cpu::int8::activate(e, out + (b * g.out_h + oy) * g.out_w * f, g.out_w * f);
      }
}

void embedding(const Tensor& ids_in, const Tensor& codes_in, const Tensor& scale_in, const std::string& who,
               const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"int8_embedding"}, {&ids_in, &codes_in, &scale_in}, {&y},
                     [=](const Tensor* t) { embedding(t[0], t[1], t[2], who, t[3]); });
  KernelClock clock;
  require_cpu(ids_in, who);
  const Tensor codes = codes_in.contiguous(), scale = scale_in.contiguous();
  const std::vector<std::int64_t> ids = ids_in.to_vector<std::int64_t>();
  const i64 vocab = codes.shape()[0], dim = codes.shape()[1];
  auto* out = static_cast<float*>(y.raw_data());
  const auto* c = codes.data<std::uint8_t>();
  const float* s = scale.data<float>();
  const bool per_row = scale.size() > 1;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const i64 id = ids[i];
    if (id < 0 || id >= vocab)
      throw ValueError(fmt::format("{}: index {} is outside [0, {}) (input {})", who, id, vocab,
                                   ids_in.shape().to_string()));
    const float si = s[per_row ? id : 0];
    for (i64 d = 0; d < dim; ++d)
      out[static_cast<i64>(i) * dim + d] = static_cast<float>(int{c[id * dim + d]} - 128) * si;
  }
}

void observe(const Tensor& x_in, float& lo, float& hi, std::vector<float>* sample, std::size_t max_samples) {
  const Tensor x = host_float(x_in, "quantize (calibration)");
  const float* p = x.data<float>();
  const i64 n = x.size();
  const i64 stride = sample && max_samples > 0 ? std::max<i64>(1, n / static_cast<i64>(max_samples)) : 0;
  for (i64 i = 0; i < n; ++i) {
    if (!std::isfinite(p[i])) continue;
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
    if (stride && i % stride == 0 && sample->size() < max_samples * 4) sample->push_back(p[i]);
  }
}

}  // namespace keel::backend::int8
