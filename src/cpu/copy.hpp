#pragma once
// Byte-level copies of strided views and dtype conversions of contiguous buffers.
#include <cstdint>
#include <vector>

#include "keel/core/dtype.hpp"
#include "keel/core/tensor.hpp"

namespace keel::cpu {

// Copies a strided view (element strides) of `itemsize`-byte elements into contiguous dst.
void copy_to_contiguous(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, const char* src, char* dst,
                        std::size_t itemsize);

// Copies a strided view into another strided view of the same shape and dtype.
void copy_strided(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& src_strides,
                  const char* src, const std::vector<std::int64_t>& dst_strides, char* dst,
                  std::size_t itemsize);

// x itself when it is contiguous, else a contiguous copy of it (a CPU tensor): the kernels' own
// scratch, so that they never call back up into the ops.
Tensor contiguous(const Tensor& x);

// x with each repeated dimension (stride 0 and size > 1: a broadcast_to view, such as the
// gradient of a sum) viewed as size 1, so that a kernel that broadcasts its operands reads the
// values once instead of a copy of every repeat; x itself when it has none.
Tensor compact_broadcast(const Tensor& x);

// dst[i] = static_cast<to>(src[i]) for n contiguous elements (bool: nonzero -> true).
void convert(DType from, const void* src, DType to, void* dst, std::int64_t n);

}  // namespace keel::cpu
