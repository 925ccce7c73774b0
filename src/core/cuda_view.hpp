#pragma once
// Tensors as the CUDA backend's views (cuda/backend.hpp), and the device-aware copies that the
// ops share: a strided copy on either device, and moving a tensor between devices.
#include <initializer_list>

#include "cuda/backend.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

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

// dst = src elementwise, converting the dtype; same shape, both on one device (CPU or CUDA),
// any strides. Bumps nothing: callers that write in place bump the version themselves.
void copy_into(const Tensor& src, const Tensor& dst, const char* op);

// A contiguous copy of t on `device` (t itself when it is already there and contiguous is not
// asked for). Not recorded on a tape: Tensor::to adds the gradient.
Tensor transfer(const Tensor& t, Device device);

}  // namespace keel::detail
