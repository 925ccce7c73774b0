#pragma once
// Contractions (einsum, tensordot, outer) and norms of tensors and tensor lists (l2_normalize,
// clip_by_norm, global_norm, clip_by_global_norm). All are compositions of differentiable ops
// (transpose, reshape, matmul, reductions), so their gradients come with them: einsum's gradient
// is the einsum of the upstream gradient with the other operands, as TensorFlow's.
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

// tf.einsum / numpy.einsum: "ij,jk->ik", "bij,bjk->bik", "...ij,...jk->...ik" (the ellipsis
// broadcasts as NumPy's), "ii->i" (a diagonal), "ij->" (a sum), implicit output ("ij,jk": the
// labels that appear once, in alphabetical order, after the ellipsis axes). Labels are ASCII
// letters; spaces are ignored. Pairs contract left to right, each as one batched matmul.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// tf.tensordot: sums a's last `axes` axes against b's first `axes` axes ...
Tensor tensordot(const Tensor& a, const Tensor& b, int axes);
// ... or a's axes[0] against b's axes[1] (pairwise, negative axes allowed): {{1}, {0}}, as
// TensorFlow's [[1], [0]]. axes must hold exactly two lists.
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<std::vector<int>>& axes);
// The outer product of the flattened inputs: [a.size(), b.size()] (numpy.outer).
Tensor outer(const Tensor& a, const Tensor& b);

// tf.math.l2_normalize: x / sqrt(max(sum(x^2, axes), epsilon)); axes {} means all axes.
Tensor l2_normalize(const Tensor& x, std::vector<int> axes = {}, double epsilon = 1e-12);
// tf.clip_by_norm: x * clip_norm / max(||x||_2, clip_norm) over `axes` ({} = all axes); an
// all-zero x stays zero (and has a finite gradient).
Tensor clip_by_norm(const Tensor& x, double clip_norm, std::vector<int> axes = {});
// tf.linalg.global_norm: sqrt(sum over the list of sum(t^2)), a float scalar of the first
// tensor's dtype; undefined tensors are skipped (TensorFlow's None entries).
Tensor global_norm(const std::vector<Tensor>& tensors);
// tf.clip_by_global_norm: every t scaled by clip_norm / max(global_norm, clip_norm); the norm
// comes back too. A non-finite global norm makes every clipped tensor NaN, as TensorFlow does
// (the update is poisoned, not silently skipped). Undefined entries stay undefined.
struct ClippedTensors {
  std::vector<Tensor> tensors;
  Tensor global_norm;
};
ClippedTensors clip_by_global_norm(const std::vector<Tensor>& tensors, double clip_norm);

}  // namespace keel
