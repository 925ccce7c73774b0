#pragma once
// Matrix products (OpenBLAS for float32/float64) and keel::linalg, TensorFlow's tf.linalg:
// factorizations, solves, determinants, norms and matrix structure (LAPACK on the CPU).
//
// Every linalg op works on the last two axes ([..., m, n]) and is batched over the leading ones;
// inputs are float32 or float64 (anything else is a DTypeError), and the gradients are those
// TensorFlow defines. A singular matrix given to inv or solve, or a matrix that is not positive
// definite given to cholesky, is a ValueError naming the op, the batch index and the shape.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

// a: [..., m, k], b: [..., k, n] (after the optional transposes of the last two axes);
// leading axes broadcast. Result [..., m, n].
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// The lower (upper) triangle of the last two axes, from diagonal k up (down): tril keeps
// j - i <= k, triu keeps j - i >= k (numpy.tril / numpy.triu). Built on linalg::band_part when
// k allows it.
Tensor tril(const Tensor& x, std::int64_t k = 0);
Tensor triu(const Tensor& x, std::int64_t k = 0);

namespace linalg {

struct QR { Tensor q, r; };
struct SVD { Tensor s, u, v; };
struct Eigh { Tensor e, v; };
struct Slogdet { Tensor sign, log_abs_determinant; };

// tf.norm's `ord`: "euclidean" (the default), "fro", or a number: 1, 2, infinity, or any p > 0
// for vector norms. Written as the argument itself: norm(x, "fro", {-2, -1}), norm(x, 1).
class NormOrder {
 public:
  NormOrder(const char* name) : name_(name) {}
  NormOrder(std::string name) : name_(std::move(name)) {}
  NormOrder(double p) : p_(p) {}
  NormOrder(int p) : p_(p) {}
  bool is_named() const { return !name_.empty(); }
  const std::string& name() const { return name_; }  // "" when numeric
  double p() const { return p_; }
  std::string to_string() const;

 private:
  std::string name_;
  double p_ = 0;
};

// a^-1 of square a.
Tensor inv(const Tensor& a);
// x with matrix @ x = rhs (adjoint: matrix^T @ x = rhs); matrix [..., n, n], rhs [..., n, k].
Tensor solve(const Tensor& matrix, const Tensor& rhs, bool adjoint = false);
// The lower triangular L with L L^T = x; reads only x's lower triangle.
Tensor cholesky(const Tensor& x);
// x with (chol chol^T) x = rhs, chol the lower Cholesky factor.
Tensor cholesky_solve(const Tensor& chol, const Tensor& rhs);
// x = q r, q orthonormal columns, r upper triangular: q [..., m, c], r [..., c, n] with
// c = min(m, n), or c = m when full_matrices.
QR qr(const Tensor& x, bool full_matrices = false);
// x = u diag(s) v^T (v, not v^T, as TensorFlow returns it); s [..., min(m,n)] descending,
// u [..., m, m or min(m,n)], v [..., n, n or min(m,n)]; u and v undefined unless compute_uv.
// The gradient follows TensorFlow's SvdGrad: where two singular values coincide, the terms
// 1 / (s_j^2 - s_i^2) of the pair are taken as 0 (the singular vectors are not unique there).
SVD svd(const Tensor& x, bool full_matrices = false, bool compute_uv = true);
// Symmetric x (lower triangle read) = v diag(e) v^T, e ascending.
Eigh eigh(const Tensor& x);
Tensor det(const Tensor& x);
// sign(det) and log|det| (sign 0 and log -inf for a singular matrix).
Slogdet slogdet(const Tensor& x);
// The least-squares solution of matrix @ x = rhs (tf.linalg.lstsq), with l2_regularizer * I added
// to the Gram matrix. fast: Cholesky of the normal equations (full rank needed); otherwise the
// minimum-norm solution through the pseudo-inverse (l2_regularizer ignored, as TensorFlow does).
Tensor lstsq(const Tensor& matrix, const Tensor& rhs, double l2_regularizer = 0, bool fast = true);
// x with op(matrix) @ x = rhs for triangular matrix (only its lower / upper triangle read),
// op = transpose when adjoint. Batch axes broadcast.
Tensor triangular_solve(const Tensor& matrix, const Tensor& rhs, bool lower = true, bool adjoint = false);
// tf.norm: axes {} = every element as one vector; one axis = vector norms; two axes = matrix
// norms ("euclidean"/"fro" Frobenius, 1 max column sum, inf max row sum, 2 largest singular value).
Tensor norm(const Tensor& x, NormOrder ord = "euclidean", std::vector<int> axes = {}, bool keepdims = false);
// Swaps the last two axes (a view); `conjugate` changes nothing for real dtypes.
Tensor matrix_transpose(const Tensor& x, bool conjugate = false);
// The sum of the main diagonal of each matrix: [..., m, n] -> [...].
Tensor trace(const Tensor& x);
// tf.linalg.diag: [..., n] -> [..., n, n] with the vector on the diagonal.
Tensor diag(const Tensor& v);
// tf.linalg.diag_part: [..., m, n] -> [..., min(m, n)].
Tensor diag_part(const Tensor& x);
// The Moore-Penrose pseudo-inverse [..., n, m]; singular values at most rcond * max(s) are
// dropped. rcond < 0 means TensorFlow's default 10 * max(m, n) * epsilon(dtype).
Tensor pinv(const Tensor& x, double rcond = -1);
// Keeps the band i - j <= num_lower, j - i <= num_upper of the last two axes (a negative count
// keeps that whole triangle), zeros elsewhere.
Tensor band_part(const Tensor& x, std::int64_t num_lower, std::int64_t num_upper);

}  // namespace linalg
}  // namespace keel
