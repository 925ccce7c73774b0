// Elementwise kernels: broadcasting views for the GPU, the strided CPU drivers otherwise.
#include <initializer_list>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda_views.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "cpu/elementwise.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

namespace {

// on_gpu(views) with the operands' CUDA views (the output's last) broadcast to out's shape, or
// on_cpu() on the CPU. `op` names the kernel in the views' errors.
template <class Gpu, class Cpu>
void run(std::initializer_list<const Tensor*> operands, const Tensor& out, const char* op, Gpu&& on_gpu,
         Cpu&& on_cpu) {
  if (!on_cuda(out)) return on_cpu();  // the CPU path allocates nothing here
  if (out.size() == 0) return;
  std::vector<const Tensor*> views(operands);
  views.push_back(&out);
  on_gpu(cuda_views(views, out.shape(), op));
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"unary", int(op), alpha}, {&x}, {&out}, [=](const Tensor* t) { unary(op, t[0], t[1], alpha); });
  KernelClock clock;
  run({&x}, out, "unary", [&](const auto& v) { cuda::unary(op, v[0], v[1], alpha); }, [&] {
    if (!is_half(x.dtype())) return cpu::unary(op, x, out, alpha);
    via_float32({&x}, out, [&](const std::vector<Tensor>& in, const Tensor& o) { cpu::unary(op, in[0], o, alpha); });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"binary", int(op)}, {&a, &b}, {&out}, [=](const Tensor* t) { binary(op, t[0], t[1], t[2]); });
  KernelClock clock;
  run({&a, &b}, out, "binary", [&](const auto& v) { cuda::binary(op, v[0], v[1], v[2]); }, [&] {
    if (!is_half(a.dtype())) return cpu::binary(op, a, b, out);
    via_float32({&a, &b}, out, [&](const std::vector<Tensor>& in, const Tensor& o) { cpu::binary(op, in[0], in[1], o); });
  });
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"compare", int(op)}, {&a, &b}, {&out}, [=](const Tensor* t) { compare(op, t[0], t[1], t[2]); });
  KernelClock clock;
  run({&a, &b}, out, "compare", [&](const auto& v) { cuda::compare(op, v[0], v[1], v[2]); }, [&] {
    if (!is_half(a.dtype())) return cpu::compare(op, a, b, out);
    via_float32({&a, &b}, out, [&](const std::vector<Tensor>& in, const Tensor& o) { cpu::compare(op, in[0], in[1], o); });
  });
}

void logical(LogicalOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"logical", int(op)}, {&a, &b}, {&out}, [=](const Tensor* t) { logical(op, t[0], t[1], t[2]); });
  KernelClock clock;
  run({&a, &b}, out, "logical", [&](const auto& v) { cuda::logical(op, v[0], v[1], v[2]); },
      [&] { cpu::logical(op, a, b, out); });
}

void logical_not(const Tensor& x, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"logical_not"}, {&x}, {&out}, [](const Tensor* t) { logical_not(t[0], t[1]); });
  KernelClock clock;
  run({&x}, out, "logical_not", [&](const auto& v) { cuda::logical_not(v[0], v[1]); }, [&] { cpu::logical_not(x, out); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"where"}, {&cond, &a, &b}, {&out}, [](const Tensor* t) { where(t[0], t[1], t[2], t[3]); });
  KernelClock clock;
  run({&cond, &a, &b}, out, "where", [&](const auto& v) { cuda::where(v[0], v[1], v[2], v[3]); },
      [&] { cpu::where(cond, a, b, out); });
}

void float_test(FloatTest test, const Tensor& x, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"float_test", int(test)}, {&x}, {&out}, [=](const Tensor* t) { float_test(test, t[0], t[1]); });
  KernelClock clock;
  const char* opname = test == FloatTest::nan ? "is_nan" : test == FloatTest::inf ? "is_inf" : "is_finite";
  run({&x}, out, opname, [&](const auto& v) { cuda::float_test(test, v[0], v[1]); },
      [&] { cpu::float_test(test, x, out); });
}

}  // namespace keel::backend
