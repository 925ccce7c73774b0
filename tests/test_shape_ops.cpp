// Shape ops: values, views, error cases and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.hpp"
#include "threads_guard.hpp"
#include "value_fixtures.hpp"

using namespace keel;
using Catch::Contains;

using keel_test::f64;
using keel_test::wavy;

namespace {

using F = std::vector<float>;
F fv(const Tensor& t) { return t.to_vector<float>(); }

// x = [[0, 1, 2],
//      [3, 4, 5]]
Tensor x23() { return reshape(arange(6), {2, 3}); }
// c[i,j,k] = 12 i + 4 j + k, shape [2,3,4]
Tensor c234() { return reshape(arange(24), {2, 3, 4}); }


}  // namespace

TEST_CASE("reshape keeps row-major order, infers -1 and copies non-contiguous inputs",
          "[shape_ops][reshape]") {
  const Tensor x = x23();
  CHECK(reshape(x, {3, 2}).shape() == Shape{3, 2});
  CHECK(fv(reshape(x, {3, 2})) == F{0, 1, 2, 3, 4, 5});
  CHECK(reshape(x, {-1, 2}).shape() == Shape{3, 2});
  CHECK(reshape(x, {6, -1}).shape() == Shape{6, 1});
  CHECK(reshape(x, {1, -1, 1}).shape() == Shape{1, 6, 1});
  // a view when x is contiguous
  CHECK(reshape(x, {6}).impl()->storage == x.impl()->storage);
  // of a transposed view: the values in the view's row-major order, [[0,3],[1,4],[2,5]]
  CHECK(fv(reshape(transpose(x), {6})) == F{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_AS(reshape(x, {4, 2}), ShapeError);
  CHECK_THROWS_WITH(reshape(x, {4, 2}), Contains("reshape") && Contains("[2,3]") && Contains("[4,2]"));
}

TEST_CASE("transpose reverses the axes by default and follows a permutation",
          "[shape_ops][transpose]") {
  CHECK(fv(transpose(x23())) == F{0, 3, 1, 4, 2, 5});
  const Tensor c = c234();
  const Tensor t = transpose(c);
  CHECK(t.shape() == Shape{4, 3, 2});
  F expected;  // t[k,j,i] = c[i,j,k] = 12 i + 4 j + k
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) expected.push_back(float(12 * i + 4 * j + k));
  CHECK(fv(t) == expected);
  CHECK(t.impl()->storage == c.impl()->storage);  // a view

  const Tensor p = transpose(c, {0, 2, 1});
  CHECK(p.shape() == Shape{2, 4, 3});
  F expected_p;  // p[i,k,j] = 12 i + 4 j + k
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) expected_p.push_back(float(12 * i + 4 * j + k));
  CHECK(fv(p) == expected_p);
  CHECK(fv(transpose(c, {0, 1, 2})) == fv(c));
  // transposing twice gives the original
  CHECK(fv(transpose(transpose(c, {1, 2, 0}), {2, 0, 1})) == fv(c));

  CHECK_THROWS_AS(transpose(c, {0, 1}), Error);     // wrong length
  CHECK_THROWS_AS(transpose(c, {0, 1, 1}), Error);  // not a permutation
  CHECK_THROWS_AS(transpose(c, {0, 1, 3}), Error);  // out of range
}

TEST_CASE("transposed and permuted copies of every element size put each element where its index says",
          "[shape_ops][transpose]") {
  // Copies whose innermost axis is strided in the source run in tiles (and 4-byte elements in
  // 4 x 4 register transposes); odd sizes leave partial tiles at both ends. x holds its own flat
  // index, so the copy's element at index (i0, i1, ...) must be x's flat index of the permuted
  // position: sum over axes of i_k * (x's stride of axis perm[k]).
  keel_test::ThreadsGuard guard;
  struct Case {
    Shape shape;
    std::vector<int> perm;
  };
  const std::vector<Case> cases = {{{33, 70}, {1, 0}},          {{70, 33}, {1, 0}},
                                   {{37, 5, 64}, {2, 1, 0}},    {{3, 64, 40}, {0, 2, 1}},
                                   {{3, 64, 40}, {2, 0, 1}},    {{4, 33, 35}, {1, 2, 0}},
                                   {{2, 3, 36, 34}, {0, 3, 1, 2}}, {{130, 129}, {1, 0}}};
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Case& c : cases) {
      const std::int64_t n = c.shape.num_elements();
      std::vector<std::int64_t> x_strides(static_cast<std::size_t>(c.shape.rank()), 1);
      for (std::int64_t k = c.shape.rank() - 1; k > 0; --k)
        x_strides[static_cast<std::size_t>(k - 1)] = x_strides[static_cast<std::size_t>(k)] * c.shape[k];
      // The expected flat source index of each element of the result, in row-major order.
      std::vector<double> want(static_cast<std::size_t>(n));
      std::vector<std::int64_t> dims;
      for (int p : c.perm) dims.push_back(c.shape[p]);
      std::vector<std::int64_t> idx(dims.size(), 0);
      for (std::int64_t e = 0; e < n; ++e) {
        std::int64_t src = 0;
        for (std::size_t k = 0; k < dims.size(); ++k) src += idx[k] * x_strides[static_cast<std::size_t>(c.perm[k])];
        want[static_cast<std::size_t>(e)] = static_cast<double>(src);
        for (std::size_t k = dims.size(); k-- > 0;) {
          if (++idx[k] < dims[k]) break;
          idx[k] = 0;
        }
      }
      for (DType dt : {DType::uint8, DType::float16, DType::float32, DType::int32, DType::float64, DType::int64}) {
        INFO("shape " << c.shape.to_string() << " dtype " << name(dt) << " threads " << threads);
        // uint8 and float16 hold the index modulo 251 (exact in both); the wider types all of it.
        const bool narrow = dt == DType::uint8 || dt == DType::float16;
        Tensor x = arange(0, static_cast<double>(n), 1, DType::float64);
        if (narrow) x = x - floor(x / 251.0) * 251.0;
        x = cast(reshape(x, c.shape), dt);
        const Tensor y = transpose(x, c.perm).contiguous();
        REQUIRE(y.shape() == Shape(dims));
        const std::vector<double> got = cast(y, DType::float64).to_vector<double>();
        std::size_t wrong = 0;
        for (std::size_t e = 0; e < got.size(); ++e) {
          const double w = narrow ? std::fmod(want[e], 251.0) : want[e];
          wrong += got[e] != w;
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("expand_dims inserts and squeeze removes size-1 axes", "[shape_ops][squeeze]") {
  const Tensor x = x23();
  CHECK(expand_dims(x, 0).shape() == Shape{1, 2, 3});
  CHECK(expand_dims(x, 1).shape() == Shape{2, 1, 3});
  CHECK(expand_dims(x, 2).shape() == Shape{2, 3, 1});
  CHECK(expand_dims(x, -1).shape() == Shape{2, 3, 1});  // -1 appends (tf.expand_dims)
  CHECK(expand_dims(x, -3).shape() == Shape{1, 2, 3});
  CHECK(fv(expand_dims(x, 1)) == fv(x));
  CHECK(expand_dims(constant(1.0), 0).shape() == Shape{1});
  CHECK_THROWS_AS(expand_dims(x, 4), ValueError);
  CHECK_THROWS_AS(expand_dims(x, -4), ValueError);

  const Tensor y = reshape(arange(3), {1, 3, 1});
  CHECK(squeeze(y).shape() == Shape{3});
  CHECK(squeeze(y, {0}).shape() == Shape{3, 1});
  CHECK(squeeze(y, {-1}).shape() == Shape{1, 3});
  CHECK(squeeze(y, {0, 2}).shape() == Shape{3});
  CHECK(fv(squeeze(y)) == F{0, 1, 2});
  CHECK(squeeze(ones({1, 1})).shape() == Shape{});
  CHECK_THROWS_AS(squeeze(y, {1}), Error);  // axis 1 has size 3
  CHECK_THROWS_WITH(squeeze(y, {1}), Contains("squeeze"));
  CHECK_THROWS_AS(squeeze(y, {3}), ValueError);
}

TEST_CASE("concat joins along an existing axis", "[shape_ops][concat]") {
  const Tensor x = x23();
  const Tensor r = constant({6.f, 7.f, 8.f}, {1, 3});
  CHECK(concat({x, r}, 0).shape() == Shape{3, 3});
  CHECK(fv(concat({x, r}, 0)) == F{0, 1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor col = constant({10.f, 11.f}, {2, 1});
  CHECK(fv(concat({x, col}, 1)) == F{0, 1, 2, 10, 3, 4, 5, 11});
  CHECK(fv(concat({col, x, col}, -1)) == F{10, 0, 1, 2, 10, 11, 3, 4, 5, 11});
  CHECK(fv(concat({x}, 0)) == fv(x));
  // views as inputs
  CHECK(fv(concat({transpose(x), transpose(x)}, 1)) == F{0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5});

  CHECK_THROWS_AS(concat({x, ones({2, 2})}, 0), ShapeError);  // other dims differ: 3 vs 2
  CHECK_THROWS_WITH(concat({x, ones({2, 2})}, 0), Contains("concat") && Contains("[2,3]") &&
                                                       Contains("[2,2]"));
  CHECK_THROWS_AS(concat({x, ones({6})}, 0), ShapeError);  // ranks differ
  CHECK_THROWS_AS(concat({x, ones({2, 3}, DType::float64)}, 0), DTypeError);
  CHECK_THROWS_AS(concat({x, x}, 2), ValueError);
  CHECK_THROWS_AS(concat({}, 0), Error);
}

TEST_CASE("stack joins along a new axis and unstack splits it off", "[shape_ops][stack]") {
  const Tensor a = constant({1.f, 2.f, 3.f}, {3});
  const Tensor b = constant({4.f, 5.f, 6.f}, {3});
  CHECK(stack({a, b}).shape() == Shape{2, 3});
  CHECK(fv(stack({a, b})) == F{1, 2, 3, 4, 5, 6});
  CHECK(stack({a, b}, 1).shape() == Shape{3, 2});
  CHECK(fv(stack({a, b}, 1)) == F{1, 4, 2, 5, 3, 6});
  CHECK(fv(stack({a, b}, -1)) == F{1, 4, 2, 5, 3, 6});
  CHECK(stack({constant(1.0), constant(2.0)}).shape() == Shape{2});
  CHECK_THROWS_AS(stack({a, ones({4})}), ShapeError);
  CHECK_THROWS_WITH(stack({a, ones({4})}), Contains("stack") && Contains("[3]") && Contains("[4]"));
  CHECK_THROWS_AS(stack({a, b}, 2), ValueError);

  const Tensor x = x23();
  const auto rows = unstack(x);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].shape() == Shape{3});
  CHECK(fv(rows[1]) == F{3, 4, 5});
  const auto cols = unstack(x, 1);
  REQUIRE(cols.size() == 3);
  CHECK(cols[0].shape() == Shape{2});
  CHECK(fv(cols[0]) == F{0, 3});
  CHECK(fv(cols[2]) == F{2, 5});
  CHECK(fv(unstack(x, -1)[1]) == F{1, 4});
  CHECK(fv(stack(unstack(x, 1), 1)) == fv(x));  // round trip
}

TEST_CASE("split cuts into equal parts or given sizes", "[shape_ops][split]") {
  const Tensor x = reshape(arange(12), {2, 6});  // [[0..5],[6..11]]
  const auto parts = split(x, 3, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 2});
  CHECK(fv(parts[0]) == F{0, 1, 6, 7});
  CHECK(fv(parts[1]) == F{2, 3, 8, 9});
  CHECK(fv(parts[2]) == F{4, 5, 10, 11});
  const auto halves = split(x, 2, 0);
  REQUIRE(halves.size() == 2);
  CHECK(fv(halves[1]) == F{6, 7, 8, 9, 10, 11});

  const auto sized = split(x, std::vector<std::int64_t>{1, 2, 3}, 1);
  REQUIRE(sized.size() == 3);
  CHECK(sized[0].shape() == Shape{2, 1});
  CHECK(fv(sized[0]) == F{0, 6});
  CHECK(fv(sized[1]) == F{1, 2, 7, 8});
  CHECK(fv(sized[2]) == F{3, 4, 5, 9, 10, 11});
  const auto neg_axis = split(x, std::vector<std::int64_t>{4, 2}, -1);
  CHECK(neg_axis[1].shape() == Shape{2, 2});
  CHECK(fv(neg_axis[1]) == F{4, 5, 10, 11});

  CHECK_THROWS_AS(split(x, 4, 1), Error);  // 6 columns do not split into 4 equal parts
  CHECK_THROWS_WITH(split(x, 4, 1), Contains("split"));
  CHECK_THROWS_AS(split(x, std::vector<std::int64_t>{1, 2}, 1), Error);  // 3 != 6
  CHECK_THROWS_AS(split(x, 2, 2), ValueError);
}

TEST_CASE("tile repeats along each axis", "[shape_ops][tile]") {
  const Tensor x = constant({1.f, 2.f}, {1, 2});
  CHECK(tile(x, {2, 2}).shape() == Shape{2, 4});
  CHECK(fv(tile(x, {2, 2})) == F{1, 2, 1, 2, 1, 2, 1, 2});
  CHECK(fv(tile(constant({1.f, 2.f, 3.f}, {3}), {2})) == F{1, 2, 3, 1, 2, 3});
  // [[0,1,2],[3,4,5]] tiled {2,1}: the rows again
  CHECK(fv(tile(x23(), {2, 1})) == F{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  CHECK(tile(x23(), {1, 0}).shape() == Shape{2, 0});
  CHECK_THROWS_AS(tile(x, {2}), Error);  // one multiple per axis
  CHECK_THROWS_WITH(tile(x, {2}), Contains("tile"));
}

TEST_CASE("slice takes begin and size, size -1 meaning to the end", "[shape_ops][slice]") {
  const Tensor x = reshape(arange(12), {3, 4});  // x[i,j] = 4 i + j
  const Tensor s = slice(x, {1, 1}, {2, -1});    // rows 1..2, cols 1..3
  CHECK(s.shape() == Shape{2, 3});
  CHECK(fv(s) == F{5, 6, 7, 9, 10, 11});
  CHECK(s.impl()->storage == x.impl()->storage);  // a view
  CHECK(fv(slice(x, {0, 2}, {-1, 1})) == F{2, 6, 10});
  CHECK(slice(x, {3, 0}, {0, 4}).shape() == Shape{0, 4});
  // a slice of a slice
  CHECK(fv(slice(s, {1, 1}, {1, 2})) == F{10, 11});
  CHECK_THROWS_AS(slice(x, {2, 0}, {2, 4}), Error);  // rows 2..3 of 3
  CHECK_THROWS_WITH(slice(x, {2, 0}, {2, 4}), Contains("slice") && Contains("[3,4]"));
  CHECK_THROWS_AS(slice(x, {0}, {1}), Error);  // one begin per axis
}

TEST_CASE("broadcast_to expands size-1 and missing axes as a view", "[shape_ops][broadcast]") {
  const Tensor r = constant({1.f, 2.f, 3.f}, {3});
  const Tensor b = broadcast_to(r, {2, 3});
  CHECK(b.shape() == Shape{2, 3});
  CHECK(fv(b) == F{1, 2, 3, 1, 2, 3});
  CHECK(b.impl()->storage == r.impl()->storage);
  CHECK(fv(broadcast_to(constant({1.f, 2.f}, {2, 1}), {2, 3})) == F{1, 1, 1, 2, 2, 2});
  CHECK(fv(broadcast_to(constant(7.0), {2})) == F{7, 7});
  CHECK_THROWS_AS(broadcast_to(r, {2, 4}), ShapeError);
  CHECK_THROWS_WITH(broadcast_to(r, {2, 4}), Contains("[3]") && Contains("[2,4]"));
  CHECK_THROWS_AS(broadcast_to(ones({2, 3}), {3}), ShapeError);  // cannot drop axes
}

TEST_CASE("gather picks slices along an axis", "[shape_ops][gather]") {
  const Tensor p = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2});  // rows [1,2] [3,4] [5,6]
  const Tensor g0 = gather(p, constant({2, 0, 2}, {3}));
  CHECK(g0.shape() == Shape{3, 2});
  CHECK(fv(g0) == F{5, 6, 1, 2, 5, 6});
  // int64 indices, 2-D: shape = indices.shape + params.shape[1:] = [2,2,2]
  const Tensor g2 = gather(p, constant(std::vector<std::int64_t>{0, 1, 1, 2}, Shape{2, 2}));
  CHECK(g2.shape() == Shape{2, 2, 2});
  CHECK(fv(g2) == F{1, 2, 3, 4, 3, 4, 5, 6});
  // axis 1 of [[1,2,3],[4,5,6]] with [2,0]: [[3,1],[6,4]]
  const Tensor q = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  const Tensor g1 = gather(q, constant({2, 0}, {2}), 1);
  CHECK(g1.shape() == Shape{2, 2});
  CHECK(fv(g1) == F{3, 1, 6, 4});
  CHECK(fv(gather(q, constant({1}, {1}), -1)) == F{2, 5});
  // a rank-0 index drops the axis
  CHECK(gather(q, constant(1.0, DType::int32), 1).shape() == Shape{2});
  // of a transposed view: q^T = [[1,4],[2,5],[3,6]], rows 2 and 1
  CHECK(fv(gather(transpose(q), constant({2, 1}, {2}))) == F{3, 6, 2, 5});

  CHECK_THROWS_AS(gather(p, constant({0, 5}, {2})), ValueError);
  CHECK_THROWS_WITH(gather(p, constant({0, 5}, {2})), Contains("gather") && Contains("5"));
  CHECK_THROWS_AS(gather(q, constant({3}, {1}), 1), ValueError);
  CHECK_THROWS_AS(gather(p, constant({-1}, {1})), Error);
  CHECK_THROWS_AS(gather(p, constant({0.f}, {1})), DTypeError);  // float indices
  CHECK_THROWS_AS(gather(p, constant({0}, {1}), 2), ValueError);
}

TEST_CASE("unsorted_segment_sum adds rows into their segments", "[shape_ops][segment]") {
  const Tensor data = constant({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}, {4, 2});
  // ids [0,2,0,1]: segment 0 = row0 + row2 = [6,8], 1 = row3 = [7,8], 2 = row1 = [3,4]
  const Tensor s = unsorted_segment_sum(data, constant({0, 2, 0, 1}, {4}), 3);
  CHECK(s.shape() == Shape{3, 2});
  CHECK(fv(s) == F{6, 8, 7, 8, 3, 4});
  // an empty segment is zero: [1,2,3,4] with ids [1,1,0,1] -> [3, 1+2+4, 0]
  CHECK(fv(unsorted_segment_sum(constant({1.f, 2.f, 3.f, 4.f}, {4}),
                                constant(std::vector<std::int64_t>{1, 1, 0, 1}, Shape{4}), 3)) ==
        F{3, 7, 0});
  CHECK_THROWS_AS(unsorted_segment_sum(data, constant({0, 3, 0, 1}, {4}), 3), Error);
  CHECK_THROWS_AS(unsorted_segment_sum(data, constant({0, 1}, {2}), 3), Error);  // 2 ids, 4 rows
}

TEST_CASE("one_hot encodes indices along a new last axis", "[shape_ops][one_hot]") {
  const Tensor o = one_hot(constant({0, 2, 1}, {3}), 3);
  CHECK(o.dtype() == DType::float32);
  CHECK(o.shape() == Shape{3, 3});
  CHECK(fv(o) == F{1, 0, 0, 0, 0, 1, 0, 1, 0});
  const Tensor o2 = one_hot(constant(std::vector<std::int64_t>{1, 0, 3, 2}, Shape{2, 2}), 4, 5.0,
                            -1.0, DType::float64);
  CHECK(o2.dtype() == DType::float64);
  CHECK(o2.shape() == Shape{2, 2, 4});
  CHECK(o2.to_vector<double>() ==
        std::vector<double>{-1, 5, -1, -1, 5, -1, -1, -1, -1, -1, -1, 5, -1, -1, 5, -1});
  CHECK_THROWS_AS(one_hot(constant({0.f}, {1}), 3), DTypeError);
}

TEST_CASE("pad adds constant borders", "[shape_ops][pad]") {
  const Tensor x = constant({1.f, 2.f, 3.f, 4.f}, {2, 2});
  const Tensor p = pad(x, {{1, 0}, {0, 2}}, 9);
  CHECK(p.shape() == Shape{3, 4});
  CHECK(fv(p) == F{9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9});
  CHECK(fv(pad(constant({1.f, 2.f}, {2}), {{2, 1}})) == F{0, 0, 1, 2, 0});
  CHECK(fv(pad(x, {{0, 0}, {0, 0}})) == fv(x));
  CHECK_THROWS_AS(pad(x, {{1, 1}}), Error);  // one pair per axis
  CHECK_THROWS_WITH(pad(x, {{1, 1}}), Contains("pad"));
  CHECK_THROWS_AS(pad(x, {{-1, 0}, {0, 0}}), Error);
}

// ---- gradients --------------------------------------------------------------------------------

TEST_CASE("view ops pass gradient checks: reshape, transpose, expand_dims, squeeze, slice, "
          "broadcast_to",
          "[shape_ops][gradient]") {
  const Tensor x = wavy({2, 3, 4});
  using V = std::vector<Tensor>;
  check_gradients([](const V& xs) { return reshape(xs[0], {4, -1}); }, {x});
  check_gradients([](const V& xs) { return transpose(xs[0]); }, {x});
  check_gradients([](const V& xs) { return transpose(xs[0], {1, 2, 0}); }, {x});
  check_gradients([](const V& xs) { return expand_dims(xs[0], 1); }, {x});
  check_gradients([](const V& xs) { return squeeze(xs[0]); }, {wavy({1, 3, 1, 2})});
  check_gradients([](const V& xs) { return squeeze(xs[0], {2}); }, {wavy({1, 3, 1, 2})});
  check_gradients([](const V& xs) { return slice(xs[0], {1, 0, 1}, {1, -1, 2}); }, {x});
  check_gradients([](const V& xs) { return broadcast_to(xs[0], {2, 3, 4}); }, {wavy({3, 1})});
  check_gradients([](const V& xs) { return broadcast_to(xs[0], {2, 3}); }, {wavy({})});
  // chains of views and a reshape of a transposed view (which copies)
  check_gradients([](const V& xs) { return reshape(transpose(xs[0]), {-1}); }, {x});
  check_gradients([](const V& xs) { return slice(transpose(xs[0], {2, 0, 1}), {1, 1, 0}, {2, 1, 3}); },
                  {x});
  check_gradients([](const V& xs) { return xs[0][1]; }, {x});  // operator[]
}

TEST_CASE("joining and splitting ops pass gradient checks: concat, stack, unstack, split",
          "[shape_ops][gradient]") {
  using V = std::vector<Tensor>;
  check_gradients([](const V& xs) { return concat({xs[0], xs[1], xs[2]}, 1); },
                  {wavy({2, 3}, 0.1), wavy({2, 1}, 0.2), wavy({2, 2}, 0.3)});
  check_gradients([](const V& xs) { return concat({xs[0], xs[1]}, 0); },
                  {wavy({2, 3}, 0.1), wavy({1, 3}, 0.2)});
  // the same tensor twice: its gradients add up
  check_gradients([](const V& xs) { return concat({xs[0], xs[0] * 2.0}, -1); }, {wavy({2, 3})});
  check_gradients([](const V& xs) { return stack({xs[0], xs[1]}, 1); },
                  {wavy({2, 3}, 0.1), wavy({2, 3}, 0.5)});
  // unstack, then recombine the pieces differently (every piece used, some twice)
  check_gradients(
      [](const V& xs) {
        auto p = unstack(xs[0], 1);
        return stack({p[2] * p[0], p[1], p[0]}, 0);
      },
      {wavy({2, 3})});
  check_gradients(
      [](const V& xs) {
        auto p = split(xs[0], 3, 1);
        return concat({p[2], p[0] * p[1]}, 0);
      },
      {wavy({2, 6})});
  // one piece unused: its gradient is zero
  check_gradients(
      [](const V& xs) {
        auto p = split(xs[0], std::vector<std::int64_t>{1, 2, 3}, 1);
        return concat({p[2], square(p[0])}, 1);
      },
      {wavy({2, 6})});
}

TEST_CASE("gather along the last axis picks each row's columns for every element size", "[shape_ops][gather]") {
  // 300 rows of 70: x[r, c] = (r * 70 + c) mod 251 (exact in every dtype below), columns picked
  // with repeats and in any order; out[r, j] = x[r, idx[j]].
  keel_test::ThreadsGuard guard;
  const std::vector<std::int64_t> idx = {69, 0, 3, 3, 41, 68, 1, 17, 0, 55, 20};
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (DType dt : {DType::uint8, DType::float16, DType::float32, DType::int32, DType::float64, DType::int64}) {
      INFO("dtype " << name(dt) << " threads " << threads);
      Tensor x = arange(0, 300 * 70, 1, DType::float64);
      x = cast(reshape(x - floor(x / 251.0) * 251.0, {300, 70}), dt);
      const std::vector<double> got =
          cast(gather(x, constant(idx, Shape{static_cast<std::int64_t>(idx.size())}), 1), DType::float64)
              .to_vector<double>();
      REQUIRE(got.size() == 300 * idx.size());
      std::size_t wrong = 0;
      for (std::int64_t r = 0; r < 300; ++r)
        for (std::size_t j = 0; j < idx.size(); ++j)
          wrong += got[static_cast<std::size_t>(r) * idx.size() + j] != static_cast<double>((r * 70 + idx[j]) % 251);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("tile, gather, unsorted_segment_sum and pad pass gradient checks", "[shape_ops][gradient]") {
  using V = std::vector<Tensor>;
  check_gradients([](const V& xs) { return tile(xs[0], {2, 3}); }, {wavy({2, 2})});
  check_gradients([](const V& xs) { return tile(xs[0], {3}); }, {wavy({2})});
  // repeated indices: the gradient of row 2 collects two contributions
  const Tensor idx = constant({2, 0, 2, 3}, {4});
  check_gradients([idx](const V& xs) { return gather(xs[0], idx); }, {wavy({4, 3})});
  check_gradients([idx](const V& xs) { return gather(xs[0], idx, 1); }, {wavy({2, 5})});
  const Tensor idx2 = constant(std::vector<std::int64_t>{1, 1, 0, 2}, Shape{2, 2});
  check_gradients([idx2](const V& xs) { return gather(xs[0], idx2, 0); }, {wavy({3, 2})});
  // segments: repeated ids and an empty segment (3)
  const Tensor ids = constant({0, 2, 0, 1, 2}, {5});
  check_gradients([ids](const V& xs) { return unsorted_segment_sum(xs[0], ids, 4); },
                  {wavy({5, 2})});
  check_gradients([](const V& xs) { return pad(xs[0], {{1, 0}, {2, 1}}, 3.0); }, {wavy({2, 3})});
}

TEST_CASE("no gradient flows into integer indices", "[shape_ops][gradient]") {
  const Tensor p = wavy({3, 2});
  const Tensor idx = constant({2, 0}, {2});
  GradientTape tape(true);
  tape.watch(p);
  tape.watch(idx);  // an integer tensor: watching it has no effect
  const Tensor y = reduce_sum(gather(p, idx));
  CHECK_FALSE(tape.gradient(y, idx).defined());
  // rows 2 and 0 were picked once each, row 1 never
  CHECK(tape.gradient(y, p).to_vector<double>() == std::vector<double>{1, 1, 0, 0, 1, 1});
}
