// Post-training quantization: the int8 GEMM levels against the reference, activation and weight
// quantization by hand, each quantized layer against its float layer within the quantization
// error (and Dense exactly against the integer arithmetic), static calibration, float16, saving
// and loading, and the errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <filesystem>
#include <random>

#include "cpu/int8_gemm.hpp"
#include "scratch.hpp"

using namespace keel;
using Catch::Matchers::Contains;

namespace {

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  REQUIRE(x.size() == y.size());
  float m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}
float max_abs(const Tensor& a) {
  float m = 0;
  for (float v : a.to_vector<float>()) m = std::max(m, std::fabs(v));
  return m;
}

// Restores the best int8 level when a test switched it.
struct LevelGuard {
  ~LevelGuard() { cpu::int8::set_level(cpu::int8::levels().front()); }
};

// A quantized layer's arithmetic by hand, for a float layer whose bias was set to kBias: the
// batch's range (widened to 0), 7-bit codes of the input, int32 sums of (code - zero point) *
// (weight code - 128), then the per-channel scales and the bias.
const std::vector<float> kBias = {0.1f, -0.2f, 0.3f};
struct ByHand {
  std::vector<float> x;
  double sa = 0;
  long zp = 0;
  std::vector<int> codes;
  std::vector<float> scales;
  ByHand(const Tensor& input, models::Model& quantized)
      : x(input.to_vector<float>()),
        codes(quantized.get_weights()[0].to_vector<int>()),
        scales(quantized.get_weights()[1].to_vector<float>()) {
    float lo = 0, hi = 0;
    for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
    sa = (hi - lo) / 127.0;
    zp = std::lround(-lo / sa);
  }
  // Input element i's code, less the zero point; weight code k, less 128.
  long input(std::size_t i) const { return std::clamp<long>(std::lround(std::nearbyint(x[i] / sa)) + zp, 0, 127) - zp; }
  long weight(std::size_t k) const { return codes[k] - 128; }
  double output(long acc, std::size_t channel) const { return acc * sa * scales[channel] + kBias[channel]; }
};

}  // namespace

TEST_CASE("int8 GEMM: every instruction-set level gives the reference's numbers", "[quantization]") {
  LevelGuard guard;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> act(0, 127), wt(-127, 127);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (auto [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 1}, {1, 10, 128}, {3, 17, 5}, {7, 33, 290}, {13, 16, 4}, {6, 64, 27}, {64, 48, 300}}) {
    const std::int64_t k4 = (k + 3) / 4 * 4;
    std::vector<std::uint8_t> a(static_cast<std::size_t>(m * k4), 0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j) a[static_cast<std::size_t>(i * k4 + j)] = static_cast<std::uint8_t>(act(rng));
    std::vector<std::int8_t> q(static_cast<std::size_t>(k * n));
    for (auto& v : q) v = static_cast<std::int8_t>(wt(rng));
    std::vector<float> ws(static_cast<std::size_t>(n)), bias(static_cast<std::size_t>(n));
    for (auto& v : ws) v = 0.01f + 0.01f * std::fabs(unit(rng));
    for (auto& v : bias) v = unit(rng);
    const auto packed = cpu::int8::pack(q.data(), k, n);
    cpu::int8::Epilogue e;
    e.a_scale = 0.02f;
    e.a_zero_point = 37;
    e.w_scale = ws.data();
    e.bias = bias.data();
    e.relu = true;
    // The definition, in double: relu((sum_k (a - zp) * q) * a_scale * w_scale + bias).
    std::vector<double> expect(static_cast<std::size_t>(m * n));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long acc = 0;
        for (std::int64_t t = 0; t < k; ++t) acc += (a[i * k4 + t] - 37L) * q[t * n + j];
        expect[i * n + j] = std::max(0.0, acc * (0.02 * ws[j]) + bias[j]);
      }
    std::vector<float> reference;
    for (const std::string& level : cpu::int8::levels()) {
      INFO("level " << level << ", m " << m << ", n " << n << ", k " << k);
      REQUIRE(cpu::int8::set_level(level));
      std::vector<float> out(static_cast<std::size_t>(m * n), -1);
      cpu::int8::gemm(a.data(), k4, m, packed, e, out.data(), n);
      for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(expect[i]).margin(1e-4).epsilon(1e-5));
      if (reference.empty()) reference = out;
      CHECK(out == reference);  // the same integers and the same float epilogue on every level
    }
  }
  CHECK_FALSE(cpu::int8::set_level("sse9"));
  CHECK(cpu::int8::levels().back() == "scalar");
}

TEST_CASE("activation quantization: scale, zero point and rounding by hand", "[quantization]") {
  // Range [-1, 3]: scale = 4 / 127, zero point = round(1 / scale) = round(31.75) = 32.
  const auto p = cpu::int8::params_for_range(-1.0f, 3.0f);
  CHECK(p.scale == Approx(4.0 / 127));
  CHECK(p.zero_point == 32);
  // A range without 0 is widened to hold it: [0.5, 2] -> [0, 2], zero point 0.
  CHECK(cpu::int8::params_for_range(0.5f, 2.0f).zero_point == 0);
  CHECK(cpu::int8::params_for_range(0.5f, 2.0f).scale == Approx(2.0 / 127));
  LevelGuard guard;
  for (const std::string& level : cpu::int8::levels()) {
    INFO("level " << level);
    REQUIRE(cpu::int8::set_level(level));
    // 0 -> 32; 3 -> round(95.25) + 32 = 127; -1 -> round(-31.75) + 32 = 0; 10 and -5 clamp;
    // 0.5 -> round(15.875) + 32 = 48; 0.0625 -> round(1.984) + 32 = 34; 2.5 * 4 / 127 (a tie,
    // 2.5) -> 2 + 32 = 34 (to even). Repeated to 37 values: vector bodies and a scalar tail.
    const std::vector<float> base = {0, 3, -1, 10, -5, 0.5f, 0.0625f, 2.5f * 4.0f / 127.0f};
    const std::vector<std::uint8_t> expect = {32, 127, 0, 127, 0, 48, 34, 34};
    std::vector<float> x;
    std::vector<std::uint8_t> want;
    for (int i = 0; i < 37; ++i) {
      x.push_back(base[static_cast<std::size_t>(i % 8)]);
      want.push_back(expect[static_cast<std::size_t>(i % 8)]);
    }
    std::vector<std::uint8_t> q(x.size());
    CHECK(cpu::int8::quantize_rows(x.data(), 1, 37, 37, p, q.data(), 37));
    CHECK(q == want);
    float lo = 0, hi = 0;
    cpu::int8::value_range(x.data(), 37, lo, hi);
    CHECK(lo == -5.0f);
    CHECK(hi == 10.0f);
    // A NaN or infinity anywhere (in a vector body or the tail) is reported; NaN codes as 0.
    for (std::size_t at : {std::size_t{3}, std::size_t{20}, std::size_t{36}}) {
      std::vector<float> bad = x;
      bad[at] = std::nanf("");
      CHECK_FALSE(cpu::int8::quantize_rows(bad.data(), 1, 37, 37, p, q.data(), 37));
      CHECK(q[at] == 0);
      lo = hi = 0;
      cpu::int8::value_range(bad.data(), 37, lo, hi);
      CHECK(lo == -5.0f);  // NaN skipped
      bad[at] = INFINITY;
      CHECK_FALSE(cpu::int8::quantize_rows(bad.data(), 1, 37, 37, p, q.data(), 37));
      CHECK(q[at] == 127);
    }
  }
}

TEST_CASE("quantize: per-channel and per-tensor weight codes by hand", "[quantization]") {
  models::Sequential m({layers::InputLayer(Shape{2}), layers::Dense(2, {.use_bias = false})});
  m.layers().back()->weights()[0]->assign(constant({1.0f, -0.5f, -2.0f, 0.25f}, Shape{2, 2}));
  // Per channel: column scales max|w| / 127 = 2/127 and 0.5/127. Codes q + 128 with
  // q = round(w / scale): 1 -> 63.5 -> 64 (ties to even) -> 192; -0.5 -> -127 -> 1; -2 -> -127 -> 1;
  // 0.25 -> 63.5 -> 64 -> 192.
  auto q = quantization::quantize(m);
  auto* w = dynamic_cast<quantization::QuantizedLayer*>(q->layers().back().get());
  REQUIRE(w != nullptr);
  CHECK(w->name() == "quant_" + m.layers().back()->name());
  CHECK(q->get_weights()[0].dtype() == DType::uint8);
  CHECK(q->get_weights()[0].to_vector<int>() == std::vector<int>{192, 1, 1, 192});
  CHECK(q->get_weights()[1].to_vector<float>()[0] == Approx(2.0 / 127));
  CHECK(q->get_weights()[1].to_vector<float>()[1] == Approx(0.5 / 127));
  // Per tensor: one scale 2/127; -0.5 -> -31.75 -> -32 -> 96; 0.25 -> 15.875 -> 16 -> 144.
  auto t = quantization::quantize(m, {.per_channel = false});
  CHECK(t->get_weights()[0].to_vector<int>() == std::vector<int>{192, 96, 1, 144});
  CHECK(t->get_weights()[1].shape() == Shape{1});
}

TEST_CASE("quantized Dense computes the integer arithmetic exactly", "[quantization]") {
  random::set_seed(11);
  models::Sequential m({layers::InputLayer(Shape{5}), layers::Dense(3)});
  m.layers().back()->weights()[1]->assign(constant(kBias, Shape{3}));
  auto q = quantization::quantize(m);
  const Tensor x = random::normal({4, 5});
  const auto yv = q->predict(x).to_vector<float>();
  const ByHand hand(x, *q);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      long acc = 0;
      for (std::size_t k = 0; k < 5; ++k) acc += hand.input(i * 5 + k) * hand.weight(k * 3 + j);
      CHECK(yv[i * 3 + j] == Approx(hand.output(acc, j)).margin(1e-5));
    }
}

TEST_CASE("quantized Conv2D computes the integer arithmetic exactly, 1- to 3-channel first layers included",
          "[quantization]") {
  // The int8 convolution copies the codes into a buffer padded with the zero point (so padded
  // taps add nothing), then im2col copies the taps of a kernel row (kw * c bytes) as one 8-byte
  // move when they fit (c <= 2 with 3x3), else by runs, or tap by tap when dilated. By hand as
  // for Dense, tap by tap, at every image edge: "same" (TensorFlow's odd pixel after) and
  // "valid", strided and dilated, with output channels that fill whole 16-lane blocks (stored
  // unmasked) and ones that do not, at every instruction-set level.
  LevelGuard guard;
  struct Case {
    std::int64_t c;
    std::string padding;
    int stride, dilation;
    std::int64_t o;
  };
  const Case cases[] = {{1, "same", 1, 1, 3},  {2, "same", 1, 1, 3},   {3, "same", 1, 1, 3},  {1, "valid", 1, 1, 3},
                        {2, "valid", 1, 1, 3}, {3, "valid", 1, 1, 3},  {1, "same", 1, 1, 32}, {4, "same", 2, 1, 16},
                        {5, "valid", 1, 2, 17}, {32, "same", 1, 1, 32}, {3, "same", 1, 2, 33}};
  for (const Case& t : cases)
    for (const std::string& level : cpu::int8::levels()) {
      INFO(t.c << " channels, padding " << t.padding << ", stride " << t.stride << ", dilation " << t.dilation << ", "
                << t.o << " filters, level " << level);
      REQUIRE(cpu::int8::set_level(level));
      random::set_seed(static_cast<std::uint64_t>(12 + t.c));
      const std::int64_t h = 7, w = 6, c = t.c, o = t.o, s = t.stride, d = t.dilation, span = 2 * d + 1;
      models::Sequential m({layers::InputLayer(Shape{h, w, c}),
                            layers::Conv2D(o, 3, {.strides = {t.stride, t.stride}, .padding = t.padding,
                                                  .dilation_rate = {t.dilation, t.dilation}})});
      std::vector<float> bias(static_cast<std::size_t>(o));
      for (std::int64_t f = 0; f < o; ++f) bias[static_cast<std::size_t>(f)] = kBias[static_cast<std::size_t>(f % 3)];
      m.layers().back()->weights()[1]->assign(constant(bias, Shape{o}));
      auto q = quantization::quantize(m);
      const Tensor x = random::normal({2, h, w, c});
      const Tensor y = q->predict(x);
      const ByHand hand(x, *q);
      // Keras' output size and TensorFlow's padding before (the odd pixel goes after).
      const bool same = t.padding == "same";
      const std::int64_t oh = same ? (h + s - 1) / s : (h - span) / s + 1, ow = same ? (w + s - 1) / s : (w - span) / s + 1;
      const std::int64_t pad_top = same ? std::max<std::int64_t>((oh - 1) * s + span - h, 0) / 2 : 0;
      const std::int64_t pad_left = same ? std::max<std::int64_t>((ow - 1) * s + span - w, 0) / 2 : 0;
      REQUIRE(y.shape() == Shape{2, oh, ow, o});
      const auto yv = y.to_vector<float>();
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t i = 0; i < oh; ++i)
          for (std::int64_t j = 0; j < ow; ++j)
            for (std::int64_t f = 0; f < o; ++f) {
              long acc = 0;
              for (std::int64_t ky = 0; ky < 3; ++ky)
                for (std::int64_t kx = 0; kx < 3; ++kx)
                  for (std::int64_t ch = 0; ch < c; ++ch) {
                    const std::int64_t iy = i * s + ky * d - pad_top, ix = j * s + kx * d - pad_left;
                    if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                    acc += hand.input(static_cast<std::size_t>(((n * h + iy) * w + ix) * c + ch)) *
                           hand.weight(static_cast<std::size_t>(((ky * 3 + kx) * c + ch) * o + f));
                  }
              const float got = yv[static_cast<std::size_t>(((n * oh + i) * ow + j) * o + f)];
              const double expect = acc * hand.sa * hand.scales[static_cast<std::size_t>(f)] + bias[static_cast<std::size_t>(f)];
              CHECK(got == Approx(expect).margin(1e-5));
            }
    }
}

TEST_CASE("each quantized layer matches its float layer within the quantization error", "[quantization]") {
  random::set_seed(5);
  SECTION("Conv2D (same, strides, relu; dilated), DepthwiseConv2D, Dense") {
    models::Sequential m({layers::InputLayer(Shape{9, 9, 3}),
                          layers::Conv2D(8, 3, {.strides = {2, 1}, .padding = "same", .activation = "relu"}),
                          layers::DepthwiseConv2D(3, {.padding = "valid", .depth_multiplier = 2, .dilation_rate = {1, 2}}),
                          layers::Conv2D(4, 2, {.dilation_rate = {2, 1}}),
                          layers::Flatten(), layers::Dense(4, {.activation = "tanh"})});
    const Tensor x = random::normal({6, 9, 9, 3});
    const Tensor ref = m.predict(x);
    auto q = quantization::quantize(m);
    CHECK(q->layers().size() == m.layers().size());
    const Tensor y = q->predict(x);
    CHECK(y.shape() == ref.shape());
    // 7-bit activations and 8-bit weights: a few percent of the output's scale.
    CHECK(max_abs_diff(y, ref) < 0.05f * std::max(1.0f, max_abs(ref)));
  }
  SECTION("Conv1D (causal, dilated) and LSTM (return_sequences, go_backwards)") {
    models::Sequential m({layers::InputLayer(Shape{12, 4}),
                          layers::Conv1D(6, 3, {.padding = "causal", .dilation_rate = 2}),
                          layers::LSTM(5, {.return_sequences = true, .go_backwards = true}), layers::LSTM(3)});
    const Tensor x = random::normal({3, 12, 4});
    const Tensor ref = m.predict(x);
    const Tensor y = quantization::quantize(m)->predict(x);
    CHECK(y.shape() == ref.shape());
    CHECK(max_abs_diff(y, ref) < 0.05f);
  }
  SECTION("Embedding (per row, mask_zero) into an LSTM") {
    models::Sequential m({layers::InputLayer(Shape{6}), layers::Embedding(20, 8, {.mask_zero = true}),
                          layers::LSTM(4)});
    const Tensor ids = constant<std::int64_t>({1, 5, 7, 0, 0, 0, 3, 19, 2, 8, 11, 0}, Shape{2, 6});
    const Tensor ref = m.predict(ids);
    auto q = quantization::quantize(m);
    const Tensor y = q->predict(ids);
    CHECK(max_abs_diff(y, ref) < 0.02f);
    // An id outside the table is an error naming the layer, not a read past it.
    CHECK_THROWS_WITH(q->predict(constant<std::int64_t>({1, 2, 3, 4, 5, 20}, Shape{1, 6})), Contains("quant_"));
  }
}

TEST_CASE("an elementwise activation runs in the int8 kernels' epilogue with the op's own numbers", "[quantization]") {
  // Quantized layers apply sigmoid, tanh, gelu, ... to each block of the GEMM's output while it
  // is in cache, with the float kernel the activation op runs: the result must be that op
  // applied afterwards to the same layer without an activation, bit for bit, on every int8
  // level, in Dense, Conv2D (several 192-pixel blocks) and DepthwiseConv2D. softmax is not
  // elementwise and runs after the kernel.
  LevelGuard guard;
  random::set_seed(9);
  const Tensor xd = mul(random::normal({100, 12}), scalar_like(random::normal({1}), 3.0));
  const Tensor xc = mul(random::normal({3, 10, 10, 3}), scalar_like(random::normal({1}), 3.0));
  for (const char* name : {"relu", "relu6", "sigmoid", "tanh", "elu", "gelu", "silu", "swish", "softplus", "leaky_relu",
                           "exponential", "selu", "softsign", "hard_sigmoid", "hard_silu", "hard_swish", "mish",
                           "softmax"}) {
    for (int kind = 0; kind < 3; ++kind) {
      const auto make = [&](const std::string& act) {
        if (kind == 0) return models::Sequential({layers::InputLayer(Shape{12}), layers::Dense(20, {.activation = act})});
        if (kind == 1)
          return models::Sequential({layers::InputLayer(Shape{10, 10, 3}),
                                     layers::Conv2D(5, 3, {.padding = "same", .activation = act})});
        return models::Sequential({layers::InputLayer(Shape{10, 10, 3}),
                                   layers::DepthwiseConv2D(3, {.depth_multiplier = 2, .activation = act})});
      };
      models::Sequential with = make(name), without = make("linear");
      without.set_weights(with.get_weights());
      const auto qa = quantization::quantize(with), qb = quantization::quantize(without);
      const Tensor& x = kind == 0 ? xd : xc;
      for (const std::string& level : cpu::int8::levels()) {
        INFO(name << ", layer kind " << kind << ", level " << level);
        REQUIRE(cpu::int8::set_level(level));
        const Tensor fused = qa->predict(x);
        const Tensor after = activations::get(name)(qb->predict(x));
        CHECK(fused.to_vector<float>() == after.to_vector<float>());
      }
      // No separate activation op runs (a profile of the call shows the int8 kernel alone).
      profiler::start();
      qa->predict(x);
      profiler::stop();
      bool separate = false;
      for (const auto& op : profiler::key_averages()) {
        const std::string lower = [&] {
          std::string l = op.name;
          for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          return l;
        }();
        separate = separate || lower == "sigmoid" || lower == "tanh" || lower == "relu" || lower == "elu" ||
                   lower == "softplus" || lower == "mish" || lower == "selu";
      }
      CHECK(separate == false);
    }
  }
}

TEST_CASE("static calibration records the input range (minmax) or its percentiles", "[quantization]") {
  models::Sequential m({layers::InputLayer(Shape{2}), layers::Dense(2)});
  // 1000 values in [-2, 5] plus one outlier at 100.
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(-2.0f + 7.0f * static_cast<float>(i) / 999.0f);
  v.push_back(100.0f);
  v.push_back(0.0f);
  const Tensor x = constant(v, Shape{501, 2});
  auto q = quantization::quantize(m, {.activations = "static"}, x);
  const auto range = q->get_weights().back().to_vector<float>();
  CHECK(range == std::vector<float>{-2.0f, 100.0f});
  auto p = quantization::quantize(m, {.activations = "static", .calibration = "percentile", .percentile = 99.0}, x);
  const auto pr = p->get_weights().back().to_vector<float>();
  CHECK(pr[0] == Approx(-2.0f).margin(0.1));
  CHECK(pr[1] == Approx(4.93f).margin(0.1));  // the 99th percentile of the uniform part, not 100
  // The calibrated model computes with that fixed range: outside it, inputs clamp.
  const Tensor y = q->predict(constant({1.0f, 1.0f}, Shape{1, 2}));
  CHECK(max_abs_diff(y, m.predict(constant({1.0f, 1.0f}, Shape{1, 2}))) < 0.5f);
}

TEST_CASE("float16 quantization stores half the bytes and computes in float32", "[quantization]") {
  random::set_seed(2);
  models::Sequential m({layers::InputLayer(Shape{6}), layers::Dense(5, {.activation = "relu"}), layers::Dense(2)});
  auto h = quantization::quantize(m, {.dtype = "float16"});
  CHECK(h->get_weights()[0].dtype() == DType::float16);
  const Tensor x = random::normal({4, 6});
  CHECK(max_abs_diff(h->predict(x), m.predict(x)) < 2e-3f);
}

TEST_CASE("quantized models save and load, and the int8 file is at least 3.5x smaller", "[quantization]") {
  keel_test::Scratch dir("quantization");
  random::set_seed(9);
  models::Sequential m({layers::InputLayer(Shape{256}), layers::Dense(256, {.activation = "relu"}), layers::Dense(10)});
  auto q = quantization::quantize(m);
  auto s = quantization::quantize(m, {.activations = "static"}, random::normal({64, 256}));
  const Tensor x = random::normal({3, 256});
  for (const std::string file : {"q.keras", "q.h5"}) {
    INFO(file);
    q->save(dir / file);
    auto back = models::load_model(dir / file);
    CHECK(max_abs_diff(back->predict(x), q->predict(x)) == 0.0f);
  }
  s->save(dir / "s.keras");
  CHECK(max_abs_diff(models::load_model(dir / "s.keras")->predict(x), s->predict(x)) == 0.0f);
  m.save(dir / "f.keras");
  const auto float_bytes = std::filesystem::file_size(dir / "f.keras");
  const auto int8_bytes = std::filesystem::file_size(dir / "q.keras");
  INFO("float32 " << float_bytes << " bytes, int8 " << int8_bytes << " bytes");
  CHECK(static_cast<double>(float_bytes) / static_cast<double>(int8_bytes) >= 3.5);
}

TEST_CASE("quantize: what it leaves in float32, and bad input", "[quantization]") {
  models::Sequential m({layers::InputLayer(Shape{8, 8, 4}),
                        layers::Conv2D(4, 3, {.groups = 2}), layers::BatchNormalization(),
                        layers::Conv2D(2, 1, {.data_format = "channels_first"}), layers::Flatten(), layers::Dense(3)});
  auto q = quantization::quantize(m);
  CHECK(q->layers()[0]->class_name() == "Conv2D");  // grouped
  CHECK(q->layers()[1]->class_name() == "BatchNormalization");
  CHECK(q->layers()[2]->class_name() == "Conv2D");  // channels_first
  CHECK(q->layers()[4]->class_name() == "QuantizedLayer");
  CHECK_FALSE(quantization::is_quantizable(layers::LSTM(3, {.stateful = true})));
  CHECK(quantization::is_quantizable(layers::LSTM(3)));

  models::Sequential d({layers::InputLayer(Shape{3}), layers::Dense(2)});
  CHECK_THROWS_AS(quantization::quantize(d, {.dtype = "int4"}), ValueError);
  CHECK_THROWS_AS(quantization::quantize(d, {.activations = "sometimes"}), ValueError);
  CHECK_THROWS_WITH(quantization::quantize(d, {.activations = "static"}), Contains("calibration_x"));
  CHECK_THROWS_AS(quantization::quantize(d, {}, zeros(Shape{2, 3})), ValueError);
  CHECK_THROWS_AS(quantization::quantize(d, {.activations = "static", .calibration = "median"}, zeros(Shape{2, 3})),
                  ValueError);
  auto qd = quantization::quantize(d);
  CHECK_THROWS_WITH(qd->predict(constant({1.0f, std::nanf(""), 0.0f}, Shape{1, 3})), Contains("NaN"));
  CHECK_THROWS_AS(qd->predict(constant({1.0f, INFINITY, 0.0f}, Shape{1, 3})), ValueError);
}

TEST_CASE("a quantized model evaluates, and refuses to train", "[quantization]") {
  random::set_seed(4);
  models::Sequential m({layers::InputLayer(Shape{6}), layers::Dense(8, {.activation = "relu"}), layers::Dense(3)});
  const Tensor x = random::normal({32, 6});
  const Tensor y = random::uniform_int(Shape{32}, 0, 3, DType::int64);
  m.compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  auto q = quantization::quantize(m);
  q->compile({.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  const auto float_logs = m.evaluate(x, y, {.verbose = 0});
  const auto int8_logs = q->evaluate(x, y, {.verbose = 0});
  CHECK(int8_logs.at("loss") == Approx(float_logs.at("loss")).margin(0.05));
  // No gradient reaches int8 codes: fit and a tape are refused, naming the layer.
  CHECK_THROWS_WITH(q->fit(x, y, {.epochs = 1, .verbose = 0}), Contains("quant_") && Contains("no gradients"));
  GradientTape tape;
  CHECK_THROWS_AS((*q)(x, false), ValueError);
}

TEST_CASE("export_onnx of an int8 LSTM is a ValueError naming it", "[quantization][onnx]") {
  keel_test::Scratch dir("quantization_onnx");
  models::Sequential m({layers::InputLayer(Shape{5, 2}), layers::LSTM(3)});
  auto q = quantization::quantize(m);
  CHECK_THROWS_WITH(io::export_onnx(*q, dir / "q.onnx"), Contains("quant_") && Contains("LSTM"));
  // float16 LSTMs export (their kernels as float16 initializers).
  CHECK_NOTHROW(io::export_onnx(*quantization::quantize(m, {.dtype = "float16"}), dir / "h.onnx"));
}
