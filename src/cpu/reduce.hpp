#pragma once
// CPU reductions over a sorted set of axes, and arg-reductions along one axis.
#include <vector>

#include "cpu/kernels.hpp"
#include "keel/core/tensor.hpp"

namespace keel::cpu {

// out: contiguous, x's shape without `axes` (out.size() = product of the kept dims).
void reduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes, const Tensor& out);
// out: int64, x's shape without `axis`; the first index of the max (or min) wins ties.
void arg_reduce(kernel::ArgReduceOp op, const Tensor& x, int axis, const Tensor& out);

}  // namespace keel::cpu
