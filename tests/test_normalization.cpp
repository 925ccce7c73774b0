// Normalisation: moments, batch_norm (training and inference, Keras' moving statistics) and
// layer_norm: values derived by hand, float32 accuracy, thread-count independence, argument
// errors, and float64 finite-difference checks of first and second derivatives.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"
#include "simd_levels.hpp"

using namespace keel;
using Catch::Contains;

namespace {

Tensor randn(Shape shape, std::uint64_t seed, double mean = 0, double stddev = 1,
             DType dtype = DType::float64) {
  random::set_seed(seed);
  return random::normal(std::move(shape), mean, stddev, dtype);
}

void check_close(const Tensor& t, const std::vector<double>& expected, double eps = 1e-6) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(eps).margin(eps));
  }
}

void check_all_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vb[i]));
  INFO("worst absolute difference " << worst);
  CHECK(worst <= tol);
}

// A reference batch norm written with plain ops (not the fused kernel).
Tensor reference_batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  std::vector<int> lead;
  for (int d = 0; d + 1 < x.rank(); ++d) lead.push_back(d);
  const Tensor mean = reduce_mean(x, lead, true);
  const Tensor var = reduce_mean(square(x - mean), lead, true);
  return (x - mean) / sqrt(var + eps) * gamma + beta;
}

// f(x, gamma, beta)'s outputs, then the gradients of the first one (upstream dy) wrt x, gamma and
// beta, as float32 values, at every SIMD level: each level must give the first level's bits,
// which are returned.
template <class F>
std::vector<std::vector<float>> same_bits_at_every_level(F f, const Tensor& x, const Tensor& g, const Tensor& b,
                                                         const Tensor& dy) {
  std::vector<std::vector<float>> first;
  testing::at_every_simd_level([&](const std::string&) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(g);
    tape.watch(b);
    const std::vector<Tensor> outs = f(x, g, b);
    std::vector<std::vector<float>> now;
    for (const Tensor& t : outs) now.push_back(t.to_vector<float>());
    for (const Tensor& t : tape.gradient(outs[0], {x, g, b}, dy)) now.push_back(t.to_vector<float>());
    if (first.empty()) first = now;
    for (std::size_t k = 0; k < now.size(); ++k) CHECK(now[k] == first[k]);
  });
  return first;
}

}  // namespace

// ---- batch norm: values -------------------------------------------------------------------------

TEST_CASE("batch_norm training normalises a 2x2 batch with its mean and biased variance", "[batch_norm]") {
  // x = [[1, 2],
  //      [3, 6]]   channel 0: {1, 3}: mean 2, biased variance ((1-2)^2 + (3-2)^2) / 2 = 1
  //                channel 1: {2, 6}: mean 4, biased variance ((2-4)^2 + (6-4)^2) / 2 = 4
  // y = gamma * (x - mean) / sqrt(var + 1e-3) + beta, with
  //   1 / sqrt(1.001) = 0.99950037468777..., 2 / sqrt(4.001) = 0.99987502343261...
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant({1.0, 2.0, 3.0, 6.0}, {2, 2}, dt);
    const double a = 0.9995003746877732, b = 0.9998750234326181;
    const auto plain = batch_norm(x, ones({2}, dt), zeros({2}, dt), zeros({2}, dt), ones({2}, dt), true);
    check_close(plain.y, {-a, -b, a, b}, dt == DType::float32 ? 1e-6 : 1e-12);
    // gamma = [2, 0.5], beta = [1, -1]: y = [[2(-a)+1, 0.5(-b)-1], [2a+1, 0.5b-1]]
    const auto scaled = batch_norm(x, constant({2.0, 0.5}, {2}, dt), constant({1.0, -1.0}, {2}, dt),
                                   zeros({2}, dt), ones({2}, dt), true);
    check_close(scaled.y, {-0.9990007493755464, -1.499937511716309, 2.999000749375546, -0.5000624882836909},
                dt == DType::float32 ? 1e-6 : 1e-12);
    CHECK(scaled.y.dtype() == dt);
  }
}

TEST_CASE("batch_norm training updates the moving statistics with Keras' momentum and the biased variance",
          "[batch_norm]") {
  // The 2x2 batch above: mean [2, 4], biased variance [1, 4] (the unbiased one would be [2, 8]).
  // Keras (defaults momentum 0.99, epsilon 1e-3):
  //   moving_mean'     = moving_mean * 0.99 + mean * 0.01     = [0*0.99 + 0.02, 0*0.99 + 0.04]
  //   moving_variance' = moving_variance * 0.99 + var * 0.01  = [0.99 + 0.01, 0.99 + 0.04]
  const Tensor x = constant({1.0, 2.0, 3.0, 6.0}, {2, 2}, DType::float64);
  const auto r = batch_norm(x, ones({2}, DType::float64), zeros({2}, DType::float64),
                            zeros({2}, DType::float64), ones({2}, DType::float64), true);
  check_close(r.moving_mean, {0.02, 0.04}, 1e-14);
  check_close(r.moving_variance, {1.0, 1.03}, 1e-14);

  // momentum 0.9 from moving_mean [1, -1], moving_variance [2, 0.5]:
  //   [1*0.9 + 2*0.1, -1*0.9 + 4*0.1] = [1.1, -0.5];  [2*0.9 + 1*0.1, 0.5*0.9 + 4*0.1] = [1.9, 0.85]
  const auto r2 = batch_norm(x, Tensor(), Tensor(), constant({1.0, -1.0}, {2}, DType::float64),
                             constant({2.0, 0.5}, {2}, DType::float64), true, 0.9);
  check_close(r2.moving_mean, {1.1, -0.5}, 1e-14);
  check_close(r2.moving_variance, {1.9, 0.85}, 1e-14);

  // The default epsilon is Keras' 1e-3: a channel with zero variance gives (x - mean) / sqrt(1e-3).
  const Tensor flat = constant({5.0, 1.0, 5.0, 3.0}, {2, 2}, DType::float64);  // channel 0 constant
  const auto r3 = batch_norm(flat, Tensor(), Tensor(), Tensor(), Tensor(), true);
  check_close(r3.y, {0.0, -1.0 / std::sqrt(1.001), 0.0, 1.0 / std::sqrt(1.001)}, 1e-12);
  CHECK_FALSE(r3.moving_mean.defined());  // no moving statistics given, none returned
}

TEST_CASE("batch_norm inference uses the moving statistics and returns them unchanged", "[batch_norm]") {
  // moving_mean [1, 2], moving_variance [4, 0.25], epsilon 0 (for round numbers):
  //   channel 0: (x - 1) / 2,  channel 1: (x - 2) / 0.5, then * gamma [3, 1] + beta [0, 10]
  // x = [[1, 2], [5, 3]] -> [[0*3 + 0, 0 + 10], [2*3 + 0, 2 + 10]] = [[0, 10], [6, 12]]
  const Tensor x = constant({1.0, 2.0, 5.0, 3.0}, {2, 2}, DType::float64);
  const Tensor mm = constant({1.0, 2.0}, {2}, DType::float64);
  const Tensor mv = constant({4.0, 0.25}, {2}, DType::float64);
  const auto r = batch_norm(x, constant({3.0, 1.0}, {2}, DType::float64), constant({0.0, 10.0}, {2}, DType::float64),
                            mm, mv, false, 0.99, 0.0);
  check_close(r.y, {0.0, 10.0, 6.0, 12.0}, 1e-14);
  CHECK(r.moving_mean.to_vector<double>() == mm.to_vector<double>());
  CHECK(r.moving_variance.to_vector<double>() == mv.to_vector<double>());
}

TEST_CASE("batch_norm normalises over every axis but the last of a 4-d NHWC input", "[batch_norm]") {
  const Tensor x = randn({3, 4, 5, 6}, 11, 2.0, 3.0);
  const Tensor gamma = randn({6}, 12), beta = randn({6}, 13);
  const auto r = batch_norm(x, gamma, beta, zeros({6}, DType::float64), ones({6}, DType::float64), true);
  check_all_close(r.y, reference_batch_norm(x, gamma, beta, 1e-3), 1e-12);
  // The moving mean moved 1% of the way to the batch mean.
  check_all_close(r.moving_mean, reduce_mean(x, {0, 1, 2}) * 0.01, 1e-14);
  check_all_close(r.moving_variance, ones({6}, DType::float64) * 0.99 + reduce_variance(x, {0, 1, 2}) * 0.01, 1e-14);
}

TEST_CASE("batch_norm float32 statistics stay accurate for data far from zero", "[batch_norm]") {
  // Mean 1000, standard deviation 0.5: E[x^2] - E[x]^2 in float32 would lose every digit of
  // the variance; the shifted one-pass sums must not. Compared with the float64 computation.
  const Tensor x64 = randn({64, 8, 8, 4}, 21, 1000.0, 0.5);
  const Tensor x32 = x64.astype(DType::float32);
  const Tensor x32_as64 = x32.astype(DType::float64);  // the same rounded inputs
  const auto r32 = batch_norm(x32, Tensor(), Tensor(), zeros({4}), ones({4}), true);
  const auto r64 = batch_norm(x32_as64, Tensor(), Tensor(), zeros({4}, DType::float64),
                              ones({4}, DType::float64), true);
  check_all_close(r32.y.astype(DType::float64), r64.y, 2e-3);
  const auto v32 = r32.moving_variance.to_vector<double>(), v64 = r64.moving_variance.to_vector<double>();
  for (std::size_t c = 0; c < 4; ++c) CHECK(v32[c] == Approx(v64[c]).epsilon(1e-5));
}

TEST_CASE("batch_norm gives bit-identical results with 1 and 2 threads", "[batch_norm]") {
  const int before = config::num_threads();
  const Tensor x = randn({64, 16, 16, 8}, 31, 0.5, 2.0, DType::float32);  // 131072 elements
  const Tensor gamma = randn({8}, 32, 1.0, 0.1, DType::float32);
  const Tensor w = randn({64, 16, 16, 8}, 33, 0.0, 1.0, DType::float32);
  auto run = [&](int threads) {
    config::set_num_threads(threads);
    GradientTape tape;
    tape.watch(x);
    tape.watch(gamma);
    const auto r = batch_norm(x, gamma, Tensor(), zeros({8}), ones({8}), true);
    auto g = tape.gradient(reduce_sum(r.y * w), {x, gamma});
    return std::vector<std::vector<float>>{r.y.to_vector<float>(), r.moving_variance.to_vector<float>(),
                                           g[0].to_vector<float>(), g[1].to_vector<float>()};
  };
  const auto one = run(1), two = run(2);
  config::set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
}

TEST_CASE("batch_norm's column kernels give the same bits at every SIMD level and match float64", "[batch_norm]") {
  // Channel counts below one register, with a leftover tail, exactly 16, and past the strips of
  // four registers; 300 rows make several blocks of the column sums (block sums added in double).
  for (const std::int64_t cols : {1, 3, 15, 16, 17, 64, 65, 100}) {
    INFO("channels " << cols);
    const auto seed = static_cast<std::uint64_t>(cols);
    const Tensor x64 = randn({300, cols}, 141 + seed, 5.0, 2.0).astype(DType::float32).astype(DType::float64);
    const Tensor g64 = randn({cols}, 142, 1.0, 0.2), b64 = randn({cols}, 143), dy64 = randn({300, cols}, 144);
    const Tensor x = x64.astype(DType::float32), g = g64.astype(DType::float32), b = b64.astype(DType::float32);
    const Tensor dy = dy64.astype(DType::float32), mm = zeros({cols}), mv = ones({cols});
    const auto first = same_bits_at_every_level(
        [&](const Tensor& xi, const Tensor& gi, const Tensor& bi) {
          const auto r = batch_norm(xi, gi, bi, mm, mv, true);
          return std::vector<Tensor>{r.y, r.moving_mean, r.moving_variance,
                                     batch_norm(xi, gi, bi, r.moving_mean, r.moving_variance, false).y};
        },
        x, g, b, dy);
    // float64 references from plain ops: the formula and its gradient through the tape.
    GradientTape tape;
    tape.watch(x64);
    tape.watch(g64);
    tape.watch(b64);
    const Tensor y_ref = reference_batch_norm(x64, g64, b64, 1e-3);
    const auto grads_ref = tape.gradient(y_ref, {x64, g64, b64}, dy64);
    const std::vector<Tensor> expected{y_ref, grads_ref[0], grads_ref[1], grads_ref[2]};
    const std::size_t at[] = {0, 4, 5, 6};  // y, then the gradients wrt x, gamma, beta
    for (std::size_t k = 0; k < expected.size(); ++k) {
      const auto want = expected[k].to_vector<double>();
      const auto& got = first[at[k]];
      REQUIRE(got.size() == want.size());
      // y and dx are O(1); gamma's and beta's gradients sum 300 rows, so their tolerance scales.
      const double tol = k < 2 ? 2e-4 : 2e-2;
      for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("output " << k << " element " << i);
        CHECK(static_cast<double>(got[i]) == Approx(want[i]).margin(tol));
      }
    }
  }
}

TEST_CASE("batch_norm without gamma and beta only normalises", "[batch_norm]") {
  const Tensor x = randn({5, 3}, 41);
  const auto r = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.99, 1e-5);
  check_all_close(r.y, reference_batch_norm(x, ones({3}, DType::float64), zeros({3}, DType::float64), 1e-5), 1e-12);
}

TEST_CASE("batch_norm rejects bad arguments with clear errors", "[batch_norm][errors]") {
  const Tensor x = zeros({4, 3});
  const Tensor c3 = ones({3});
  CHECK_THROWS_AS(batch_norm(ones({3}), c3, c3, c3, c3, true), ValueError);  // rank 1
  CHECK_THROWS_WITH(batch_norm(x, ones({4}), c3, c3, c3, true), Contains("gamma") && Contains("[4]"));
  CHECK_THROWS_AS(batch_norm(x, ones({4}), c3, c3, c3, true), ShapeError);
  CHECK_THROWS_AS(batch_norm(x, ones({3}, DType::float64), c3, c3, c3, true), DTypeError);
  CHECK_THROWS_AS(batch_norm(x, c3, c3, Tensor(), c3, false), ValueError);  // inference needs them
  CHECK_THROWS_WITH(batch_norm(x, c3, c3, c3, c3, true, 1.5), Contains("momentum") && Contains("1.5"));
  CHECK_THROWS_AS(batch_norm(x, c3, c3, c3, c3, true, 0.99, -1.0), ValueError);
  CHECK_THROWS_AS(batch_norm(zeros({0, 3}), c3, c3, c3, c3, true), ValueError);  // empty batch
  CHECK_THROWS_AS(batch_norm(zeros({4, 3}, DType::int32), Tensor(), Tensor(), Tensor(), Tensor(), true), DTypeError);
}

// ---- batch norm: gradients ----------------------------------------------------------------------

TEST_CASE("batch_norm training gradients wrt x, gamma and beta match finite differences", "[batch_norm][grad]") {
  for (const Shape& shape : {Shape{4, 3}, Shape{2, 3, 2, 3}, Shape{7, 1}}) {
    INFO("shape " << shape.to_string());
    const std::int64_t c = shape[shape.rank() - 1];
    const Tensor x = randn(shape, 51, 0.3, 1.5);
    const Tensor gamma = randn({c}, 52, 1.0, 0.5), beta = randn({c}, 53);
    check_gradients([](const std::vector<Tensor>& in) {
      return batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true).y;
    }, {x, gamma, beta}, 1e-6, 1e-6);
  }
}

TEST_CASE("batch_norm inference gradients wrt x, gamma, beta and the moving statistics match finite differences",
          "[batch_norm][grad]") {
  const Tensor x = randn({3, 2, 4}, 61);
  const Tensor gamma = randn({4}, 62), beta = randn({4}, 63), mm = randn({4}, 64);
  const Tensor mv = square(randn({4}, 65)) + 0.5;
  check_gradients([](const std::vector<Tensor>& in) {
    return batch_norm(in[0], in[1], in[2], in[3], in[4], false).y;
  }, {x, gamma, beta, mm, mv}, 1e-6, 1e-6);
}

TEST_CASE("batch_norm second derivatives match finite differences of the first", "[batch_norm][grad]") {
  // f(x, gamma) = d/dx sum(w * batch_norm(x)): the outer tape differentiates the backward.
  // Its finite differences run the first-order (fused-kernel) backward, its analytic
  // gradient the differentiable one, so this also checks that the two agree.
  const Tensor x = randn({4, 3}, 71, 0.0, 2.0);
  const Tensor gamma = randn({3}, 72, 1.0, 0.5);
  const Tensor beta = randn({3}, 73);
  const Tensor w = randn({4, 3}, 74);
  check_gradients([&](const std::vector<Tensor>& in) {
    GradientTape inner;
    inner.watch(in[0]);
    const auto r = batch_norm(in[0], in[1], beta, Tensor(), Tensor(), true);
    const Tensor y3 = r.y * r.y * r.y;  // nonlinear in y, so the Hessian has every term
    return inner.gradient(reduce_sum(r.y * w + y3 * 0.1), in[0]);
  }, {x, gamma}, 1e-6, 1e-6);
}

TEST_CASE("batch_norm first-order backward kernels agree with the differentiable backward", "[batch_norm][grad]") {
  const Tensor x = randn({16, 5, 5, 7}, 81, 3.0, 2.0);
  const Tensor gamma = randn({7}, 82), beta = randn({7}, 83), w = randn({16, 5, 5, 7}, 84);
  // The fused path runs when no other tape records; the composite one when an outer tape
  // records the backward.
  std::vector<Tensor> fused, composite;
  {
    GradientTape tape;
    tape.watch(x);
    tape.watch(gamma);
    tape.watch(beta);
    const auto r = batch_norm(x, gamma, beta, Tensor(), Tensor(), true);
    fused = tape.gradient(reduce_sum(r.y * w), {x, gamma, beta});
  }
  {
    GradientTape outer;
    outer.watch(x);
    GradientTape tape;
    tape.watch(x);
    tape.watch(gamma);
    tape.watch(beta);
    const auto r = batch_norm(x, gamma, beta, Tensor(), Tensor(), true);
    composite = tape.gradient(reduce_sum(r.y * w), {x, gamma, beta});
  }
  for (std::size_t i = 0; i < 3; ++i) check_all_close(fused[i], composite[i], 1e-10);
}

// ---- layer norm ---------------------------------------------------------------------------------------

TEST_CASE("layer_norm normalises each row over the last axis", "[layer_norm]") {
  // Row [1, 2, 3]: mean 2, biased variance (1 + 0 + 1) / 3 = 2/3;
  //   y = (x - 2) / sqrt(2/3 + 1e-3) = [-1.2238273448265007, 0, 1.2238273448265007]
  // Row [2, 4, 9]: mean 5, variance (9 + 1 + 16) / 3 = 26/3;
  //   y = (x - 5) / sqrt(26/3 + 1e-3) = [-1.0189905445098144, -0.3396635148366048, 1.3586540593464191]
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant({1.0, 2.0, 3.0, 2.0, 4.0, 9.0}, {2, 3}, dt);
    const double tol = dt == DType::float32 ? 1e-6 : 1e-12;
    check_close(layer_norm(x, Tensor(), Tensor()),
                {-1.2238273448265007, 0.0, 1.2238273448265007, -1.0189905445098144, -0.3396635148366048,
                 1.3586540593464191},
                tol);
    // gamma [1, 2, 3], beta [0, 1, 0] scale and shift each column.
    check_close(layer_norm(x, constant({1.0, 2.0, 3.0}, {3}, dt), constant({0.0, 1.0, 0.0}, {3}, dt)),
                {-1.2238273448265007, 1.0, 3.671482034479502, -1.0189905445098144, 1.0 - 0.6793270296732096,
                 4.075962178039257},
                tol);
  }
}

TEST_CASE("layer_norm's row kernels give the same bits at every SIMD level and match float64", "[layer_norm]") {
  // Rows shorter than one 16-lane step, with a leftover tail, exactly 16 lanes, and longer than one
  // block of 1024 (the statistics are summed in float32 lanes per block, then in double).
  for (const std::int64_t cols : {1, 3, 15, 16, 17, 33, 1024, 1025, 2100}) {
    INFO("rows of " << cols);
    const Tensor x64 = randn({70, cols}, 131 + static_cast<std::uint64_t>(cols), 50.0, 3.0);
    const Tensor g64 = randn({cols}, 132), b64 = randn({cols}, 133), dy64 = randn({70, cols}, 134);
    const Tensor x = x64.astype(DType::float32), g = g64.astype(DType::float32), b = b64.astype(DType::float32);
    const Tensor dy = dy64.astype(DType::float32);
    const auto first = same_bits_at_every_level(
        [](const Tensor& xi, const Tensor& gi, const Tensor& bi) {
          return std::vector<Tensor>{layer_norm(xi, gi, bi)};
        },
        x, g, b, dy);
    // float64 reference from the moments (the composite formula), to float32 accuracy: y is O(5).
    const auto [m, v] = moments(x64, {1}, true);
    const auto y_ref = ((x64 - m) / sqrt(v + 1e-3) * g64 + b64).to_vector<double>();
    for (std::size_t i = 0; i < y_ref.size(); ++i) {
      INFO("element " << i);
      CHECK(static_cast<double>(first[0][i]) == Approx(y_ref[i]).margin(2e-4));
    }
  }
}

TEST_CASE("layer_norm over several trailing or middle axes matches moments", "[layer_norm]") {
  const Tensor x = randn({2, 3, 4, 5}, 91, 1.0, 2.0);
  SECTION("trailing axes {2, 3} with gamma shaped like them") {
    const Tensor gamma = randn({4, 5}, 92), beta = randn({4, 5}, 93);
    const auto [m, v] = moments(x, {2, 3}, true);
    check_all_close(layer_norm(x, gamma, beta, {-2, -1}), (x - m) / sqrt(v + 1e-3) * gamma + beta, 1e-12);
  }
  SECTION("middle axes {1, 2}") {
    const Tensor gamma = randn({3, 4}, 94), beta = randn({3, 4}, 95);
    const auto [m, v] = moments(x, {1, 2}, true);
    const Tensor expected = (x - m) / sqrt(v + 1e-5) * reshape(gamma, {1, 3, 4, 1}) + reshape(beta, {1, 3, 4, 1});
    check_all_close(layer_norm(x, gamma, beta, {1, 2}, 1e-5), expected, 1e-12);
  }
}

TEST_CASE("layer_norm gradients match finite differences", "[layer_norm][grad]") {
  SECTION("last axis, with gamma and beta") {
    const Tensor x = randn({3, 5}, 101, 0.5, 2.0);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                    {x, randn({5}, 102), randn({5}, 103)}, 1e-6, 1e-6);
  }
  SECTION("two trailing axes, no beta") {
    const Tensor x = randn({2, 3, 4}, 104);
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], Tensor(), {1, 2}); },
                    {x, randn({3, 4}, 105)}, 1e-6, 1e-6);
  }
  SECTION("every axis of a vector (no leading axis)") {
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
                    {randn({6}, 106), randn({6}, 107), randn({6}, 108)}, 1e-6, 1e-6);
  }
  SECTION("a middle axis (composite path)") {
    check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], {1}); },
                    {randn({2, 4, 3}, 109), randn({4}, 110), randn({4}, 111)}, 1e-6, 1e-6);
  }
}

TEST_CASE("layer_norm second derivatives match finite differences of the first", "[layer_norm][grad]") {
  const Tensor w = randn({3, 4}, 121);
  check_gradients([&](const std::vector<Tensor>& in) {
    GradientTape inner;
    inner.watch(in[0]);
    const Tensor y = layer_norm(in[0], in[1], Tensor());
    return inner.gradient(reduce_sum(y * w + y * y * y * 0.1), in[0]);
  }, {randn({3, 4}, 122), randn({4}, 123)}, 1e-6, 1e-6);
}

TEST_CASE("layer_norm rejects bad arguments with clear errors", "[layer_norm][errors]") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(layer_norm(x, ones({2}), Tensor()), ShapeError);
  CHECK_THROWS_WITH(layer_norm(x, ones({2}), Tensor()), Contains("layer_norm") && Contains("gamma"));
  CHECK_THROWS_AS(layer_norm(x, Tensor(), Tensor(), {2}), ValueError);  // axis out of range
  CHECK_THROWS_AS(layer_norm(x, ones({3}, DType::float64), Tensor()), DTypeError);
  CHECK_THROWS_AS(layer_norm(x, Tensor(), Tensor(), {-1}, -1.0), ValueError);
}

// ---- moments --------------------------------------------------------------------------------------------

TEST_CASE("moments gives the mean and the biased variance over the axes", "[moments]") {
  // [[1, 5, 3], [4, 2, 6]]: over axis 0: mean [2.5, 3.5, 4.5], variance [2.25, 2.25, 2.25]
  //                         over axis 1: mean [3, 4], variance [(4+4+0)/3, (0+4+4)/3] = [8/3, 8/3]
  const Tensor x = constant({1.0, 5.0, 3.0, 4.0, 2.0, 6.0}, {2, 3}, DType::float64);
  const auto [m0, v0] = moments(x, {0});
  check_close(m0, {2.5, 3.5, 4.5}, 1e-14);
  check_close(v0, {2.25, 2.25, 2.25}, 1e-14);
  const auto [m1, v1] = moments(x, {1}, true);
  CHECK(m1.shape() == Shape{2, 1});
  CHECK(v1.shape() == Shape{2, 1});
  check_close(v1, {8.0 / 3, 8.0 / 3}, 1e-14);
  check_gradients([](const std::vector<Tensor>& in) {
    const auto [m, v] = moments(in[0], {0, 2});
    return m * v;
  }, {randn({3, 2, 4}, 131)}, 1e-6, 1e-6);
}

namespace {
// The statistics written with plain reductions (not moments' fused kernel), in float64.
std::pair<Tensor, Tensor> reference_moments(const Tensor& x, const std::vector<int>& axes) {
  const Tensor x64 = x.astype(DType::float64);
  const Tensor mean = reduce_mean(x64, axes, true);
  return {mean, reduce_mean(square(x64 - mean), axes, true)};
}
}  // namespace

TEST_CASE("moments over blocks of axes matches plain reductions at every SIMD level", "[moments]") {
  struct Layout {
    Shape shape;
    std::vector<int> axes;
  };
  // Trailing rows (shorter than a 16-lane step, with a tail, longer than a 1024 block), leading
  // rows over few and many columns, a middle block (instance statistics of NHWC), every axis.
  const std::vector<Layout> layouts{{{37, 1}, {1}},      {{37, 15}, {1}},       {{9, 16}, {1}},
                                    {{5, 1025}, {1}},    {{3, 4, 33}, {1, 2}},  {{300, 1}, {0}},
                                    {{300, 3}, {0}},     {{70, 33}, {0}},       {{4, 5, 6, 19}, {0, 1, 2}},
                                    {{3, 5, 7, 19}, {1, 2}}, {{2, 3, 4}, {0, 1, 2}}, {{6, 1, 5}, {1}},
                                    // Axes in two runs (GroupNormalization's [N, H, W, groups, C / groups]
                                    // over {1, 2, 4}): the kernel over the larger, the law of total
                                    // variance over the other.
                                    {{2, 5, 6, 3, 4}, {1, 2, 4}}, {{4, 3, 10}, {0, 2}}};
  for (const Layout& l : layouts) {
    for (DType dt : {DType::float32, DType::float64}) {
      INFO("shape " << l.shape.to_string() << ", " << name(dt));
      // Far from zero (mean 40, sd 3): a variance taken as E[x^2] - E[x]^2 in float32 loses it.
      const Tensor x = randn(l.shape, 151 + static_cast<std::uint64_t>(l.shape.num_elements()), 40.0, 3.0, dt);
      const std::pair<Tensor, Tensor> ref = reference_moments(x, l.axes);
      const bool one_run = l.axes.back() - l.axes.front() + 1 == static_cast<int>(l.axes.size());
      const Tensor &rm = ref.first, &rv = ref.second;
      std::vector<double> first_m, first_v;
      testing::at_every_simd_level([&](const std::string& level) {
        INFO("level " << level);
        const auto [m, v] = moments(x, l.axes, true);
        REQUIRE(m.shape() == rm.shape());
        REQUIRE(v.shape() == rv.shape());
        CHECK(m.dtype() == dt);
        const double tol = dt == DType::float32 ? 2e-4 : 1e-10;  // relative to a mean of 40 and variance of 9
        check_all_close(m, rm, 40 * tol);
        check_all_close(v, rv, 9 * tol);
        if (first_m.empty()) {
          first_m = m.to_vector<double>();
          first_v = v.to_vector<double>();
        }
        if (one_run) {  // the fused kernel alone: the same bits at every level (reduce_mean's are not)
          CHECK(m.to_vector<double>() == first_m);
          CHECK(v.to_vector<double>() == first_v);
        }
      });
    }
  }
}

TEST_CASE("moments' gradients match finite differences for each layout", "[moments][grad]") {
  const auto both = [](std::vector<int> axes) {
    return [axes](const std::vector<Tensor>& in) {
      const auto [m, v] = moments(in[0], axes, true);
      return m * 0.7 + v * v;  // weights both outputs, the variance not linearly
    };
  };
  SECTION("trailing axis") { check_gradients(both({2}), {randn({2, 3, 5}, 161)}, 1e-6, 1e-6); }
  SECTION("leading axes") { check_gradients(both({0, 1}), {randn({3, 4, 5}, 162)}, 1e-6, 1e-6); }
  SECTION("a middle block") { check_gradients(both({1, 2}), {randn({2, 3, 4, 3}, 163)}, 1e-6, 1e-6); }
  SECTION("axes in two runs") { check_gradients(both({1, 3}), {randn({2, 4, 3, 5}, 166)}, 1e-6, 1e-6); }
  SECTION("only the variance used, no kept dims") {
    check_gradients([](const std::vector<Tensor>& in) { return moments(in[0], {0}).second; }, {randn({6, 2}, 164)},
                    1e-6, 1e-6);
  }
  SECTION("second derivatives through an outer tape") {
    check_gradients([](const std::vector<Tensor>& in) {
      GradientTape inner;
      inner.watch(in[0]);
      const auto [m, v] = moments(in[0], {1}, true);
      return inner.gradient(reduce_sum(v * v + m * v), in[0]);
    }, {randn({3, 4}, 165)}, 1e-6, 1e-6);
  }
}

TEST_CASE("moments' gradient is (x - mean) * 2 g_var / n + g_mean / n", "[moments][grad]") {
  // x = [1, 2, 6] over axis 0: mean 3, variance (4 + 1 + 9) / 3 = 14/3. With loss = 2 mean + var:
  // dx = (x - 3) * 2 / 3 + 2 / 3 = [-4/3 + 2/3, -2/3 + 2/3, 2 + 2/3] = [-2/3, 0, 8/3].
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = constant({1.0, 2.0, 6.0}, {3}, dt);
    GradientTape tape;
    tape.watch(x);
    const auto [m, v] = moments(x, {0});
    check_close(v, {14.0 / 3}, 1e-6);
    check_close(tape.gradient(m * 2.0 + v, x), {-2.0 / 3, 0.0, 8.0 / 3}, 1e-6);
  }
}

TEST_CASE("moments of an empty block are NaN, and reduce_variance and reduce_std use it", "[moments]") {
  const auto [m, v] = moments(zeros({0, 3}), {0});
  CHECK(m.shape() == Shape{3});
  for (double e : m.to_vector<double>()) CHECK(std::isnan(e));
  for (double e : v.to_vector<double>()) CHECK(std::isnan(e));
  // 1e4 + {-1, 0, 1, 2}: variance 1.25 in float32, where a one-pass E[x^2] - E[x]^2 is off by ~8.
  const Tensor x = constant({9999.0, 10000.0, 10001.0, 10002.0}, {1, 4}, DType::float32);
  check_close(reduce_variance(x, {1}), {1.25}, 1e-6);
  check_close(reduce_std(x), {std::sqrt(1.25)}, 1e-6);
}
