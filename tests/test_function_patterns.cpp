// Pattern fusion in graph mode (graph/fuse_patterns.cpp): kernel sequences that one fused kernel
// of the backend runs in one pass. Each fused graph must give the bits of the kernels it
// replaces, so every test compares with memcmp (NaNs and the signs of zeros included), at every
// SIMD level, and checks that the graph shows the fused kernel (and, with the pass off, not).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <keel/keel.hpp>

#include "backend/fused.hpp"
#include "graph/plan.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().raw_data(), b.contiguous().raw_data(), a.size() * itemsize(a.dtype())) == 0;
}

std::size_t count_ops(const graph::Graph& g, const std::string& type) {
  std::size_t n = 0;
  for (const auto& op : g.operations()) n += op.type == type;
  return n;
}

// Integers in [-2, 2]; with `special`, element 7 is a NaN and element 40 minus infinity (few, so
// that most results stay finite and a wrong bias or activation shows).
Tensor pattern(const Shape& shape, DType dtype, int seed, bool special = true) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(static_cast<int>((i * 7919 + static_cast<std::size_t>(seed)) % 5) - 2);
  if (special && v.size() > 40) {
    v[7] = std::numeric_limits<double>::quiet_NaN();
    v[40] = -std::numeric_limits<double>::infinity();
  }
  return constant(v, shape, DType::float64).astype(dtype);
}

// The pools both max pool tests run: tiling the image (2x2/2), leaving pixels out (7x5 valid, a
// 2x2/3 gap), padding ("same") and overlapping (3x3/1); the channel count is set per run.
struct PoolCase {
  Shape x;
  std::array<int, 2> pool, strides;
  std::string padding;
};
const std::vector<PoolCase> kPoolCases = {{{2, 8, 8, 0}, {2, 2}, {2, 2}, "valid"},
                                          {{2, 7, 5, 0}, {2, 2}, {2, 2}, "valid"},
                                          {{2, 7, 5, 0}, {2, 2}, {2, 2}, "same"},
                                          {{1, 8, 7, 0}, {2, 2}, {3, 3}, "valid"},
                                          {{1, 6, 5, 0}, {3, 3}, {1, 1}, "same"}};

// x for a pool case: integers in [-2, 2] (ties and zeros) with a NaN every 11 elements; and w,
// the pool's upstream gradient: integers in [-3, 3] with NaNs and infinities.
std::pair<Tensor, Tensor> pool_inputs(const PoolCase& c, DType dtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> xv(static_cast<std::size_t>(c.x.num_elements()));
  for (std::size_t i = 0; i < xv.size(); ++i)
    xv[i] = i % 11 == 7 ? nan : static_cast<double>(static_cast<int>((i * 7919) % 5) - 2);
  const Tensor x = constant(xv, c.x, DType::float64).astype(dtype);
  const Tensor y = max_pool2d(x, c.pool, c.strides, c.padding);
  std::vector<double> wv(static_cast<std::size_t>(y.size()));
  for (std::size_t i = 0; i < wv.size(); ++i)
    wv[i] = i % 13 == 5 ? nan : i % 17 == 3 ? inf : static_cast<double>(static_cast<int>(i % 7) - 3);
  return {x, constant(wv, y.shape(), DType::float64).astype(dtype)};
}

// Runs check(dtype, c, relu) at every SIMD level, for both float dtypes, every pool case with 1,
// 5, 16, 19 and 37 channels (with and without a SIMD tail), with and without a ReLU.
template <class Check>
void each_pool_run(Check&& check) {
  testing::at_every_simd_level([&](const std::string& level) {
    for (const DType dtype : {DType::float32, DType::float64})
      for (const std::int64_t channels : {1, 5, 16, 19, 37})
        for (PoolCase c : kPoolCases)
          for (const bool relu : {true, false}) {
            c.x[3] = channels;
            INFO(level << " " << keel::name(dtype) << " x " << c.x.to_string() << " pool " << c.pool[0]
                       << " stride " << c.strides[0] << " " << c.padding << (relu ? " relu" : ""));
            check(dtype, c, relu);
          }
  });
}

}  // namespace

TEST_CASE("a max pool's gradient and the ReLU gradient after it run as one kernel with the same bits", "[function]") {
  // Pattern fusion (graph/fuse_patterns.cpp): MaxPoolGrad(relu(x), dy) then ReluGrad(that,
  // relu(x)) become MaxPoolGradReluGrad. It masks dy by the window's max > 0 inside the scatter
  // where windows do not overlap, and each image after its scatter where they do. Against the
  // eager gradient (the two kernels), bit for bit (NaNs and the signs of zeros included), at
  // every SIMD level: pools that tile the image (2x2/2), leave pixels out (7x5 valid, a 2x2/3
  // gap), pad ("same") and overlap (3x3/1); channels with and without a SIMD tail. Half of relu(x)
  // is 0, so many windows' max is 0 and their mask 0; dy holds negatives (a masked -g is -0), a
  // NaN and an infinity (NaN * 0 and inf * 0 stay NaN).
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  auto body = [](const PoolCase& c) {
    return [c](const Tensor& x, const Tensor& w) {
      GradientTape tape;
      tape.watch(x);
      const Tensor loss = reduce_sum(max_pool2d(relu(x), c.pool, c.strides, c.padding) * w);
      return tape.gradient(loss, x);
    };
  };
  each_pool_run([&](DType dtype, const PoolCase& c, bool relu) {
    if (!relu) return;  // the pattern is the ReLU's
    const auto [x, w] = pool_inputs(c, dtype);
    const Tensor want = body(c)(x, w);
    passes.fuse_patterns = true;
    auto fused = keel::function(body(c));
    const graph::Graph& g = fused.concrete_graph(x, w);
    passes.fuse_patterns = false;
    auto plain = keel::function(body(c));
    const graph::Graph& unfused = plain.concrete_graph(x, w);
    passes = saved;
    CHECK(count_ops(g, "MaxPoolGradReluGrad") == 1);
    CHECK(count_ops(g, "MaxPoolGrad") + count_ops(g, "ReluGrad") == 0);
    CHECK(count_ops(unfused, "MaxPoolGradReluGrad") == 0);
    CHECK(same_bits(fused(x, w), want));  // a replay of the fused graph
    CHECK(same_bits(plain(x, w), want));
  });
}

TEST_CASE("a max pool whose forward is in the graph keeps its choices for the gradient, with the same bits",
          "[function]") {
  // When the forward max pool is in the same graph (a traced training step), it becomes
  // MaxPoolWithArgmax, which also writes each window's chosen tap (plus a flag for a max not > 0),
  // and the gradient, MaxPoolGradWithArgmax[ReluGrad], scatters dy by those choices instead of
  // reading x again. Against the eager forward and gradient, bit for bit, at every SIMD level:
  // with and without a ReLU before the pool, pools that tile the image, leave pixels out, pad and
  // overlap (3x3/1: with the ReLU, the mask of each pixel's sum needs x, so that gradient stays
  // MaxPoolGradReluGrad; without, overlapping windows add their parts in the same order). x holds
  // NaNs (the first NaN tap is chosen; NaN > 0 is false), ties and zeros; dy negatives (a masked -g
  // is -0), NaNs and infinities.
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  auto body = [](const PoolCase& c, bool relu) {
    return [c, relu](const Tensor& x, const Tensor& w) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = max_pool2d(relu ? keel::relu(x) : x, c.pool, c.strides, c.padding);
      return std::vector<Tensor>{tape.gradient(reduce_sum(y * w), x), y};
    };
  };
  each_pool_run([&](DType dtype, const PoolCase& c, bool relu) {
    const auto [x, w] = pool_inputs(c, dtype);
    const std::vector<Tensor> want = body(c, relu)(x, w);
    passes.fuse_patterns = true;
    auto fused = keel::function(body(c, relu));
    const graph::Graph& g = fused.concrete_graph(x, w);
    passes = saved;
    const bool overlap = c.strides[0] < c.pool[0];
    const bool kept = !(relu && overlap);
    CHECK(count_ops(g, "MaxPoolWithArgmax") == (kept ? 1u : 0u));
    CHECK(count_ops(g, "MaxPool") == (kept ? 0u : 1u));
    CHECK(count_ops(g, relu ? "MaxPoolGradWithArgmaxReluGrad" : "MaxPoolGradWithArgmax") == (kept ? 1u : 0u));
    CHECK(count_ops(g, "MaxPoolGradReluGrad") == (relu && overlap ? 1u : 0u));
    const std::vector<Tensor> got = fused(x, w);  // a replay
    REQUIRE(got.size() == 2);
    CHECK(same_bits(got[0], want[0]));
    CHECK(same_bits(got[1], want[1]));
  });
}

TEST_CASE("a max pool gradient with kept choices also takes the bias gradient's sum after it", "[function]") {
  // A bias before a max pool (a Conv2D layer's, then the pool) gets the gradient Sum(dx, axes
  // {0, 1, 2}) of the pool's gradient dx. In a graph whose pool keeps its choices, the gradient's
  // kernel becomes MaxPoolGradWithArgmax[ReluGrad]BiasAddGrad, which also adds each window's
  // gradient into the sum as it scatters it (a window gives its gradient to one pixel, so these
  // add up to the sum over dx). The values added are the same, in another order: with integer
  // values (exact in any order) the sums equal eager's; a NaN or infinity in the upstream
  // gradient makes its channel's sum NaN or infinite in both. dx and y keep their bits.
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  auto body = [](const PoolCase& c, bool relu) {
    return [c, relu](const Tensor& x, const Tensor& b, const Tensor& w) {
      GradientTape tape;
      tape.watch(x);
      tape.watch(b);
      const Tensor z = x + b;
      const Tensor y = max_pool2d(relu ? keel::relu(z) : z, c.pool, c.strides, c.padding);
      std::vector<Tensor> out = tape.gradient(reduce_sum(y * w), std::vector<Tensor>{x, b});
      out.push_back(y);
      return out;
    };
  };
  // Equal values: NaN equals NaN, and -0 equals 0 (a sum of -0s may start from +0).
  auto same_values = [](const Tensor& a, const Tensor& b) {
    if (a.shape() != b.shape()) return false;
    const std::vector<double> u = a.astype(DType::float64).to_vector<double>(),
                              v = b.astype(DType::float64).to_vector<double>();
    for (std::size_t i = 0; i < u.size(); ++i)
      if (!(u[i] == v[i] || (std::isnan(u[i]) && std::isnan(v[i])))) return false;
    return true;
  };
  each_pool_run([&](DType dtype, const PoolCase& c, bool relu) {
    const Tensor x = pool_inputs(c, dtype).first;
    const Tensor b = pattern(Shape{c.x[3]}, dtype, 3, /*special=*/false);
    const Tensor w = pattern(max_pool2d(x, c.pool, c.strides, c.padding).shape(), dtype, 1);
    const std::vector<Tensor> want = body(c, relu)(x, b, w);
    passes.fuse_patterns = true;
    auto fused = keel::function(body(c, relu));
    const graph::Graph& g = fused.concrete_graph(x, b, w);
    passes = saved;
    const bool kept = !(relu && c.strides[0] < c.pool[0]);
    const std::string op =
        relu ? "MaxPoolGradWithArgmaxReluGradBiasAddGrad" : "MaxPoolGradWithArgmaxBiasAddGrad";
    CHECK(count_ops(g, op) == (kept ? 1u : 0u));
    CHECK(count_ops(g, "Sum") == (kept ? 0u : 1u));  // the bias's where not fused (the loss is dead)
    const std::vector<Tensor> got = fused(x, b, w);  // a replay
    REQUIRE(got.size() == 3);
    CHECK(same_bits(got[0], want[0]));
    CHECK(same_values(got[1], want[1]));
    CHECK(same_bits(got[2], want[2]));
  });
}

TEST_CASE("the bias gradient a max pool gradient sums has the same bits at 1 and 2 threads", "[function]") {
  // Each image's sums are added in their own rows, then the rows in image order: how the images
  // are split between threads does not change the order. Values that are not integers (so the
  // order shows in the bits), 12 images of 32x32x24 (enough work for the kernel to split them 6 +
  // 6 on two threads: cpu/window_kernels.hpp's plan_parts), float32 and float64; and close to
  // eager's sum (another order of the same values).
  const int threads = config::num_threads();
  for (const DType dtype : {DType::float32, DType::float64}) {
    INFO(keel::name(dtype));
    random::set_seed(7);
    const Tensor x = random::normal(Shape{12, 32, 32, 24}, 0.0, 1.0, dtype);
    const Tensor b = random::normal(Shape{24}, 0.0, 1.0, dtype);
    const Tensor w = random::normal(Shape{12, 16, 16, 24}, 0.0, 1.0, dtype);
    auto body = [](const Tensor& x, const Tensor& b, const Tensor& w) {
      GradientTape tape;
      tape.watch(b);
      const Tensor y = max_pool2d(relu(x + b), {2, 2}, {2, 2}, "valid");
      return std::vector<Tensor>{tape.gradient(reduce_sum(y * w), b), y};
    };
    auto fused = keel::function(body);
    REQUIRE(count_ops(fused.concrete_graph(x, b, w), "MaxPoolGradWithArgmaxReluGradBiasAddGrad") == 1);
    config::set_num_threads(1);
    const Tensor one = fused(x, b, w)[0];
    config::set_num_threads(2);
    const Tensor two = fused(x, b, w)[0];
    config::set_num_threads(threads);
    CHECK(same_bits(one, two));
    // Sums of about 1500 values of size 1: float32 rounding differs by far less than 1e-3.
    const Tensor want = body(x, b, w)[0];
    const double tolerance = dtype == DType::float32 ? 1e-3 : 1e-11;
    CHECK(reduce_max(abs(one - want)).astype(DType::float64).item<double>() < tolerance);
  }
}

TEST_CASE("a convolution with its bias and activation runs as one kernel with the same bits", "[function]") {
  // Conv2D(x, k) -> y; Add(y, b) -> t; Relu|Sigmoid|Tanh|Exp(t) -> z (bias_add under a trace)
  // become Conv2DBiasAdd<Act>(x, k, b) -> z, which adds the bias and applies the activation to
  // each block of output rows right after its GEMM (each output row of the direct kernel). The
  // eager forward is conv2d, then bias_add's one-pass kernel: the same kernel on the same values.
  // Geometries: the direct kernel (3 channels, 3x3, 16 outputs; float32 with AVX2), which adds
  // the bias and a ReLU to its tiles in registers; its narrow tiles (16 channels, 5 outputs: dot
  // products along the channels, biased one output at a time); im2col (5 and 19 outputs, not
  // multiples of 8; 16 channels), pointwise 1x1, strides with "valid" padding, and 1024 output
  // rows (8 im2col blocks, split over the threads). x holds a NaN and an infinity; the gradients
  // of x, k and b through the fused output are compared too.
  graph::detail::PassOptions& passes = graph::detail::default_pass_options();
  const graph::detail::PassOptions saved = passes;
  struct Case {
    Shape x;
    std::int64_t kernel, outputs;
    std::array<int, 2> strides;
    std::string padding;
  };
  const std::vector<Case> cases = {{{2, 7, 6, 3}, 3, 16, {1, 1}, "same"},  {{2, 7, 6, 3}, 3, 5, {1, 1}, "same"},
                                   {{1, 6, 5, 16}, 3, 19, {2, 1}, "valid"}, {{2, 4, 5, 7}, 1, 16, {1, 1}, "valid"},
                                   {{4, 16, 16, 16}, 3, 24, {1, 1}, "same"}, {{2, 6, 5, 16}, 3, 5, {1, 1}, "same"}};
  const std::vector<std::pair<std::string, std::string>> activations = {
      {"linear", "Conv2DBiasAdd"}, {"relu", "Conv2DBiasAddRelu"}, {"sigmoid", "Conv2DBiasAddSigmoid"},
      {"tanh", "Conv2DBiasAddTanh"}, {"exponential", "Conv2DBiasAddExp"}};
  auto body = [](const Case& c, const std::string& activation) {
    return [c, activation](const Tensor& x, const Tensor& k, const Tensor& b) {
      GradientTape tape;
      tape.watch(x);
      tape.watch(k);
      tape.watch(b);
      const Tensor z = bias_add(conv2d(x, k, c.strides, c.padding), b, activation);
      std::vector<Tensor> out = tape.gradient(reduce_sum(z * z.shape()[3] * 0.25), {x, k, b});
      out.insert(out.begin(), z);
      return out;
    };
  };
  testing::at_every_simd_level([&](const std::string& level) {
    for (const DType dtype : {DType::float32, DType::float64})
      for (const Case& c : cases)
        for (const auto& [activation, fused_name] : activations) {
          INFO(level << " " << keel::name(dtype) << " x " << c.x.to_string() << " kernel " << c.kernel << " outputs "
                     << c.outputs << " " << c.padding << " " << activation);
          const Tensor x = pattern(c.x, dtype, 1);
          const Tensor k = pattern(Shape{c.kernel, c.kernel, c.x[3], c.outputs}, dtype, 2, false) * 0.25;
          const Tensor b = pattern(Shape{c.outputs}, dtype, 3, false);
          const std::vector<Tensor> want = body(c, activation)(x, k, b);
          passes.fuse_patterns = true;
          auto fused = keel::function(body(c, activation));
          const graph::Graph& g = fused.concrete_graph(x, k, b);
          passes.fuse_patterns = false;
          auto plain = keel::function(body(c, activation));
          const graph::Graph& unfused = plain.concrete_graph(x, k, b);
          passes = saved;
          CHECK(count_ops(g, fused_name) == 1);
          CHECK(count_ops(g, "Conv2D") == 0);
          CHECK(count_ops(unfused, fused_name) == 0);
          const std::vector<Tensor> got = fused(x, k, b), got_plain = plain(x, k, b);  // replays
          REQUIRE(got.size() == want.size());
          REQUIRE(got_plain.size() == want.size());
          for (std::size_t i = 0; i < got.size(); ++i) {
            CHECK(same_bits(got[i], want[i]));
            CHECK(same_bits(got_plain[i], want[i]));
          }
        }
  });
}

TEST_CASE("a convolution whose output or sum is read elsewhere keeps those values", "[function]") {
  // Fusion must not drop a value something else reads: when the convolution's output y is also a
  // result, nothing fuses; when the biased t is (and the activation after it), the bias joins the
  // convolution and the activation stays a kernel of its own.
  const Tensor x = pattern(Shape{2, 6, 6, 3}, DType::float32, 1, false);
  const Tensor k = pattern(Shape{3, 3, 3, 16}, DType::float32, 2, false);
  const Tensor b = pattern(Shape{16}, DType::float32, 3, false);
  auto keeps_y = [](const Tensor& x, const Tensor& k, const Tensor& b) {
    const Tensor y = conv2d(x, k, {1, 1}, "same");
    return std::vector<Tensor>{y, bias_add(y, b, "relu")};
  };
  auto keeps_t = [](const Tensor& x, const Tensor& k, const Tensor& b) {
    const Tensor t = bias_add(conv2d(x, k, {1, 1}, "same"), b);
    return std::vector<Tensor>{t, relu(t)};
  };
  auto f = keel::function(keeps_y);
  CHECK(count_ops(f.concrete_graph(x, k, b), "Conv2D") == 1);
  CHECK(count_ops(f.concrete_graph(x, k, b), "Conv2DBiasAddRelu") == 0);
  const std::vector<Tensor> got_y = f(x, k, b), want_y = keeps_y(x, k, b);
  for (std::size_t i = 0; i < 2; ++i) CHECK(same_bits(got_y[i], want_y[i]));
  auto h = keel::function(keeps_t);
  CHECK(count_ops(h.concrete_graph(x, k, b), "Conv2DBiasAdd") == 1);
  CHECK(count_ops(h.concrete_graph(x, k, b), "Relu") == 1);
  const std::vector<Tensor> got_t = h(x, k, b), want_t = keeps_t(x, k, b);
  for (std::size_t i = 0; i < 2; ++i) CHECK(same_bits(got_t[i], want_t[i]));
}

TEST_CASE("the fused convolution kernel with no input channels gives the activated bias", "[function]") {
  // K = 0 (a convolution over 0 channels): y is all zeros, so z = activation(bias) everywhere.
  // A trace does not fuse there (an empty view has no layout to match), so the kernel is called
  // directly: 1 image of 5x5, a 3x3 window, "same" padding, 8 outputs.
  kernel::WindowGeom g;
  g.n = 1, g.h = g.w = 5, g.c = 0, g.kh = g.kw = 3, g.sh = g.sw = g.dh = g.dw = 1, g.pad_top = g.pad_left = 1;
  g.ho = g.wo = 5, g.o = 8;
  for (const DType dtype : {DType::float32, DType::float64}) {
    const Tensor x = zeros({1, 5, 5, 0}, dtype), k = zeros({3, 3, 0, 8}, dtype);
    const Tensor b = pattern(Shape{8}, dtype, 3, false);
    const Tensor z = zeros({1, 5, 5, 8}, dtype);
    backend::conv2d_bias_activation(g, x, k, b, false, kernel::UnaryOp::sigmoid, z);
    CHECK(same_bits(z, bias_add(zeros({1, 5, 5, 8}, dtype), b, "sigmoid")));
  }
}
