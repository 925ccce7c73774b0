// keel::linalg factorizations: cholesky, qr, svd and eigh. Hand-derived 2x2 values,
// reconstructions on batches and views, errors, and float64 gradient checks (of functions that do
// not depend on the arbitrary signs of singular vectors and eigenvectors).
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "linalg_fixtures.hpp"

using namespace keel;
using namespace linalg_test;
using Catch::Contains;

namespace {

// u diag(w) v^T: unchanged when a singular vector pair (or an eigenvector) flips its sign.
Tensor weighted_outer(const Tensor& u, const Tensor& w, const Tensor& v) {
  return matmul(u * expand_dims(w, -2), v, false, true);
}

// x[..., :, :k]
Tensor first_cols(const Tensor& x, std::int64_t k) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), size(static_cast<std::size_t>(x.rank()), -1);
  size.back() = k;
  return slice(x, begin, size);
}

// x^T x = I for the columns of x (batched)
void check_orthonormal_columns(const Tensor& x) {
  const Tensor g = matmul(x, x, true, false);
  check_close(g, broadcast_to(eye(x.shape()[x.rank() - 1], DType::float64), g.shape()), 1e-12);
}

}  // namespace

TEST_CASE("cholesky of a 2x2 matrix by hand, batched and from the lower triangle", "[linalg][cholesky]") {
  // [[4, 2], [2, 3]]: l11 = sqrt 4 = 2, l21 = 2 / 2 = 1, l22 = sqrt(3 - 1^2) = sqrt 2.
  const Tensor a = f64({4, 2, 2, 3}, {2, 2});
  check_close(linalg::cholesky(a), {2, 0, 1, std::sqrt(2.0)});
  check_close(linalg::cholesky(f32({4, 2, 2, 3}, {2, 2})), {2, 0, 1, std::sqrt(2.0)}, 1e-6);
  // only the lower triangle is read (TensorFlow's convention): a 99 above changes nothing
  check_close(linalg::cholesky(f64({4, 99, 2, 3}, {2, 2})), {2, 0, 1, std::sqrt(2.0)});
  // batched L L^T = A, of a transposed (non-contiguous) view of symmetric matrices
  const Tensor w = sample({3, 4, 4}, 0.5);
  const Tensor spd = matmul(w, w, false, true) + eye(4, DType::float64);
  const Tensor l = linalg::cholesky(linalg::matrix_transpose(spd));
  check_close(matmul(l, l, false, true), spd, 1e-12);
  check_close(l, linalg::band_part(l, -1, 0), 0);  // zeros above the diagonal
  CHECK(linalg::cholesky(zeros({0, 2, 2}, DType::float64)).shape() == Shape{0, 2, 2});
}

TEST_CASE("cholesky rejects matrices that are not positive definite", "[linalg][cholesky][errors]") {
  // batch [0, 1]: [[1, 2], [2, 1]] has eigenvalues 3 and -1
  const Tensor a = stack({stack({eye(2, DType::float64), f64({1, 2, 2, 1}, {2, 2})})});
  REQUIRE(a.shape() == Shape{1, 2, 2, 2});
  CHECK_THROWS_AS(linalg::cholesky(a), ValueError);
  CHECK_THROWS_WITH(linalg::cholesky(a), Contains("cholesky") && Contains("not positive definite") &&
                                             Contains("matrix 1") && Contains("[0,1]") && Contains("[1,2,2,2]"));
  CHECK_THROWS_AS(linalg::cholesky(zeros({2, 3}, DType::float64)), ShapeError);
  CHECK_THROWS_AS(linalg::cholesky(zeros({2, 2}, DType::int32)), DTypeError);
}

TEST_CASE("qr of a 2x2 matrix by hand and reconstructions of all shapes", "[linalg][qr]") {
  // [[3, 1], [4, 2]]: the first column has norm 5, so |r11| = 5 and q1 = +-[3, 4] / 5;
  // r12 = q1 . [1, 2] = +-(3 + 8) / 5 = +-2.2 with r11's sign; |r22| = |det| / 5 = |6 - 4| / 5 = 0.4.
  const linalg::QR f = linalg::qr(f64({3, 1, 4, 2}, {2, 2}));
  const D r = f.r.to_vector<double>();
  CHECK(std::abs(r[0]) == Approx(5));
  CHECK(r[1] / r[0] == Approx(2.2 / 5));
  CHECK(r[2] == 0);
  CHECK(std::abs(r[3]) == Approx(0.4));
  check_close(matmul(f.q, f.r), {3, 1, 4, 2}, 1e-12);
  for (const bool full : {false, true})
    for (const Shape& s : {Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{4, 4}}) {
      INFO("shape " << s.to_string() << ", full_matrices " << full);
      const Tensor a = sample(s, 0.3);
      const linalg::QR d = linalg::qr(a, full);
      const std::int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], c = full ? m : std::min(m, n);
      CHECK(d.q.shape()[d.q.rank() - 2] == m);
      CHECK(d.q.shape()[d.q.rank() - 1] == c);
      CHECK(d.r.shape()[d.r.rank() - 2] == c);
      CHECK(d.r.shape()[d.r.rank() - 1] == n);
      check_close(matmul(d.q, d.r), a, 1e-12);
      check_orthonormal_columns(d.q);
      check_close(d.r, triu(d.r), 0);
    }
  // a transposed view as input; an empty matrix
  const Tensor t = linalg::matrix_transpose(sample({3, 4}, 0.8));
  const linalg::QR dt = linalg::qr(t);
  check_close(matmul(dt.q, dt.r), t, 1e-12);
  CHECK(linalg::qr(zeros({3, 0}, DType::float64)).q.shape() == Shape{3, 0});
  check_close(linalg::qr(zeros({3, 0}, DType::float64), true).q, eye(3, DType::float64), 0);
  CHECK_THROWS_AS(linalg::qr(zeros({3}, DType::float64)), ShapeError);
}

TEST_CASE("svd of 2x2 matrices by hand and reconstructions", "[linalg][svd]") {
  // [[3, 0], [4, 5]]: A^T A = [[25, 20], [20, 25]] has eigenvalues 45 and 5, so s = [sqrt 45, sqrt 5].
  const Tensor a = f64({3, 0, 4, 5}, {2, 2});
  check_close(linalg::svd(a).s, {std::sqrt(45.0), std::sqrt(5.0)}, 1e-12);
  check_close(linalg::svd(a, false, false).s, {std::sqrt(45.0), std::sqrt(5.0)}, 1e-12);
  CHECK_FALSE(linalg::svd(a, false, false).u.defined());
  check_close(linalg::svd(f32({3, 0, 4, 5}, {2, 2})).s, {std::sqrt(45.0), std::sqrt(5.0)}, 1e-6);
  for (const bool full : {false, true})
    for (const Shape& s : {Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{3, 3}}) {
      INFO("shape " << s.to_string() << ", full_matrices " << full);
      const Tensor x = sample(s, 0.7);
      const linalg::SVD d = linalg::svd(x, full);
      const std::int64_t m = s[s.rank() - 2], n = s[s.rank() - 1], k = std::min(m, n);
      CHECK(d.s.shape()[d.s.rank() - 1] == k);
      CHECK(d.u.shape()[d.u.rank() - 2] == m);
      CHECK(d.u.shape()[d.u.rank() - 1] == (full ? m : k));
      CHECK(d.v.shape()[d.v.rank() - 2] == n);
      CHECK(d.v.shape()[d.v.rank() - 1] == (full ? n : k));
      check_orthonormal_columns(d.u);
      check_orthonormal_columns(d.v);
      // u[:, :k] diag(s) v[:, :k]^T = x
      check_close(weighted_outer(first_cols(d.u, k), d.s, first_cols(d.v, k)), x, 1e-12);
      // s descending and non-negative, in every matrix of the batch
      const D sv = d.s.to_vector<double>();
      for (std::size_t i = 0; i < sv.size(); ++i) {
        CHECK(sv[i] >= 0);
        if ((i + 1) % static_cast<std::size_t>(k) != 0) CHECK(sv[i] >= sv[i + 1]);
      }
    }
  // a transposed view: the singular values of x^T are those of x
  const Tensor x = sample({4, 3}, 0.1);
  check_close(linalg::svd(linalg::matrix_transpose(x)).s, linalg::svd(x).s, 1e-12);
  CHECK(linalg::svd(zeros({3, 0}, DType::float64)).s.shape() == Shape{0});
  CHECK_THROWS_AS(linalg::svd(zeros({3, 3}, DType::int32)), DTypeError);
}

TEST_CASE("eigh of a 2x2 matrix by hand, reconstructions and the lower triangle", "[linalg][eigh]") {
  // [[2, 1], [1, 2]]: det(A - t I) = (2 - t)^2 - 1 = 0 at t = 1 and 3, with eigenvectors
  // [1, -1] / sqrt 2 and [1, 1] / sqrt 2 (up to sign).
  const linalg::Eigh f = linalg::eigh(f64({2, 1, 1, 2}, {2, 2}));
  check_close(f.e, {1, 3}, 1e-12);
  const D v = f.v.to_vector<double>();  // columns are the eigenvectors
  CHECK(std::abs(v[0]) == Approx(1 / std::sqrt(2.0)));
  CHECK(v[2] == Approx(-v[0]));
  CHECK(v[3] == Approx(v[1]));
  // the upper triangle is not read: 77 above the diagonal gives the same answer
  check_close(linalg::eigh(f64({2, 77, 1, 2}, {2, 2})).e, {1, 3}, 1e-12);
  check_close(linalg::eigh(f32({2, 1, 1, 2}, {2, 2})).e, {1, 3}, 1e-6);
  // batched v diag(e) v^T = a, ascending e, of a non-contiguous view
  const Tensor w = sample({2, 4, 4}, 0.9);
  const Tensor sym = w + linalg::matrix_transpose(w);
  const linalg::Eigh d = linalg::eigh(linalg::matrix_transpose(sym));
  check_close(weighted_outer(d.v, d.e, d.v), sym, 1e-12);
  check_orthonormal_columns(d.v);
  const D e = d.e.to_vector<double>();
  for (std::size_t i = 0; i + 1 < e.size(); ++i)
    if ((i + 1) % 4 != 0) CHECK(e[i] <= e[i + 1]);
  CHECK_THROWS_AS(linalg::eigh(zeros({2, 3}, DType::float64)), ShapeError);
}

TEST_CASE("gradients of cholesky and qr match finite differences", "[linalg][gradients]") {
  // TensorFlow's Cholesky gradient holds for symmetric perturbations: differentiate through a
  // symmetric construction, as TensorFlow's own tests do.
  check_gradients([](const std::vector<Tensor>& in) {
    return linalg::cholesky(matmul(in[0], in[0], false, true) + eye(3, DType::float64) * 0.5);
  }, {sample({2, 3, 3}, 0.4)});
  for (const Shape& s : {Shape{2, 4, 3}, Shape{3, 3}, Shape{2, 3, 5}}) {
    INFO("shape " << s.to_string());
    const Tensor a = sample(s, 0.6, 1.5);
    check_gradients([](const std::vector<Tensor>& in) { return linalg::qr(in[0]).q; }, {a});
    check_gradients([](const std::vector<Tensor>& in) { return linalg::qr(in[0]).r; }, {a});
  }
  // full q of a wide matrix is the reduced one; of a tall matrix TensorFlow has no gradient
  check_gradients([](const std::vector<Tensor>& in) { return linalg::qr(in[0], true).r; }, {sample({2, 4}, 0.2)});
  const Tensor tall = sample({4, 2}, 0.2);
  GradientTape tape;
  tape.watch(tall);
  const Tensor q = linalg::qr(tall, true).q;
  CHECK_THROWS_AS(tape.gradient(reduce_sum(q), tall), ValueError);
}

TEST_CASE("gradients of svd and eigh match finite differences", "[linalg][gradients]") {
  // weights with distinct values, so that u diag(w) v^T depends on each singular pair
  for (const Shape& s : {Shape{2, 4, 3}, Shape{3, 3}, Shape{3, 5}}) {
    INFO("shape " << s.to_string());
    const Tensor a = sample(s, 0.5);
    const std::int64_t k = std::min(s[s.rank() - 2], s[s.rank() - 1]);
    const Tensor w = f64(std::vector<double>{1.0, 0.6, 0.3}, {3}) ;
    const Tensor wk = slice(w, {0}, {k});
    check_gradients([](const std::vector<Tensor>& in) { return linalg::svd(in[0]).s; }, {a});
    check_gradients([](const std::vector<Tensor>& in) { return linalg::svd(in[0], false, false).s; }, {a});
    check_gradients([wk](const std::vector<Tensor>& in) {
      const linalg::SVD d = linalg::svd(in[0]);
      return weighted_outer(d.u, wk, d.v);
    }, {a});
    check_gradients([wk, k](const std::vector<Tensor>& in) {  // full_matrices with |m - n| <= 1
      const linalg::SVD d = linalg::svd(in[0], true);
      return weighted_outer(first_cols(d.u, k), wk * d.s, first_cols(d.v, k));
    }, {s[s.rank() - 1] == 5 ? sample({3, 4}, 0.5) : a});
  }
  const Tensor sym = sample({2, 3, 3}, 0.8);
  check_gradients([](const std::vector<Tensor>& in) { return linalg::eigh(in[0]).e; }, {sym});
  check_gradients([](const std::vector<Tensor>& in) {
    const linalg::Eigh d = linalg::eigh(in[0]);
    return weighted_outer(d.v, f64({1.0, 0.5, 0.2}, {3}), d.v);
  }, {sym});
}
