#pragma once
// Tensors as the CUDA kernels' views (cuda/backend.hpp): what the backend layer hands them.
#include <initializer_list>

#include "cuda/backend.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

// The axes of `shape` merged wherever every operand's strides allow it (axis i folds into the
// axis before it when, for each operand, stride[before] == stride[i] * shape[i]), with size-1
// axes dropped: most ops end up with one or two axes. strides[k] are operand k's strides.
struct MergedAxes {
  std::vector<std::int64_t> shape;
  std::vector<std::vector<std::int64_t>> strides;
};
MergedAxes merge_axes(const std::vector<std::int64_t>& shape, const std::vector<std::vector<std::int64_t>>& strides);

// Views of `tensors` (on one CUDA device) broadcast to `shape` (NumPy rules, strides 0 on
// broadcast axes), their axes merged together. DeviceError naming op when more than
// cuda::kMaxDims axes remain after merging.
std::vector<cuda::View> cuda_views(const std::vector<const Tensor*>& tensors, const Shape& shape, const char* op);
// One tensor's view, its axes merged.
cuda::View cuda_view(const Tensor& t);

// cpu::copy_strided's contract on a CUDA device: copies a `shape` block of dtype elements between
// two strided layouts (a 0 source stride broadcasts). Merges axes before building the views, so
// ranks above cuda::kMaxDims work when they merge.
void cuda_copy_strided(DType dtype, int device, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& src_strides, const void* src,
                       const std::vector<std::int64_t>& dst_strides, void* dst);

}  // namespace keel::backend
