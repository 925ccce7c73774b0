// keel::linalg inverses, solves and determinants: inv, solve, triangular_solve, cholesky_solve,
// det, slogdet, lstsq and pinv. Values derived by hand, identities on batches and views, errors,
// and float64 gradient checks.
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

TEST_CASE("inv of a 2x2 matrix by the adjugate formula", "[linalg][inv]") {
  // [[4, 7], [2, 6]]: det = 4*6 - 7*2 = 10, inverse = [[6, -7], [-2, 4]] / 10.
  const Tensor a = f64({4, 7, 2, 6}, {2, 2});
  check_close(linalg::inv(a), {0.6, -0.7, -0.2, 0.4});
  // float32 too, to float32 accuracy
  check_close(linalg::inv(f32({4, 7, 2, 6}, {2, 2})), {0.6, -0.7, -0.2, 0.4}, 1e-6);
  CHECK(linalg::inv(f32({4, 7, 2, 6}, {2, 2})).dtype() == DType::float32);
}

TEST_CASE("inv is batched, reads views and returns A^-1 with A A^-1 = I", "[linalg][inv]") {
  const Tensor a = sample({2, 3, 4, 4}, 0.4, 4.0);
  const Tensor x = linalg::inv(a);
  CHECK(x.shape() == Shape{2, 3, 4, 4});
  check_close(matmul(a, x), broadcast_to(eye(4, DType::float64), {2, 3, 4, 4}), 1e-12);
  // each batch element equals the inverse of that matrix alone
  check_close(x[1][2], linalg::inv(a[1][2]), 1e-13);
  // a transposed view: inv(A^T) = inv(A)^T
  check_close(linalg::inv(linalg::matrix_transpose(a)), linalg::matrix_transpose(x), 1e-12);
  // empty batch and 0x0 matrices
  CHECK(linalg::inv(zeros({0, 3, 3}, DType::float64)).shape() == Shape{0, 3, 3});
  CHECK(linalg::inv(zeros({2, 0, 0}, DType::float64)).shape() == Shape{2, 0, 0});
}

TEST_CASE("inv and solve reject singular, non-square and integer matrices", "[linalg][inv][solve][errors]") {
  // batch element [1] is [[1, 2], [2, 4]]: the second row is twice the first
  const Tensor a = f64({1, 0, 0, 1, 1, 2, 2, 4}, {2, 2, 2});
  CHECK_THROWS_AS(linalg::inv(a), ValueError);
  CHECK_THROWS_WITH(linalg::inv(a), Contains("inv") && Contains("singular") && Contains("matrix 1") &&
                                        Contains("[2,2,2]"));
  CHECK_THROWS_AS(linalg::solve(a, ones({2, 2, 1}, DType::float64)), ValueError);
  CHECK_THROWS_WITH(linalg::solve(a, ones({2, 2, 1}, DType::float64)), Contains("solve") && Contains("singular"));
  CHECK_THROWS_AS(linalg::inv(zeros({2, 3}, DType::float64)), ShapeError);
  CHECK_THROWS_AS(linalg::inv(zeros({3}, DType::float64)), ShapeError);
  CHECK_THROWS_AS(linalg::inv(zeros({2, 2}, DType::int32)), DTypeError);
  CHECK_THROWS_AS(linalg::det(zeros({2, 2}, DType::int64)), DTypeError);
  CHECK_THROWS_AS(linalg::solve(eye(2, DType::float64), ones({3, 1}, DType::float64)), ShapeError);
  CHECK_THROWS_WITH(linalg::solve(eye(2, DType::float64), ones({3, 1}, DType::float64)),
                    Contains("solve") && Contains("[3,1]"));
  CHECK_THROWS_AS(linalg::solve(eye(2, DType::float64), ones({2, 1}, DType::float32)), DTypeError);
}

TEST_CASE("solve: matrix x = rhs, with adjoint and batches", "[linalg][solve]") {
  // [[3, 1], [1, 2]] x = [9, 8]: x = [2, 3] (3*2 + 3 = 9, 2 + 2*3 = 8).
  const Tensor a = f64({3, 1, 1, 2}, {2, 2});
  check_close(linalg::solve(a, f64({9, 8}, {2, 1})), {2, 3});
  // two right-hand sides at once: columns [9, 8] and [1, 2] -> x columns [2, 3] and [0, 1]
  check_close(linalg::solve(a, f64({9, 1, 8, 2}, {2, 2})), {2, 0, 3, 1});
  // adjoint: [[1, 2], [3, 4]]^T x = [[1, 3], [2, 4]] x = [7, 10] -> x = [1, 2]
  check_close(linalg::solve(f64({1, 2, 3, 4}, {2, 2}), f64({7, 10}, {2, 1}), true), {1, 2});
  // batched, with a transposed rhs view and a broadcast matrix
  const Tensor m = sample({3, 3, 3}, 0.1, 3.0);
  const Tensor b = linalg::matrix_transpose(sample({3, 4, 3}, 0.9));  // [3, 3, 4], not contiguous
  const Tensor x = linalg::solve(m, b);
  check_close(matmul(m, x), b, 1e-12);
  const Tensor xa = linalg::solve(m, b, true);
  check_close(matmul(m, xa, true, false), b, 1e-12);
  const Tensor xb = linalg::solve(m[0], b);  // [3,3] against [3,3,4]: the matrix broadcasts
  check_close(matmul(m[0], xb), b, 1e-12);
}

TEST_CASE("triangular_solve reads one triangle and solves op(L) x = b", "[linalg][triangular_solve]") {
  // lower [[2, 0], [3, 1]] x = [4, 7]: x0 = 4/2 = 2, x1 = 7 - 3*2 = 1. The 9 above the diagonal is
  // never read.
  const Tensor l = f64({2, 9, 3, 1}, {2, 2});
  check_close(linalg::triangular_solve(l, f64({4, 7}, {2, 1})), {2, 1});
  // adjoint: L^T = [[2, 3], [0, 1]]: x1 = 7, x0 = (4 - 3*7) / 2 = -8.5
  check_close(linalg::triangular_solve(l, f64({4, 7}, {2, 1}), true, true), {-8.5, 7});
  // upper: [[2, 9], [0, 1]] (the 3 below is not read): x1 = 7, x0 = (4 - 63) / 2 = -29.5
  check_close(linalg::triangular_solve(l, f64({4, 7}, {2, 1}), false), {-29.5, 7});
  CHECK_THROWS_AS(linalg::triangular_solve(f64({0, 0, 1, 1}, {2, 2}), f64({1, 1}, {2, 1})), ValueError);
  CHECK_THROWS_WITH(linalg::triangular_solve(f64({0, 0, 1, 1}, {2, 2}), f64({1, 1}, {2, 1})),
                    Contains("triangular_solve") && Contains("diagonal"));
  // batch broadcasting: [2, 3, 3] matrices against one [3, 2] rhs
  const Tensor lb = linalg::band_part(sample({2, 3, 3}, 0.3, 3.0), -1, 0);
  const Tensor rhs = sample({3, 2}, 1.1);
  const Tensor x = linalg::triangular_solve(lb, rhs);
  CHECK(x.shape() == Shape{2, 3, 2});
  check_close(matmul(lb, x), broadcast_to(rhs, {2, 3, 2}), 1e-12);
}

TEST_CASE("cholesky_solve solves with the factor of a positive definite matrix", "[linalg][cholesky_solve]") {
  // A = [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]]; A x = [8, 7] -> x = [1.25, 1.5]
  // (4*1.25 + 2*1.5 = 8, 2*1.25 + 3*1.5 = 7).
  const Tensor a = f64({4, 2, 2, 3}, {2, 2});
  check_close(linalg::cholesky_solve(linalg::cholesky(a), f64({8, 7}, {2, 1})), {1.25, 1.5}, 1e-12);
}

TEST_CASE("det and slogdet by cofactor expansion", "[linalg][det]") {
  // [[2, 0, 1], [1, 3, 2], [1, 1, 2]]: 2 (3*2 - 2*1) - 0 + 1 (1*1 - 3*1) = 8 - 2 = 6.
  const Tensor a = f64({2, 0, 1, 1, 3, 2, 1, 1, 2}, {3, 3});
  check_close(linalg::det(a), {6});
  CHECK(linalg::det(a).shape() == Shape{});
  // a row swap flips the sign: det = -6; slogdet gives sign -1, log 6
  const Tensor swapped = f64({1, 3, 2, 2, 0, 1, 1, 1, 2}, {3, 3});
  check_close(linalg::det(swapped), {-6});
  const linalg::Slogdet sl = linalg::slogdet(swapped);
  check_close(sl.sign, {-1});
  check_close(sl.log_abs_determinant, {std::log(6.0)});
  // batched, a transposed view (det A^T = det A), a singular matrix (a zero row: det 0, sign 0,
  // log -inf), and the empty matrix (det 1)
  const Tensor batch = stack({a, linalg::matrix_transpose(swapped), f64({1, 2, 3, 0, 0, 0, 4, 5, 6}, {3, 3})});
  check_close(linalg::det(batch), {6, -6, 0});
  const linalg::Slogdet sb = linalg::slogdet(batch);
  check_close(sb.sign, {1, -1, 0});
  const D logs = sb.log_abs_determinant.to_vector<double>();
  CHECK(logs[1] == Approx(std::log(6.0)));
  CHECK(std::isinf(logs[2]));
  CHECK(logs[2] < 0);
  check_close(linalg::det(zeros({2, 0, 0}, DType::float64)), {1, 1});
  CHECK_THROWS_AS(linalg::det(zeros({2, 3}, DType::float64)), ShapeError);
}

TEST_CASE("lstsq fits a line by least squares, fast and minimum-norm paths", "[linalg][lstsq]") {
  // y = c0 + c1 t at t = 0, 1, 2 with y = [1, 2, 4]: A^T A = [[3, 3], [3, 5]], A^T y = [7, 10];
  // (A^T A)^-1 = [[5, -3], [-3, 3]] / 6, so c = [35 - 30, -21 + 30] / 6 = [5/6, 3/2].
  const Tensor a = f64({1, 0, 1, 1, 1, 2}, {3, 2});
  const Tensor y = f64({1, 2, 4}, {3, 1});
  check_close(linalg::lstsq(a, y), {5.0 / 6, 1.5}, 1e-12);
  check_close(linalg::lstsq(a, y, 0, false), {5.0 / 6, 1.5}, 1e-12);
  // ridge: (A^T A + I) c = A^T y: [[4, 3], [3, 6]] c = [7, 10] -> det 15, c = [42 - 30, 40 - 21] / 15
  check_close(linalg::lstsq(a, y, 1.0), {12.0 / 15, 19.0 / 15}, 1e-12);
  // underdetermined [1, 1] c = 2: the minimum-norm solution is [1, 1]
  check_close(linalg::lstsq(f64({1, 1}, {1, 2}), f64({2}, {1, 1})), {1, 1}, 1e-12);
  // rank deficient: [[1, 0], [1, 0]] c = [2, 2] (a zero column): the Gram matrix [[2, 0], [0, 0]]
  // has no Cholesky factor; the pseudo-inverse gives the minimum-norm solution [2, 0]
  const Tensor rd = f64({1, 0, 1, 0}, {2, 2});
  CHECK_THROWS_AS(linalg::lstsq(rd, f64({2, 2}, {2, 1})), ValueError);
  CHECK_THROWS_WITH(linalg::lstsq(rd, f64({2, 2}, {2, 1})), Contains("lstsq") && Contains("positive definite"));
  check_close(linalg::lstsq(rd, f64({2, 2}, {2, 1}), 0, false), {2, 0}, 1e-12);
  CHECK_THROWS_AS(linalg::lstsq(a, y, -1.0), ValueError);
  CHECK_THROWS_AS(linalg::lstsq(a, f64({1, 2}, {2, 1})), ShapeError);
}

TEST_CASE("pinv of full-rank and rank-one matrices", "[linalg][pinv]") {
  // A = a a^T with a = [1, 2]: pinv(A) = A / |a|^4 = A / 25.
  check_close(linalg::pinv(f64({1, 2, 2, 4}, {2, 2})), {0.04, 0.08, 0.08, 0.16}, 1e-12);
  // tall full column rank: pinv = (A^T A)^-1 A^T, and pinv(A) A = I
  const Tensor a = sample({2, 4, 3}, 0.5);
  const Tensor p = linalg::pinv(a);
  CHECK(p.shape() == Shape{2, 3, 4});
  check_close(matmul(p, a), broadcast_to(eye(3, DType::float64), {2, 3, 3}), 1e-12);
  check_close(p, matmul(linalg::inv(matmul(a, a, true, false)), a, false, true), 1e-10);
  CHECK(linalg::pinv(zeros({3, 0}, DType::float64)).shape() == Shape{0, 3});
}

TEST_CASE("gradients of inv, solve and triangular_solve match finite differences", "[linalg][gradients]") {
  const Tensor a = sample({2, 3, 3}, 0.7, 3.0);
  check_gradients([](const std::vector<Tensor>& in) { return linalg::inv(in[0]); }, {a});
  const Tensor b = sample({2, 3, 2}, 1.9);
  for (const bool adjoint : {false, true}) {
    INFO("adjoint " << adjoint);
    check_gradients([adjoint](const std::vector<Tensor>& in) { return linalg::solve(in[0], in[1], adjoint); },
                    {a, b});
  }
  for (const bool lower : {true, false})
    for (const bool adjoint : {false, true}) {
      INFO("lower " << lower << ", adjoint " << adjoint);
      check_gradients([lower, adjoint](const std::vector<Tensor>& in) {
        return linalg::triangular_solve(in[0], in[1], lower, adjoint);
      }, {a, b});
    }
  // broadcast batch: the matrix's gradient sums over the rhs batch
  check_gradients([](const std::vector<Tensor>& in) { return linalg::triangular_solve(in[0], in[1]); },
                  {sample({3, 3}, 0.2, 3.0), b});
}

TEST_CASE("gradients of cholesky_solve, det, slogdet, lstsq and pinv match finite differences",
          "[linalg][gradients]") {
  const Tensor l = linalg::band_part(sample({3, 3}, 0.4, 3.0), -1, 0);
  check_gradients([](const std::vector<Tensor>& in) { return linalg::cholesky_solve(in[0], in[1]); },
                  {l, sample({3, 2}, 0.8)});
  const Tensor a = sample({2, 3, 3}, 1.7, 2.0);
  check_gradients([](const std::vector<Tensor>& in) { return linalg::det(in[0]); }, {a});
  check_gradients([](const std::vector<Tensor>& in) { return linalg::slogdet(in[0]).log_abs_determinant; }, {a});
  const Tensor tall = sample({4, 2}, 0.3), wide = sample({2, 4}, 0.6);
  for (const double l2 : {0.0, 0.5}) {
    INFO("l2_regularizer " << l2);
    check_gradients([l2](const std::vector<Tensor>& in) { return linalg::lstsq(in[0], in[1], l2); },
                    {tall, sample({4, 3}, 0.1)});
    check_gradients([l2](const std::vector<Tensor>& in) { return linalg::lstsq(in[0], in[1], l2); },
                    {wide, sample({2, 3}, 0.1)});
  }
  check_gradients([](const std::vector<Tensor>& in) { return linalg::lstsq(in[0], in[1], 0, false); },
                  {tall, sample({4, 1}, 0.1)}, 1e-6, 1e-5);
  check_gradients([](const std::vector<Tensor>& in) { return linalg::pinv(in[0]); }, {sample({2, 3, 2}, 0.9)}, 1e-6,
                  1e-5);
}

TEST_CASE("inv and solve replay inside keel::function, and a singular matrix still raises there",
          "[linalg][function]") {
  auto f = keel::function([](const Tensor& a, const Tensor& b) { return linalg::solve(a, b) + linalg::inv(a); });
  const Tensor a = sample({3, 3}, 0.3, 3.0), b = sample({3, 3}, 0.4);
  check_close(f(a, b), linalg::solve(a, b) + linalg::inv(a), 1e-12);
  const Tensor a2 = sample({3, 3}, 0.5, 3.0);  // a replay on new values
  check_close(f(a2, b), linalg::solve(a2, b) + linalg::inv(a2), 1e-12);
  CHECK_THROWS_AS(f(zeros({3, 3}, DType::float64), b), ValueError);
  CHECK_THROWS_WITH(f(zeros({3, 3}, DType::float64), b), Contains("singular"));
}
