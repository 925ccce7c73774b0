// Scans and sorts on either device. Host fallback: the CUDA backend has no kernels for this
// family, so a CUDA operand is copied to the host, the CPU kernel runs on the copies, and the
// outputs are copied into the caller's device tensors (correct, not fast: the copies wait for
// the device).
#include "backend/scan_sort.hpp"

#include <vector>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "cpu/scan_sort.hpp"

namespace keel::backend {

namespace {


// Runs `kernel(inputs, outputs)` on the CPU: CUDA inputs are copied to the host and CUDA
// outputs computed into host tensors of their shape, then copied back; half inputs are widened
// to float32 and half outputs computed in float32 and rounded once (exact for sorts, which only
// move values). Undefined tensors stay undefined.
template <class K>
void sort_on_host(std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs, K&& kernel) {
  std::vector<Tensor> in, out, wide_out;
  for (const Tensor* t : inputs) in.push_back(t->defined() ? widened(to_device(*t, Device::cpu())) : Tensor());
  for (const Tensor* t : outputs) {
    Tensor host;
    if (t->defined())
      host = on_cuda(*t) ? detail::empty_tensor(t->shape(), t->dtype(), Device::cpu()) : *t;
    out.push_back(host);
    wide_out.push_back(host.defined() ? widened_output(host) : Tensor());
  }
  kernel(in, wide_out);
  std::size_t i = 0;
  for (const Tensor* t : outputs) {
    if (t->defined()) {
      round_into(wide_out[i], out[i]);
      if (on_cuda(*t)) transfer(out[i], *t);
    }
    ++i;
  }
}

}  // namespace

void scan(ScanOp op, const Tensor& x, int axis, bool exclusive, bool reverse, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"scan", int(op)}, {&x}, {&out},
                     [=](const Tensor* t) { scan(op, t[0], axis, exclusive, reverse, t[1]); });
  KernelClock clock;
  sort_on_host({&x}, {&out}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    cpu::scan(op, in[0], axis, exclusive, reverse, o[0]);
  });
}

void sort(const Tensor& x, int axis, bool descending, const Tensor& values, const Tensor& indices) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"sort", descending ? 1 : 0}, {&x}, {&values, &indices},
                     [=](const Tensor* t) { sort(t[0], axis, descending, t[1], t[2]); });
  KernelClock clock;
  sort_on_host({&x}, {&values, &indices}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    cpu::sort(in[0], axis, descending, o[0], o[1]);
  });
}

void top_k(const Tensor& x, std::int64_t k, bool sorted, const Tensor& values, const Tensor& indices) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"top_k"}, {&x}, {&values, &indices},
                     [=](const Tensor* t) { top_k(t[0], k, sorted, t[1], t[2]); });
  KernelClock clock;
  sort_on_host({&x}, {&values, &indices}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    cpu::top_k(in[0], k, sorted, o[0], o[1]);
  });
}

void search_sorted(const Tensor& sorted, const Tensor& values, bool right, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"search_sorted", right ? 1 : 0}, {&sorted, &values}, {&out},
                     [=](const Tensor* t) { search_sorted(t[0], t[1], right, t[2]); });
  KernelClock clock;
  sort_on_host({&sorted, &values}, {&out}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    cpu::search_sorted(in[0], in[1], right, o[0]);
  });
}

void bincount(const Tensor& x, const Tensor& weights, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"bincount"}, {&x, &weights}, {&out}, [](const Tensor* t) { bincount(t[0], t[1], t[2]); });
  KernelClock clock;
  sort_on_host({&x, &weights}, {&out}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    cpu::bincount(in[0], in[1], o[0]);
  });
}

Tensor unique(const Tensor& x, const Tensor& idx) {
  // The output's size is a value read on the host: a traced function cannot replay that.
  if (KernelRecorder* r = recorder()) r->host_read("unique (its output size depends on the values)");
  KernelClock clock;
  Tensor y;
  sort_on_host({&x}, {&idx}, [&](const std::vector<Tensor>& in, const std::vector<Tensor>& o) {
    y = cpu::unique(in[0], o[0]);
  });
  if (is_half(x.dtype())) {  // computed on float32 copies: back to x's dtype (exact)
    Tensor h = detail::empty_tensor(y.shape(), x.dtype(), Device::cpu(), "unique");
    round_into(y, h);
    y = h;
  }
  return on_cuda(x) ? to_device(y, x.device()) : y;
}

}  // namespace keel::backend
