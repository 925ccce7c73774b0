#include "core/cuda_view.hpp"

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "cpu/elementwise.hpp"

namespace keel::detail {

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

void copy_into(const Tensor& src, const Tensor& dst, const char* op) {
  if (src.device() != dst.device())
    throw DeviceError(fmt::format("{}: source on {} and destination on {}", op, src.device().to_string(),
                                  dst.device().to_string()));
  if (src.size() == 0) return;
  if (dst.device().is_cuda()) {
    if (src.dtype() == dst.dtype()) {  // merges before building views: any rank that merges to 8
      cuda_copy_strided(src.dtype(), dst.device().index(), src.shape().dims(), src.strides(), src.raw_data(),
                        dst.strides(), dst.raw_data());
      return;
    }
    const auto v = cuda_views({&src, &dst}, src.shape(), op);
    cuda::copy(v[0], v[1]);
    return;
  }
  if (src.dtype() != dst.dtype()) {
    // Convert through a contiguous buffer of the source, then copy into the strided target.
    const Tensor c = src.contiguous();
    Tensor converted = dst.is_contiguous() ? dst : empty_tensor(dst.shape(), dst.dtype(), dst.device());
    cpu::convert(c.dtype(), c.raw_data(), dst.dtype(), converted.raw_data(), c.size());
    if (converted.raw_data() == dst.raw_data()) return;
    copy_into(converted, dst, op);
    return;
  }
  cpu::copy_strided(src.shape().dims(), src.strides(), static_cast<const char*>(src.raw_data()), dst.strides(),
                    static_cast<char*>(dst.raw_data()), itemsize(src.dtype()));
}

Tensor transfer(const Tensor& t, Device device) {
  const Device from = t.device();
  if (from == device) return t;
  if (device.is_cuda() && (device.index() < 0 || device.index() >= cuda::device_count()))
    throw DeviceError(fmt::format("to: cannot copy a tensor {} to {}: {} CUDA devices present{}",
                                  t.shape().to_string(), device.to_string(), cuda::device_count(),
                                  cuda::device_count() == 0 ? " (none usable: no GPU or keel built without CUDA)" : ""));
  const Tensor src = t.contiguous();  // made contiguous where it lives
  Tensor out = empty_tensor(t.shape(), t.dtype(), device);
  const std::size_t nbytes = static_cast<std::size_t>(t.size()) * itemsize(t.dtype());
  if (from.is_cpu())
    cuda::copy_to_device(out.raw_data(), src.raw_data(), nbytes, device.index());
  else if (device.is_cpu())
    cuda::copy_to_host(out.raw_data(), src.raw_data(), nbytes, from.index());
  else
    cuda::copy_between(out.raw_data(), device.index(), src.raw_data(), from.index(), nbytes);
  return out;
}

}  // namespace keel::detail
