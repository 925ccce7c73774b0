// Pooling: max_pool2d, avg_pool2d, global_avg_pool2d, global_max_pool2d.
//
// Forward values against plain loops written here from TensorFlow's definitions (padding excluded
// from both the max and the average); gradients, first and second order, against central finite
// differences in float64 (gradcheck.hpp); the max's gradient routing on ties checked by hand.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

struct Result {
  std::vector<double> values;
  Shape shape;
};

// TensorFlow's window rule: valid: out = ceil((in - k + 1) / s); same: out = ceil(in / s) with
// max((out - 1) * s + k - in, 0) padding, half before (rounded down).
struct Axis {
  i64 out, before;
};
Axis ref_axis(i64 in, i64 k, i64 s, const std::string& padding) {
  if (padding == "valid") return {static_cast<i64>(std::ceil(double(in - k + 1) / double(s))), 0};
  const i64 out = static_cast<i64>(std::ceil(double(in) / double(s)));
  return {out, std::max<i64>((out - 1) * s + k - in, 0) / 2};
}

// Max or mean over the window's pixels that lie inside the image.
Result ref_pool(const Tensor& xt, std::array<int, 2> pool, std::array<int, 2> s, const std::string& padding,
                bool max) {
  const auto x = xt.to_vector<double>();
  const Shape& xs = xt.shape();
  const Axis ah = ref_axis(xs[1], pool[0], s[0], padding), aw = ref_axis(xs[2], pool[1], s[1], padding);
  const Shape ys{xs[0], ah.out, aw.out, xs[3]};
  std::vector<double> y;
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 oh = 0; oh < ah.out; ++oh)
      for (i64 ow = 0; ow < aw.out; ++ow)
        for (i64 c = 0; c < xs[3]; ++c) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (i64 i = 0; i < pool[0]; ++i)
            for (i64 j = 0; j < pool[1]; ++j) {
              const i64 ih = oh * s[0] - ah.before + i, iw = ow * s[1] - aw.before + j;
              if (ih < 0 || ih >= xs[1] || iw < 0 || iw >= xs[2]) continue;
              const double v = x[static_cast<std::size_t>(((n * xs[1] + ih) * xs[2] + iw) * xs[3] + c)];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          y.push_back(max ? best : sum / count);
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

struct PoolCase {
  Shape x;
  std::array<int, 2> pool, strides;
  std::string padding;
};

std::string describe(const PoolCase& c) {
  std::ostringstream s;
  s << "x " << c.x.to_string() << " pool [" << c.pool[0] << "," << c.pool[1] << "] strides [" << c.strides[0]
    << "," << c.strides[1] << "] padding " << c.padding;
  return s.str();
}

// Odd image sizes, "same" with odd padding (the extra row/column after), overlapping windows
// (stride < pool), gaps (stride > pool), non-square pools, 1x1, the whole image.
const std::vector<PoolCase> kPoolCases = {
    {{2, 7, 5, 3}, {2, 2}, {2, 2}, "valid"}, {{2, 7, 5, 3}, {2, 2}, {2, 2}, "same"},
    {{2, 7, 5, 3}, {3, 2}, {2, 2}, "same"},  {{1, 7, 5, 2}, {3, 3}, {1, 1}, "same"},
    {{1, 7, 5, 2}, {3, 2}, {2, 1}, "valid"}, {{2, 8, 7, 2}, {2, 2}, {3, 3}, "valid"},
    {{1, 6, 6, 4}, {1, 1}, {2, 2}, "same"},  {{2, 4, 3, 2}, {4, 3}, {1, 1}, "valid"},
    {{1, 5, 4, 3}, {4, 4}, {3, 2}, "same"},
};

using keel_test::ThreadsGuard;

}  // namespace

// ---- forward -------------------------------------------------------------------------------------

TEST_CASE("max_pool2d matches a direct loop that skips the padding") {
  std::uint32_t seed = 1;
  for (const auto& c : kPoolCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++);
    check_close(max_pool2d(x, c.pool, c.strides, c.padding), ref_pool(x, c.pool, c.strides, c.padding, true), 0);
    check_close(max_pool2d(x.astype(DType::float32), c.pool, c.strides, c.padding),
                ref_pool(x, c.pool, c.strides, c.padding, true), 1e-6);
  }
}

TEST_CASE("max_pool2d ignores the padding even when every value is negative") {
  // Zero padding would win the max here; TensorFlow pads with -inf.
  const Tensor x = full({1, 3, 3, 1}, -5.0, DType::float64);
  const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, "same");
  CHECK(y.shape() == Shape{1, 2, 2, 1});
  for (double v : y.to_vector<double>()) CHECK(v == -5.0);
}

TEST_CASE("avg_pool2d matches a direct loop that excludes the padding from the count") {
  std::uint32_t seed = 100;
  for (const auto& c : kPoolCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++);
    check_close(avg_pool2d(x, c.pool, c.strides, c.padding), ref_pool(x, c.pool, c.strides, c.padding, false),
                1e-14);
    check_close(avg_pool2d(x.astype(DType::float32), c.pool, c.strides, c.padding),
                ref_pool(x, c.pool, c.strides, c.padding, false), 1e-6);
  }
  // A corner window of a "same" 3x3 pool sees 4 pixels: the mean of ones stays one.
  const Tensor ones4 = ones({1, 4, 4, 1}, DType::float64);
  for (double v : avg_pool2d(ones4, {3, 3}, {1, 1}, "same").to_vector<double>()) CHECK(v == 1.0);
}

TEST_CASE("pooling reads strided views of its input") {
  const Tensor base = random_tensor({2, 5, 7, 3}, 150);
  const Tensor x = transpose(base, {0, 2, 1, 3});
  REQUIRE(!x.is_contiguous());
  check_close(max_pool2d(x, {3, 2}, {2, 2}, "same"), ref_pool(x.contiguous(), {3, 2}, {2, 2}, "same", true), 0);
  check_close(avg_pool2d(x, {3, 2}, {2, 2}, "same"), ref_pool(x.contiguous(), {3, 2}, {2, 2}, "same", false), 1e-14);
}

// ---- gradients -----------------------------------------------------------------------------------

TEST_CASE("max_pool2d routes the gradient to the first maximum of each window") {
  // All equal: every window's first (top-left) pixel takes the whole gradient, as in TensorFlow.
  const Tensor x = zeros({1, 4, 4, 1}, DType::float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = max_pool2d(x, {2, 2}, {2, 2});
  const Tensor w = constant(std::vector<double>{1, 2, 3, 4}, {1, 2, 2, 1});
  const auto g = tape.gradient(reduce_sum(y * w), x).to_vector<double>();
  const std::vector<double> want = {1, 0, 2, 0,  //
                                    0, 0, 0, 0,  //
                                    3, 0, 4, 0,  //
                                    0, 0, 0, 0};
  CHECK(g == want);

  // Overlapping windows add up at a shared maximum (stride 1, 2x2 pool: the centre wins all four).
  const Tensor x2 = constant(std::vector<double>{0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 3, 3, 1});
  GradientTape tape2;
  tape2.watch(x2);
  const auto g2 = tape2.gradient(reduce_sum(max_pool2d(x2, {2, 2}, {1, 1})), x2).to_vector<double>();
  CHECK(g2 == std::vector<double>{0, 0, 0, 0, 4, 0, 0, 0, 0});
}

TEST_CASE("max_pool2d's first-order gradient by the forward's kept choices equals the recorded gradient's bits") {
  // Under a tape alone, the CPU forward keeps each window's choice and the gradient scatters dy by
  // it; under a second tape (which records the backward), the gradient is max_pool_grad's op,
  // which finds each window's first maximum again from x. Same routing: ties (values from a set
  // of 3), NaN taps (a window holding one routes to its first NaN, as its output is NaN) and -inf,
  // disjoint, overlapping and padded windows, float32 and float64, every SIMD level.
  struct Case { Shape shape; std::array<int, 2> pool, strides; const char* padding; };
  const std::vector<Case> cases{{{2, 8, 8, 16}, {2, 2}, {2, 2}, "valid"}, {{2, 9, 7, 5}, {3, 3}, {2, 2}, "same"},
                                {{1, 6, 6, 3}, {3, 3}, {1, 1}, "valid"}, {{3, 5, 5, 17}, {2, 3}, {1, 2}, "same"}};
  std::mt19937 gen(31);
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dt : {DType::float32, DType::float64})
      for (const Case& c : cases) {
        INFO(c.shape.to_string() << " pool " << c.pool[0] << "x" << c.pool[1] << " " << c.padding << " " << name(dt));
        std::vector<double> v(static_cast<std::size_t>(c.shape.num_elements()));
        std::uniform_int_distribution<int> pick(0, 40);
        for (double& e : v) {
          const int r = pick(gen);
          e = r == 0 ? std::numeric_limits<double>::quiet_NaN() : r == 1 ? -std::numeric_limits<double>::infinity()
                                                                          : static_cast<double>(r % 3);
        }
        const Tensor x = cast(constant(v, c.shape), dt);
        const Tensor dy = cast(random_tensor(max_pool2d(x, c.pool, c.strides, c.padding).shape(), 5), dt);
        GradientTape tape;
        tape.watch(x);
        const Tensor kept = tape.gradient(max_pool2d(x, c.pool, c.strides, c.padding), std::vector<Tensor>{x}, dy)[0];
        GradientTape outer;
        outer.watch(x);
        GradientTape inner;
        inner.watch(x);
        const Tensor found = inner.gradient(max_pool2d(x, c.pool, c.strides, c.padding), std::vector<Tensor>{x}, dy)[0];
        const auto a = cast(kept, DType::float64).to_vector<double>();
        const auto b = cast(found, DType::float64).to_vector<double>();
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
          INFO("element " << i);
          REQUIRE(std::memcmp(&a[i], &b[i], sizeof(double)) == 0);
        }
      }
  });
}

TEST_CASE("max_pool2d gradients match finite differences") {
  std::uint32_t seed = 200;
  for (const auto& c : kPoolCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++);
    check_gradients([&](const std::vector<Tensor>& in) { return max_pool2d(in[0], c.pool, c.strides, c.padding); },
                    {x});
  }
}

TEST_CASE("avg_pool2d gradients match finite differences") {
  std::uint32_t seed = 300;
  for (const auto& c : kPoolCases) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++);
    check_gradients([&](const std::vector<Tensor>& in) { return avg_pool2d(in[0], c.pool, c.strides, c.padding); },
                    {x});
  }
}

TEST_CASE("pooling second derivatives match finite differences") {
  // d/dx of the gradient of sum(pool(x)^2): through the recorded backward ops (the max's gradient
  // of its gradient is a gather at the same maxima; the average's is the average itself).
  for (const auto& c : {kPoolCases[1], kPoolCases[3], kPoolCases[8]}) {
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, 400);
    for (bool max : {true, false}) {
      INFO((max ? "max_pool2d" : "avg_pool2d"));
      check_gradients(
          [&](const std::vector<Tensor>& in) {
            GradientTape inner;
            inner.watch(in[0]);
            const Tensor y = max ? max_pool2d(in[0], c.pool, c.strides, c.padding)
                                 : avg_pool2d(in[0], c.pool, c.strides, c.padding);
            return inner.gradient(reduce_sum(square(y)), in[0]);
          },
          {x});
    }
  }
}

TEST_CASE("max_pool2d's gradient is differentiable in the upstream gradient") {
  // The backward op's gradient with respect to its incoming gradient: g -> dx is linear, so a
  // finite-difference check over g covers the gather that serves as its adjoint.
  const PoolCase c = kPoolCases[2];
  const Tensor x = random_tensor(c.x, 450);
  const Tensor y_shape_probe = max_pool2d(x, c.pool, c.strides, c.padding);
  const Tensor g = random_tensor(y_shape_probe.shape(), 451);
  check_gradients(
      [&](const std::vector<Tensor>& in) {
        GradientTape inner;
        inner.watch(x);
        const Tensor y = max_pool2d(x, c.pool, c.strides, c.padding);
        return inner.gradient(y, std::vector<Tensor>{x}, in[0])[0];
      },
      {g});
}

TEST_CASE("pooling splits work across threads without changing the result") {
  ThreadsGuard guard;
  const Tensor x = random_tensor({8, 32, 32, 32}, 500);
  const Tensor w = random_tensor({8, 16, 16, 32}, 501);
  auto run = [&](int threads, bool max) {
    config::set_num_threads(threads);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = max ? max_pool2d(x, {3, 3}, {2, 2}, "same") : avg_pool2d(x, {3, 3}, {2, 2}, "same");
    const Tensor g = tape.gradient(reduce_sum(y * w), x);
    return std::vector<Tensor>{y, g};
  };
  for (bool max : {true, false}) {
    INFO((max ? "max_pool2d" : "avg_pool2d"));
    const auto one = run(1, max), two = run(2, max);
    check_close(one[0], ref_pool(x, {3, 3}, {2, 2}, "same", max), 1e-14);
    for (std::size_t i = 0; i < 2; ++i) check_close(two[i], {one[i].to_vector<double>(), one[i].shape()}, 0);
  }
}

TEST_CASE("pooling gradients in float32 agree with float64") {
  // The float32 kernels (4-wide vectors in the max's argmax) against the float64 ones, over the
  // overlapping, disjoint and padded cases; 48 channels exercise both the vector blocks and the
  // scalar channel tail.
  std::uint32_t seed = 470;
  for (PoolCase c : kPoolCases) {
    c.x[3] = 48 + 3;
    INFO(describe(c));
    const Tensor x = random_tensor(c.x, seed++);
    for (bool max : {true, false}) {
      INFO((max ? "max_pool2d" : "avg_pool2d"));
      auto grad = [&](const Tensor& in) {
        GradientTape tape;
        tape.watch(in);
        const Tensor y = max ? max_pool2d(in, c.pool, c.strides, c.padding) : avg_pool2d(in, c.pool, c.strides, c.padding);
        const Tensor w = random_tensor(y.shape(), 471, in.dtype());
        return tape.gradient(reduce_sum(y * w), in);
      };
      const Tensor g64 = grad(x), g32 = grad(x.astype(DType::float32));
      CHECK(g32.dtype() == DType::float32);
      check_close(g32, {g64.to_vector<double>(), g64.shape()}, 1e-5);
    }
  }
}

TEST_CASE("max and average pooling and their gradients match direct loops at every SIMD level") {
  // The window kernels run a SIMD batch of channels per tap (16 float32 lanes on AVX-512, 8 on
  // AVX2, 4 on SSE2) and a scalar tail: 1, 5, 16, 19 and 37 channels cover full batches, tails and
  // both. Values from {-2, ..., 2} make ties common; a NaN every 11th element puts one in many
  // windows. The references, written here from tf.nn.max_pool and tf.nn.avg_pool: the max of a
  // window is its first NaN if it has one, else its first largest tap in row-major order, and
  // the gradient dy goes to that tap (and the gradient's own gradient gathers from it); the mean
  // is over the taps inside the image, and each of them gets dy / count; gradients add up where
  // windows overlap. The max's sums of small integers
  // are exact in both types; the mean's divisions round.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  testing::at_every_simd_level([&](const std::string&) {
    for (const bool max : {true, false})
      for (const DType dtype : {DType::float32, DType::float64})
        for (const i64 channels : {1, 5, 16, 19, 37})
          for (PoolCase c : kPoolCases) {
            c.x[3] = channels;
            INFO((max ? "max_pool2d " : "avg_pool2d ") << describe(c) << " " << name(dtype));
            std::vector<double> xv(static_cast<std::size_t>(c.x.num_elements()));
            for (std::size_t i = 0; i < xv.size(); ++i)
              xv[i] = i % 11 == 7 ? nan : static_cast<double>(static_cast<int>((i * 7919) % 5) - 2);
            const Tensor x = constant(xv, c.x, DType::float64).astype(dtype);
            GradientTape tape;
            tape.watch(x);
            const Tensor y = max ? max_pool2d(x, c.pool, c.strides, c.padding) : avg_pool2d(x, c.pool, c.strides, c.padding);
            std::vector<double> wv(static_cast<std::size_t>(y.shape().num_elements()));
            for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<double>(i % 7 + 1);
            const Tensor dx =
                tape.gradient(reduce_sum(y * constant(wv, y.shape(), DType::float64).astype(dtype)), x);

            const Shape& xs = c.x;
            const Axis ah = ref_axis(xs[1], c.pool[0], c.strides[0], c.padding),
                       aw = ref_axis(xs[2], c.pool[1], c.strides[1], c.padding);
            REQUIRE(y.shape() == Shape{xs[0], ah.out, aw.out, channels});
            std::vector<double> want_y, want_dx(xv.size(), 0.0), want_gather;
            for (i64 n = 0, q = 0; n < xs[0]; ++n)
              for (i64 oh = 0; oh < ah.out; ++oh)
                for (i64 ow = 0; ow < aw.out; ++ow)
                  for (i64 ch = 0; ch < channels; ++ch, ++q) {
                    std::vector<std::size_t> taps;  // inside the image, row-major
                    for (i64 i = 0; i < c.pool[0]; ++i)
                      for (i64 j = 0; j < c.pool[1]; ++j) {
                        const i64 ih = oh * c.strides[0] - ah.before + i, iw = ow * c.strides[1] - aw.before + j;
                        if (ih >= 0 && ih < xs[1] && iw >= 0 && iw < xs[2])
                          taps.push_back(static_cast<std::size_t>(((n * xs[1] + ih) * xs[2] + iw) * channels + ch));
                      }
                    const double g = wv[static_cast<std::size_t>(q)];
                    if (max) {
                      std::size_t arg = taps[0];
                      for (std::size_t at : taps)
                        if (!std::isnan(xv[arg]) && (std::isnan(xv[at]) || xv[at] > xv[arg])) arg = at;
                      want_y.push_back(xv[arg]);
                      want_dx[arg] += g;
                      want_gather.push_back(static_cast<double>(arg % 13));  // r below, at the chosen tap
                    } else {
                      double sum = 0;
                      for (std::size_t at : taps) sum += xv[at];
                      want_y.push_back(sum / static_cast<double>(taps.size()));
                      for (std::size_t at : taps) want_dx[at] += g / static_cast<double>(taps.size());
                    }
                  }
            const double tol = max ? 0.0 : dtype == DType::float32 ? 1e-6 : 1e-14;
            const auto close = [&](const std::vector<double>& got, const std::vector<double>& want) {
              REQUIRE(got.size() == want.size());
              for (std::size_t i = 0; i < want.size(); ++i) {
                INFO("element " << i << ": " << got[i] << ", want " << want[i]);
                if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
                else CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
              }
            };
            close(y.to_vector<double>(), want_y);
            close(dx.to_vector<double>(), want_dx);
            if (max) {
              // The gradient's adjoint in the upstream gradient (the second derivative's gather):
              // d/dg sum(dx(g) * r) = r at each window's chosen tap, with r[i] = i % 13.
              std::vector<double> rv(xv.size());
              for (std::size_t i = 0; i < rv.size(); ++i) rv[i] = static_cast<double>(i % 13);
              const Tensor g = constant(wv, y.shape(), DType::float64).astype(dtype);
              GradientTape outer;
              outer.watch(g);
              GradientTape inner;
              inner.watch(x);
              const Tensor d = inner.gradient(max_pool2d(x, c.pool, c.strides, c.padding), std::vector<Tensor>{x}, g)[0];
              const Tensor back = outer.gradient(reduce_sum(d * constant(rv, c.x, DType::float64).astype(dtype)), g);
              close(back.to_vector<double>(), want_gather);
            }
          }
  });
}

// ---- global pools --------------------------------------------------------------------------------

TEST_CASE("global pools reduce over height and width") {
  const Tensor x = random_tensor({2, 3, 5, 4}, 600);
  const auto v = x.to_vector<double>();
  std::vector<double> mean(8, 0.0), mx(8, -1e300);
  for (i64 n = 0; n < 2; ++n)
    for (i64 p = 0; p < 15; ++p)
      for (i64 c = 0; c < 4; ++c) {
        const double e = v[static_cast<std::size_t>((n * 15 + p) * 4 + c)];
        mean[static_cast<std::size_t>(n * 4 + c)] += e / 15;
        mx[static_cast<std::size_t>(n * 4 + c)] = std::max(mx[static_cast<std::size_t>(n * 4 + c)], e);
      }
  check_close(global_avg_pool2d(x), {mean, Shape{2, 4}}, 1e-14);
  check_close(global_max_pool2d(x), {mx, Shape{2, 4}}, 0);
  CHECK(global_avg_pool2d(x, true).shape() == Shape{2, 1, 1, 4});
  CHECK(global_max_pool2d(x, true).shape() == Shape{2, 1, 1, 4});
  check_gradients([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return global_max_pool2d(in[0], true); }, {x});
}

// ---- bad input -----------------------------------------------------------------------------------

TEST_CASE("pooling rejects wrong ranks, bad sizes, strides and padding with clear messages") {
  const Tensor x = zeros({1, 4, 4, 2});
  check_error<ShapeError>([&] { max_pool2d(zeros({4, 4, 2}), {2, 2}, {2, 2}); }, {"max_pool2d", "rank 4", "[4,4,2]"});
  check_error<ShapeError>([&] { avg_pool2d(zeros({1, 1, 4, 4, 2}), {2, 2}, {2, 2}); },
                          {"avg_pool2d", "[1,1,4,4,2]"});
  check_error<ShapeError>([&] { global_avg_pool2d(zeros({4, 2})); }, {"global_avg_pool2d", "[4,2]"});
  check_error<ShapeError>([&] { global_max_pool2d(zeros({4, 4, 2})); }, {"global_max_pool2d", "[4,4,2]"});
  check_error<ShapeError>([&] { max_pool2d(x, {5, 2}, {1, 1}); }, {"max_pool2d", "[5, 2]", "[1,4,4,2]", "valid"});
  CHECK(max_pool2d(x, {5, 2}, {1, 1}, "same").shape() == Shape{1, 4, 4, 2});
  check_error<ValueError>([&] { max_pool2d(x, {2, 2}, {0, 2}); }, {"max_pool2d", "strides", "[0, 2]"});
  check_error<ValueError>([&] { avg_pool2d(x, {2, 2}, {2, -1}); }, {"avg_pool2d", "strides", "[2, -1]"});
  check_error<ValueError>([&] { avg_pool2d(x, {0, 2}, {1, 1}); }, {"avg_pool2d", "pool size", "[0, 2]"});
  check_error<ValueError>([&] { max_pool2d(x, {2, 2}, {2, 2}, "full"); }, {"max_pool2d", "padding", "\"full\""});
  check_error<DTypeError>([&] { max_pool2d(zeros({1, 4, 4, 2}, DType::int32), {2, 2}, {2, 2}); },
                          {"max_pool2d", "int32"});
}

// ---- half precision --------------------------------------------------------------------------------

TEST_CASE("pooling float16 and bfloat16 computes in float32 and rounds the result once") {
  for (const DType dt : {DType::float16, DType::bfloat16}) {
    INFO(name(dt));
    const Tensor x = random_tensor({2, 5, 6, 3}, 77, dt);
    const Tensor x32 = x.astype(DType::float32);
    const auto same = [&](const Tensor& got, const Tensor& want32) {
      CHECK(got.dtype() == dt);
      REQUIRE(got.shape() == want32.shape());
      CHECK(got.to_vector<float>() == want32.astype(dt).to_vector<float>());
    };
    same(max_pool2d(x, {3, 3}, {2, 2}, "same"), max_pool2d(x32, {3, 3}, {2, 2}, "same"));
    same(avg_pool2d(x, {3, 2}, {2, 1}, "same"), avg_pool2d(x32, {3, 2}, {2, 1}, "same"));
    same(global_avg_pool2d(x), global_avg_pool2d(x32));
    same(global_max_pool2d(x, true), global_max_pool2d(x32, true));
    // the max of half values is one of them: exact
    CHECK(max_pool2d(x, {2, 2}, {2, 2}).astype(DType::float32).to_vector<float>() ==
          max_pool2d(x32, {2, 2}, {2, 2}).to_vector<float>());
  }
}

TEST_CASE("pooling gradients of bfloat16 inputs come back in bfloat16") {
  const Tensor x = random_tensor({1, 4, 4, 2}, 91, DType::bfloat16);
  GradientTape tape;
  tape.watch(x);
  const Tensor loss = reduce_sum(max_pool2d(x, {2, 2}, {2, 2}).astype(DType::float32)) +
                      reduce_sum(avg_pool2d(x, {2, 2}, {1, 1}, "same").astype(DType::float32));
  const Tensor g = tape.gradient(loss, x);
  CHECK(g.dtype() == DType::bfloat16);
  const Tensor x32 = x.astype(DType::float32);
  GradientTape tape32;
  tape32.watch(x32);
  const Tensor loss32 = reduce_sum(max_pool2d(x32, {2, 2}, {2, 2})) + reduce_sum(avg_pool2d(x32, {2, 2}, {1, 1}, "same"));
  const Tensor g32 = tape32.gradient(loss32, x32);
  // Each path's gradient is rounded to bfloat16 before the two are added.
  const auto gv = g.astype(DType::float32).to_vector<float>(), wv = g32.to_vector<float>();
  REQUIRE(gv.size() == wv.size());
  for (std::size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == Approx(wv[i]).epsilon(1e-2).margin(1e-2));
}
