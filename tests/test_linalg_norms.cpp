// keel::linalg norms and matrix structure: norm (vector and matrix orders), trace, diag,
// diag_part, band_part, tril / triu and matrix_transpose. Hand-derived values, edge cases,
// errors and float64 gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.hpp"
#include "linalg_fixtures.hpp"

using namespace keel;
using namespace linalg_test;
using Catch::Contains;

namespace {
const double inf = std::numeric_limits<double>::infinity();
// x = [[1, -2], [3, 4]]
Tensor x22() { return f64({1, -2, 3, 4}, {2, 2}); }
// c[i, j] = 3 i + j, [3, 3]
Tensor c33() { return f64({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3}); }
}  // namespace

TEST_CASE("norm: vector norms over all elements and over one axis", "[linalg][norm]") {
  // all four elements as one vector: sqrt(1 + 4 + 9 + 16) = sqrt 30
  check_close(linalg::norm(x22()), {std::sqrt(30.0)});
  CHECK(linalg::norm(x22()).shape() == Shape{});
  CHECK(linalg::norm(x22(), "euclidean", {}, true).shape() == Shape{1, 1});
  check_close(linalg::norm(x22(), 1), {10});    // 1 + 2 + 3 + 4
  check_close(linalg::norm(x22(), inf), {4});   // max |x|
  check_close(linalg::norm(x22(), 2), {std::sqrt(30.0)});
  // over the last axis: rows [1, -2] and [3, 4]
  check_close(linalg::norm(x22(), 2, {-1}), {std::sqrt(5.0), 5});
  check_close(linalg::norm(x22(), 1, {1}), {3, 7});
  check_close(linalg::norm(x22(), inf, {-1}), {2, 4});
  check_close(linalg::norm(x22(), 3, {-1}), {std::cbrt(9.0), std::cbrt(91.0)});  // (1 + 8)^(1/3), (27 + 64)^(1/3)
  check_close(linalg::norm(x22(), 0.5, {0}), {std::pow(1 + std::sqrt(3.0), 2), std::pow(std::sqrt(2.0) + 2, 2)});
  // over axis 0 of a transposed view = over axis 1 of x
  check_close(linalg::norm(linalg::matrix_transpose(x22()), 1, {0}), {3, 7});
  CHECK(linalg::norm(x22(), 1, {0}, true).shape() == Shape{1, 2});
  check_close(linalg::norm(f32({3, 4}, {2})), {5}, 1e-6);
  check_close(linalg::norm(zeros({0, 3}, DType::float64), 2, {0}), {0, 0, 0});
}

TEST_CASE("norm: matrix norms over two axes", "[linalg][norm]") {
  // Frobenius sqrt 30; 1: the largest column sum of |x| ([4, 6]) = 6; inf: the largest row sum
  // ([3, 7]) = 7; 2: the largest singular value, sqrt of the largest eigenvalue of
  // x^T x = [[10, 10], [10, 20]], 15 + sqrt(25 + 100).
  check_close(linalg::norm(x22(), "fro", {-2, -1}), {std::sqrt(30.0)});
  check_close(linalg::norm(x22(), "euclidean", {0, 1}), {std::sqrt(30.0)});
  check_close(linalg::norm(x22(), 1, {-2, -1}), {6});
  check_close(linalg::norm(x22(), inf, {-2, -1}), {7});
  check_close(linalg::norm(x22(), 2, {-2, -1}), {std::sqrt(15 + std::sqrt(125.0))}, 1e-12);
  // swapped axes transpose the matrix: the 1- and inf-norms trade places
  check_close(linalg::norm(x22(), 1, {1, 0}), {7});
  // batched over a middle axis: matrices along axes 0 and 2 of [2, 3, 2]
  const Tensor b = stack({x22(), x22() * 2.0, x22() * 3.0}, 1);  // b[:, j, :] = (j + 1) x
  check_close(linalg::norm(b, inf, {0, 2}), {7, 14, 21});
  check_close(linalg::norm(b, 2, {0, 2}), {std::sqrt(15 + std::sqrt(125.0)), 2 * std::sqrt(15 + std::sqrt(125.0)),
                                            3 * std::sqrt(15 + std::sqrt(125.0))}, 1e-12);
  CHECK(linalg::norm(b, 2, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(linalg::norm(b, 1, {2, 0}, true).shape() == Shape{1, 3, 1});
}

TEST_CASE("norm rejects orders and axes TensorFlow rejects", "[linalg][norm][errors]") {
  CHECK_THROWS_AS(linalg::norm(x22(), "fro"), ValueError);          // a matrix norm needs two axes
  CHECK_THROWS_AS(linalg::norm(x22(), "nuclear", {0, 1}), ValueError);
  CHECK_THROWS_AS(linalg::norm(x22(), 3, {0, 1}), ValueError);      // no matrix 3-norm
  CHECK_THROWS_WITH(linalg::norm(x22(), 3, {0, 1}), Contains("norm") && Contains("3"));
  CHECK_THROWS_AS(linalg::norm(x22(), 0), ValueError);
  CHECK_THROWS_AS(linalg::norm(x22(), -1), ValueError);
  CHECK_THROWS_AS(linalg::norm(x22(), 2, {0, 0}), ValueError);
  CHECK_THROWS_AS(linalg::norm(x22(), 2, {0, 1, 1}), ValueError);
  CHECK_THROWS_AS(linalg::norm(x22(), 2, {2}), ValueError);
  CHECK_THROWS_AS(linalg::norm(ones({2}, DType::int32)), DTypeError);
}

TEST_CASE("trace, diag and diag_part", "[linalg][diag]") {
  // [[1, 2, 3], [4, 5, 6]]: the diagonal is [1, 5], its sum 6
  const Tensor x = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  check_close(linalg::diag_part(x), {1, 5});
  check_close(linalg::trace(x), {6});
  check_close(linalg::diag_part(linalg::matrix_transpose(x)), {1, 5});
  // batched: c and 10 c, diagonals [0, 4, 8] and [0, 40, 80]
  const Tensor b = stack({c33(), c33() * 10.0});
  check_close(linalg::diag_part(b), {0, 4, 8, 0, 40, 80});
  check_close(linalg::trace(b), {12, 120});
  CHECK(linalg::trace(zeros({2, 0, 3}, DType::float64)).shape() == Shape{2});
  check_close(linalg::trace(zeros({2, 0, 3}, DType::float64)), {0, 0});
  // diag: [[1, 2], [3, 4]] rows as diagonals of [2, 2, 2]
  const Tensor d = linalg::diag(f64({1, 2, 3, 4}, {2, 2}));
  CHECK(d.shape() == Shape{2, 2, 2});
  check_close(d, {1, 0, 0, 2, 3, 0, 0, 4});
  check_close(linalg::diag_part(d), {1, 2, 3, 4});
  CHECK(linalg::diag(ones({3}, DType::int32)).dtype() == DType::int32);
  CHECK_THROWS_AS(linalg::diag_part(ones({3}, DType::float64)), ShapeError);
  CHECK_THROWS_AS(linalg::diag(ones({}, DType::float64)), ShapeError);
}

TEST_CASE("band_part, tril, triu and matrix_transpose", "[linalg][band_part]") {
  // c[i, j] = 3 i + j. band (1, 0) keeps i - j <= 1 and j <= i: the diagonal and the one below.
  check_close(linalg::band_part(c33(), 1, 0), {0, 0, 0, 3, 4, 0, 0, 7, 8});
  check_close(linalg::band_part(c33(), 0, -1), {0, 1, 2, 0, 4, 5, 0, 0, 8});  // upper triangle
  check_close(linalg::band_part(c33(), -1, -1), c33().to_vector<double>());
  check_close(linalg::band_part(c33(), 0, 0), {0, 0, 0, 0, 4, 0, 0, 0, 8});
  // tril keeps j - i <= k, triu keeps j - i >= k (numpy's)
  check_close(tril(c33()), {0, 0, 0, 3, 4, 0, 6, 7, 8});
  check_close(tril(c33(), -1), {0, 0, 0, 3, 0, 0, 6, 7, 0});
  check_close(tril(c33(), 1), {0, 1, 0, 3, 4, 5, 6, 7, 8});
  check_close(triu(c33()), {0, 1, 2, 0, 4, 5, 0, 0, 8});
  check_close(triu(c33(), 1), {0, 1, 2, 0, 0, 5, 0, 0, 0});
  check_close(triu(c33(), -1), {0, 1, 2, 3, 4, 5, 0, 7, 8});
  // non-square, batched, of a view: the transpose of [[0, 3, 6], [1, 4, 7]] rows
  const Tensor t = linalg::matrix_transpose(slice(c33(), {0, 0}, {2, 3}));  // [[0, 3], [1, 4], [2, 5]]
  check_close(t, {0, 3, 1, 4, 2, 5});
  check_close(tril(t), {0, 0, 1, 4, 2, 5});
  check_close(triu(stack({t, t})), {0, 3, 0, 4, 0, 0, 0, 3, 0, 4, 0, 0});
  CHECK(linalg::matrix_transpose(zeros({2, 3, 4})).shape() == Shape{2, 4, 3});
  CHECK_THROWS_AS(linalg::matrix_transpose(zeros({3})), ShapeError);
  CHECK_THROWS_AS(tril(zeros({3})), ShapeError);
}

TEST_CASE("gradients of norms and of the structure ops match finite differences", "[linalg][gradients]") {
  const Tensor x = sample({2, 3, 4}, 0.3) + 0.05;
  for (const double p : {1.0, 2.0, 3.0, inf}) {
    INFO("ord " << p);
    check_gradients([p](const std::vector<Tensor>& in) { return linalg::norm(in[0], p, {-1}); }, {x});
    check_gradients([p](const std::vector<Tensor>& in) { return linalg::norm(in[0], p); }, {x});
    if (p != 3.0)
      check_gradients([p](const std::vector<Tensor>& in) { return linalg::norm(in[0], p, {-2, -1}); }, {x});
  }
  check_gradients([](const std::vector<Tensor>& in) { return linalg::norm(in[0], "fro", {0, 2}); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::trace(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::diag_part(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::diag(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::band_part(in[0], 1, 0); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return tril(in[0], -1) + triu(in[0], 2); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::matrix_transpose(in[0]); }, {x});
}
