#pragma once
// The backend entries of the n-d indexing ops: gather_nd, the scatter_nd family and reverse,
// with backend.hpp's contract (checked operands, preallocated contiguous outputs, a recorder
// hook). cuda/ has no kernels for them: a CUDA tensor runs the CPU kernel on host copies and
// the result is copied back (a host fallback; correct, not fast).
#include <cstdint>
#include <vector>

#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

// The first bad index tuple: its row in indices [n, M], which entry and its value (position -1
// when every index is in range).
struct NdBadIndex {
  std::int64_t position = -1;
  std::int64_t component = 0;
  std::int64_t value = 0;
};

using kernel::ScatterMode;

// out (indices.shape[:-1] + params.shape[M:]) = params at the index tuples of indices ([..., M],
// int32 or int64); params and indices contiguous, any dtype. Nothing is written on a bad index.
NdBadIndex gather_nd(const Tensor& params, const Tensor& indices, const Tensor& out);

// out (base's shape and dtype) = base, or zeros when base is undefined, with updates
// (indices.shape[:-1] + out.shape[M:]) written at the index tuples by `mode`. base may be out
// itself (an in-place update). All operands contiguous. Nothing is written on a bad index.
NdBadIndex scatter_nd(ScatterMode mode, const Tensor& base, const Tensor& indices, const Tensor& updates,
                      const Tensor& out);

// out (contiguous, x's shape) = x (any strides) with the axes whose flip entry is set reversed.
void reverse(const Tensor& x, const std::vector<bool>& flip, const Tensor& out);

}  // namespace keel::backend
