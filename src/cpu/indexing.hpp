#pragma once
// CPU kernels of the indexing ops (gather, unsorted_segment_sum, one_hot), with the contract of
// cuda/indexing.hpp: contiguous row-major buffers; the first bad index comes back (position -1
// when there is none) so that the op words its error the same way on every device.
#include <cstddef>
#include <cstdint>

#include "keel/core/dtype.hpp"

namespace keel::cpu {

struct BadIndex {
  std::int64_t position = -1;
  std::int64_t value = 0;
};

// out[o, j] = params[o, indices[j]] for rows of row_bytes bytes; params [outer, dim, row],
// out [outer, n, row]. Indices are checked first: on a bad one nothing is written.
BadIndex gather_rows(const void* params, std::int64_t outer, std::int64_t dim, std::size_t row_bytes,
                     const void* indices, DType index_dtype, std::int64_t n, void* out);

// out [num_segments, inner] = the sums of data's n rows by segment id; negative ids are dropped
// (has_negative), an id >= num_segments is an error (nothing is written then).
struct SegmentIds {
  BadIndex bad;
  bool has_negative = false;
};
SegmentIds segment_sum(DType dtype, const void* data, std::int64_t n, std::int64_t inner, const void* ids,
                       DType id_dtype, std::int64_t num_segments, void* out);

// out[i, c] = on if indices[i] == c else off (item-byte elements, the values encoded in the low
// bytes of on_bits / off_bits); indices int32, int64 or uint8.
void one_hot(const void* indices, DType index_dtype, std::int64_t n, std::int64_t depth, std::uint64_t on_bits,
             std::uint64_t off_bits, std::size_t item, void* out);

// n elements of `item` bytes, each the value in the low bytes of `bits`.
void fill_bytes(void* dst, std::int64_t n, std::uint64_t bits, std::size_t item);

}  // namespace keel::cpu
