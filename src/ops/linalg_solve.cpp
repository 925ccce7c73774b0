// Inverses, solves and determinants: inv, solve, cholesky, cholesky_solve, triangular_solve,
// det, slogdet, lstsq. Each forward with TensorFlow's gradient (linalg_grad.py) right below it.
#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/lapack.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/linalg_checks.hpp"

namespace keel::linalg {

using autograd::Grads;
using autograd::Needs;
using linalg_detail::batch_shape;
using linalg_detail::cols;
using linalg_detail::rows;
using linalg_detail::output_like;

namespace {

// [...] -> [..., 1, 1], to scale a batch of matrices.
Tensor per_matrix(const Tensor& t) { return expand_dims(expand_dims(t, -1), -1); }

// x solving op(a) x = b for triangular a (the op's checks done, batch axes equal).
Tensor triangular_solve_impl(const Tensor& a, const Tensor& b, bool lower, bool adjoint) {
  Tensor x = output_like(b.shape(), b, "triangular_solve");
  const std::int64_t failed = backend::triangular_solve(a, b, lower, adjoint, x);
  if (failed >= 0) linalg_detail::throw_failed("triangular_solve", failed, "has a zero on its diagonal", a);
  if (autograd::recording())
    autograd::record("triangular_solve", {a, b}, {x}, [a, x, lower, adjoint](const Grads& g, const Needs& need) {
      // TF: grad_b = triangular_solve(a, g, lower, !adjoint); grad_a = -grad_b x^T (or -x grad_b^T
      // when adjoint), restricted to the triangle a is read from.
      const Tensor gb = triangular_solve(a, g[0], lower, !adjoint);
      Tensor ga;
      if (need[0]) {
        ga = neg(adjoint ? matmul(x, gb, false, true) : matmul(gb, x, false, true));
        ga = lower ? band_part(ga, -1, 0) : band_part(ga, 0, -1);
      }
      return Grads{ga, need[1] ? gb : Tensor()};
    }, {a, x});
  return x;
}

}  // namespace

Tensor inv(const Tensor& a) {
  linalg_detail::check_square(a, "inv");
  Tensor out = output_like(a.shape(), a, "inv");
  const std::int64_t failed = backend::inverse(a, out);
  if (failed >= 0) linalg_detail::throw_failed("inv", failed, "is singular", a);
  if (autograd::recording())
    autograd::record("inv", {a}, {out}, [out](const Grads& g, const Needs&) {
      // TF MatrixInverse: -A^-T g A^-T.
      return Grads{neg(matmul(out, matmul(g[0], out, false, true), true, false))};
    }, {out});
  return out;
}

Tensor solve(const Tensor& matrix_in, const Tensor& rhs_in, bool adjoint) {
  linalg_detail::check_square(matrix_in, "solve", "matrix");
  linalg_detail::check_rhs(matrix_in, rhs_in, "solve");
  const auto [a, b] = linalg_detail::broadcast_batch(matrix_in, rhs_in, "solve");
  Tensor x = output_like(b.shape(), b, "solve");
  const std::int64_t failed = backend::solve(a, b, adjoint, x);
  if (failed >= 0) linalg_detail::throw_failed("solve", failed, "is singular", a);
  if (autograd::recording())
    autograd::record("solve", {a, b}, {x}, [a = a, x, adjoint](const Grads& g, const Needs& need) {
      // TF MatrixSolve: grad_b = solve(a, g, !adjoint); grad_a = -grad_b x^T (-x grad_b^T when adjoint).
      const Tensor gb = solve(a, g[0], !adjoint);
      Tensor ga;
      if (need[0]) ga = neg(adjoint ? matmul(x, gb, false, true) : matmul(gb, x, false, true));
      return Grads{ga, need[1] ? gb : Tensor()};
    }, {a, x});
  return x;
}

Tensor cholesky(const Tensor& x) {
  linalg_detail::check_square(x, "cholesky");
  Tensor l = output_like(x.shape(), x, "cholesky");
  const std::int64_t failed = backend::cholesky(x, l);
  if (failed >= 0) linalg_detail::throw_failed("cholesky", failed, "is not positive definite", x);
  if (autograd::recording())
    autograd::record("cholesky", {x}, {l}, [l](const Grads& g, const Needs&) {
      // TF CholeskyGrad: with P = tril(L^T g) with its diagonal halved,
      // grad_a = sym(L^-T P L^-1), sym(M) = (M + M^T) / 2 (a gradient for symmetric perturbations).
      const std::int64_t n = cols(l);
      const Tensor eye_n = broadcast_to(linalg_detail::eye_like(l, n), l.shape());
      const Tensor l_inv = triangular_solve(l, eye_n, true, false);
      Tensor middle = matmul(l, g[0], true, false);
      middle = band_part(middle - diag(diag_part(middle)) * 0.5, -1, 0);
      const Tensor ga = matmul(matmul(l_inv, middle, true, false), l_inv);
      return Grads{(ga + matrix_transpose(ga)) * 0.5};
    }, {l});
  return l;
}

Tensor cholesky_solve(const Tensor& chol, const Tensor& rhs) {
  linalg_detail::check_square(chol, "cholesky_solve", "chol");
  linalg_detail::check_rhs(chol, rhs, "cholesky_solve");
  // (L L^T) x = rhs: L y = rhs, then L^T x = y. Composite: the gradient comes with it.
  return detail::in_op("cholesky_solve", [&] {
    return triangular_solve(chol, triangular_solve(chol, rhs, true, false), true, true);
  });
}

Tensor triangular_solve(const Tensor& matrix, const Tensor& rhs, bool lower, bool adjoint) {
  linalg_detail::check_square(matrix, "triangular_solve", "matrix");
  linalg_detail::check_rhs(matrix, rhs, "triangular_solve");
  const auto [a, b] = linalg_detail::broadcast_batch(matrix, rhs, "triangular_solve");
  return triangular_solve_impl(a, b, lower, adjoint);
}

Tensor det(const Tensor& x) {
  linalg_detail::check_square(x, "det");
  Tensor d = output_like(batch_shape(x), x, "det");
  backend::determinant(x, d, Tensor(), Tensor());
  if (autograd::recording())
    autograd::record("det", {x}, {d}, [x, d](const Grads& g, const Needs&) {
      // TF MatrixDeterminant: g det(A) A^-T.
      return Grads{per_matrix(g[0] * d) * matrix_transpose(inv(x))};
    }, {x, d});
  return d;
}

Slogdet slogdet(const Tensor& x) {
  linalg_detail::check_square(x, "slogdet");
  Tensor sign = output_like(batch_shape(x), x, "slogdet");
  Tensor log_abs = output_like(batch_shape(x), x, "slogdet");
  backend::determinant(x, Tensor(), sign, log_abs);
  if (autograd::recording())
    autograd::record("slogdet", {x}, {sign, log_abs}, [x](const Grads& g, const Needs&) {
      // TF LogMatrixDeterminant: g_log A^-T; the sign is piecewise constant.
      return Grads{per_matrix(g[1]) * matrix_transpose(inv(x))};
    }, {x});
  return {sign, log_abs};
}

Tensor lstsq(const Tensor& matrix, const Tensor& rhs, double l2_regularizer, bool fast) {
  linalg_detail::check_matrix(matrix, "lstsq", "matrix");
  linalg_detail::check_rhs(matrix, rhs, "lstsq");
  detail::check_finite(l2_regularizer, "lstsq", "l2_regularizer");
  if (l2_regularizer < 0)
    throw ValueError(fmt::format("lstsq: l2_regularizer must be >= 0, got {}", l2_regularizer));
  return detail::in_op("lstsq", [&] {
    if (!fast) return matmul(pinv(matrix), rhs);  // the minimum-norm solution, also when rank deficient
    // TensorFlow's fast path: Cholesky of the regularized Gram matrix of the normal equations.
    const std::int64_t m = rows(matrix), n = cols(matrix);
    const bool over = m >= n;
    Tensor gram = over ? matmul(matrix, matrix, true, false) : matmul(matrix, matrix, false, true);
    if (l2_regularizer != 0) gram = gram + linalg_detail::eye_like(matrix, over ? n : m) * l2_regularizer;
    const Tensor chol = cholesky(gram);
    return over ? cholesky_solve(chol, matmul(matrix, rhs, true, false))
                : matmul(matrix, cholesky_solve(chol, rhs), true, false);
  });
}

}  // namespace keel::linalg
