// QuantizedLayer: a Dense, Conv1D, Conv2D, DepthwiseConv2D, LSTM or Embedding layer whose kernels
// are stored as int8 codes (or float16) and whose int8 forward pass runs on backend/int8.hpp.
// The wrapped layer is kept (untracked: its float weights are not the model's) for shapes and
// config, and computes float16 models and the rare int8 fallbacks (a masked LSTM input, a tensor
// off the CPU) on weights dequantized into it.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "autograd/record.hpp"
#include "backend/int8.hpp"
#include "keel/layers/registry.hpp"
#include "keel/ops/creation.hpp"
#include "layers/elementwise_activations.hpp"
#include "layers/layer_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"
#include "keel/quantization/quantization.hpp"

namespace keel::quantization {

namespace detail {
enum class Kind { dense, conv1d, conv2d, depthwise2d, lstm, embedding };
}

namespace {

using nlohmann::json;
using i64 = std::int64_t;
using detail::Kind;

Kind kind_of(const std::string& cls) {
  if (cls == "Dense") return Kind::dense;
  if (cls == "Conv1D") return Kind::conv1d;
  if (cls == "Conv2D") return Kind::conv2d;
  if (cls == "DepthwiseConv2D") return Kind::depthwise2d;
  if (cls == "LSTM") return Kind::lstm;
  return Kind::embedding;
}

// The weights each class stores quantized, and the axis of their output channels once
// reshaped as matrix_shape() gives (every kernel becomes [rows, channels], Embedding's table
// keeps a scale per row).
bool is_kernel(Kind k, const std::string& rel) {
  if (k == Kind::lstm) return rel == "kernel" || rel == "recurrent_kernel";
  if (k == Kind::embedding) return rel == "embeddings";
  if (k == Kind::depthwise2d) return rel == "depthwise_kernel";
  return rel == "kernel";
}
Shape matrix_shape(Kind k, const Shape& s) {
  if (k == Kind::embedding) return s;
  const i64 channels = k == Kind::depthwise2d ? s[s.rank() - 2] * s[s.rank() - 1] : s[s.rank() - 1];
  return Shape{s.num_elements() / std::max<i64>(channels, 1), channels};
}
int channel_axis(Kind k) { return k == Kind::embedding ? 0 : 1; }

std::uint64_t version_of(const Variable* v) { return v->peek().impl()->storage->version(); }

}  // namespace

struct QuantizedLayer::State {
  Kind kind = Kind::dense;
  json config;  // the wrapped layer's
  // What each call reads of it, made once: its activations, and the name errors give.
  activations::ActivationFn activation, recurrent_activation;
  std::string who;
  struct Stored {
    std::string rel;            // "kernel", "bias", ...
    Variable* inner = nullptr;  // the wrapped layer's float weight
    Variable* value = nullptr;  // codes, float16 storage, or the float weight itself
    Variable* scale = nullptr;  // int8 kernels
    bool kernel = false;
  };
  std::vector<Stored> weights;
  Variable* input_range = nullptr;
  // Each kernel's packing for the int8 GEMM (remade when its codes change).
  std::map<std::string, std::shared_ptr<backend::int8::MatrixCache>> caches;
  std::vector<std::uint64_t> synced;  // versions of the stored weights last written into the inner layer
  bool calibrating = false;
  float seen_lo = 0, seen_hi = 0;
  std::vector<float> sample;

  const Stored& find(const std::string& rel) const {
    for (const Stored& s : weights)
      if (s.rel == rel) return s;
    throw ValueError(fmt::format("QuantizedLayer: the wrapped layer has no weight '{}'", rel));
  }
  bool has(const std::string& rel) const {
    for (const Stored& s : weights)
      if (s.rel == rel) return true;
    return false;
  }
  Tensor bias() const { return has("bias") ? find("bias").value->peek().contiguous() : Tensor(); }
  // y[m, n] = x[m, k] . kernel `rel` (+ bias), on the int8 GEMM.
  Tensor linear(const Tensor& x, const std::string& rel, const Tensor& bias, const backend::int8::Range& range,
                const backend::int8::Activation& act, const std::string& who) {
    const Stored& w = find(rel);
    const Shape m = matrix_shape(kind, w.value->shape());
    Tensor y = empty(Shape{x.shape()[0], m[1]}, DType::float32);
    backend::int8::linear(x.contiguous(), reshape(w.value->peek(), m), w.scale->peek(), cache(rel), bias, range, act,
                          who, y);
    return y;
  }
  // Made with the weights (build), so that calls only read the map.
  const std::shared_ptr<backend::int8::MatrixCache>& cache(const std::string& rel) const { return caches.at(rel); }
};

QuantizedLayer::QuantizedLayer(layers::LayerRef layer, QuantizeOptions options)
    : Layer(layer.get() ? "quant_" + layer.get()->name() : ""),
      layer_(layer.get()),
      options_(std::move(options)),
      state_(std::make_shared<State>()) {
  if (!layer_) throw ValueError("QuantizedLayer: the wrapped layer is null");
  if (options_.dtype != "int8" && options_.dtype != "float16")
    throw ValueError(fmt::format("QuantizedLayer: dtype '{}' (expected \"int8\" or \"float16\")", options_.dtype));
  if (options_.activations != "dynamic" && options_.activations != "static")
    throw ValueError(fmt::format("QuantizedLayer: activations '{}' (expected \"dynamic\" or \"static\")",
                                 options_.activations));
  if (options_.calibration != "minmax" && options_.calibration != "percentile")
    throw ValueError(fmt::format("QuantizedLayer: calibration '{}' (expected \"minmax\" or \"percentile\")",
                                 options_.calibration));
  if (!(options_.percentile > 50 && options_.percentile <= 100))
    throw ValueError(fmt::format("QuantizedLayer: percentile {} (expected (50, 100])", options_.percentile));
  if (!is_quantizable(*layer_))
    throw ValueError(fmt::format("QuantizedLayer: {} '{}' is not quantizable (Dense, Conv1D, Conv2D, DepthwiseConv2D, "
                                 "LSTM and Embedding are, channels_last, ungrouped, not stateful, no return_state)",
                                 layer_->class_name(), layer_->name()));
  state_->kind = kind_of(layer_->class_name());
  state_->config = layer_->get_config();
  state_->activation = activations::ActivationFn(state_->config.value("activation", std::string("linear")));
  state_->recurrent_activation =
      activations::ActivationFn(state_->config.value("recurrent_activation", std::string("sigmoid")));
}

void QuantizedLayer::build(const Shape& input_shape) {
  if (!layer_->built()) layer_->build(input_shape);
  if (!state_->weights.empty()) return;
  const bool int8 = options_.dtype == "int8";
  for (Variable* v : layer_->weights()) {
    State::Stored s;
    s.rel = layers::detail::relative_weight_name(v->name(), layer_->name());
    s.inner = v;
    s.kernel = is_kernel(state_->kind, s.rel);
    if (s.kernel && int8) {
      s.value = &add_weight(s.rel + "_quantized", v->shape(), DType::uint8);
      state_->caches[s.rel] = std::make_shared<backend::int8::MatrixCache>();
      const Shape m = matrix_shape(state_->kind, v->shape());
      s.scale = &add_weight(s.rel + "_scale", Shape{options_.per_channel ? m[channel_axis(state_->kind)] : 1},
                            DType::float32);
    } else if (s.kernel) {
      s.value = &add_weight(s.rel + "_float16", v->shape(), DType::float16);
    } else {
      s.value = &add_weight(s.rel, v->shape(), v->dtype());
    }
    state_->weights.push_back(s);
  }
  if (int8 && options_.activations == "static") state_->input_range = &add_weight("input_range", Shape{2}, DType::float32);
}

void QuantizedLayer::check_input_shape(const Shape& input_shape) const {
  // The wrapped layer was built by build() directly, which records no shape: its checks compare
  // against the wrapper's (Embedding's ids may change length).
  if (state_->kind != Kind::embedding) Layer::check_input_shape(input_shape);
}

Shape QuantizedLayer::compute_output_shape(const Shape& input_shape) { return layer_->compute_output_shape(input_shape); }

void QuantizedLayer::set_float_weights(const std::vector<std::pair<std::string, Tensor>>& weights) {
  for (const auto& [rel, value] : weights) {
    const State::Stored& s = state_->find(rel);
    if (value.shape() != s.inner->shape())
      throw ShapeError(fmt::format("{}: weight '{}' is {}, the layer's is {}", name(), rel, value.shape().to_string(),
                                   s.inner->shape().to_string()));
    if (!s.kernel) {
      s.value->assign(cast(value, s.value->dtype()));
    } else if (options_.dtype == "float16") {
      s.value->assign(cast(value, DType::float16));
    } else {
      const Shape m = matrix_shape(state_->kind, value.shape());
      auto q = backend::int8::quantize_weights(reshape(cast(value, DType::float32), m), channel_axis(state_->kind),
                                               options_.per_channel);
      s.value->assign(reshape(q.codes, value.shape()));
      s.scale->assign(q.scale);
    }
  }
}

void QuantizedLayer::sync_inner() {
  std::vector<std::uint64_t> now;
  for (const State::Stored& s : state_->weights)
    now.push_back(version_of(s.value) ^ (s.scale ? version_of(s.scale) << 32 : 0));
  if (now == state_->synced) return;
  for (const State::Stored& s : state_->weights) {
    Tensor v;
    if (!s.kernel || options_.dtype == "float16") {
      v = cast(s.value->peek(), s.inner->dtype());
    } else {
      const Shape m = matrix_shape(state_->kind, s.value->shape());
      v = reshape(backend::int8::dequantize_weights(reshape(s.value->peek(), m), s.scale->peek(),
                                                    channel_axis(state_->kind)),
                  s.inner->shape());
    }
    s.inner->assign(v.to(s.inner->device()));
  }
  state_->synced = now;
}

layers::Layer& QuantizedLayer::dequantized_layer() {
  sync_inner();
  return *layer_;
}

std::optional<std::array<float, 2>> QuantizedLayer::input_range() const {
  if (!state_->input_range) return std::nullopt;
  const std::vector<float> r = state_->input_range->peek().to_vector<float>();
  return std::array<float, 2>{r[0], r[1]};
}

void QuantizedLayer::begin_calibration() {
  state_->calibrating = true;
  state_->seen_lo = state_->seen_hi = 0;
  state_->sample.clear();
}

void QuantizedLayer::finish_calibration() {
  state_->calibrating = false;
  if (!state_->input_range) return;
  float lo = state_->seen_lo, hi = state_->seen_hi;
  if (options_.calibration == "percentile" && !state_->sample.empty()) {
    std::vector<float>& v = state_->sample;
    std::sort(v.begin(), v.end());
    const auto at = [&](double p) {
      const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
      return v[static_cast<std::size_t>(std::llround(pos))];
    };
    lo = at(100.0 - options_.percentile);
    hi = at(options_.percentile);
  }
  state_->input_range->assign(constant(std::vector<float>{lo, hi}, Shape{2}));
  state_->sample.clear();
}

Tensor QuantizedLayer::call(const Tensor& x, bool training) {
  // Post-training quantization is for inference: no gradient reaches the stored codes (nor,
  // through int8 kernels, the layers before), so training would go silently wrong.
  if (training || autograd::recording())
    throw ValueError(fmt::format("{}: a quantized layer computes no gradients (post-training quantization is for "
                                 "inference): train the float model and quantize it again",
                                 name()));
  const bool masked_rnn = state_->kind == Kind::lstm && layers::get_mask(x).defined();
  if (options_.dtype == "int8" && x.device().is_cpu() && !masked_rnn) return call_int8(x);
  sync_inner();
  return (*layer_)(x, training);
}

Tensor QuantizedLayer::call_int8(const Tensor& x) {
  State& st = *state_;
  const json& c = st.config;
  if (st.who.empty()) st.who = fmt::format("{} ({} int8)", name(), layer_->class_name());
  const std::string& who = st.who;
  backend::int8::Range range;
  if (st.input_range && !st.calibrating) range.calibrated = st.input_range->peek();
  if (st.calibrating && st.kind != Kind::embedding) {
    const size_t max_samples = options_.calibration == "percentile" ? 1 << 16 : 0;
    backend::int8::observe(cast(x, DType::float32), st.seen_lo, st.seen_hi, max_samples ? &st.sample : nullptr,
                           max_samples);
  }
  // An elementwise activation runs in the kernels' epilogue (the same float kernel the op would
  // run afterwards, on each block while it is in cache); softmax and the like run after.
  const activations::ActivationFn& act = st.activation;
  backend::int8::Activation fused;
  if (const auto* e = activations::detail::elementwise_activation(act.name())) fused = {true, e->kernel, e->alpha};
  const auto finish = [&](Tensor y) { return fused.on ? y : act(y); };
  const Tensor xf = st.kind == Kind::embedding ? x : cast(x, DType::float32);
  const Shape s = x.shape();

  switch (st.kind) {
    case Kind::dense: {
      const i64 k = s[s.rank() - 1];
      Tensor y = st.linear(reshape(xf, Shape{-1, k}), "kernel", st.bias(), range, fused, who);
      std::vector<i64> dims = s.dims();
      dims.back() = y.shape()[1];
      y = reshape(finish(y), Shape(dims));
      const Tensor mask = layers::get_mask(x);
      return mask.defined() ? layers::with_mask(y, mask) : y;
    }
    case Kind::conv1d:
    case Kind::conv2d:
    case Kind::depthwise2d: {
      const bool one_d = st.kind == Kind::conv1d;
      const auto pair = [&](const char* key) {
        const json& v = c.at(key);
        if (v.is_number()) return std::array<i64, 2>{1, v.get<i64>()};
        if (one_d) return std::array<i64, 2>{1, v.at(0).get<i64>()};
        return std::array<i64, 2>{v.at(0).get<i64>(), v.at(1).get<i64>()};
      };
      const Tensor x4 = one_d ? reshape(xf, Shape{s[0], 1, s[1], s[2]}) : xf;
      const auto ks = pair("kernel_size"), st2 = pair("strides"), dl = pair("dilation_rate");
      backend::int8::ConvGeometry g;
      g.kh = ks[0], g.kw = ks[1], g.sh = st2[0], g.sw = st2[1], g.dh = dl[0], g.dw = dl[1];
      const std::string padding = c.value("padding", std::string("valid"));
      backend::int8::plan_axis(one_d ? "valid" : padding, x4.shape()[1], g.kh, g.sh, g.dh, g.pad_top, g.out_h);
      backend::int8::plan_axis(padding, x4.shape()[2], g.kw, g.sw, g.dw, g.pad_left, g.out_w);
      const Tensor x4c = x4.contiguous();
      Tensor y;
      if (st.kind == Kind::depthwise2d) {
        const State::Stored& w = st.find("depthwise_kernel");
        y = empty(Shape{s[0], g.out_h, g.out_w, w.value->shape()[2] * w.value->shape()[3]}, DType::float32);
        backend::int8::depthwise2d(x4c, w.value->peek(), w.scale->peek(), g, st.bias(), range, fused, who, y);
      } else {
        const State::Stored& w = st.find("kernel");
        const Shape m = matrix_shape(st.kind, w.value->shape());
        y = empty(Shape{s[0], g.out_h, g.out_w, m[1]}, DType::float32);
        backend::int8::conv2d(x4c, reshape(w.value->peek(), m), w.scale->peek(), st.cache("kernel"), g, st.bias(),
                              range, fused, who, y);
      }
      y = finish(y);
      return one_d ? reshape(y, Shape{s[0], g.out_w, y.shape()[3]}) : y;
    }
    case Kind::embedding: {
      const State::Stored& w = st.find("embeddings");
      std::vector<i64> dims = s.dims();
      dims.push_back(w.value->shape()[1]);
      Tensor y = empty(Shape(dims), DType::float32);
      backend::int8::embedding(x, w.value->peek(), w.scale->peek(), who, y);
      if (c.value("mask_zero", false)) y = layers::with_mask(y, not_equal(cast(x, DType::int64), zeros(Shape{}, DType::int64)));
      return y;
    }
    case Kind::lstm: {
      const i64 n = s[0], t = s[1], u = c.at("units").get<i64>();
      const activations::ActivationFn& rec = st.recurrent_activation;
      const bool backwards = c.value("go_backwards", false);
      // The input projection of every step in one product; the recurrent one step by step, on h
      // whose range is [-1, 1] with tanh (o * tanh(c)), else taken from each step.
      const Tensor xz = reshape(st.linear(reshape(xf, Shape{n * t, s[2]}), "kernel", st.bias(), range, {}, who),
                                Shape{n, t, 4 * u});
      backend::int8::Range h_range;
      if (act.name() == "tanh") h_range.fixed = true, h_range.lo = -1.0f, h_range.hi = 1.0f;
      Tensor h = zeros(Shape{n, u}), cell = zeros(Shape{n, u});
      std::vector<Tensor> hs;
      for (i64 step = 0; step < t; ++step) {
        const i64 at = backwards ? t - 1 - step : step;
        const Tensor z = add(reshape(slice(xz, {0, at, 0}, {n, 1, 4 * u}), Shape{n, 4 * u}),
                             st.linear(h, "recurrent_kernel", Tensor(), h_range, {}, who));
        const Tensor i = rec(slice(z, {0, 0}, {n, u})), f = rec(slice(z, {0, u}, {n, u}));
        const Tensor g = act(slice(z, {0, 2 * u}, {n, u})), o = rec(slice(z, {0, 3 * u}, {n, u}));
        cell = add(mul(f, cell), mul(i, g));
        h = mul(o, act(cell));
        if (c.value("return_sequences", false)) hs.push_back(h);
      }
      return c.value("return_sequences", false) ? stack(hs, 1) : h;
    }
  }
  return x;
}

nlohmann::json QuantizedLayer::get_config() const {
  json cfg = Layer::get_config();
  cfg["layer"] = layers::serialize(*layer_);
  cfg["dtype_quantized"] = options_.dtype;
  cfg["per_channel"] = options_.per_channel;
  cfg["activations"] = options_.activations;
  cfg["calibration"] = options_.calibration;
  cfg["percentile"] = options_.percentile;
  return cfg;
}

bool is_quantizable(const layers::Layer& layer) {
  const std::string cls = layer.class_name();
  if (cls != "Dense" && cls != "Conv1D" && cls != "Conv2D" && cls != "DepthwiseConv2D" && cls != "LSTM" &&
      cls != "Embedding")
    return false;
  const json c = layer.get_config();
  if (c.value("data_format", std::string("channels_last")) != "channels_last") return false;
  if (c.value("groups", 1) != 1) return false;
  if (cls == "LSTM" && (c.value("stateful", false) || c.value("return_state", false))) return false;
  return true;
}

}  // namespace keel::quantization
