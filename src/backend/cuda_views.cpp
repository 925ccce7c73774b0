#include "backend/cuda_views.hpp"

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "cpu/elementwise.hpp"

namespace keel::backend {

MergedAxes merge_axes(const std::vector<std::int64_t>& shape, const std::vector<std::vector<std::int64_t>>& strides) {
  MergedAxes m;
  m.strides.resize(strides.size());
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t d = shape[i];
    if (d == 1) continue;  // a size-1 axis moves nowhere, whatever its stride
    bool mergeable = !m.shape.empty();
    for (std::size_t k = 0; mergeable && k < strides.size(); ++k)
      mergeable = m.strides[k].back() == strides[k][i] * d;
    if (mergeable) {
      m.shape.back() *= d;
      for (std::size_t k = 0; k < strides.size(); ++k) m.strides[k].back() = strides[k][i];
    } else {
      m.shape.push_back(d);
      for (std::size_t k = 0; k < strides.size(); ++k) m.strides[k].push_back(strides[k][i]);
    }
  }
  return m;
}

std::vector<cuda::View> cuda_views(const std::vector<const Tensor*>& tensors, const Shape& shape, const char* op) {
  std::vector<std::vector<std::int64_t>> strides;
  strides.reserve(tensors.size());
  for (const Tensor* t : tensors)
    strides.push_back(t->shape() == shape ? t->strides() : cpu::broadcast_strides(*t, shape));
  const MergedAxes m = merge_axes(shape.dims(), strides);
  if (m.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw DeviceError(fmt::format("{}: CUDA kernels take at most {} axes that do not merge; shape {} has {}", op,
                                  cuda::kMaxDims, shape.to_string(), m.shape.size()));
  std::vector<cuda::View> views(tensors.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    cuda::View& v = views[k];
    v.data = const_cast<void*>(tensors[k]->raw_data());
    v.dtype = tensors[k]->dtype();
    v.device = tensors[k]->device().index();
    v.rank = static_cast<int>(m.shape.size());
    for (std::size_t i = 0; i < m.shape.size(); ++i) {
      v.shape[i] = m.shape[i];
      v.strides[i] = m.strides[k][i];
    }
  }
  return views;
}

cuda::View cuda_view(const Tensor& t) { return cuda_views({&t}, t.shape(), "cuda")[0]; }

void cuda_copy_strided(DType dtype, int device, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& src_strides, const void* src,
                       const std::vector<std::int64_t>& dst_strides, void* dst) {
  for (std::int64_t d : shape)
    if (d == 0) return;  // nothing to copy
  const MergedAxes m = merge_axes(shape, {src_strides, dst_strides});
  if (m.shape.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw DeviceError(fmt::format("copy: CUDA kernels take at most {} axes that do not merge, got {}",
                                  cuda::kMaxDims, m.shape.size()));
  cuda::View s, d;
  s.data = const_cast<void*>(src);
  d.data = dst;
  s.dtype = d.dtype = dtype;
  s.device = d.device = device;
  s.rank = d.rank = static_cast<int>(m.shape.size());
  for (std::size_t i = 0; i < m.shape.size(); ++i) {
    s.shape[i] = d.shape[i] = m.shape[i];
    s.strides[i] = m.strides[0][i];
    d.strides[i] = m.strides[1][i];
  }
  cuda::copy(s, d);
}

}  // namespace keel::backend
