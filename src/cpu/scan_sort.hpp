#pragma once
// CPU kernels of the scans and sorts (cumsum, cumprod, sort, top_k, searchsorted, unique,
// bincount). Inputs may have any strides; outputs are contiguous and fully written. float32,
// float64, int32, int64 and uint8 (the backend widens float16 / bfloat16 to float32 first).
// Positions along the sorted axis are int32 outputs.
#include <cstdint>

#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::cpu {

using kernel::ScanOp;

// out = the running sum / product of x along axis (x's shape and dtype). Integers wrap.
void scan(ScanOp kind, const Tensor& x, int axis, bool exclusive, bool reverse, const Tensor& out);

// values and / or indices (either may be undefined) = x stably sorted along axis, ascending or
// descending in the order of sort_keys.hpp.
void sort(const Tensor& x, int axis, bool descending, const Tensor& values, const Tensor& indices);

// values and indices [..., k] = the k largest of each row of the last axis, lower index first
// among equals; in descending order when `sorted`, else in the order of their positions.
void top_k(const Tensor& x, std::int64_t k, bool sorted, const Tensor& values, const Tensor& indices);

// out [rows..., m] (int32) = for each value of row r, the insertion point in row r of the
// ascending `sorted` [rows..., n]: the first position whose entry is >= value (> when `right`).
void search_sorted(const Tensor& sorted, const Tensor& values, bool right, const Tensor& out);

// idx (int32, x's shape) = the rank of each element's value by first occurrence; returns the
// distinct values of the 1-D x in that order (a new contiguous CPU tensor).
Tensor unique(const Tensor& x, const Tensor& idx);

// out [length] = per bin, the count (or the sum of `weights`, when defined) of the elements of
// x (int32 / int64) equal to it. Values outside [0, length) are skipped: the op has rejected them.
void bincount(const Tensor& x, const Tensor& weights, const Tensor& out);

}  // namespace keel::cpu
