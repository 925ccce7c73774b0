// Strided slicing: Tensor::slice (NumPy's basic indexing), strided_slice (tf.strided_slice) and
// Variable::assign(value, spec): values, clamping, views, errors and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "check_error.hpp"
#include "gradcheck.hpp"
#include "value_fixtures.hpp"

using namespace keel;

using keel_test::f64;
using keel_test::wavy;

namespace {

using F = std::vector<float>;
using V = std::vector<Tensor>;
F fv(const Tensor& t) { return t.to_vector<float>(); }

// d[i,j,k] = 12 i + 4 j + k, shape [4,3,4]
Tensor d434() { return reshape(arange(48), {4, 3, 4}); }


}  // namespace

TEST_CASE("slice of a 1-D tensor follows Python's start:stop:step, clamping the bounds",
          "[indexing][slice]") {
  const Tensor x = arange(10);  // [0, 1, ..., 9]
  CHECK(fv(x.slice({range(1, -1)})) == F{1, 2, 3, 4, 5, 6, 7, 8});   // x[1:-1]: -1 -> 9
  CHECK(fv(x.slice({range(0, keel::end, 3)})) == F{0, 3, 6, 9});     // x[::3]
  CHECK(fv(x.slice({range(-2, keel::end)})) == F{8, 9});             // x[-2:]: -2 -> 8
  CHECK(fv(x.slice({range(keel::end, 3)})) == F{0, 1, 2});           // x[:3]
  CHECK(fv(x.slice({range(keel::end, keel::end, -1)})) == F{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});  // x[::-1]
  CHECK(fv(x.slice({range(8, 2, -2)})) == F{8, 6, 4});               // 8, 6, 4 (stop 2 excluded)
  CHECK(fv(x.slice({range(-1, -4, -1)})) == F{9, 8, 7});             // x[-1:-4:-1]
  CHECK(fv(x.slice({range(7, keel::end, -3)})) == F{7, 4, 1});       // x[7::-3]: down to index 0
  // Out-of-range bounds clamp: x[-100:100] is all of x; x[100::-1] starts at the last element;
  // x[:-100:-1] runs past the first one.
  CHECK(fv(x.slice({range(-100, 100)})).size() == 10);
  CHECK(fv(x.slice({range(100, keel::end, -1)})) == F{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(fv(x.slice({range(keel::end, -100, -4)})) == F{9, 5, 1});
  // Empty results: stop before start for the direction of the step.
  CHECK(x.slice({range(5, 2)}).shape() == Shape{0});
  CHECK(x.slice({range(2, 3, -1)}).shape() == Shape{0});
  CHECK(x.slice({range(20, 30)}).shape() == Shape{0});
  // A step larger than the axis takes the first element only.
  CHECK(fv(x.slice({range(3, keel::end, std::int64_t{1} << 62)})) == F{3});
  CHECK(fv(x.slice({range(3, keel::end, INT64_MIN)})) == F{3});
}

TEST_CASE("slice entries: integers remove an axis, all, newaxis and ellipsis", "[indexing][slice]") {
  const Tensor d = d434();
  // d[1:-1, :, ::2] (the API's example): i in {1, 2}, j in {0, 1, 2}, k in {0, 2}
  const Tensor y = d.slice({range(1, -1), keel::all, range(0, keel::end, 2)});
  CHECK(y.shape() == Shape{2, 3, 2});
  F expected;
  for (int i = 1; i <= 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k <= 2; k += 2) expected.push_back(float(12 * i + 4 * j + k));
  CHECK(fv(y) == expected);
  // d[2]: [3,4], 24 + 4 j + k
  CHECK(d.slice({2}).shape() == Shape{3, 4});
  CHECK(fv(d.slice({2}))[5] == 24 + 4 + 1);
  // d[-1, -1, -1] is a scalar: 12*3 + 4*2 + 3 = 47
  CHECK(d.slice({-1, -1, -1}).shape() == Shape{});
  CHECK(d.slice({-1, -1, -1}).item<float>() == 47);
  // d[:, 1] = 12 i + 4 + k, shape [4,4]; d[..., 1] = 12 i + 4 j + 1, shape [4,3]
  CHECK(d.slice({keel::all, 1}).shape() == Shape{4, 4});
  CHECK(fv(d.slice({keel::all, 1}))[4] == 12 + 4 + 0);
  CHECK(d.slice({keel::ellipsis, 1}).shape() == Shape{4, 3});
  CHECK(fv(d.slice({keel::ellipsis, 1}))[4] == 12 + 4 + 1);
  // d[None, 0, ..., None]: [1, 3, 4, 1]; d[0, None, ::-3]: [1, 1, 4], j = 2 only (2, then -1 stops)
  CHECK(d.slice({keel::newaxis, 0, keel::ellipsis, keel::newaxis}).shape() == Shape{1, 3, 4, 1});
  const Tensor z = d.slice({0, keel::newaxis, range(keel::end, keel::end, -3)});
  CHECK(z.shape() == Shape{1, 1, 4});
  CHECK(fv(z) == F{8, 9, 10, 11});
  // An ellipsis may stand for no axis: d[0, ..., 1, 2] = d[0, 1, 2] = 4 + 2 = 6.
  CHECK(d.slice({0, keel::ellipsis, 1, 2}).item<float>() == 6);
  // Fewer entries than axes: the rest are whole; {} is all of x.
  CHECK(d.slice({1}).shape() == Shape{3, 4});
  CHECK(d.slice({}).shape() == d.shape());
  // A scalar takes only newaxis and ellipsis.
  CHECK(constant(5.0).slice({keel::newaxis}).shape() == Shape{1});
  // Integer types other than int convert (one constructor).
  const std::size_t two = 2;
  const long minus_one = -1;
  CHECK(d.slice({two, minus_one}).shape() == Shape{4});
}

TEST_CASE("slice is a view for positive steps and a copy for negative ones", "[indexing][slice]") {
  const Tensor d = d434();
  const Tensor v = d.slice({range(1, 3), keel::all, range(0, keel::end, 2)});
  CHECK(v.impl()->storage == d.impl()->storage);
  CHECK_FALSE(v.is_contiguous());
  const Tensor r = d.slice({range(keel::end, keel::end, -1)});
  CHECK(r.impl()->storage != d.impl()->storage);
  // r[i] = d[3 - i]: first element of r is d[3,0,0] = 36
  CHECK(fv(r)[0] == 36);
}

TEST_CASE("slice of non-contiguous and empty inputs", "[indexing][slice]") {
  // t = transpose(c) with c[i,j,k] = 12 i + 4 j + k of shape [2,3,4]: t[k,j,i] = c[i,j,k], [4,3,2].
  // t[::-1, 1] has shape [4,2]: row r is k = 3 - r, column i: 12 i + 4 + (3 - r).
  const Tensor t = transpose(reshape(arange(24), {2, 3, 4}));
  const Tensor y = t.slice({range(keel::end, keel::end, -1), 1});
  CHECK(y.shape() == Shape{4, 2});
  CHECK(fv(y) == F{7, 19, 6, 18, 5, 17, 4, 16});
  // A strided slice of a strided slice: t[1:, :, 1][::2] = t[1::2, :, 1] -> k in {1, 3}, i = 1
  const Tensor w = t.slice({range(1, keel::end), keel::all, 1}).slice({range(0, keel::end, 2)});
  CHECK(w.shape() == Shape{2, 3});
  CHECK(fv(w) == F{13, 17, 21, 15, 19, 23});
  // Empty axes: every range is empty, and the integer entry is checked against the size 3.
  const Tensor e = zeros({0, 3});
  CHECK(e.slice({range(keel::end, keel::end, -1), 1}).shape() == Shape{0});
  CHECK(e.slice({keel::all, range(1, keel::end)}).shape() == Shape{0, 2});
  CHECK_THROWS_AS(e.slice({0}), ValueError);
}

TEST_CASE("slice errors name the index and its bound", "[indexing][slice][errors]") {
  const Tensor c = reshape(arange(24), {2, 3, 4});
  check_error<ValueError>([&] { c.slice({2}); }, {"slice", "index 2", "[-2, 2)", "axis 0", "[2,3,4]"});
  check_error<ValueError>([&] { c.slice({0, -4}); }, {"index -4", "[-3, 3)", "axis 1"});
  check_error<ValueError>([&] { c.slice({0, 0, 0, 0}); }, {"slice", "4 indexed axes", "[2,3,4]"});
  check_error<ValueError>([&] { c.slice({keel::ellipsis, 0, keel::ellipsis}); }, {"ellipsis"});
  check_error<ValueError>([&] { c.slice({range(0, 2, 0)}); }, {"step", "axis 0"});
  CHECK_THROWS_AS(constant(1.0).slice({0}), ValueError);
  CHECK_THROWS_AS(Tensor().slice({0}), ValueError);
}

TEST_CASE("strided_slice follows tf.strided_slice", "[indexing][strided_slice]") {
  // TF's documentation example: t = [[[1,1,1],[2,2,2]], [[3,3,3],[4,4,4]], [[5,5,5],[6,6,6]]]
  const Tensor t = constant<float>({1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6}, {3, 2, 3});
  const Tensor a = strided_slice(t, {1, 0, 0}, {2, 1, 3}, {1, 1, 1});
  CHECK(a.shape() == Shape{1, 1, 3});
  CHECK(fv(a) == F{3, 3, 3});
  const Tensor b = strided_slice(t, {1, 0, 0}, {2, 2, 3}, {1, 1, 1});
  CHECK(b.shape() == Shape{1, 2, 3});
  CHECK(fv(b) == F{3, 3, 3, 4, 4, 4});
  // Negative stride on axis 1: from -1 (row 1) down to -3 (before row 0, exclusive): rows 1, 0.
  const Tensor c = strided_slice(t, {1, -1, 0}, {2, -3, 3}, {1, -1, 1});
  CHECK(c.shape() == Shape{1, 2, 3});
  CHECK(fv(c) == F{4, 4, 4, 3, 3, 3});
  // Default strides, fewer entries than axes, clamped ends.
  CHECK(strided_slice(t, {1}, {100}).shape() == Shape{2, 2, 3});
  CHECK(fv(strided_slice(t, {-1, 1}, {3, 2}, {1, 1})) == F{6, 6, 6});
  CHECK_THROWS_AS(strided_slice(t, {0}, {1}, {0}), ValueError);
  CHECK_THROWS_AS(strided_slice(t, {0, 0}, {1}), ValueError);
  CHECK_THROWS_AS(strided_slice(t, {0, 0, 0, 0}, {1, 1, 1, 1}), ValueError);
}

TEST_CASE("slice and strided_slice pass gradient checks", "[indexing][gradient]") {
  const Tensor x = wavy({4, 5});
  check_gradients([](const V& xs) { return xs[0].slice({range(1, -1), range(0, keel::end, 2)}); }, {x});
  check_gradients([](const V& xs) { return xs[0].slice({range(keel::end, keel::end, -2), range(4, 0, -3)}); }, {x});
  check_gradients([](const V& xs) { return xs[0].slice({keel::newaxis, -1, keel::ellipsis}); }, {x});
  check_gradients([](const V& xs) { return xs[0].slice({2, 3}); }, {x});
  check_gradients([](const V& xs) { return strided_slice(xs[0], {3, 1}, {-5, 5}, {-1, 2}); }, {x});
  // a non-contiguous input
  check_gradients([](const V& xs) { return transpose(xs[0]).slice({range(1, keel::end, 2), range(keel::end, 1, -1)}); },
                  {x});
  // Second order: the gradient of sum(slice(x)^2) is 2 x scattered into zeros; its own gradient
  // goes back through the scatter (a strided view of the upstream gradient).
  check_gradients([](const V& xs) {
    GradientTape inner;
    inner.watch(xs[0]);
    const Tensor s = reduce_sum(square(xs[0].slice({range(keel::end, keel::end, -2), range(1, 4)})));
    return inner.gradient(s, xs[0]) * xs[0];
  }, {x});
}

TEST_CASE("the gradient of a slice is the upstream gradient scattered into zeros", "[indexing][gradient]") {
  // y = x[::-2] of x = [x0..x4] is [x4, x2, x0]; with upstream weights [1, 2, 3] the gradient is
  // [3, 0, 2, 0, 1].
  const Tensor x = f64({1, 2, 3, 4, 5}, {5});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x.slice({range(keel::end, keel::end, -2)});
  const Tensor g = tape.gradient(reduce_sum(y * f64({1, 2, 3}, {3})), x);
  CHECK(g.to_vector<double>() == std::vector<double>{3, 0, 2, 0, 1});
}

TEST_CASE("Variable::assign(value, spec) writes a slice in place", "[indexing][variable]") {
  Variable v(arange(10), "v");
  v.assign(constant<float>({100, 101}, {2}), {range(1, 3)});  // v[1:3] = [100, 101]
  CHECK(fv(v.peek()) == F{0, 100, 101, 3, 4, 5, 6, 7, 8, 9});
  // v[::-4] is v[9], v[5], v[1]
  v.assign(constant<float>({-1, -2, -3}, {3}), {range(keel::end, keel::end, -4)});
  CHECK(fv(v.peek()) == F{0, -3, 101, 3, 4, -2, 6, 7, 8, -1});
  // v2[1] = [7, 8, 9] on a [2,3] variable; v2[:, None, 0] = [[5], [6]] (shape [2,1])
  Variable v2(zeros({2, 3}), "v2");
  v2.assign(constant<float>({7, 8, 9}, {3}), {1});
  v2.assign(constant<float>({5, 6}, {2, 1}), {keel::all, keel::newaxis, 0});
  CHECK(fv(v2.peek()) == F{5, 0, 0, 6, 8, 9});
  // an empty slice accepts an empty value
  v2.assign(zeros({0, 3}), {range(2, keel::end)});
  // the value may be a view of the variable itself: v[0:5] = v[5:10][::-1]
  Variable w(arange(10), "w");
  w.assign(w.peek().slice({range(9, 4, -1)}), {range(0, 5)});
  CHECK(fv(w.peek()) == F{9, 8, 7, 6, 5, 5, 6, 7, 8, 9});
  check_error<ShapeError>([&] { v2.assign(zeros({2}), {1}); }, {"Variable.assign", "[2]", "[3]"});
  CHECK_THROWS_AS(v2.assign(zeros({3}, DType::float64), {1}), DTypeError);
  check_error<ValueError>([&] { v2.assign(zeros({3}), {2}); }, {"index 2", "[-2, 2)"});
}

TEST_CASE("a sliced assign bumps the version a tape checks", "[indexing][variable]") {
  Variable v(constant<double>({1, 2, 3}, {3}), "v");
  GradientTape tape;
  const Tensor y = reduce_sum(square(v.value()));  // square saves v's value for backward
  v.assign(constant<double>({9}, {1}), {range(0, 1)});
  CHECK_THROWS_AS(tape.gradient(y, v), Error);
}

TEST_CASE("copies of short contiguous runs (a few columns) take every element from its place", "[slice][copy]") {
  // A slice of a few columns and a concat along a short last axis copy runs of 1 to 128 bytes one
  // stride apart as fixed-size moves (and other sizes as calls): every element checked against
  // its source, for 1-, 2-, 4- and 8-byte elements, at 1 and 2 threads.
  const int threads = config::num_threads();
  for (int t : {1, 2}) {
    config::set_num_threads(t);
    for (DType dt : {DType::uint8, DType::float16, DType::float32, DType::float64})
      for (std::int64_t cols : {1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 33}) {
        INFO(name(dt) << ", " << cols << " columns, threads " << t);
        const std::int64_t rows = 9000, wide = cols + 3;
        const Tensor x = cast(reshape(mod(arange(0.0, static_cast<double>(rows * wide)), 97.0), {rows, wide}), dt);
        const std::vector<double> xv = x.to_vector<double>();
        const std::vector<double> s = slice(x, {0, 1}, {rows, cols}).contiguous().to_vector<double>();
        const std::vector<double> c = concat({slice(x, {0, 0}, {rows, cols}), x}, 1).to_vector<double>();
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < cols; ++j) {
            REQUIRE(s[static_cast<std::size_t>(r * cols + j)] == xv[static_cast<std::size_t>(r * wide + 1 + j)]);
            REQUIRE(c[static_cast<std::size_t>(r * (cols + wide) + j)] == xv[static_cast<std::size_t>(r * wide + j)]);
          }
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < wide; ++j)
            REQUIRE(c[static_cast<std::size_t>(r * (cols + wide) + cols + j)] ==
                    xv[static_cast<std::size_t>(r * wide + j)]);
      }
  }
  config::set_num_threads(threads);
}
