// n-d indexing kernels (gather_nd, scatter_nd, reverse): the CPU kernels, and for CUDA tensors
// the same kernels on host copies, since cuda/ has none of these (a documented host fallback).
#include "backend/indexing_nd.hpp"

#include <memory>
#include <optional>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "cpu/indexing_nd.hpp"

namespace keel::backend {

namespace {

// indices [..., M] addressing rows of `data` ([d0, ..., dM-1, row...]).
cpu::NdLayout layout_of(const Tensor& data, const Tensor& indices) {
  cpu::NdLayout l;
  const auto& id = indices.shape().dims();
  const std::int64_t m = id.back();
  l.dims.assign(data.shape().dims().begin(), data.shape().dims().begin() + m);
  l.n = 1;
  for (std::size_t i = 0; i + 1 < id.size(); ++i) l.n *= id[i];
  std::int64_t row = 1;
  for (std::size_t i = static_cast<std::size_t>(m); i < data.shape().dims().size(); ++i) row *= data.shape().dims()[i];
  l.row_bytes = static_cast<std::size_t>(row) * itemsize(data.dtype());
  return l;
}

NdBadIndex from_cpu(const cpu::NdBadIndex& b) { return {b.position, b.component, b.value}; }

// The replay of a traced call has no op around it to word the error: it throws itself.
[[noreturn]] void replay_bad(const char* op, const NdBadIndex& b, const Tensor& data, const Tensor& indices) {
  const std::int64_t dim = data.shape()[b.component];
  throw ValueError(fmt::format("{}: index {} (entry {} of index tuple {} of indices {}) is out of range [{}, {}) "
                               "for axis {} of shape {}", op, b.value, b.component, b.position,
                               indices.shape().to_string(), -dim, dim, b.component, data.shape().to_string()));
}

Tensor host(const Tensor& t) { return t.defined() ? to_device(t, Device::cpu()) : Tensor(); }

}  // namespace

NdBadIndex gather_nd(const Tensor& params, const Tensor& indices, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    auto traced = std::make_shared<std::optional<NdBadIndex>>();
    r->kernel({"gather_nd"}, {&params, &indices}, {&out}, [=](const Tensor* t) {
      const NdBadIndex b = gather_nd(t[0], t[1], t[2]);
      if (!traced->has_value()) *traced = b;
      else if (b.position >= 0) replay_bad("gather_nd", b, t[0], t[1]);
    });
    return **traced;
  }
  KernelClock clock;
  const cpu::NdLayout l = layout_of(params, indices);
  if (on_cuda(params)) {
    // Host fallback: no CUDA kernel for gather_nd.
    const Tensor hp = host(params), hi = host(indices);
    const Tensor ho = detail::empty_tensor(out.shape(), out.dtype(), Device::cpu(), "gather_nd");
    const cpu::NdBadIndex b = cpu::gather_nd(l, hp.raw_data(), hi.raw_data(), hi.dtype(), ho.raw_data());
    if (b.position < 0) transfer(ho, out);
    return from_cpu(b);
  }
  return from_cpu(cpu::gather_nd(l, params.raw_data(), indices.raw_data(), indices.dtype(), out.raw_data()));
}

NdBadIndex scatter_nd(ScatterMode mode, const Tensor& base, const Tensor& indices, const Tensor& updates,
                      const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    auto traced = std::make_shared<std::optional<NdBadIndex>>();
    r->kernel({"scatter_nd", static_cast<int>(mode)}, {&base, &indices, &updates}, {&out}, [=](const Tensor* t) {
      const NdBadIndex b = scatter_nd(mode, t[0], t[1], t[2], t[3]);
      if (!traced->has_value()) *traced = b;
      else if (b.position >= 0) replay_bad("scatter_nd", b, t[3], t[1]);
    });
    return **traced;
  }
  KernelClock clock;
  const cpu::NdLayout l = layout_of(out, indices);
  if (on_cuda(out)) {
    // Host fallback: no CUDA kernel for the scatters. The base travels to the host (also when it
    // is out itself) and the whole result comes back.
    const Tensor hb = host(base), hi = host(indices), hu = host(updates);
    const Tensor ho = detail::empty_tensor(out.shape(), out.dtype(), Device::cpu(), "scatter_nd");
    const cpu::NdBadIndex b = cpu::scatter_nd(mode, out.dtype(), l, hb.defined() ? hb.raw_data() : nullptr,
                                              hi.raw_data(), hi.dtype(), hu.raw_data(), ho.raw_data());
    if (b.position < 0) transfer(ho, out);
    return from_cpu(b);
  }
  return from_cpu(cpu::scatter_nd(mode, out.dtype(), l, base.defined() ? base.raw_data() : nullptr,
                                  indices.raw_data(), indices.dtype(), updates.raw_data(), out.raw_data()));
}

void reverse(const Tensor& x, const std::vector<bool>& flip, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"reverse"}, {&x}, {&out}, [=](const Tensor* t) { reverse(t[0], flip, t[1]); });
  KernelClock clock;
  if (on_cuda(x)) {
    // Host fallback: no CUDA kernel for reverse.
    const Tensor hx = host(x);
    const Tensor ho = detail::empty_tensor(out.shape(), out.dtype(), Device::cpu(), "reverse");
    cpu::reverse(hx.shape().dims(), hx.strides(), static_cast<const char*>(hx.raw_data()), flip,
                 static_cast<char*>(ho.raw_data()), itemsize(x.dtype()));
    transfer(ho, out);
    return;
  }
  cpu::reverse(x.shape().dims(), x.strides(), static_cast<const char*>(x.raw_data()), flip,
               static_cast<char*>(out.raw_data()), itemsize(x.dtype()));
}

}  // namespace keel::backend
