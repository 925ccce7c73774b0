#include "core/cuda_view.hpp"

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "cpu/elementwise.hpp"

namespace keel::detail {

namespace {

cuda::View view_with(const Tensor& t, const Shape& shape, const std::vector<std::int64_t>& strides) {
  if (shape.rank() > cuda::kMaxDims)
    throw DeviceError(fmt::format("CUDA kernels take tensors of rank at most {}; got shape {}", cuda::kMaxDims,
                                  shape.to_string()));
  cuda::View v;
  v.data = const_cast<void*>(t.raw_data());
  v.dtype = t.dtype();
  v.device = t.device().index();
  v.rank = static_cast<int>(shape.rank());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = shape[i];
    v.strides[i] = strides[static_cast<std::size_t>(i)];
  }
  return v;
}

}  // namespace

cuda::View cuda_view(const Tensor& t) { return view_with(t, t.shape(), t.strides()); }

cuda::View cuda_view(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return cuda_view(t);
  return view_with(t, shape, cpu::broadcast_strides(t, shape));
}

void merge_dims(std::initializer_list<cuda::View*> views, const char* op) {
  if (views.size() == 0) return;
  const cuda::View& first = **views.begin();
  const int rank = first.rank;
  std::int64_t shape[cuda::kMaxDims];
  int out = 0;
  for (int i = 0; i < rank; ++i) {
    const std::int64_t d = first.shape[i];
    if (d == 1) continue;  // a size-1 axis moves nowhere, whatever its stride
    bool mergeable = out > 0;
    if (mergeable)
      for (cuda::View* v : views)
        if (v->strides[out - 1] != v->strides[i] * d) mergeable = false;
    if (mergeable) {
      shape[out - 1] *= d;
      for (cuda::View* v : views) v->strides[out - 1] = v->strides[i];
    } else {
      shape[out] = d;
      for (cuda::View* v : views) v->strides[out] = v->strides[i];
      ++out;
    }
  }
  for (cuda::View* v : views) {
    v->rank = out;
    for (int i = 0; i < out; ++i) v->shape[i] = shape[i];
  }
  (void)op;
}

void cuda_copy_strided(DType dtype, int device, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& src_strides, const void* src,
                       const std::vector<std::int64_t>& dst_strides, void* dst) {
  std::vector<std::int64_t> dims, ss, ds;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return;  // nothing to copy
    if (shape[i] == 1) continue;
    if (!dims.empty() && ss.back() == src_strides[i] * shape[i] && ds.back() == dst_strides[i] * shape[i]) {
      dims.back() *= shape[i];
      ss.back() = src_strides[i];
      ds.back() = dst_strides[i];
    } else {
      dims.push_back(shape[i]);
      ss.push_back(src_strides[i]);
      ds.push_back(dst_strides[i]);
    }
  }
  if (dims.size() > static_cast<std::size_t>(cuda::kMaxDims))
    throw DeviceError(fmt::format("copy: CUDA kernels take at most {} non-mergeable axes, got {}",
                                  cuda::kMaxDims, dims.size()));
  cuda::View s, d;
  s.data = const_cast<void*>(src);
  d.data = dst;
  s.dtype = d.dtype = dtype;
  s.device = d.device = device;
  s.rank = d.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    s.shape[i] = d.shape[i] = dims[i];
    s.strides[i] = ss[i];
    d.strides[i] = ds[i];
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
    cuda::View s = cuda_view(src), d = cuda_view(dst);
    merge_dims({&s, &d}, op);
    cuda::copy(s, d);
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
