// The 1-D / 3-D pooling layers and ops, UpSampling1D/2D/3D (with resize_bilinear),
// ZeroPadding, Cropping and RepeatVector: values by hand or a plain loop, shapes for every
// padding and stride, float64 gradients of the new ops, errors, config round trips.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <limits>
#include <vector>

#include "conv_family_fixtures.hpp"
#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;
using keel_test::check_round_trip;
using keel_test::f64;
using keel_test::max_abs_diff;
using keel_test::tf_axis;
using keel_test::values;
using keel_test::wavy;
using V = std::vector<double>;

namespace {

// Plain-loop 3-D pooling with TF's windows; averages count only positions inside the input.
Tensor pool3d_reference(const Tensor& x, std::array<int, 3> p, std::array<int, 3> s, bool same, bool max) {
  const auto d = x.shape().dims();
  const auto xv = values(x);
  std::array<std::pair<std::int64_t, std::int64_t>, 3> ax;
  for (int a = 0; a < 3; ++a) ax[a] = tf_axis(d[a + 1], p[a], s[a], 1, same);
  V out;
  for (std::int64_t n = 0; n < d[0]; ++n)
    for (std::int64_t z = 0; z < ax[0].first; ++z)
      for (std::int64_t r = 0; r < ax[1].first; ++r)
        for (std::int64_t q = 0; q < ax[2].first; ++q)
          for (std::int64_t c = 0; c < d[4]; ++c) {
            double acc = max ? -std::numeric_limits<double>::infinity() : 0;
            int count = 0;
            for (int i = 0; i < p[0]; ++i)
              for (int j = 0; j < p[1]; ++j)
                for (int l = 0; l < p[2]; ++l) {
                  const std::int64_t zz = z * s[0] - ax[0].second + i, rr = r * s[1] - ax[1].second + j,
                                     cc = q * s[2] - ax[2].second + l;
                  if (zz < 0 || zz >= d[1] || rr < 0 || rr >= d[2] || cc < 0 || cc >= d[3]) continue;
                  const double v = xv[static_cast<std::size_t>((((n * d[1] + zz) * d[2] + rr) * d[3] + cc) * d[4] + c)];
                  acc = max ? std::max(acc, v) : acc + v;
                  ++count;
                }
            out.push_back(max ? acc : acc / count);
          }
  return constant(out, Shape{d[0], ax[0].first, ax[1].first, ax[2].first, d[4]}, DType::float64);
}

}  // namespace

TEST_CASE("1-D pooling by hand", "[pooling][ops]") {
  // x = [1, 5, 2, 4, 3] (one channel). max pool 2 stride 2 valid: [5, 4]; same (ceil(5/2) = 3
  // windows, the last one only x[4]): [5, 4, 3]; average same: [3, 3, 3].
  const Tensor x = f64({1, 5, 2, 4, 3}, {1, 5, 1});
  CHECK(values(max_pool1d(x, 2, 2)) == V{5, 4});
  CHECK(values(max_pool1d(x, 2, 2, "same")) == V{5, 4, 3});
  CHECK(values(avg_pool1d(x, 2, 2, "same")) == V{3, 3, 3});
  // pool 3 stride 1: averages (1+5+2)/3, (5+2+4)/3, (2+4+3)/3.
  const auto a = values(avg_pool1d(x, 3, 1));
  CHECK(a[0] == Approx(8.0 / 3));
  CHECK(a[1] == Approx(11.0 / 3));
  CHECK(a[2] == Approx(3.0));
  CHECK_THROWS_AS(max_pool1d(x, 6, 1), ShapeError);
  CHECK_THROWS_AS(max_pool1d(f64({1, 2}, {1, 2}), 1, 1), ShapeError);
}

TEST_CASE("3-D pooling matches a plain loop", "[pooling][ops]") {
  const Tensor x = wavy({2, 5, 4, 6, 2});
  for (bool same : {false, true})
    for (std::array<int, 3> p : {std::array<int, 3>{2, 2, 2}, {3, 1, 2}})
      for (std::array<int, 3> s : {std::array<int, 3>{1, 1, 1}, {2, 3, 2}}) {
        const char* pad = same ? "same" : "valid";
        CHECK(max_abs_diff(max_pool3d(x, p, s, pad), pool3d_reference(x, p, s, same, true)) < 1e-12);
        CHECK(max_abs_diff(avg_pool3d(x, p, s, pad), pool3d_reference(x, p, s, same, false)) < 1e-12);
      }
  const Tensor xt = transpose(wavy({2, 4, 5, 6, 2}), {0, 2, 1, 3, 4});  // non-contiguous
  CHECK(max_abs_diff(max_pool3d(xt, {2, 2, 2}, {2, 2, 2}), pool3d_reference(xt, {2, 2, 2}, {2, 2, 2}, false, true)) <
        1e-12);
  CHECK_THROWS_AS(avg_pool3d(x, {6, 1, 1}, {1, 1, 1}), ShapeError);
  CHECK_THROWS_AS(avg_pool3d(x, {0, 1, 1}, {1, 1, 1}), ValueError);
}

TEST_CASE("pooling and resize ops have float64 gradients", "[pooling][grad]") {
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return avg_pool3d(v[0], {2, 2, 1}, {1, 2, 1}, "same"); },
                             {wavy({1, 3, 3, 2, 2})});
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return max_pool3d(v[0], {2, 2, 2}, {1, 1, 1}); },
                             {wavy({1, 3, 3, 3, 1})});
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return avg_pool1d(v[0], 2, 1, "same"); },
                             {wavy({2, 4, 2})});
  keel_test::check_gradients([](const std::vector<Tensor>& v) { return resize_bilinear(v[0], {5, 3}); },
                             {wavy({1, 2, 4, 2})});
}

TEST_CASE("pooling layers: shapes, channels_first, global pooling and configs", "[pooling][layers]") {
  const Tensor x1 = cast(wavy({2, 7, 3}), DType::float32);
  layers::MaxPooling1D mp(2);
  CHECK(mp(x1).shape() == Shape{2, 3, 3});
  check_round_trip(mp, x1);
  layers::AveragePooling1D ap(3, {.strides = 1, .padding = "same", .data_format = "channels_first"});
  const Tensor ycf = ap(transpose(x1, {0, 2, 1}));
  CHECK(max_abs_diff(transpose(ycf, {0, 2, 1}), avg_pool1d(x1, 3, 1, "same")) < 1e-6);
  check_round_trip(ap, transpose(x1, {0, 2, 1}));

  const Tensor x3 = cast(wavy({2, 4, 5, 6, 3}), DType::float32);
  layers::MaxPooling3D m3;
  CHECK(m3(x3).shape() == Shape{2, 2, 2, 3, 3});
  check_round_trip(m3, x3);
  layers::AveragePooling3D a3({2, 2, 2}, {.strides = {1, 2, 3}, .padding = "same"});
  CHECK(a3(x3).shape() == Shape{2, 4, 3, 2, 3});
  check_round_trip(a3, x3);
  CHECK_THROWS_AS(layers::MaxPooling3D(2, {.padding = "full"}), ValueError);
  CHECK_THROWS_AS(layers::MaxPooling3D(2)(x1), ShapeError);

  // Global pools: mean / max over the spatial axes.
  const Tensor g = f64({1, 2, 3, 4, 5, 6}, {1, 3, 2});  // steps (1,2), (3,4), (5,6)
  layers::GlobalAveragePooling1D gap;
  CHECK(values(gap(g)) == V{3, 4});
  layers::GlobalMaxPooling1D gmp({.keepdims = true});
  CHECK(gmp(g).shape() == Shape{1, 1, 2});
  CHECK(values(gmp(g)) == V{5, 6});
  layers::GlobalMaxPooling1D gmp_cf({.data_format = "channels_first"});
  CHECK(values(gmp_cf(g)) == V{2, 4, 6});
  layers::GlobalAveragePooling3D ga3({.keepdims = true});
  CHECK(ga3(x3).shape() == Shape{2, 1, 1, 1, 3});
  CHECK(max_abs_diff(ga3(x3), reduce_mean(x3, {1, 2, 3}, true)) < 1e-6);
  layers::GlobalMaxPooling3D gm3({.data_format = "channels_first"});
  CHECK(gm3(x3).shape() == Shape{2, 4});
  check_round_trip(gap, g);
  check_round_trip(gmp, g);
  check_round_trip(ga3, x3);
  check_round_trip(gm3, x3);
}

TEST_CASE("UpSampling layers: nearest repeats, bilinear as tf.image.resize", "[reshaping][upsampling]") {
  const Tensor x = f64({1, 2, 3}, {1, 3, 1});
  layers::UpSampling1D u1(2);
  CHECK(values(u1(x)) == V{1, 1, 2, 2, 3, 3});
  check_round_trip(u1, cast(x, DType::float32));
  // 2x2 image [[1, 2], [3, 4]] nearest (2, 1): rows doubled.
  const Tensor img = f64({1, 2, 3, 4}, {1, 2, 2, 1});
  layers::UpSampling2D u2({2, 1});
  CHECK(values(u2(img)) == V{1, 2, 1, 2, 3, 4, 3, 4});
  // Bilinear, width 2 -> 4, half-pixel centers: src = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75,
  // 1.25 -> [1, 1.25, 1.75, 2] for the row (1, 2) (the ends clamp).
  layers::UpSampling2D bl({1, 2}, {.interpolation = "bilinear"});
  const auto b = values(bl(cast(img, DType::float32)));
  const V expected{1, 1.25, 1.75, 2, 3, 3.25, 3.75, 4};
  REQUIRE(b.size() == expected.size());
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(b[i] == Approx(expected[i]));
  check_round_trip(bl, cast(img, DType::float32));
  layers::UpSampling2D bl_cf(2, {.data_format = "channels_first", .interpolation = "bilinear"});
  const Tensor xc = cast(wavy({1, 3, 2, 4}), DType::float32);
  CHECK(max_abs_diff(bl_cf(xc), transpose(resize_bilinear(transpose(xc, {0, 2, 3, 1}), {4, 8}), {0, 3, 1, 2})) <
        1e-6);
  CHECK_THROWS_AS(layers::UpSampling2D(2, {.interpolation = "area"}), ValueError);
  layers::UpSampling3D u3({1, 2, 3});
  const Tensor x3 = cast(wavy({1, 2, 2, 2, 1}), DType::float32);
  CHECK(u3(x3).shape() == Shape{1, 2, 4, 6, 1});
  CHECK(max_abs_diff(u3(x3), repeat(repeat(x3, 2, 2), 3, 3)) == 0);
  check_round_trip(u3, x3);
}

TEST_CASE("ZeroPadding, Cropping and RepeatVector", "[reshaping]") {
  const Tensor x = f64({1, 2, 3}, {1, 3, 1});
  layers::ZeroPadding1D z1({1, 2});
  CHECK(values(z1(x)) == V{0, 1, 2, 3, 0, 0});
  check_round_trip(z1, cast(x, DType::float32));
  layers::Cropping1D c1({1, 0});
  CHECK(values(c1(x)) == V{2, 3});
  check_round_trip(c1, cast(x, DType::float32));
  CHECK_THROWS_AS(layers::Cropping1D({2, 1})(x), ShapeError);  // nothing left
  CHECK_THROWS_AS(layers::ZeroPadding1D(-1), ValueError);

  // [[1, 2], [3, 4]] padded ((1, 0), (0, 1)): [[0, 0, 0], [1, 2, 0], [3, 4, 0]].
  const Tensor img = f64({1, 2, 3, 4}, {1, 2, 2, 1});
  layers::ZeroPadding2D z2({{1, 0}, {0, 1}});
  CHECK(values(z2(img)) == V{0, 0, 0, 1, 2, 0, 3, 4, 0});
  check_round_trip(z2, cast(img, DType::float32));
  layers::ZeroPadding2D z2cf(1, {.data_format = "channels_first"});
  CHECK(z2cf(cast(wavy({2, 3, 4, 5}), DType::float32)).shape() == Shape{2, 3, 6, 7});
  // Cropping2D ((0, 1), (1, 0)) of [[1, 2], [3, 4]] keeps [[2]].
  layers::Cropping2D c2({{0, 1}, {1, 0}});
  CHECK(values(c2(img)) == V{2});
  const Tensor x3 = cast(wavy({2, 4, 5, 6, 3}), DType::float32);
  layers::ZeroPadding3D z3;
  CHECK(z3(x3).shape() == Shape{2, 6, 7, 8, 3});
  check_round_trip(z3, x3);
  layers::Cropping3D c3({{1, 1}, {0, 2}, {3, 0}});
  const Tensor y3 = c3(x3);
  CHECK(y3.shape() == Shape{2, 2, 3, 3, 3});
  CHECK(max_abs_diff(y3, slice(x3, {0, 1, 0, 3, 0}, {-1, 2, 3, 3, -1})) == 0);
  check_round_trip(c3, x3);
  // Cropping a non-contiguous (transposed) input.
  const Tensor xt = transpose(x3, {0, 2, 1, 3, 4});
  CHECK(max_abs_diff(c3(xt), slice(xt.contiguous(), {0, 1, 0, 3, 0}, {-1, 3, 2, 3, -1})) == 0);

  layers::RepeatVector rv(3);
  const Tensor v = f64({1, 2, 3, 4}, {2, 2});
  CHECK(rv(v).shape() == Shape{2, 3, 2});
  CHECK(values(rv(v)) == V{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  check_round_trip(rv, cast(v, DType::float32));
  CHECK_THROWS_AS(rv(x), ShapeError);
  keel_test::check_gradients([&](const std::vector<Tensor>& in) { return rv(in[0]); }, {wavy({2, 2})});
}
