#pragma once
// Shape ops. reshape, transpose, slicing, expand_dims, squeeze and broadcast_to return views.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

Tensor reshape(const Tensor& x, Shape shape);  // one dimension may be -1
Tensor transpose(const Tensor& x, std::vector<int> perm = {});  // default: reverse the axes
Tensor expand_dims(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, std::vector<int> axes = {});     // default: every size-1 axis
Tensor concat(const std::vector<Tensor>& values, int axis);
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
std::vector<Tensor> unstack(const Tensor& x, int axis = 0);
std::vector<Tensor> split(const Tensor& x, int num, int axis);   // num equal parts
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis);
Tensor tile(const Tensor& x, const std::vector<std::int64_t>& multiples);
// size -1 takes everything from begin to the end of that axis.
Tensor slice(const Tensor& x, const std::vector<std::int64_t>& begin,
             const std::vector<std::int64_t>& size);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
// The adjoint of gather on axis 0: out[indices[i]] += data[i]; out has num_segments rows.
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids,
                            std::int64_t num_segments);
Tensor one_hot(const Tensor& indices, int depth, double on_value = 1, double off_value = 0,
               DType dtype = DType::float32);
// paddings: one {before, after} pair per axis.
Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings,
           double value = 0);
// tf.pad's modes (any case): "CONSTANT" fills with value; "REFLECT" mirrors x without its edge
// element (each padding < the axis size), "SYMMETRIC" with it (each padding <= the axis size).
Tensor pad(const Tensor& x, const std::vector<std::array<std::int64_t, 2>>& paddings, const std::string& mode,
           double value = 0);

// Shape broadcasting by NumPy rules; ShapeError naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast");

}  // namespace keel
