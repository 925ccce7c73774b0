#pragma once
// A slice spec resolved against a shape (NumPy's rules), shared by Tensor::slice, strided_slice
// and Variable::assign(value, spec): which elements of each input axis are taken, as a view with
// positive steps plus the axes to reverse, and the shape the result has.
#include <cstdint>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::detail {

struct SlicePlan {
  // Per input axis: the positive-step view x[begin : begin + count * step : step].
  std::vector<std::int64_t> begin, step, count;
  std::vector<int> flip;     // input axes read backwards (a negative step), count > 1
  std::vector<int> dropped;  // input axes removed by an integer entry (count 1)
  // The result's shape: count without the dropped axes, with the new axes (size 1) inserted.
  std::vector<std::int64_t> out_dims;
  std::vector<int> new_axes;  // positions in out_dims of the newaxis entries, ascending
};

// ValueError naming op for a zero step, an integer index out of range, more than one ellipsis or
// more entries than axes.
SlicePlan plan_slice(const Shape& shape, const SliceSpec& spec, const char* op);

// The positive-step view the plan takes of x (no recording): shape count, strides x's times step.
Tensor plan_view(const Tensor& x, const SlicePlan& plan);

}  // namespace keel::detail
