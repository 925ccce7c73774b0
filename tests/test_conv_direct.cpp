// conv2d's direct float32 kernels (cpu/conv_direct.cpp): register tiles over a zero-padded image
// for the forward, the input gradient of a stride-1 convolution (the forward of dy with the
// kernel turned by 180 degrees and its channel axes swapped) and the kernel gradient, at AVX2 and
// AVX-512, for K = kh*kw*c up to the limits where im2col + GEMM takes over.
//
// The oracle is the same convolution in float64, which always takes the im2col path and which
// tests/test_conv.cpp checks against loops written from the definition. Each case runs at every
// SIMD level (capped at SSE2 everything takes im2col), so the shapes below are chosen for the
// paths they reach at the AVX-512 level:
// - channel blocks of 1, 2 and 4 registers (16, 32, 64 channels) and a mix (48, 80);
// - images narrower than a tile (widths 5 and 7 against 12 pixels), so tiles cross the ends of
//   output rows and images;
// - dilation along the height (inputs of a tap row stay one run) and along the width (one run
//   per tap);
// - a stride of 2 (no direct input gradient), 24 channels (AVX2 tiles at the AVX-512 level);
// - fewer than 8 output channels (the narrow tiles: dot products along whole registers of input
//   channels), in the forward and in the input gradient of a first layer (3 or 1 channels);
// - K = 1296 (forward and input gradient by im2col, kernel gradient direct) and K = 4800 (all
//   im2col);
// - rows too wide for one padded copy of the whole image (200 x 64 floats): bands of a few
//   output rows, at strides 1 and 2.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "simd_levels.hpp"
#include "threads_guard.hpp"

using namespace keel;

namespace {

struct Case {
  Shape x, k;
  std::array<int, 2> strides, dilation;
  std::string padding;
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << "x " << c.x.to_string() << " k " << c.k.to_string() << " strides " << c.strides[0] << "," << c.strides[1]
     << " dilation " << c.dilation[0] << "," << c.dilation[1] << " " << c.padding;
  return os.str();
}

// float32 against float64: |got - want| within 1e-5 of the largest |want| (sums of up to 4800
// products of values in [-1, 1]: float32 rounding stays near 1e-6 of it; a wrong tap, channel or
// pixel is of the order of the values themselves).
void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const auto g = got.astype(DType::float64).to_vector<double>(), w = want.to_vector<double>();
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    scale = std::max(scale, std::abs(w[i]));
    worst = std::max(worst, std::abs(g[i] - w[i]));
  }
  INFO("largest error " << worst << " of values up to " << scale);
  CHECK(worst <= 1e-5 * scale);
}

// y, dx and dk of sum(conv2d(x, k) * r) in float32 against float64, x, k and r uniform in [-1, 1].
void check_case(const Case& c) {
  INFO(describe(c));
  const Tensor x = random::uniform(c.x, -1.0, 1.0, DType::float64);
  const Tensor k = random::uniform(c.k, -1.0, 1.0, DType::float64);
  const Tensor y64 = conv2d(x, k, c.strides, c.padding, c.dilation);
  const Tensor r = random::uniform(y64.shape(), -1.0, 1.0, DType::float64);
  auto run = [&](DType dtype) {
    const Tensor xd = x.astype(dtype), kd = k.astype(dtype);
    GradientTape tape;
    tape.watch(xd);
    tape.watch(kd);
    const Tensor y = conv2d(xd, kd, c.strides, c.padding, c.dilation);
    std::vector<Tensor> out = tape.gradient(reduce_sum(y * r.astype(dtype)), std::vector<Tensor>{xd, kd});
    out.insert(out.begin(), y);
    return out;
  };
  const auto want = run(DType::float64);
  testing::at_every_simd_level([&](const std::string&) {
    const auto got = run(DType::float32);
    const char* what[] = {"y", "dx", "dk"};
    for (std::size_t i = 0; i < 3; ++i) {
      INFO(what[i]);
      check_close(got[i], want[i]);
    }
  });
}

}  // namespace

TEST_CASE("conv2d float32 direct tiles match float64 for every channel block and narrow images") {
  const std::vector<Case> cases = {
      {{2, 5, 7, 16}, {3, 3, 16, 16}, {1, 1}, {1, 1}, "same"},     // 1 register, tiles cross rows
      {{3, 4, 5, 32}, {3, 3, 32, 32}, {1, 1}, {1, 1}, "same"},     // 2 registers, images of 20 pixels
      {{2, 6, 6, 16}, {3, 3, 16, 64}, {1, 1}, {1, 1}, "same"},     // 4 registers; dx has 16 channels
      {{1, 9, 8, 48}, {3, 3, 48, 80}, {1, 1}, {1, 1}, "same"},     // 4 + 1 and 2 + 1 registers
      {{2, 9, 7, 16}, {3, 3, 16, 32}, {1, 1}, {2, 1}, "valid"},    // dilated rows, one run per tap row
      {{2, 7, 9, 32}, {2, 3, 32, 16}, {1, 1}, {1, 2}, "same"},     // dilated columns, a run per tap
      {{2, 9, 9, 16}, {3, 3, 16, 16}, {2, 2}, {1, 1}, "same"},     // stride 2: dx by im2col
      {{2, 6, 5, 24}, {3, 3, 24, 24}, {1, 1}, {1, 1}, "same"},     // 24 channels: AVX2 tiles
      {{1, 4, 3, 144}, {3, 3, 144, 16}, {1, 1}, {1, 1}, "same"},   // K = 1296: only dk direct
      {{1, 3, 3, 192}, {5, 5, 192, 16}, {1, 1}, {1, 1}, "same"},   // K = 4800: all by im2col
      {{2, 6, 9, 3}, {3, 3, 3, 16}, {1, 1}, {1, 1}, "same"},       // dx narrow: a first layer's 3 of 16
      {{2, 5, 7, 1}, {3, 3, 1, 32}, {1, 1}, {1, 1}, "valid"},      // dx narrow: 1 of 32
      {{1, 6, 5, 7}, {3, 3, 7, 16}, {1, 1}, {1, 1}, "same"},       // dx narrow: 7 of 16
      {{2, 5, 6, 16}, {3, 3, 16, 3}, {1, 1}, {1, 1}, "same"},      // y narrow: an RGB output
      {{1, 5, 5, 24}, {3, 3, 24, 5}, {1, 1}, {1, 1}, "same"},      // y narrow on AVX2 tiles
      {{1, 7, 6, 32}, {3, 2, 32, 2}, {1, 1}, {2, 2}, "same"},      // y narrow, dilated
      {{1, 8, 200, 64}, {3, 3, 64, 16}, {1, 1}, {1, 1}, "same"},   // bands of 3 output rows
      {{1, 9, 130, 64}, {3, 3, 64, 16}, {2, 2}, {1, 1}, "same"},   // bands at stride 2
  };
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("conv2d float32 direct tiles split an image between threads without changing the result") {
  // 3 images of 6 rows on two threads: the parts split at output row 9, inside the second image,
  // so each part loads that image and runs part of its pixels.
  keel_test::ThreadsGuard guard;
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    config::set_num_threads(threads);
    check_case({{3, 6, 10, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"});
  }
}

TEST_CASE("conv2d float32 direct forward applies a traced bias and activation to every pixel") {
  // In a traced function Conv2D -> Add(bias) -> Relu becomes one kernel whose epilogue runs on
  // each image's pixels as the tiles finish them (src/graph/fuse_patterns.cpp).
  // 48 output channels (wide tiles) and 3 (narrow tiles).
  for (const std::int64_t out : {48, 3}) {
    INFO(out << " output channels");
    const Tensor x = random::uniform({3, 5, 7, 32}, -1.0, 1.0, DType::float32);
    const Tensor k = random::uniform({3, 3, 32, out}, -1.0, 1.0, DType::float32);
    const Tensor b = random::uniform({out}, -1.0, 1.0, DType::float32);
    auto f = [](const Tensor& x, const Tensor& k, const Tensor& b) { return relu(conv2d(x, k, {1, 1}, "same") + b); };
    const Tensor want = f(x.astype(DType::float64), k.astype(DType::float64), b.astype(DType::float64));
    testing::at_every_simd_level([&](const std::string&) {
      auto traced = keel::function(f);
      check_close(traced(x, k, b), want);
    });
  }
}
