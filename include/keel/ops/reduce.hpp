#pragma once
// Reductions over any set of axes (empty = all axes); negative axes count from the end.
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

Tensor reduce_sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_prod(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_variance(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_std(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_any(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);  // bool
Tensor reduce_all(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);  // bool
Tensor argmax(const Tensor& x, int axis = -1);  // int64
Tensor argmin(const Tensor& x, int axis = -1);  // int64

// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace keel
