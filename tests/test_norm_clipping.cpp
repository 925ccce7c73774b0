// l2_normalize, clip_by_norm, global_norm and clip_by_global_norm against TensorFlow's
// definitions worked by hand on 3-4-5 and 5-12-13 triangles, their zero and non-finite cases,
// and float64 gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using keel_test::check_gradients;
using V = std::vector<Tensor>;

TEST_CASE("l2_normalize divides by the L2 norm over the axes, floored at epsilon", "[norms]") {
  // [3, 4] / 5 = [0.6, 0.8].
  const Tensor x = constant<double>({3, 4, 0, 0}, {2, 2});
  const auto rows = l2_normalize(x, {1}).to_vector<double>();
  CHECK(rows[0] == Approx(0.6));
  CHECK(rows[1] == Approx(0.8));
  CHECK(rows[2] == 0.0);  // 0 * rsqrt(max(0, 1e-12)): zero rows stay zero, not NaN
  CHECK(rows[3] == 0.0);
  // All axes: the norm of [3, 4, 0, 0] is 5 too; axis 0 with negative spelling: [3,0]/3, [4,0]/4.
  CHECK(l2_normalize(x).to_vector<double>()[1] == Approx(0.8));
  CHECK(l2_normalize(x, {-2}).to_vector<double>() == std::vector<double>{1, 1, 0, 0});
  // epsilon floors the squared sum: [1e-3] with epsilon 1 gives 1e-3 / sqrt(1).
  CHECK(l2_normalize(constant<double>({1e-3}, {1}), {}, 1.0).item<double>() == Approx(1e-3));
  CHECK_THROWS_AS(l2_normalize(constant<int>({1, 2}, {2})), DTypeError);
}

TEST_CASE("clip_by_norm rescales only tensors whose norm exceeds clip_norm", "[norms]") {
  const Tensor x = constant<double>({3, 4}, {2});
  CHECK(clip_by_norm(x, 1.0).to_vector<double>()[0] == Approx(0.6));   // 3 * 1 / max(5, 1)
  CHECK(clip_by_norm(x, 10.0).to_vector<double>() == std::vector<double>{3, 4});  // 5 <= 10
  // Per row: [[3,4],[0.3,0.4]] with clip 1: the first row scaled to norm 1, the second kept.
  const auto r = clip_by_norm(constant<double>({3, 4, 0.3, 0.4}, {2, 2}), 1.0, {1}).to_vector<double>();
  CHECK(r[1] == Approx(0.8));
  CHECK(r[3] == Approx(0.4));
  CHECK(clip_by_norm(zeros({3}, DType::float64), 1.0).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK_THROWS_AS(clip_by_norm(x, 0.0), ValueError);
}

TEST_CASE("clip_by_norm of zeros has TensorFlow's finite gradient", "[norms][gradient]") {
  // At x = 0 the value is x * c / max(0, c) = x, so the gradient of sum() is 1 everywhere.
  const Tensor z = zeros({2}, DType::float64);
  GradientTape tape;
  tape.watch(z);
  const Tensor g = tape.gradient(reduce_sum(clip_by_norm(z, 2.0)), z);
  CHECK(g.to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("global_norm and clip_by_global_norm treat the list as one vector", "[norms]") {
  // sqrt(3^2 + 4^2 + 12^2) = sqrt(169) = 13.
  const V ts = {constant<double>({3, 4}, {2}), Tensor(), constant<double>({12}, {1, 1})};
  CHECK(global_norm(ts).item<double>() == Approx(13));
  const ClippedTensors c = clip_by_global_norm(ts, 6.5);  // scale 6.5 / 13 = 0.5
  CHECK(c.global_norm.item<double>() == Approx(13));
  CHECK(c.tensors[0].to_vector<double>() == std::vector<double>{1.5, 2});
  CHECK_FALSE(c.tensors[1].defined());
  CHECK(c.tensors[2].shape() == Shape({1, 1}));
  CHECK(c.tensors[2].item<double>() == Approx(6));
  // Below the threshold nothing changes: scale = 20 * min(1/13, 1/20) = 1.
  CHECK(clip_by_global_norm(ts, 20).tensors[0].to_vector<double>() == std::vector<double>{3, 4});
  // A non-finite norm poisons every tensor with NaN, as TensorFlow does.
  const double inf = std::numeric_limits<double>::infinity();
  const ClippedTensors bad = clip_by_global_norm({constant<double>({inf, 1}, {2})}, 1.0);
  for (double v : bad.tensors[0].to_vector<double>()) CHECK(std::isnan(v));
  CHECK_THROWS_AS(global_norm({}), ValueError);
  CHECK_THROWS_AS(clip_by_global_norm(ts, -1), ValueError);
}

TEST_CASE("norm-based clipping passes float64 gradient checks", "[norms][gradient]") {
  const Tensor x = constant<double>({0.3, -1.2, 2.0, 0.7, -0.4, 0.9}, {2, 3});
  check_gradients([](const V& v) { return l2_normalize(v[0], {1}); }, {x});
  check_gradients([](const V& v) { return clip_by_norm(v[0], 1.0); }, {x});       // clipped (norm ~2.6)
  check_gradients([](const V& v) { return clip_by_norm(v[0], 5.0); }, {x});       // not clipped
  check_gradients([](const V& v) { return global_norm({v[0], v[1]}); }, {x, constant<double>({1.5}, {1})});
  check_gradients([](const V& v) { return clip_by_global_norm({v[0]}, 1.0).tensors[0]; }, {x});
}
