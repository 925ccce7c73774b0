#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "backend/optimizer.hpp"

#include "cpu/optimizer.hpp"
#include "cuda/optimizers.hpp"

namespace keel::backend {

namespace {

bool fused_dtype(const Tensor& w) {
  if (w.device().is_cuda()) return w.dtype() == DType::float32 || w.dtype() == DType::float64;
  return w.dtype() == DType::float32;  // the CPU's SIMD loop; float64 and halves take the ops
}

bool matches(const Tensor& t, const Tensor& w) {
  return t.device() == w.device() && t.dtype() == w.dtype() && t.shape() == w.shape();
}

}  // namespace

bool optimizer_update(const kernel::OptimizerParams& p, const Tensor& w, const Tensor& grad,
                      const std::array<Tensor, 3>& slots) {
  KernelClock clock;
  if (!fused_dtype(w) || !w.is_contiguous() || !matches(grad, w)) return false;
  for (const Tensor& s : slots)
    if (s.defined() && (!matches(s, w) || !s.is_contiguous())) return false;
  if (KernelRecorder* r = recorder()) {
    r->kernel({"optimizer_update", int(p.rule)}, {&grad}, {&w, &slots[0], &slots[1], &slots[2]},
              [=](const Tensor* t) { optimizer_update(p, t[1], t[0], {t[2], t[3], t[4]}); });
    return true;
  }
  const Tensor g = grad.contiguous();  // a copy for a strided gradient (freed in stream order on a GPU)
  if (w.device().is_cuda()) {
    void* sp[3] = {};
    for (std::size_t k = 0; k < 3; ++k) sp[k] = slots[k].defined() ? slots[k].raw_data() : nullptr;
    cuda::optimizer_update(w.dtype(), p, w.size(), w.raw_data(), g.raw_data(), sp, w.device().index());
    return true;
  }
  float* sp[3] = {};
  for (std::size_t k = 0; k < 3; ++k) sp[k] = slots[k].defined() ? static_cast<float*>(slots[k].raw_data()) : nullptr;
  cpu::optimizer_update(p, w.size(), static_cast<float*>(w.raw_data()), g.data<float>(), sp);
  return true;
}

}  // namespace keel::backend
