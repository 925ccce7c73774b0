#pragma once
// The backend entries of the scans and sorts (the contract of backend.hpp: the ops have checked
// the arguments; outputs are allocated by the caller, contiguous, and fully written; inputs may
// have any strides). float16 / bfloat16 are computed in float32 on the CPU and rounded once.
// The CUDA backend has no kernels for this family yet: a CUDA tensor is copied to the host, the
// CPU kernel runs there, and the outputs are copied back (a host fallback).
#include <cstdint>

#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

using kernel::ScanOp;

// out (x's shape and dtype) = the running sum / product of x along `axis`.
void scan(ScanOp op, const Tensor& x, int axis, bool exclusive, bool reverse, const Tensor& out);

// values (x's shape and dtype) and / or indices (int32, x's shape) of x sorted stably along
// `axis`; either output may be undefined (not wanted).
void sort(const Tensor& x, int axis, bool descending, const Tensor& values, const Tensor& indices);

// values (x's dtype) and indices (int32), [..., k]: the k largest of each row of x's last axis.
void top_k(const Tensor& x, std::int64_t k, bool sorted, const Tensor& values, const Tensor& indices);

// out (int32, values' shape) = the insertion points of values into the ascending rows of
// `sorted` (innermost axis; one row per row of values).
void search_sorted(const Tensor& sorted, const Tensor& values, bool right, const Tensor& out);

// out [length] (int32, or weights' dtype when weights is defined) = the counts / weight sums of
// x's values (int32 or int64) below `length`.
void bincount(const Tensor& x, const Tensor& weights, const Tensor& out);

// Not replayable (the size of y depends on the values, which are read on the host; a traced
// function stops there): idx (int32, x's shape, on x's device) = each element's position in y,
// and the result y = the distinct values of the 1-D x in first-occurrence order, on x's device.
Tensor unique(const Tensor& x, const Tensor& idx);

}  // namespace keel::backend
