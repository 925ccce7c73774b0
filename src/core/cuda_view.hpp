#pragma once
// Tensors as the CUDA backend's views (cuda/backend.hpp), and the device-aware copies that the
// ops share: a strided copy on either device, and moving a tensor between devices.
#include <initializer_list>

#include "cuda/backend.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// t's view; with `shape`, t broadcast to it (NumPy rules, strides 0 on broadcast axes). The
// caller has checked that t is on a CUDA device and broadcasts to `shape`.
cuda::View cuda_view(const Tensor& t);
cuda::View cuda_view(const Tensor& t, const Shape& shape);

// Merges axes that are contiguous in every view and drops size-1 axes, so that most kernels see
// one or two axes. All views share one shape. (Tensors of rank above cuda::kMaxDims are refused
// with DeviceError by cuda_view.)
void merge_dims(std::initializer_list<cuda::View*> views, const char* op);

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
