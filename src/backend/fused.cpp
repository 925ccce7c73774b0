// The fused kernels' seam: the CPU kernels of src/cpu/ for every entry; CUDA has none yet (its
// ops run their composites, which has_fused tells them).
#include "backend/fused.hpp"
#include "backend/kernel_clock.hpp"

#include <cstdint>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "cpu/cross_entropy.hpp"
#include "cpu/normalization.hpp"
#include "cpu/recurrent.hpp"
#include "keel/core/error.hpp"

namespace keel::backend {

namespace {

// A fused entry reached on a device without its kernel: the op should have asked has_fused.
[[noreturn]] void no_kernel(const char* op, Device device) {
  throw DeviceError(fmt::format("{}: no fused kernel on {}", op, device.to_string()));
}

// Runs f.template operator()<T>() for `t`'s float dtype, on the CPU (the only device with these
// kernels).
template <class F>
void on_cpu(const char* op, const Tensor& t, F&& f) {
  if (!t.device().is_cpu()) no_kernel(op, t.device());
  detail::dispatch_float(t.dtype(), op, f);
}

template <class T>
const T* in(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* out(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// The rows of a 2-D tensor whose last axis has unit stride.
template <class T>
cpu::Rows<T> rows(const Tensor& t) {
  return {t.data<T>(), t.shape()[0] <= 1 ? 0 : t.strides()[0]};
}

template <class T>
cpu::CellInput<T> cell_input(const Tensor& x, const Tensor& kernel, const Tensor& x_proj) {
  if (!kernel.defined()) return {rows<T>(x), 0, nullptr, nullptr};
  return {{x.data<T>(), x.shape()[1]}, x.shape()[1], kernel.data<T>(), out<T>(x_proj)};
}

// The last axis, and the product of the others.
std::int64_t channels(const Tensor& x) { return x.rank() == 0 ? 1 : x.shape()[x.rank() - 1]; }
std::int64_t leading(const Tensor& x) {
  std::int64_t m = 1;
  for (std::int64_t d = 0; d + 1 < x.rank(); ++d) m *= x.shape()[d];
  return m;
}

// Layer norm's row length: the product of x's axes where the statistics (x's rank) have 1.
std::int64_t normalised(const Tensor& x, const Tensor& stats) {
  std::int64_t n = 1;
  for (std::int64_t d = 0; d < x.rank(); ++d)
    if (stats.shape()[d] == 1) n *= x.shape()[d];
  return n;
}

}  // namespace

bool has_fused(Fused, Device device) { return device.is_cpu(); }

// ---- normalisation -----------------------------------------------------------------------------

void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                      const Tensor& moving_variance, double momentum, double epsilon, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const Tensor& new_moving_mean,
                      const Tensor& new_moving_variance) {
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_train<T>(x.data<T>(), leading(x), channels(x), in<T>(gamma), in<T>(beta), in<T>(moving_mean),
                             in<T>(moving_variance), momentum, epsilon, out<T>(y), out<T>(mean), out<T>(rstd),
                             out<T>(new_moving_mean), out<T>(new_moving_variance));
  });
}

void batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                          const Tensor& moving_variance, double epsilon, const Tensor& y) {
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_inference<T>(x.data<T>(), leading(x), channels(x), in<T>(gamma), in<T>(beta),
                                 in<T>(moving_mean), in<T>(moving_variance), epsilon, out<T>(y));
  });
}

void batch_norm_train_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                               const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_train_backward<T>(x.data<T>(), dy.data<T>(), leading(x), channels(x), in<T>(gamma),
                                      mean.data<T>(), rstd.data<T>(), out<T>(dx), out<T>(dgamma), out<T>(dbeta));
  });
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  KernelClock clock;
  const std::int64_t rows = mean.size(), cols = normalised(x, mean);
  on_cpu("layer_norm", x, [&]<class T>() {
    cpu::layer_norm<T>(x.data<T>(), rows, cols, in<T>(gamma), in<T>(beta), epsilon, out<T>(y), out<T>(mean),
                       out<T>(rstd));
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  KernelClock clock;
  const std::int64_t rows = mean.size(), cols = normalised(x, mean);
  on_cpu("layer_norm", x, [&]<class T>() {
    cpu::layer_norm_backward<T>(x.data<T>(), dy.data<T>(), rows, cols, in<T>(gamma), mean.data<T>(),
                                rstd.data<T>(), out<T>(dx), out<T>(dgamma), out<T>(dbeta));
  });
}

// ---- recurrent cells ---------------------------------------------------------------------------

void lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
               const Tensor& recurrent_kernel, const Tensor& bias, const Tensor& act, const Tensor& c_new,
               const Tensor& tanh_c, const Tensor& h_new, const Tensor& x_proj, const Tensor& g_buf) {
  KernelClock clock;
  on_cpu("lstm_cell", h, [&]<class T>() {
    cpu::lstm_cell<T>(h.shape()[0], h.shape()[1], cell_input<T>(x, kernel, x_proj), h.data<T>(),
                      recurrent_kernel.data<T>(), in<T>(bias), rows<T>(c), out<T>(act), out<T>(g_buf),
                      out<T>(c_new), out<T>(tanh_c), out<T>(h_new));
  });
}

void lstm_cell_backward(const Tensor& act, const Tensor& tanh_c, const Tensor& dh, const Tensor& dc,
                        const Tensor& c, const Tensor& dz, const Tensor& dc_prev) {
  KernelClock clock;
  on_cpu("lstm_cell", act, [&]<class T>() {
    cpu::lstm_cell_backward<T>(act.shape()[0], act.shape()[1] / 4, act.data<T>(), tanh_c.data<T>(), rows<T>(dh),
                               rows<T>(dc), rows<T>(c), out<T>(dz), out<T>(dc_prev));
  });
}

void gru_cell(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
              const Tensor& b_in, const Tensor& b_rec, const Tensor& zr, const Tensor& rec_h, const Tensor& cand,
              const Tensor& h_new, const Tensor& x_proj, const Tensor& inner) {
  KernelClock clock;
  on_cpu("gru_cell", h, [&]<class T>() {
    cpu::gru_cell<T>(h.shape()[0], h.shape()[1], cell_input<T>(x, kernel, x_proj), h.data<T>(),
                     recurrent_kernel.data<T>(), in<T>(b_in), in<T>(b_rec), out<T>(zr), out<T>(rec_h),
                     out<T>(cand), out<T>(h_new), out<T>(inner));
  });
}

void gru_cell_backward(const Tensor& zr, const Tensor& rec_h, const Tensor& cand, const Tensor& h,
                       const Tensor& d, const Tensor& dX, const Tensor& dI, const Tensor& dh_direct) {
  KernelClock clock;
  on_cpu("gru_cell", cand, [&]<class T>() {
    cpu::gru_cell_backward<T>(cand.shape()[0], cand.shape()[1], zr.data<T>(), rec_h.data<T>(), cand.data<T>(),
                              rows<T>(h), rows<T>(d), out<T>(dX), out<T>(dI), out<T>(dh_direct));
  });
}

void recurrent_input_projection(const Tensor& x, const Tensor& kernel, const Tensor& bias, const Tensor& y) {
  KernelClock clock;
  on_cpu("recurrent_input_projection", x, [&]<class T>() {
    cpu::linear<T>(x.shape()[0], x.shape()[1], kernel.shape()[1], x.data<T>(), kernel.data<T>(), in<T>(bias),
                   out<T>(y));
  });
}

// ---- cross-entropies with logits -----------------------------------------------------------------

void softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  KernelClock clock;
  const std::int64_t k = channels(logits);
  on_cpu("softmax_cross_entropy_with_logits", logits, [&]<class T>() {
    cpu::softmax_cross_entropy<T>(loss.size(), k, labels.data<T>(), logits.data<T>(), out<T>(loss));
  });
}

void sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  KernelClock clock;
  const std::int64_t k = channels(logits);
  on_cpu("sparse_softmax_cross_entropy_with_logits", logits, [&]<class T>() {
    detail::dispatch_index(labels.dtype(), "sparse_softmax_cross_entropy_with_logits", [&]<class I>() {
      cpu::sparse_softmax_cross_entropy<T, I>(loss.size(), k, labels.data<I>(), logits.data<T>(), out<T>(loss));
    });
  });
}

void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  KernelClock clock;
  on_cpu("sigmoid_cross_entropy_with_logits", logits, [&]<class T>() {
    cpu::sigmoid_cross_entropy<T>(loss.size(), labels.data<T>(), logits.data<T>(), out<T>(loss));
  });
}

}  // namespace keel::backend
