#pragma once
// The CUDA kernels of the indexing ops (gather, unsorted_segment_sum, one_hot) and of dropout,
// as the backend layer (src/backend/) calls them. Plain C++17 with no CUDA header, like
// cuda/backend.hpp; without KEEL_WITH_CUDA every function throws DeviceError
// (src/backend/cuda_unavailable.cpp).
//
// All pointers are device memory of `device`, contiguous, row-major. Index arrays are int32 or
// int64 (one_hot also takes uint8); other dtypes are a DTypeError. Errors of the indices found
// on the device come back as a BadIndex, so that the op throws its own ValueError with the CPU's
// wording: a kernel sets a flag in device memory and the host reads it back, which waits for the
// device (one synchronisation per call).
#include <cstddef>
#include <cstdint>

#include "keel/core/dtype.hpp"

namespace keel::cuda {

// The first (lowest-position) bad index of a call: position -1 when there is none.
struct BadIndex {
  std::int64_t position = -1;
  std::int64_t value = 0;
};

// gather along one axis: params is [outer, dim, row_bytes bytes], out is [outer, n, row_bytes
// bytes] with out[o, j] = params[o, indices[j]]. Returns the first index outside [0, dim);
// its rows of `out` are left zero (the op throws and discards out).
BadIndex gather_rows(const void* params, std::int64_t outer, std::int64_t dim,
                     std::size_t row_bytes, const void* indices, DType index_dtype,
                     std::int64_t n, void* out, int device);

// out ([num_segments, inner], dtype) = the sum of data's rows ([n, inner]) by segment id, with
// atomic adds (float sums may differ from the CPU's in the last bits: the order is not fixed).
// Negative ids are dropped; ids >= num_segments are an error (`bad`), and their rows are dropped
// too. float32, float64, int32, int64 and uint8 (integers wrap, as on the CPU).
struct SegmentIds {
  BadIndex bad;
  bool has_negative = false;
};
SegmentIds segment_sum(DType dtype, const void* data, std::int64_t n, std::int64_t inner,
                       const void* ids, DType id_dtype, std::int64_t num_segments, void* out,
                       int device);

// out[i, c] = on if indices[i] == c else off, for c < depth; out has `item` bytes per element
// (1, 2, 4 or 8), and on_bits / off_bits hold the encoded values in their low `item` bytes
// (little-endian). Indices outside [0, depth) give an all-off row.
void one_hot(const void* indices, DType index_dtype, std::int64_t n, std::int64_t depth,
             std::uint64_t on_bits, std::uint64_t off_bits, std::size_t item, void* out,
             int device);

// dropout's keep mask from Philox-4x32-10 (cuda/philox.cuh), the CPU's draw exactly: element
// i is kept when word i % 4 of block i / 4 of {key, counter} in `stream` is >= threshold.
// y = x * scale where kept, +0 where dropped; mask (may be null) = scale or 0. float32, float64.
struct PhiloxDraw {
  std::uint64_t key = 0;
  std::uint64_t counter = 0;
  std::uint32_t stream = 0;
};
void dropout(DType dtype, const void* x, std::int64_t n, const PhiloxDraw& draw,
             std::uint32_t threshold, double scale, void* y, void* mask, int device);

}  // namespace keel::cuda
