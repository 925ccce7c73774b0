// Factorizations: qr, svd, eigh (LAPACK kernels with TensorFlow's gradients, linalg_grad.py) and
// pinv, a composite of svd.
#include <algorithm>
#include <cmath>
#include <limits>

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
using linalg_detail::column_slice;
using linalg_detail::rows;
using linalg_detail::safe_reciprocal;
using linalg_detail::with_matrix;
using linalg_detail::output_like;

namespace {

Tensor T(const Tensor& x) { return matrix_transpose(x); }

// TF's _QrGradSquareAndDeepMatrices (m >= n, reduced q [m, n] and r [n, n]).
Tensor qr_grad_deep(const Tensor& q, const Tensor& r, const Tensor& dq, const Tensor& dr) {
  // x r^-T for upper triangular r, as a solve: (r^-1 x^T)^T.
  const auto solve_r = [&r](const Tensor& x) { return T(triangular_solve(r, T(x), false, false)); };
  const Tensor qdq = matmul(q, dq, true, false);
  const Tensor rdr = matmul(r, dr, false, true);
  const Tensor lower = band_part((qdq - T(qdq)) + (rdr - T(rdr)), -1, 0);
  const Tensor grad_a = matmul(q, dr + solve_r(lower));
  const Tensor grad_b = solve_r(dq - matmul(q, qdq));
  return grad_a + grad_b;
}

// TF's SvdGrad for compute_uv (see svd's comment in the header for degenerate values).
Tensor svd_grad(const Tensor& a, Tensor s, Tensor u, Tensor v, const Tensor& gs, Tensor gu, Tensor gv, bool full) {
  std::int64_t m = rows(a), n = cols(a);
  const bool use_adjoint = m > n;  // differentiate A^T = V S U^T, transpose at the end
  if (use_adjoint) {
    std::swap(m, n);
    std::swap(u, v);
    std::swap(gu, gv);
  }
  if (full && n - m > 1)
    throw ValueError(fmt::format("svd: no gradient for full_matrices=true when the dimensions differ by more than 1 "
                                 "(TensorFlow's SvdGrad is not defined there): input {}", a.shape().to_string()));
  const Tensor s_mat = diag(s);
  const Tensor s2 = square(s);
  // f[i, j] = 1 / (s_j^2 - s_i^2), 0 on the diagonal and for equal values (safe reciprocal).
  const Tensor f = safe_reciprocal(expand_dims(s2, -2) - expand_dims(s2, -1));
  const Tensor v1 = column_slice(v, 0, m), gv1 = column_slice(gv, 0, m);
  const Tensor f_u = f * matmul(u, gu, true, false);
  const Tensor f_v = f * matmul(v1, gv1, true, false);
  const Tensor inner = diag(gs) + matmul(f_u + T(f_u), s_mat) + matmul(s_mat, f_v + T(f_v));
  Tensor grad = matmul(u, matmul(inner, v1, false, true));
  if (m != n) {
    const Tensor gv1t = T(gv1);
    Tensor term2 = gv1t - matmul(matmul(gv1t, v1), v1, false, true);
    if (full) {
      const Tensor v2 = column_slice(v, m, n - m), gv2 = column_slice(gv, m, n - m);
      term2 = term2 - matmul(matmul(v1, gv2, true, false), v2, false, true);
    }
    grad = grad + matmul(matmul(u, diag(safe_reciprocal(s))), term2);
  }
  return use_adjoint ? T(grad) : grad;
}

}  // namespace

QR qr(const Tensor& x, bool full_matrices) {
  linalg_detail::check_matrix(x, "qr");
  const std::int64_t m = rows(x), n = cols(x), c = full_matrices ? m : std::min(m, n);
  const Shape batch = batch_shape(x);
  Tensor q = output_like(with_matrix(batch, m, c, "qr"), x, "qr");
  Tensor r = output_like(with_matrix(batch, c, n, "qr"), x, "qr");
  backend::qr(x, full_matrices, q, r);
  if (autograd::recording())
    autograd::record("qr", {x}, {q, r}, [x, q, r, m, n, full_matrices](const Grads& g, const Needs&) {
      if (full_matrices && m > n)
        throw ValueError(fmt::format("qr: no gradient for full_matrices=true with more rows than columns "
                                     "(TensorFlow's QrGrad is not defined there): input {}", x.shape().to_string()));
      if (m >= n) return Grads{qr_grad_deep(q, r, g[0], g[1])};
      // Wide: a = [x1, y], r = [u, v]; reduce to the square case (TF's partition).
      const Tensor y = column_slice(x, m, n - m);
      const Tensor u = column_slice(r, 0, m), dv = column_slice(g[1], m, n - m), du = column_slice(g[1], 0, m);
      const Tensor dy = matmul(q, dv);
      const Tensor dx = qr_grad_deep(q, u, g[0] + matmul(y, dv, false, true), du);
      return Grads{concat({dx, dy}, -1)};
    }, {x, q, r});
  return {q, r};
}

SVD svd(const Tensor& x, bool full_matrices, bool compute_uv) {
  linalg_detail::check_matrix(x, "svd");
  const std::int64_t m = rows(x), n = cols(x), k = std::min(m, n);
  const Shape batch = batch_shape(x);
  Tensor s = output_like(with_matrix(batch, k, -1, "svd"), x, "svd");
  Tensor u, vt;
  if (compute_uv) {
    u = output_like(with_matrix(batch, m, full_matrices ? m : k, "svd"), x, "svd");
    vt = output_like(with_matrix(batch, full_matrices ? n : k, n, "svd"), x, "svd");
  }
  const std::int64_t failed = backend::svd(x, full_matrices, s, u, vt);
  if (failed >= 0) linalg_detail::throw_failed("svd", failed, "did not converge", x);
  // The kernel writes v^T; TensorFlow returns v: a transposed view of it.
  const Tensor v = compute_uv ? linalg_detail::swapped_view(vt) : Tensor();
  if (autograd::recording()) {
    if (compute_uv) {
      autograd::record("svd", {x}, {s, u, v}, [x, s, u, v, full_matrices](const Grads& g, const Needs&) {
        return Grads{svd_grad(x, s, u, v, g[0], g[1], g[2], full_matrices)};
      }, {x, s, u, v});
    } else {
      autograd::record("svd", {x}, {s}, [x](const Grads& g, const Needs&) {
        // ds_i = u_i^T dA v_i: the gradient is u diag(g) v^T (with the vectors computed now).
        const SVD f = svd(x, false, true);
        return Grads{matmul(f.u, matmul(diag(g[0]), f.v, false, true))};
      }, {x});
    }
  }
  return {s, u, v};
}

Eigh eigh(const Tensor& x) {
  linalg_detail::check_square(x, "eigh");
  const std::int64_t n = cols(x);
  Tensor e = output_like(with_matrix(batch_shape(x), n, -1, "eigh"), x, "eigh");
  Tensor vt = output_like(x.shape(), x, "eigh");
  const std::int64_t failed = backend::eigh(x, e, vt);
  if (failed >= 0) linalg_detail::throw_failed("eigh", failed, "did not converge", x);
  const Tensor v = linalg_detail::swapped_view(vt);  // eigenvectors as columns
  if (autograd::recording())
    autograd::record("eigh", {x}, {e, v}, [e, v](const Grads& g, const Needs&) {
      // TF SelfAdjointEigV2Grad: f[i, j] = 1 / (e_j - e_i) (0 for i = j and equal values),
      // grad = v (diag(g_e) + f * (v^T g_v)) v^T, folded onto the lower triangle the op reads.
      const Tensor f = safe_reciprocal(expand_dims(e, -2) - expand_dims(e, -1));
      Tensor grad = matmul(v, matmul(diag(g[0]) + f * matmul(v, g[1], true, false), v, false, true));
      grad = band_part(grad + T(grad), -1, 0);
      return Grads{grad - diag(diag_part(grad)) * 0.5};
    }, {e, v});
  return {e, v};
}

Tensor pinv(const Tensor& x, double rcond) {
  linalg_detail::check_matrix(x, "pinv");
  const std::int64_t m = rows(x), n = cols(x);
  if (std::isnan(rcond)) throw ValueError("pinv: rcond must not be NaN");
  if (m == 0 || n == 0) {
    DeviceScope scope(x.device());
    return zeros(with_matrix(batch_shape(x), n, m, "pinv"), x.dtype());
  }
  if (rcond < 0) {
    const double eps = x.dtype() == DType::float32 ? double(std::numeric_limits<float>::epsilon())
                                                   : std::numeric_limits<double>::epsilon();
    rcond = 10.0 * double(std::max(m, n)) * eps;
  }
  return detail::in_op("pinv", [&] {
    // TensorFlow's pinv: singular values at or below rcond * max(s) become inf, so that their
    // reciprocals (and those gradients) are 0, then pinv = v diag(1/s) u^T.
    const SVD f = svd(x, false, true);
    const Tensor cutoff = expand_dims(reduce_max(f.s, {-1}) * rcond, -1);
    const Tensor s = where(greater(f.s, cutoff), f.s, full_like(f.s, std::numeric_limits<double>::infinity()));
    return matmul(f.v / expand_dims(s, -2), f.u, false, true);
  });
}

}  // namespace keel::linalg
