// Convolutions: conv2d, conv1d, depthwise_conv2d and conv2d_transpose.
//
// Forward values are compared with plain loops written here from the definitions (TensorFlow's
// padding rule, Keras' transposed-conv output size), not with keel's im2col path; gradients (first
// and second order) with central finite differences in float64 (gradcheck.hpp).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"
#include "simd_levels.hpp"
#include "threads_guard.hpp"

using namespace keel;
using i64 = std::int64_t;

namespace {

Tensor random_tensor(const Shape& shape, std::uint32_t seed, DType dtype = DType::float64) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (auto& x : v) x = dist(gen);
  return constant(v, shape, DType::float64).astype(dtype);
}

// ---- reference geometry, from TensorFlow's documentation --------------------------------------
// valid: out = ceil((in - k_eff + 1) / s), no padding.
// same:  out = ceil(in / s), pad_total = max((out - 1) * s + k_eff - in, 0), before = total / 2.
struct Axis {
  i64 out, before;
};
Axis ref_axis(i64 in, i64 k, i64 s, i64 d, const std::string& padding) {
  const i64 k_eff = d * (k - 1) + 1;
  if (padding == "valid") return {static_cast<i64>(std::ceil(double(in - k_eff + 1) / double(s))), 0};
  if (padding == "causal") return {static_cast<i64>(std::ceil(double(in) / double(s))), k_eff - 1};
  const i64 out = static_cast<i64>(std::ceil(double(in) / double(s)));
  return {out, std::max<i64>((out - 1) * s + k_eff - in, 0) / 2};
}

// Dense 4-d indexing helper.
struct Idx4 {
  i64 d0, d1, d2, d3;
  explicit Idx4(const Shape& s) : d0(s[0]), d1(s[1]), d2(s[2]), d3(s[3]) {}
  i64 operator()(i64 a, i64 b, i64 c, i64 e) const { return ((a * d1 + b) * d2 + c) * d3 + e; }
};

struct Result {
  std::vector<double> values;
  Shape shape;
};

// y[n,oh,ow,co] = sum_{i,j,ci} x[n, oh*sh - pt + i*dh, ow*sw - pl + j*dw, ci] * k[i,j,ci,co]
Result ref_conv2d(const Tensor& xt, const Tensor& kt, std::array<int, 2> s, const std::string& padding,
                  std::array<int, 2> d) {
  const auto x = xt.to_vector<double>(), k = kt.to_vector<double>();
  const Shape& xs = xt.shape();
  const Shape& ks = kt.shape();
  const Axis ah = ref_axis(xs[1], ks[0], s[0], d[0], padding), aw = ref_axis(xs[2], ks[1], s[1], d[1], padding);
  const Shape ys{xs[0], ah.out, aw.out, ks[3]};
  std::vector<double> y(static_cast<std::size_t>(ys.num_elements()), 0.0);
  const Idx4 X(xs), K(ks), Y(ys);
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 oh = 0; oh < ah.out; ++oh)
      for (i64 ow = 0; ow < aw.out; ++ow)
        for (i64 co = 0; co < ks[3]; ++co) {
          double acc = 0;
          for (i64 i = 0; i < ks[0]; ++i)
            for (i64 j = 0; j < ks[1]; ++j)
              for (i64 ci = 0; ci < ks[2]; ++ci) {
                const i64 ih = oh * s[0] - ah.before + i * d[0], iw = ow * s[1] - aw.before + j * d[1];
                if (ih < 0 || ih >= xs[1] || iw < 0 || iw >= xs[2]) continue;
                acc += x[static_cast<std::size_t>(X(n, ih, iw, ci))] * k[static_cast<std::size_t>(K(i, j, ci, co))];
              }
          y[static_cast<std::size_t>(Y(n, oh, ow, co))] = acc;
        }
  return {y, ys};
}

// y[n,ow,co] = sum_{j,ci} x[n, ow*s - pl + j*d, ci] * k[j,ci,co]
Result ref_conv1d(const Tensor& xt, const Tensor& kt, int s, const std::string& padding, int d) {
  const auto x = xt.to_vector<double>(), k = kt.to_vector<double>();
  const Shape& xs = xt.shape();
  const Shape& ks = kt.shape();
  const Axis a = ref_axis(xs[1], ks[0], s, d, padding);
  const Shape ys{xs[0], a.out, ks[2]};
  std::vector<double> y(static_cast<std::size_t>(ys.num_elements()), 0.0);
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 ow = 0; ow < a.out; ++ow)
      for (i64 co = 0; co < ks[2]; ++co) {
        double acc = 0;
        for (i64 j = 0; j < ks[0]; ++j)
          for (i64 ci = 0; ci < ks[1]; ++ci) {
            const i64 iw = ow * s - a.before + j * d;
            if (iw < 0 || iw >= xs[1]) continue;
            acc += x[static_cast<std::size_t>((n * xs[1] + iw) * xs[2] + ci)] *
                   k[static_cast<std::size_t>((j * ks[1] + ci) * ks[2] + co)];
          }
        y[static_cast<std::size_t>((n * a.out + ow) * ks[2] + co)] = acc;
      }
  return {y, ys};
}

// y[n,oh,ow,c*m + q] = sum_{i,j} x[n, ih, iw, c] * k[i,j,c,q]
Result ref_depthwise(const Tensor& xt, const Tensor& kt, std::array<int, 2> s, const std::string& padding,
                     std::array<int, 2> d) {
  const auto x = xt.to_vector<double>(), k = kt.to_vector<double>();
  const Shape& xs = xt.shape();
  const Shape& ks = kt.shape();
  const i64 mult = ks[3];
  const Axis ah = ref_axis(xs[1], ks[0], s[0], d[0], padding), aw = ref_axis(xs[2], ks[1], s[1], d[1], padding);
  const Shape ys{xs[0], ah.out, aw.out, xs[3] * mult};
  std::vector<double> y(static_cast<std::size_t>(ys.num_elements()), 0.0);
  const Idx4 X(xs), K(ks), Y(ys);
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 oh = 0; oh < ah.out; ++oh)
      for (i64 ow = 0; ow < aw.out; ++ow)
        for (i64 c = 0; c < xs[3]; ++c)
          for (i64 q = 0; q < mult; ++q) {
            double acc = 0;
            for (i64 i = 0; i < ks[0]; ++i)
              for (i64 j = 0; j < ks[1]; ++j) {
                const i64 ih = oh * s[0] - ah.before + i * d[0], iw = ow * s[1] - aw.before + j * d[1];
                if (ih < 0 || ih >= xs[1] || iw < 0 || iw >= xs[2]) continue;
                acc += x[static_cast<std::size_t>(X(n, ih, iw, c))] * k[static_cast<std::size_t>(K(i, j, c, q))];
              }
            y[static_cast<std::size_t>(Y(n, oh, ow, c * mult + q))] = acc;
          }
  return {y, ys};
}

// Keras' deconv_output_length (keras/utils/conv_utils.py), one axis.
i64 ref_deconv_length(i64 in, i64 k, i64 s, const std::string& padding, std::optional<int> output_padding,
                      i64 d) {
  const i64 k_eff = k + (k - 1) * (d - 1);
  if (!output_padding) return padding == "valid" ? in * s + std::max<i64>(k_eff - s, 0) : in * s;
  const i64 pad = padding == "same" ? k_eff / 2 : 0;
  return (in - 1) * s + k_eff - 2 * pad + *output_padding;
}

// Transposed convolution as a scatter: every input pixel, times the kernel, is added into the
// output window it would have been computed from. Kernel [kh, kw, out, in].
Result ref_conv_transpose(const Tensor& xt, const Tensor& kt, std::array<int, 2> s, const std::string& padding,
                          std::optional<std::array<int, 2>> output_padding, std::array<int, 2> d) {
  const auto x = xt.to_vector<double>(), k = kt.to_vector<double>();
  const Shape& xs = xt.shape();
  const Shape& ks = kt.shape();
  const auto op = [&](int a) { return output_padding ? std::optional<int>((*output_padding)[a]) : std::nullopt; };
  const i64 H = ref_deconv_length(xs[1], ks[0], s[0], padding, op(0), d[0]);
  const i64 W = ref_deconv_length(xs[2], ks[1], s[1], padding, op(1), d[1]);
  // The padding the forward conv2d over an H x W input would use.
  const i64 pt = ref_axis(H, ks[0], s[0], d[0], padding).before, pl = ref_axis(W, ks[1], s[1], d[1], padding).before;
  const Shape ys{xs[0], H, W, ks[2]};
  std::vector<double> y(static_cast<std::size_t>(ys.num_elements()), 0.0);
  const Idx4 X(xs), K(ks), Y(ys);
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 ih = 0; ih < xs[1]; ++ih)
      for (i64 iw = 0; iw < xs[2]; ++iw)
        for (i64 ci = 0; ci < xs[3]; ++ci)
          for (i64 i = 0; i < ks[0]; ++i)
            for (i64 j = 0; j < ks[1]; ++j) {
              const i64 oh = ih * s[0] - pt + i * d[0], ow = iw * s[1] - pl + j * d[1];
              if (oh < 0 || oh >= H || ow < 0 || ow >= W) continue;
              for (i64 co = 0; co < ks[2]; ++co)
                y[static_cast<std::size_t>(Y(n, oh, ow, co))] +=
                    x[static_cast<std::size_t>(X(n, ih, iw, ci))] * k[static_cast<std::size_t>(K(i, j, co, ci))];
            }
  return {y, ys};
}

void check_close(const Tensor& got, const Result& want, double tol) {
  REQUIRE(got.shape() == want.shape);
  const auto g = got.to_vector<double>();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double err = std::abs(g[i] - want.values[i]) / std::max(1.0, std::abs(want.values[i]));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  INFO("worst error " << worst << " at element " << at << " of " << got.shape().to_string());
  CHECK(worst <= tol);
}

struct ConvCase {
  Shape x, k;
  std::array<int, 2> strides;
  std::string padding;
  std::array<int, 2> dilation;
};

std::string describe(const ConvCase& c) {
  std::ostringstream s;
  s << "x " << c.x.to_string() << " kernel " << c.k.to_string() << " strides [" << c.strides[0] << ","
    << c.strides[1] << "] padding " << c.padding << " dilation [" << c.dilation[0] << "," << c.dilation[1]
    << "]";
  return s.str();
}

// Odd sizes, odd "same" padding (the extra pixel after), strides, dilations, both together,
// 1x1 kernels (the direct GEMM path and a strided one), a kernel as large as the input, strides
// larger than the kernel.
const std::vector<ConvCase> kConvCases = {
    {{2, 7, 5, 3}, {3, 2, 3, 4}, {1, 1}, "valid", {1, 1}},
    {{2, 7, 5, 3}, {3, 2, 3, 4}, {1, 1}, "same", {1, 1}},
    {{2, 7, 5, 3}, {3, 2, 3, 4}, {2, 2}, "same", {1, 1}},
    {{2, 7, 5, 3}, {3, 2, 3, 4}, {2, 2}, "valid", {1, 1}},
    {{1, 7, 5, 2}, {3, 2, 2, 3}, {1, 1}, "same", {2, 2}},
    {{2, 7, 5, 3}, {3, 2, 3, 2}, {2, 2}, "same", {2, 2}},
    {{1, 9, 8, 2}, {2, 3, 2, 3}, {3, 2}, "valid", {2, 1}},
    {{2, 4, 6, 5}, {1, 1, 5, 3}, {1, 1}, "valid", {1, 1}},
    {{2, 4, 6, 5}, {1, 1, 5, 3}, {1, 1}, "same", {1, 1}},
    {{2, 5, 6, 3}, {1, 1, 3, 2}, {2, 2}, "same", {1, 1}},
    {{1, 4, 3, 2}, {4, 3, 2, 2}, {1, 1}, "valid", {1, 1}},
    {{1, 6, 7, 1}, {2, 2, 1, 1}, {4, 3}, "same", {1, 1}},
    {{2, 4, 4, 2}, {5, 5, 2, 3}, {1, 1}, "same", {1, 1}},
};

// Restores keel's thread count at the end of a test.
using keel_test::ThreadsGuard;

}  // namespace

// ---- conv2d --------------------------------------------------------------------------------------

TEST_CASE("conv2d matches a direct loop over strides, same/valid padding and dilations") {
  std::uint32_t seed = 1;
  for (const auto& c : kConvCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_close(conv2d(x, k, c.strides, c.padding, c.dilation), ref_conv2d(x, k, c.strides, c.padding, c.dilation),
                1e-12);
  }
}

TEST_CASE("conv2d computes the same values in float32") {
  for (const auto& c : {kConvCases[2], kConvCases[5], kConvCases[7]}) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, 11), k = random_tensor(c.k, 12);
    const Tensor y = conv2d(x.astype(DType::float32), k.astype(DType::float32), c.strides, c.padding, c.dilation);
    CHECK(y.dtype() == DType::float32);
    check_close(y, ref_conv2d(x, k, c.strides, c.padding, c.dilation), 1e-5);
  }
}

TEST_CASE("conv2d reads strided views of its inputs") {
  // x as a transposed view [n, w, h, c] -> [n, h, w, c]; kernel as a slice.
  const Tensor base = random_tensor({2, 5, 7, 3}, 21);
  const Tensor x = transpose(base, {0, 2, 1, 3});
  const Tensor kbase = random_tensor({3, 2, 3, 6}, 22);
  const Tensor k = slice(kbase, {0, 0, 0, 1}, {3, 2, 3, 4});
  REQUIRE(!x.is_contiguous());
  const Tensor y = conv2d(x, k, {2, 1}, "same");
  check_close(y, ref_conv2d(x.contiguous(), k.contiguous(), {2, 1}, "same", {1, 1}), 1e-12);
}

TEST_CASE("conv2d output shapes follow TensorFlow's same and valid rules") {
  const Tensor x = zeros({1, 7, 5, 2}, DType::float64);
  CHECK(conv2d(x, zeros({3, 2, 2, 4}, DType::float64), {2, 2}, "same").shape() == Shape{1, 4, 3, 4});
  CHECK(conv2d(x, zeros({3, 2, 2, 4}, DType::float64), {2, 2}, "valid").shape() == Shape{1, 3, 2, 4});
  CHECK(conv2d(x, zeros({3, 2, 2, 4}, DType::float64), {1, 1}, "valid", {2, 2}).shape() == Shape{1, 3, 3, 4});
  CHECK(conv2d(x, zeros({3, 3, 2, 1}, DType::float64), {3, 3}, "SAME").shape() == Shape{1, 3, 2, 1});
}

TEST_CASE("conv2d splits work across threads without changing the result") {
  ThreadsGuard guard;
  // Large enough that the forward pass, both gradients and the batch split use two threads.
  const Tensor x = random_tensor({4, 24, 20, 8}, 31), k = random_tensor({3, 3, 8, 16}, 32);
  const Tensor w = random_tensor({4, 24, 20, 16}, 33);
  auto run = [&](int threads) {
    config::set_num_threads(threads);
    GradientTape tape;
    tape.watch(x);
    tape.watch(k);
    const Tensor y = conv2d(x, k, {1, 1}, "same");
    auto grads = tape.gradient(reduce_sum(y * w), std::vector<Tensor>{x, k});
    return std::vector<Tensor>{y, grads[0], grads[1]};
  };
  const auto one = run(1), two = run(2);
  check_close(one[0], ref_conv2d(x, k, {1, 1}, "same", {1, 1}), 1e-12);
  for (std::size_t i = 0; i < 3; ++i) check_close(two[i], {one[i].to_vector<double>(), one[i].shape()}, 1e-12);
}

TEST_CASE("conv2d gradients match finite differences for input and kernel") {
  std::uint32_t seed = 100;
  for (const auto& c : kConvCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_gradients([&](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], c.strides, c.padding, c.dilation); },
                    {x, k});
  }
}

TEST_CASE("conv2d gradients in float32 agree with float64") {
  std::uint32_t seed = 150;
  for (const auto& c : kConvCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    auto grads = [&](const Tensor& xi, const Tensor& ki) {
      GradientTape tape;
      tape.watch(xi);
      tape.watch(ki);
      const Tensor y = conv2d(xi, ki, c.strides, c.padding, c.dilation);
      return tape.gradient(reduce_sum(y * random_tensor(y.shape(), 151, xi.dtype())), std::vector<Tensor>{xi, ki});
    };
    const auto g64 = grads(x, k), g32 = grads(x.astype(DType::float32), k.astype(DType::float32));
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(g32[i].dtype() == DType::float32);
      check_close(g32[i], {g64[i].to_vector<double>(), g64[i].shape()}, 1e-5);
    }
  }
}

TEST_CASE("conv2d in float32 with few input taps and out-channels in multiples of 8") {
  // keel's direct (non-im2col) float32 kernels take these at SIMD levels with AVX2 (out % 8 == 0)
  // or AVX-512 (out % 16 == 0); tests/test_conv_direct.cpp covers them at larger K. Widths 1, 7 and 13 leave partial
  // tiles; 24 and 40 out-channels mix 16- and 8-wide blocks.
  const std::vector<ConvCase> cases = {
      {{2, 7, 5, 3}, {3, 3, 3, 16}, {1, 1}, "same", {1, 1}},  {{2, 7, 13, 3}, {3, 2, 3, 24}, {2, 1}, "same", {1, 1}},
      {{1, 9, 7, 2}, {3, 3, 2, 8}, {1, 2}, "valid", {2, 1}},  {{3, 6, 1, 4}, {2, 1, 4, 40}, {1, 1}, "same", {1, 1}},
      {{2, 5, 7, 1}, {5, 5, 1, 16}, {2, 2}, "same", {1, 1}},  {{1, 8, 8, 7}, {3, 3, 7, 32}, {1, 1}, "valid", {1, 1}},
  };
  // At every SIMD level: capped at SSE2 the same convolutions take the im2col path.
  testing::at_every_simd_level([&](const std::string&) {
    std::uint32_t seed = 170;
    for (const auto& c : cases) {
      INFO(describe(c));
      const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
      const Tensor x32 = x.astype(DType::float32), k32 = k.astype(DType::float32);
      GradientTape tape;
      tape.watch(x32);
      tape.watch(k32);
      const Tensor y = conv2d(x32, k32, c.strides, c.padding, c.dilation);
      check_close(y, ref_conv2d(x, k, c.strides, c.padding, c.dilation), 1e-5);
      const Tensor w = random_tensor(y.shape(), 171);
      const auto g32 = tape.gradient(reduce_sum(y * w.astype(DType::float32)), std::vector<Tensor>{x32, k32});
      GradientTape tape64;
      tape64.watch(x);
      tape64.watch(k);
      const auto g64 = tape64.gradient(reduce_sum(conv2d(x, k, c.strides, c.padding, c.dilation) * w),
                                       std::vector<Tensor>{x, k});
      for (std::size_t i = 0; i < 2; ++i) check_close(g32[i], {g64[i].to_vector<double>(), g64[i].shape()}, 1e-5);
    }
  });
}

TEST_CASE("conv2d in float32 splits work across threads without changing the result") {
  ThreadsGuard guard;
  const Tensor x = random_tensor({4, 24, 20, 3}, 180), k = random_tensor({3, 3, 3, 16}, 181);
  const Tensor w = random_tensor({4, 24, 20, 16}, 182);
  const Tensor x32 = x.astype(DType::float32), k32 = k.astype(DType::float32), w32 = w.astype(DType::float32);
  auto run = [&](int threads) {
    config::set_num_threads(threads);
    GradientTape tape;
    tape.watch(x32);
    tape.watch(k32);
    const Tensor y = conv2d(x32, k32, {1, 1}, "same");
    auto grads = tape.gradient(reduce_sum(y * w32), std::vector<Tensor>{x32, k32});
    return std::vector<Tensor>{y, grads[0], grads[1]};
  };
  const auto one = run(1), two = run(2);
  check_close(one[0], ref_conv2d(x, k, {1, 1}, "same", {1, 1}), 1e-5);
  // The kernel gradient sums 1920 float32 products, in a different order per thread split.
  for (std::size_t i = 0; i < 3; ++i) check_close(two[i], {one[i].to_vector<double>(), one[i].shape()}, 1e-4);
}

TEST_CASE("conv2d second derivatives match finite differences") {
  // The gradient of sum(conv2d(x, k)^2) with respect to x and to k, differentiated again: this
  // runs the backward ops' own gradients (backprop_input and backprop_filter as each other's adjoints).
  for (const auto& c : {kConvCases[2], kConvCases[5], kConvCases[9]}) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, 200), k = random_tensor(c.k, 201);
    for (int wrt = 0; wrt < 2; ++wrt) {
      INFO("gradient with respect to " << (wrt == 0 ? "x" : "kernel"));
      check_gradients(
          [&](const std::vector<Tensor>& in) {
            GradientTape inner;
            inner.watch(in[0]);
            inner.watch(in[1]);
            const Tensor y = conv2d(in[0], in[1], c.strides, c.padding, c.dilation);
            return inner.gradient(reduce_sum(square(y)), in[static_cast<std::size_t>(wrt)]);
          },
          {x, k}, 1e-6, 1e-6);
    }
  }
}

// ---- conv1d --------------------------------------------------------------------------------------

TEST_CASE("conv1d matches a direct loop, including causal padding") {
  struct Case {
    Shape x, k;
    int stride;
    std::string padding;
    int dilation;
  };
  const std::vector<Case> cases = {
      {{2, 7, 3}, {3, 3, 4}, 1, "valid", 1}, {{2, 7, 3}, {3, 3, 4}, 2, "same", 1},
      {{2, 9, 2}, {2, 2, 3}, 2, "same", 2},  {{1, 8, 2}, {3, 2, 2}, 3, "valid", 2},
      {{2, 7, 3}, {3, 3, 2}, 1, "causal", 2}, {{2, 6, 4}, {1, 4, 3}, 1, "same", 1},
  };
  std::uint32_t seed = 300;
  for (const auto& c : cases) {
    INFO("x " << c.x.to_string() << " kernel " << c.k.to_string() << " stride " << c.stride << " padding "
              << c.padding << " dilation " << c.dilation);
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_close(conv1d(x, k, c.stride, c.padding, c.dilation), ref_conv1d(x, k, c.stride, c.padding, c.dilation),
                1e-12);
    check_gradients([&](const std::vector<Tensor>& in) { return conv1d(in[0], in[1], c.stride, c.padding, c.dilation); },
                    {x, k});
  }
}

// ---- depthwise -----------------------------------------------------------------------------------

const std::vector<ConvCase> kDepthwiseCases = {
    {{2, 7, 5, 3}, {3, 2, 3, 1}, {1, 1}, "valid", {1, 1}},
    {{2, 7, 5, 3}, {3, 2, 3, 2}, {2, 2}, "same", {1, 1}},
    {{1, 7, 5, 2}, {3, 2, 2, 3}, {2, 1}, "same", {2, 2}},
    {{1, 8, 6, 4}, {2, 3, 4, 1}, {3, 2}, "valid", {1, 2}},
    {{2, 3, 3, 2}, {4, 4, 2, 1}, {1, 1}, "same", {1, 1}},
};

TEST_CASE("depthwise_conv2d matches a direct loop, with channel multipliers") {
  std::uint32_t seed = 400;
  for (const auto& c : kDepthwiseCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_close(depthwise_conv2d(x, k, c.strides, c.padding, c.dilation),
                ref_depthwise(x, k, c.strides, c.padding, c.dilation), 1e-12);
    check_close(depthwise_conv2d(x.astype(DType::float32), k.astype(DType::float32), c.strides, c.padding, c.dilation),
                ref_depthwise(x, k, c.strides, c.padding, c.dilation), 1e-5);
  }
}

TEST_CASE("depthwise_conv2d gradients match finite differences, first and second order") {
  std::uint32_t seed = 500;
  for (const auto& c : kDepthwiseCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_gradients(
        [&](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], c.strides, c.padding, c.dilation); },
        {x, k});
  }
  const ConvCase& c = kDepthwiseCases[1];
  const Tensor x = random_tensor(c.x, 550), k = random_tensor(c.k, 551);
  for (int wrt = 0; wrt < 2; ++wrt) {
    INFO("second order, gradient with respect to " << (wrt == 0 ? "x" : "kernel"));
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          GradientTape inner;
          inner.watch(in[0]);
          inner.watch(in[1]);
          const Tensor y = depthwise_conv2d(in[0], in[1], c.strides, c.padding, c.dilation);
          return inner.gradient(reduce_sum(square(y)), in[static_cast<std::size_t>(wrt)]);
        },
        {x, k});
  }
}

TEST_CASE("depthwise_conv2d with many channels agrees across float32 and float64") {
  // Channels are processed in vector blocks (16 float32 / 8 float64) plus a scalar tail; 20 input
  // channels with multipliers 1 and 3 give both, over strides, dilations and odd padding.
  const std::vector<ConvCase> cases = {
      {{2, 7, 5, 20}, {3, 2, 20, 1}, {2, 2}, "same", {1, 1}},
      {{1, 7, 6, 20}, {3, 3, 20, 3}, {1, 2}, "same", {2, 1}},
      {{2, 8, 7, 20}, {2, 3, 20, 3}, {3, 2}, "valid", {1, 1}},
  };
  std::uint32_t seed = 580;
  for (const auto& c : cases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    auto run = [&](DType dt) {
      const Tensor xi = x.astype(dt), ki = k.astype(dt);
      GradientTape tape;
      tape.watch(xi);
      tape.watch(ki);
      const Tensor y = depthwise_conv2d(xi, ki, c.strides, c.padding, c.dilation);
      const Tensor w = random_tensor(y.shape(), 590, dt);
      auto grads = tape.gradient(reduce_sum(y * w), std::vector<Tensor>{xi, ki});
      return std::vector<Tensor>{y, grads[0], grads[1]};
    };
    const auto r64 = run(DType::float64), r32 = run(DType::float32);
    check_close(r64[0], ref_depthwise(x, k, c.strides, c.padding, c.dilation), 1e-12);
    for (std::size_t i = 0; i < 3; ++i) check_close(r32[i], {r64[i].to_vector<double>(), r64[i].shape()}, 1e-5);
  }
  // The float64 gradients of one wide case against finite differences.
  const ConvCase& c = cases[1];
  check_gradients(
      [&](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], c.strides, c.padding, c.dilation); },
      {random_tensor({1, 5, 4, 20}, 595), random_tensor(c.k, 596)});
}

TEST_CASE("depthwise_conv2d splits work across threads without changing the result") {
  ThreadsGuard guard;
  const Tensor x = random_tensor({4, 32, 32, 16}, 560), k = random_tensor({3, 3, 16, 1}, 561);
  const Tensor w = random_tensor({4, 32, 32, 16}, 562);
  auto run = [&](int threads) {
    config::set_num_threads(threads);
    GradientTape tape;
    tape.watch(x);
    tape.watch(k);
    const Tensor y = depthwise_conv2d(x, k, {1, 1}, "same");
    auto grads = tape.gradient(reduce_sum(y * w), std::vector<Tensor>{x, k});
    return std::vector<Tensor>{y, grads[0], grads[1]};
  };
  const auto one = run(1), two = run(2);
  check_close(one[0], ref_depthwise(x, k, {1, 1}, "same", {1, 1}), 1e-12);
  for (std::size_t i = 0; i < 3; ++i) check_close(two[i], {one[i].to_vector<double>(), one[i].shape()}, 1e-12);
}

// ---- conv2d_transpose ----------------------------------------------------------------------------

struct TransposeCase {
  Shape x, k;  // k: [kh, kw, out, in]
  std::array<int, 2> strides;
  std::string padding;
  std::optional<std::array<int, 2>> output_padding;
  std::array<int, 2> dilation;
  Shape expected;  // Keras' Conv2DTranspose output shape
};

const std::vector<TransposeCase> kTransposeCases = {
    {{2, 3, 4, 3}, {3, 3, 2, 3}, {1, 1}, "valid", std::nullopt, {1, 1}, {2, 5, 6, 2}},
    {{2, 3, 4, 3}, {3, 3, 2, 3}, {2, 2}, "same", std::nullopt, {1, 1}, {2, 6, 8, 2}},
    {{2, 3, 4, 3}, {3, 2, 2, 3}, {2, 2}, "valid", std::nullopt, {1, 1}, {2, 7, 8, 2}},
    {{1, 3, 4, 2}, {3, 2, 2, 2}, {2, 3}, "same", std::array<int, 2>{1, 2}, {1, 1}, {1, 6, 11, 2}},
    {{1, 3, 3, 2}, {2, 2, 3, 2}, {2, 2}, "valid", std::array<int, 2>{1, 0}, {1, 1}, {1, 7, 6, 3}},
    {{1, 4, 3, 2}, {3, 2, 2, 2}, {1, 1}, "same", std::nullopt, {2, 2}, {1, 4, 3, 2}},
    {{1, 3, 3, 2}, {2, 3, 1, 2}, {2, 1}, "valid", std::nullopt, {2, 1}, {1, 7, 5, 1}},
    {{2, 3, 2, 1}, {2, 2, 2, 1}, {3, 3}, "valid", std::nullopt, {1, 1}, {2, 9, 6, 2}},
};

std::string describe(const TransposeCase& c) {
  std::ostringstream s;
  s << "x " << c.x.to_string() << " kernel " << c.k.to_string() << " strides [" << c.strides[0] << ","
    << c.strides[1] << "] padding " << c.padding;
  if (c.output_padding) s << " output_padding [" << (*c.output_padding)[0] << "," << (*c.output_padding)[1] << "]";
  s << " dilation [" << c.dilation[0] << "," << c.dilation[1] << "]";
  return s.str();
}

TEST_CASE("conv2d_transpose matches scattering each input pixel times the kernel") {
  std::uint32_t seed = 600;
  for (const auto& c : kTransposeCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    const Tensor y = conv2d_transpose(x, k, c.strides, c.padding, c.output_padding, c.dilation);
    CHECK(y.shape() == c.expected);
    check_close(y, ref_conv_transpose(x, k, c.strides, c.padding, c.output_padding, c.dilation), 1e-12);
  }
}

TEST_CASE("conv2d_transpose gradients match finite differences") {
  std::uint32_t seed = 700;
  for (const auto& c : kTransposeCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++), k = random_tensor(c.k, seed++);
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          return conv2d_transpose(in[0], in[1], c.strides, c.padding, c.output_padding, c.dilation);
        },
        {x, k});
  }
  const TransposeCase& c = kTransposeCases[3];
  const Tensor x = random_tensor(c.x, 750), k = random_tensor(c.k, 751);
  for (int wrt = 0; wrt < 2; ++wrt) {
    INFO("second order, gradient with respect to " << (wrt == 0 ? "x" : "kernel"));
    check_gradients(
        [&](const std::vector<Tensor>& in) {
          GradientTape inner;
          inner.watch(in[0]);
          inner.watch(in[1]);
          const Tensor y = conv2d_transpose(in[0], in[1], c.strides, c.padding, c.output_padding, c.dilation);
          return inner.gradient(reduce_sum(square(y)), in[static_cast<std::size_t>(wrt)]);
        },
        {x, k});
  }
}

TEST_CASE("conv2d_transpose is the gradient of conv2d with respect to its input") {
  // <conv2d(z, k), x> = <z, conv2d_transpose(x, k)> for every z shaped like the transpose's output.
  const Tensor x = random_tensor({2, 4, 3, 3}, 800), k = random_tensor({3, 2, 2, 3}, 801);
  const Tensor y = conv2d_transpose(x, k, {2, 2}, "same");
  const Tensor z = random_tensor(y.shape(), 802);
  const double lhs = reduce_sum(conv2d(z, k, {2, 2}, "same") * x).item<double>();
  const double rhs = reduce_sum(z * y).item<double>();
  CHECK(lhs == Approx(rhs).epsilon(1e-12));
}

// ---- half precision --------------------------------------------------------------------------------

namespace {
// got (a half type) equals want computed in float32 and rounded to got's dtype, element for element.
void check_rounded(const Tensor& got, const Tensor& want32) {
  REQUIRE(got.shape() == want32.shape());
  CHECK(got.to_vector<float>() == want32.astype(got.dtype()).to_vector<float>());
}
}  // namespace

TEST_CASE("conv ops on float16 and bfloat16 compute in float32 and round the result once") {
  for (const DType dt : {DType::float16, DType::bfloat16}) {
    INFO(name(dt));
    const auto half = [&](const Shape& s, std::uint32_t seed) { return random_tensor(s, seed, dt); };
    const auto f32 = [](const Tensor& t) { return t.astype(DType::float32); };
    const Tensor x = half({2, 7, 5, 3}, 1), k = half({3, 2, 3, 4}, 2);
    const Tensor y = conv2d(x, k, {2, 2}, "same");
    CHECK(y.dtype() == dt);
    check_rounded(y, conv2d(f32(x), f32(k), {2, 2}, "same"));
    const Tensor dk = half({3, 3, 3, 2}, 3);
    check_rounded(depthwise_conv2d(x, dk, {1, 1}, "same", {2, 1}),
                  depthwise_conv2d(f32(x), f32(dk), {1, 1}, "same", {2, 1}));
    const Tensor x1 = half({2, 9, 3}, 4), k1 = half({3, 3, 2}, 5);
    check_rounded(conv1d(x1, k1, 1, "causal"), conv1d(f32(x1), f32(k1), 1, "causal"));
    const Tensor tk = half({3, 3, 2, 3}, 6);
    check_rounded(conv2d_transpose(x, tk, {2, 2}, "same"), conv2d_transpose(f32(x), f32(tk), {2, 2}, "same"));
    // mixing a half input with a float32 kernel is still an error
    check_error<DTypeError>([&] { conv2d(x, f32(k)); }, {"conv2d", std::string(name(dt)), "float32"});
  }
}

TEST_CASE("conv2d gradients of float16 operands are the float32 gradients rounded") {
  const Tensor x = random_tensor({1, 5, 4, 2}, 11, DType::float16);
  const Tensor k = random_tensor({3, 3, 2, 3}, 12, DType::float16);
  GradientTape tape;
  tape.watch(x);
  tape.watch(k);
  const Tensor loss = reduce_sum(conv2d(x, k, {1, 1}, "same").astype(DType::float32));
  const auto g = tape.gradient(loss, std::vector<Tensor>{x, k});
  REQUIRE(g.size() == 2);
  CHECK(g[0].dtype() == DType::float16);
  CHECK(g[1].dtype() == DType::float16);
  // The same computation in float32 on the rounded operands.
  const Tensor x32 = x.astype(DType::float32), k32 = k.astype(DType::float32);
  GradientTape tape32;
  tape32.watch(x32);
  tape32.watch(k32);
  const Tensor loss32 = reduce_sum(conv2d(x32, k32, {1, 1}, "same").astype(DType::float16).astype(DType::float32));
  const auto g32 = tape32.gradient(loss32, std::vector<Tensor>{x32, k32});
  check_rounded(g[0], g32[0]);
  check_rounded(g[1], g32[1]);
}
