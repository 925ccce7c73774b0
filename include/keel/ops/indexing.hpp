#pragma once
// Indexing: strided slices, masks, nd gathers and scatters, reversal, rolls, repeats, meshgrid.
// TensorFlow's semantics (tf.strided_slice, tf.boolean_mask, tf.where, tf.gather_nd, ...), with
// negative indices counting from the end everywhere (an index i of an axis of size n reads
// i + n when -n <= i < 0). Out-of-range indices are ValueErrors naming the index and its bound.
// Tensor::slice (keel/core/slice_spec.hpp) is the NumPy-style spelling of strided_slice.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

// x[begin[0]:end[0]:strides[0], ...] for the first begin.size() axes (the rest whole); begin, end
// and strides (default all 1) have one length <= rank. Bounds are clamped as NumPy and TF do;
// a stride is not 0. A view when every stride is positive, else a copy.
Tensor strided_slice(const Tensor& x, std::vector<std::int64_t> begin, std::vector<std::int64_t> end,
                     std::vector<std::int64_t> strides = {});

// The elements (or slices) of x where mask (bool, of shape x.shape[axis : axis + mask.rank])
// is true, in row-major order: those mask.rank axes become one axis of size count(mask).
// The mask is read on the host (the output's size depends on it).
Tensor boolean_mask(const Tensor& x, const Tensor& mask, int axis = 0);
// tf.where(condition) with one argument: the int64 [n, rank] coordinates of the n true (non-zero)
// elements, in row-major order.
Tensor where(const Tensor& condition);

// indices [..., M] (int32/int64), M <= params.rank: out[i...] = params[indices[i..., :]], of shape
// indices.shape[:-1] + params.shape[M:].
Tensor gather_nd(const Tensor& params, const Tensor& indices);
// zeros(shape) with updates (indices.shape[:-1] + shape[M:]) added at the indices (duplicates add).
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Shape& shape);
// A copy of tensor with the slices at indices replaced by (update; the last duplicate wins),
// added to (add), or combined by max / min with the updates.
Tensor tensor_scatter_nd_update(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
Tensor tensor_scatter_nd_max(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
Tensor tensor_scatter_nd_min(const Tensor& tensor, const Tensor& indices, const Tensor& updates);

// x with the order of the elements along each of `axes` reversed (tf.reverse; axes unique).
Tensor reverse(const Tensor& x, std::vector<int> axes);
// Elements shifted by `shift` along `axis`, wrapping around (tf.roll); with lists, one shift per
// axis entry, shifts of a repeated axis adding up.
Tensor roll(const Tensor& x, std::int64_t shift, int axis);
Tensor roll(const Tensor& x, const std::vector<std::int64_t>& shifts, const std::vector<int>& axes);
// tf.repeat: each element (slice) along axis repeated `repeats` times, or repeats[i] times for
// element i (repeats one entry per element, or one for all). No axis: x flattened first.
Tensor repeat(const Tensor& x, std::int64_t repeats, std::optional<int> axis = std::nullopt);
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats, std::optional<int> axis = std::nullopt);
Tensor repeat(const Tensor& x, const Tensor& repeats, std::optional<int> axis = std::nullopt);
// tf.meshgrid: N coordinate grids of N 1-D inputs (others flattened). indexing "xy" (Cartesian:
// outputs [n1, n0, n2, ...]) or "ij" (matrix: [n0, n1, ...]).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "xy");

}  // namespace keel
