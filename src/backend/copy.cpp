// Fills and copies on either device, moves between devices, and the half types' float32 route.
#include <cmath>
#include <cstring>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/cuda_views.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

// ---- the half types on the CPU ----------------------------------------------------------------

Tensor widened(const Tensor& t) {
  if (!is_half(t.dtype())) return t;
  const Tensor c = cpu::contiguous(t);
  Tensor w = detail::empty_tensor(t.shape(), DType::float32, t.device());
  cpu::convert(c.dtype(), c.raw_data(), DType::float32, w.raw_data(), c.size());
  return w;
}

Tensor widened_output(const Tensor& out) {
  return is_half(out.dtype()) ? detail::empty_tensor(out.shape(), DType::float32, out.device()) : out;
}

void round_into(const Tensor& computed, const Tensor& out) {
  if (computed.raw_data() == out.raw_data()) return;
  cpu::convert(computed.dtype(), computed.raw_data(), out.dtype(), out.raw_data(), out.size());
}

// ---- fills and copies -------------------------------------------------------------------------

void fill(const Tensor& out, double value) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"fill", 0, value}, {}, {&out}, [=](const Tensor* t) { fill(t[0], value); });
  KernelClock clock;
  const std::int64_t n = out.size();
  if (n == 0) return;
  if (on_cuda(out)) {
    cuda::fill(cuda_view(out), value);
    return;
  }
  if (value == 0.0 && !std::signbit(value)) {
    // Zero is all-zero bits in every dtype keel has.
    std::memset(out.raw_data(), 0, static_cast<std::size_t>(n) * itemsize(out.dtype()));
    return;
  }
  detail::dispatch_all(out.dtype(), "fill", [&]<class U>() {
    const U u = detail::convert<U>(value);
    U* p = static_cast<U*>(out.raw_data());
    for (std::int64_t i = 0; i < n; ++i) p[i] = u;
  });
}

void copy_block(Device device, DType dtype, const std::vector<std::int64_t>& shape, const void* src,
                const std::vector<std::int64_t>& src_strides, void* dst,
                const std::vector<std::int64_t>& dst_strides) {
  KernelClock clock;
  if (device.is_cuda()) {
    cuda_copy_strided(dtype, device.index(), shape, src_strides, src, dst_strides, dst);
    return;
  }
  cpu::copy_strided(shape, src_strides, static_cast<const char*>(src), dst_strides, static_cast<char*>(dst),
                    itemsize(dtype));
}

void copy(const Tensor& src, const Tensor& dst, const char* op) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"copy"}, {&src}, {&dst}, [=](const Tensor* t) { copy(t[0], t[1], op); });
  KernelClock clock;
  if (src.device() != dst.device())
    throw DeviceError(fmt::format("{}: source on {} and destination on {}", op, src.device().to_string(),
                                  dst.device().to_string()));
  if (src.size() == 0) return;
  if (src.dtype() == dst.dtype()) {  // a byte copy; on a GPU it merges axes first, so any rank that merges to 8
    copy_block(dst.device(), src.dtype(), src.shape().dims(), src.raw_data(), src.strides(), dst.raw_data(),
               dst.strides());
    return;
  }
  if (on_cuda(dst)) {
    const auto v = cuda_views({&src, &dst}, src.shape(), op);
    cuda::copy(v[0], v[1]);
    return;
  }
  // Convert through a contiguous buffer of the source, then copy into the strided target.
  const Tensor c = cpu::contiguous(src);
  const Tensor converted = dst.is_contiguous() ? dst : detail::empty_tensor(dst.shape(), dst.dtype(), dst.device());
  cpu::convert(c.dtype(), c.raw_data(), dst.dtype(), converted.raw_data(), c.size());
  if (converted.raw_data() != dst.raw_data()) copy(converted, dst, op);
}

void transfer(const Tensor& src, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"transfer"}, {&src}, {&out}, [](const Tensor* t) { transfer(t[0], t[1]); });
  KernelClock clock;
  const Device from = src.device(), to = out.device();
  const std::size_t nbytes = static_cast<std::size_t>(src.size()) * itemsize(src.dtype());
  if (from.is_cpu() && to.is_cpu())
    std::memcpy(out.raw_data(), src.raw_data(), nbytes);
  else if (from.is_cpu())
    cuda::copy_to_device(out.raw_data(), src.raw_data(), nbytes, to.index());
  else if (to.is_cpu())
    cuda::copy_to_host(out.raw_data(), src.raw_data(), nbytes, from.index());
  else
    cuda::copy_between(out.raw_data(), to.index(), src.raw_data(), from.index(), nbytes);
}

void read_into(const Tensor& x, DType dtype, void* dst) {
  if (KernelRecorder* r = recorder()) r->host_read("a read of tensor values on the host (item, to_vector)");
  KernelClock clock;
  const Tensor host = cpu::contiguous(to_device(x, Device::cpu()));
  cpu::convert(host.dtype(), host.raw_data(), dtype, dst, host.size());
}

// ---- conveniences that allocate -----------------------------------------------------------------

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor clone(const Tensor& x) {
  Tensor out = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  copy(x, out, "contiguous");
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  const Device from = t.device();
  if (from == device) return t;
  if (device.is_cuda() && (device.index() < 0 || device.index() >= cuda::device_count()))
    throw DeviceError(fmt::format("to: cannot copy a tensor {} to {}: {} CUDA devices present{}",
                                  t.shape().to_string(), device.to_string(), cuda::device_count(),
                                  cuda::device_count() == 0 ? " (none usable: no GPU or keel built without CUDA)" : ""));
  const Tensor src = contiguous(t);  // made contiguous where it lives
  Tensor out = detail::empty_tensor(t.shape(), t.dtype(), device);
  transfer(src, out);
  return out;
}

std::vector<std::int64_t> read_indices(const Tensor& idx, const char* op) {
  if (KernelRecorder* r = recorder()) r->host_read(op);
  // Host reads: indices on a GPU come over first (the copy waits for the device).
  const Tensor c = on_cuda(idx) ? to_device(idx, Device::cpu()) : cpu::contiguous(idx);
  std::vector<std::int64_t> out(static_cast<std::size_t>(c.size()));
  detail::dispatch_index(c.dtype(), op, [&]<class I>() {
    const I* p = c.data<I>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int64_t>(p[i]);
  });
  return out;
}

Tensor place_on_default(const Tensor& host) {
  const Device d = default_device();
  return d.is_cpu() ? host : to_device(host, d);
}

}  // namespace keel::backend
