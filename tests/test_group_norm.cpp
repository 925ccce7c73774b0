// group_norm (keel/ops/nn.hpp), the fused op behind GroupNormalization over the last axis: values
// worked by hand, the fused kernel against plain reductions at every SIMD level and thread count,
// float64 first and second derivatives, traced against eager, and argument errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

Tensor randn(Shape shape, std::uint64_t seed, double mean = 0, double stddev = 1, DType dtype = DType::float64) {
  random::set_seed(seed);
  return random::normal(std::move(shape), mean, stddev, dtype);
}

// Keras' formula with plain ops in float64: x as [N, pixels, G, C/G], moments over {1, 3}.
Tensor reference(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, double eps) {
  const Tensor x64 = x.astype(DType::float64);
  const std::int64_t n = x.shape()[0], c = x.shape()[x.rank() - 1];
  const Tensor g = reshape(x64, {n, -1, groups, c / groups});
  const Tensor mean = reduce_mean(g, {1, 3}, true);
  const Tensor var = reduce_mean(square(g - mean), {1, 3}, true);
  Tensor y = reshape((g - mean) / sqrt(var + eps), x.shape());
  if (gamma.defined()) y = y * gamma.astype(DType::float64);
  if (beta.defined()) y = y + beta.astype(DType::float64);
  return y;
}

double worst_difference(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  return worst;
}

}  // namespace

TEST_CASE("group_norm normalises each image's groups with their own moments", "[group_norm]") {
  // x [1, 2, 4], 2 groups of 2 channels: group 0 = {1, 2, 3, 4}: mean 2.5, biased variance 1.25;
  // group 1 = {10, 20, 30, 40}: mean 25, variance 125. gamma [1, 2, 1, 2], beta [0, 0, 1, 1].
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant(std::vector<double>{1, 2, 10, 20, 3, 4, 30, 40}, {1, 2, 4}, dt);
    const Tensor gamma = constant(std::vector<double>{1, 2, 1, 2}, {4}, dt);
    const Tensor beta = constant(std::vector<double>{0, 0, 1, 1}, {4}, dt);
    const double s0 = 1 / std::sqrt(1.25 + 1e-3), s1 = 1 / std::sqrt(125 + 1e-3);
    const std::vector<double> expected{-1.5 * s0,    -0.5 * s0 * 2, -15 * s1 + 1, -5 * s1 * 2 + 1,
                                       0.5 * s0,     1.5 * s0 * 2,  5 * s1 + 1,   15 * s1 * 2 + 1};
    const auto y = group_norm(x, 2, gamma, beta).to_vector<double>();
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == Approx(expected[i]).margin(1e-6));
  }
}

TEST_CASE("group_norm's fused kernel matches plain reductions at every SIMD level and thread count",
          "[group_norm]") {
  struct Case {
    Shape shape;
    int groups;
  };
  // Groups of 1, 4 and 16 channels, channel counts under and over one SIMD batch, one image and many.
  for (const Case& k : {Case{{3, 5, 7, 16}, 4}, Case{{2, 6, 6, 64}, 4}, Case{{4, 9, 12}, 12}, Case{{1, 33, 8}, 2},
                        Case{{5, 3}, 3}}) {
    for (DType dt : {DType::float32, DType::float64}) {
      INFO(k.shape.to_string() << " in " << k.groups << " groups, " << name(dt));
      const std::int64_t c = k.shape[k.shape.rank() - 1];
      const Tensor x = randn(k.shape, 171 + static_cast<std::uint64_t>(c), 20.0, 3.0, dt);
      const Tensor gamma = randn({c}, 172, 1.0, 0.3, dt), beta = randn({c}, 173, 0.0, 1.0, dt);
      const Tensor expected = reference(x, k.groups, gamma, beta, 1e-3);
      const double tol = dt == DType::float32 ? 2e-4 : 1e-9;  // y is O(3)
      const int threads = config::num_threads();
      for (int t : {1, 2}) {
        config::set_num_threads(t);
        testing::at_every_simd_level([&](const std::string& level) {
          INFO("level " << level << ", " << t << " threads");
          CHECK(worst_difference(group_norm(x, k.groups, gamma, beta), expected) <= tol);
          const Tensor bare = reference(x, k.groups, Tensor(), Tensor(), 1e-3);
          CHECK(worst_difference(group_norm(x, k.groups, Tensor(), Tensor()), bare) <= tol);
        });
      }
      config::set_num_threads(threads);
    }
  }
}

TEST_CASE("group_norm's gradients match finite differences", "[group_norm][grad]") {
  const auto norm = [](int groups, bool affine) {
    return [groups, affine](const std::vector<Tensor>& in) {
      return affine ? group_norm(in[0], groups, in[1], in[2]) : group_norm(in[0], groups, Tensor(), Tensor());
    };
  };
  SECTION("with gamma and beta") {
    check_gradients(norm(2, true), {randn({2, 3, 4}, 181), randn({4}, 182), randn({4}, 183)}, 1e-6, 1e-6);
  }
  SECTION("an image axis between, one channel a group") {
    check_gradients(norm(3, true), {randn({2, 2, 2, 3}, 184), randn({3}, 185), randn({3}, 186)}, 1e-6, 1e-6);
  }
  SECTION("no gamma or beta") { check_gradients(norm(1, false), {randn({3, 5, 2}, 187)}, 1e-6, 1e-6); }
  SECTION("second derivatives through an outer tape") {
    const Tensor w = randn({2, 3, 4}, 188);
    check_gradients([&](const std::vector<Tensor>& in) {
      GradientTape inner;
      inner.watch(in[0]);
      inner.watch(in[1]);
      const Tensor y = group_norm(in[0], 2, in[1], Tensor());
      const std::vector<Tensor> g = inner.gradient(reduce_sum(y * w + y * y * y * 0.1), {in[0], in[1]});
      return reduce_sum(g[0] * g[0]) + reduce_sum(g[1] * g[1]);
    }, {randn({2, 3, 4}, 189), randn({4}, 190)}, 1e-6, 1e-5);
  }
}

TEST_CASE("GroupNormalization over the last axis runs group_norm, traced as eagerly", "[group_norm][function]") {
  layers::GroupNormalization layer({.groups = 4});
  const Tensor x = randn({2, 3, 3, 8}, 191, 0.0, 1.0, DType::float32);
  const Tensor eager = layer(x);
  CHECK(worst_difference(eager, reference(x, 4, layer.gamma().value(), layer.beta().value(), 1e-3)) <= 1e-5);
  auto step = keel::function([&](const Tensor& in) {
    GradientTape tape;
    tape.watch(in);
    const Tensor y = layer(in);
    return tape.gradient(reduce_sum(y * y * y), in);
  });
  GradientTape tape;
  tape.watch(x);
  const Tensor y = layer(x);
  const Tensor expected = tape.gradient(reduce_sum(y * y * y), x);
  CHECK(worst_difference(step(x), expected) <= 1e-5);
  CHECK(worst_difference(step(x * 2.0), [&] {
          GradientTape t;
          const Tensor x2 = x * 2.0;
          t.watch(x2);
          const Tensor y2 = layer(x2);
          return t.gradient(reduce_sum(y2 * y2 * y2), x2);
        }()) <= 1e-5);
  CHECK(step.trace_count() == 1);
}

TEST_CASE("group_norm of images without pixels gives empty results and gradients", "[group_norm]") {
  const Tensor x = zeros({2, 0, 4});
  const Tensor gamma = ones({4}), beta = zeros({4});
  GradientTape tape;
  tape.watch(x);
  tape.watch(gamma);
  tape.watch(beta);
  const Tensor y = group_norm(x, 2, gamma, beta);
  CHECK(y.shape() == Shape{2, 0, 4});
  const std::vector<Tensor> g = tape.gradient(reduce_sum(y), {x, gamma, beta});
  CHECK(g[0].shape() == Shape{2, 0, 4});
  CHECK(g[1].to_vector<double>() == std::vector<double>(4, 0.0));  // nothing to sum
  CHECK(g[2].to_vector<double>() == std::vector<double>(4, 0.0));
}

TEST_CASE("group_norm rejects bad arguments, naming the op", "[group_norm][errors]") {
  const Tensor x = zeros({2, 3, 4});
  CHECK_THROWS_AS(group_norm(x, 3, Tensor(), Tensor()), ValueError);  // 3 does not divide 4
  CHECK_THROWS_WITH(group_norm(x, 0, Tensor(), Tensor()), Catch::Contains("group_norm"));
  CHECK_THROWS_AS(group_norm(zeros({4}), 2, Tensor(), Tensor()), ShapeError);
  CHECK_THROWS_AS(group_norm(x, 2, ones({3}), Tensor()), ShapeError);
  CHECK_THROWS_AS(group_norm(x, 2, ones({4}, DType::float64), Tensor()), DTypeError);
  CHECK_THROWS_AS(group_norm(x, 2, Tensor(), Tensor(), -1.0), ValueError);
}
