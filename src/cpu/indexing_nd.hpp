#pragma once
// CPU kernels of the n-d indexing ops (gather_nd, scatter_nd and the tensor_scatter_nd family,
// reverse). Contiguous row-major buffers except where a kernel takes strides. Every index tuple
// is checked before anything is written, and the first bad one comes back (position -1 when
// none) so that the op words its error the same way on every device. An index i of an axis of
// size n is valid in [-n, n); a negative one counts from the end.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/kernel_kinds.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

using kernel::ScatterMode;

struct NdBadIndex {
  std::int64_t position = -1;  // the index tuple (row of indices [n, M])
  std::int64_t component = 0;  // which of its M entries
  std::int64_t value = 0;
};

// The layout both kernels share: n index tuples of M entries address rows of `row_bytes` bytes
// in a [dims[0], ..., dims[M-1], row] buffer.
struct NdLayout {
  std::vector<std::int64_t> dims;  // the M indexed dimensions
  std::int64_t n = 0;              // index tuples
  std::size_t row_bytes = 0;
};

// out[j] = params[indices[j]] row by row; nothing is written on a bad index.
NdBadIndex gather_nd(const NdLayout& layout, const void* params, const void* indices, DType index_dtype,
                     void* out);

// out = base (a copy unless base is out; zeros when base is null), then row j of updates
// written into the row at indices[j]: replaced (update, in order: the last duplicate wins), added
// (add), or combined elementwise (max, min). dtype: any for update, numeric otherwise. Nothing
// is written on a bad index.
NdBadIndex scatter_nd(ScatterMode mode, DType dtype, const NdLayout& layout, const void* base,
                      const void* indices, DType index_dtype, const void* updates, void* out);

// out (contiguous) = x (shape, element strides) with the axes where flip[d] is set reversed.
void reverse(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, const char* x,
             const std::vector<bool>& flip, char* out, std::size_t itemsize);

}  // namespace keel::cpu
