// The fused kernels' seam: the CPU kernels of src/cpu/ for every entry; CUDA has none yet (its
// ops run their composites, which has_fused tells them).
#include "backend/fused.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "cpu/elementwise_program.hpp"

#include <array>
#include <cstdint>
#include <vector>

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "cpu/cross_entropy.hpp"
#include "cpu/elementwise.hpp"
#include "cpu/normalization.hpp"
#include "cpu/recurrent.hpp"
#include "cpu/resample.hpp"
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
const T* typed_or_null(const Tensor& t) {
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
  if (KernelRecorder* r = recorder())
    return r->kernel({"batch_norm_train"}, {&x, &gamma, &beta, &moving_mean, &moving_variance},
                     {&y, &mean, &rstd, &new_moving_mean, &new_moving_variance}, [=](const Tensor* t) {
                       batch_norm_train(t[0], t[1], t[2], t[3], t[4], momentum, epsilon, t[5], t[6], t[7], t[8], t[9]);
                     });
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_train<T>(x.data<T>(), leading(x), channels(x), typed_or_null<T>(gamma), typed_or_null<T>(beta), typed_or_null<T>(moving_mean),
                             typed_or_null<T>(moving_variance), momentum, epsilon, out<T>(y), out<T>(mean), out<T>(rstd),
                             out<T>(new_moving_mean), out<T>(new_moving_variance));
  });
}

void batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                          const Tensor& moving_variance, double epsilon, const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"batch_norm_inference", 0, epsilon}, {&x, &gamma, &beta, &moving_mean, &moving_variance}, {&y},
                     [=](const Tensor* t) { batch_norm_inference(t[0], t[1], t[2], t[3], t[4], epsilon, t[5]); });
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_inference<T>(x.data<T>(), leading(x), channels(x), typed_or_null<T>(gamma), typed_or_null<T>(beta),
                                 typed_or_null<T>(moving_mean), typed_or_null<T>(moving_variance), epsilon, out<T>(y));
  });
}

void batch_norm_train_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                               const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"batch_norm_backward"}, {&x, &dy, &gamma, &mean, &rstd}, {&dx, &dgamma, &dbeta},
                     [](const Tensor* t) { batch_norm_train_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]); });
  KernelClock clock;
  on_cpu("batch_norm", x, [&]<class T>() {
    cpu::batch_norm_train_backward<T>(x.data<T>(), dy.data<T>(), leading(x), channels(x), typed_or_null<T>(gamma),
                                      mean.data<T>(), rstd.data<T>(), out<T>(dx), out<T>(dgamma), out<T>(dbeta));
  });
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"layer_norm", 0, epsilon}, {&x, &gamma, &beta}, {&y, &mean, &rstd},
                     [=](const Tensor* t) { layer_norm(t[0], t[1], t[2], epsilon, t[3], t[4], t[5]); });
  KernelClock clock;
  const std::int64_t rows = mean.size(), cols = normalised(x, mean);
  on_cpu("layer_norm", x, [&]<class T>() {
    cpu::layer_norm<T>(x.data<T>(), rows, cols, typed_or_null<T>(gamma), typed_or_null<T>(beta), epsilon, out<T>(y), out<T>(mean),
                       out<T>(rstd));
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"layer_norm_backward"}, {&x, &dy, &gamma, &mean, &rstd}, {&dx, &dgamma, &dbeta},
                     [](const Tensor* t) { layer_norm_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]); });
  KernelClock clock;
  const std::int64_t rows = mean.size(), cols = normalised(x, mean);
  on_cpu("layer_norm", x, [&]<class T>() {
    cpu::layer_norm_backward<T>(x.data<T>(), dy.data<T>(), rows, cols, typed_or_null<T>(gamma), mean.data<T>(),
                                rstd.data<T>(), out<T>(dx), out<T>(dgamma), out<T>(dbeta));
  });
}

// ---- group norm ------------------------------------------------------------------------------------

namespace {
// t as [outer, rows, inner] around its axes [first, last): the products of the axes before, of
// those, and of the axes after.
std::array<std::int64_t, 3> around(const Tensor& t, int first, int last) {
  std::array<std::int64_t, 3> d{1, 1, 1};
  for (int a = 0; a < t.rank(); ++a) d[a < first ? 0 : a < last ? 1 : 2] *= t.shape()[a];
  return d;
}
}  // namespace

void group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, double epsilon, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"group_norm", groups, epsilon}, {&x, &gamma, &beta}, {&y, &mean, &rstd},
                     [groups, epsilon](const Tensor* t) {
                       group_norm(t[0], groups, t[1], t[2], epsilon, t[3], t[4], t[5]);
                     });
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(x, 1, x.rank() - 1);  // [images, pixels, channels]
  on_cpu("group_norm", x, [&]<class T>() {
    cpu::group_norm<T>(x.data<T>(), d[0], d[1], d[2], groups, typed_or_null<T>(gamma), typed_or_null<T>(beta), epsilon,
                       out<T>(y), out<T>(mean), out<T>(rstd));
  });
}

void group_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         int groups, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"group_norm_backward", groups}, {&x, &dy, &gamma, &mean, &rstd}, {&dx, &dgamma, &dbeta},
                     [groups](const Tensor* t) {
                       group_norm_backward(t[0], t[1], t[2], t[3], t[4], groups, t[5], t[6], t[7]);
                     });
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(x, 1, x.rank() - 1);  // [images, pixels, channels]
  on_cpu("group_norm", x, [&]<class T>() {
    cpu::group_norm_backward<T>(x.data<T>(), dy.data<T>(), d[0], d[1], d[2], groups, typed_or_null<T>(gamma),
                                mean.data<T>(), rstd.data<T>(), out<T>(dx), out<T>(dgamma), out<T>(dbeta));
  });
}

// ---- moments -------------------------------------------------------------------------------------

namespace {
// The axes [first, last), as a traced graph keeps them (Node::ints, reduce's form).
std::vector<std::int64_t> block_axes(int first, int last) {
  std::vector<std::int64_t> axes;
  for (int a = first; a < last; ++a) axes.push_back(a);
  return axes;
}
}  // namespace

void moments(const Tensor& x, int first, int last, const Tensor& mean, const Tensor& variance) {
  if (KernelRecorder* r = recorder()) {
    const std::vector<std::int64_t> axes = block_axes(first, last);
    return r->kernel({"moments", 0, 0, axes.data(), axes.size()}, {&x}, {&mean, &variance},
                     [first, last](const Tensor* t) { moments(t[0], first, last, t[1], t[2]); });
  }
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(x, first, last);
  on_cpu("moments", x, [&]<class T>() {
    cpu::moments<T>(x.data<T>(), d[0], d[1], d[2], out<T>(mean), out<T>(variance));
  });
}

void moments_backward(const Tensor& x, int first, int last, const Tensor& mean, const Tensor& g_mean,
                      const Tensor& g_var, const Tensor& dx) {
  if (KernelRecorder* r = recorder()) {
    const std::vector<std::int64_t> axes = block_axes(first, last);
    return r->kernel({"moments_backward", 0, 0, axes.data(), axes.size()}, {&x, &mean, &g_mean, &g_var}, {&dx},
                     [first, last](const Tensor* t) { moments_backward(t[0], first, last, t[1], t[2], t[3], t[4]); });
  }
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(x, first, last);
  on_cpu("moments", x, [&]<class T>() {
    cpu::moments_backward<T>(x.data<T>(), d[0], d[1], d[2], mean.data<T>(), g_mean.data<T>(), g_var.data<T>(),
                             out<T>(dx));
  });
}

// ---- linear resampling -------------------------------------------------------------------------

void resample_linear(const Tensor& x, int axis, const Tensor& lower, const Tensor& upper, const Tensor& weight,
                     const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"resample_linear", axis}, {&x, &lower, &upper, &weight}, {&y},
                     [axis](const Tensor* t) { resample_linear(t[0], axis, t[1], t[2], t[3], t[4]); });
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(x, axis, axis + 1);  // [outer, in, inner]
  on_cpu("resize_bilinear", x, [&]<class T>() {
    cpu::resample_linear<T>(x.data<T>(), d[0], d[1], d[2], lower.data<std::int64_t>(), upper.data<std::int64_t>(),
                            weight.data<T>(), y.shape()[axis], out<T>(y));
  });
}

void resample_linear_backward(const Tensor& dy, int axis, const Tensor& lower, const Tensor& upper,
                              const Tensor& weight, const Tensor& dx) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"resample_linear_backward", axis}, {&dy, &lower, &upper, &weight}, {&dx},
                     [axis](const Tensor* t) { resample_linear_backward(t[0], axis, t[1], t[2], t[3], t[4]); });
  KernelClock clock;
  const std::array<std::int64_t, 3> d = around(dx, axis, axis + 1);  // [outer, in, inner]
  on_cpu("resize_bilinear", dy, [&]<class T>() {
    cpu::resample_linear_backward<T>(dy.data<T>(), d[0], d[1], d[2], lower.data<std::int64_t>(),
                                     upper.data<std::int64_t>(), weight.data<T>(), dy.shape()[axis], out<T>(dx));
  });
}

// ---- recurrent cells ---------------------------------------------------------------------------

void lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
               const Tensor& recurrent_kernel, const Tensor& bias, const Tensor& act, const Tensor& c_new,
               const Tensor& tanh_c, const Tensor& h_new, const Tensor& x_proj) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"lstm_cell"}, {&x, &h, &c, &kernel, &recurrent_kernel, &bias},
                     {&act, &c_new, &tanh_c, &h_new, &x_proj}, [](const Tensor* t) {
                       lstm_cell(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
                     });
  KernelClock clock;
  on_cpu("lstm_cell", h, [&]<class T>() {
    cpu::lstm_cell<T>(h.shape()[0], h.shape()[1], cell_input<T>(x, kernel, x_proj), h.data<T>(),
                      recurrent_kernel.data<T>(), typed_or_null<T>(bias), rows<T>(c), out<T>(act),
                      out<T>(c_new), out<T>(tanh_c), out<T>(h_new));
  });
}

void lstm_cell_backward(const Tensor& act, const Tensor& tanh_c, const Tensor& dh, const Tensor& dc,
                        const Tensor& c, const Tensor& dz, const Tensor& dc_prev) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"lstm_cell_backward"}, {&act, &tanh_c, &dh, &dc, &c}, {&dz, &dc_prev},
                     [](const Tensor* t) { lstm_cell_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6]); });
  KernelClock clock;
  on_cpu("lstm_cell", act, [&]<class T>() {
    cpu::lstm_cell_backward<T>(act.shape()[0], act.shape()[1] / 4, act.data<T>(), tanh_c.data<T>(), rows<T>(dh),
                               rows<T>(dc), rows<T>(c), out<T>(dz), out<T>(dc_prev));
  });
}

int recurrence_parts(std::int64_t time, std::int64_t batch, std::int64_t units, std::int64_t width) {
  return cpu::recurrence_parts(time, batch, units, width);
}

void lstm_sequence(int parts, const Tensor& xz, const Tensor& recurrent_kernel, const Tensor& h0, const Tensor& c0,
                   const Tensor& h_read, const Tensor& c_read, const Tensor& act, const Tensor& tanh_c,
                   const Tensor& outputs, const Tensor& h_last, const Tensor& c_last) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts};
    return r->kernel({"lstm_sequence", 0, 0, ints, 1}, {&xz, &recurrent_kernel, &h0, &c0},
                     {&h_read, &c_read, &act, &tanh_c, &outputs, &h_last, &c_last}, [parts](const Tensor* t) {
                       lstm_sequence(parts, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
                     });
  }
  KernelClock clock;
  on_cpu("lstm", h_last, [&]<class T>() {
    cpu::lstm_sequence<T>(outputs.shape()[1], h_last.shape()[0], h_last.shape()[1], parts, xz.data<T>(),
                          recurrent_kernel.data<T>(), rows<T>(h0), rows<T>(c0), out<T>(h_read), out<T>(c_read),
                          out<T>(act), out<T>(tanh_c), out<T>(outputs), out<T>(h_last), out<T>(c_last));
  });
}

void lstm_sequence_backward(int parts, const Tensor& act, const Tensor& tanh_c, const Tensor& c_read,
                            const Tensor& d_out, const Tensor& dh_last, const Tensor& dc_last,
                            const Tensor& recurrent_kernel_t, const Tensor& dz, const Tensor& dc_first,
                            const Tensor& dh_first, const Tensor& work) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts};
    return r->kernel({"lstm_sequence_backward", 0, 0, ints, 1},
                     {&act, &tanh_c, &c_read, &d_out, &dh_last, &dc_last, &recurrent_kernel_t},
                     {&dz, &dc_first, &dh_first, &work}, [parts](const Tensor* t) {
                       lstm_sequence_backward(parts, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
                     });
  }
  KernelClock clock;
  const std::int64_t batch = dc_first.shape()[0], u = dc_first.shape()[1];
  on_cpu("lstm", act, [&]<class T>() {
    cpu::lstm_sequence_backward<T>(act.shape()[0] / batch, batch, u, parts, act.data<T>(), tanh_c.data<T>(),
                                   c_read.data<T>(), d_out.data<T>(), rows<T>(dh_last), rows<T>(dc_last),
                                   recurrent_kernel_t.data<T>(), out<T>(dz), out<T>(dc_first),
                                   dh_first.defined() ? out<T>(dh_first) : nullptr, out<T>(work));
  });
}

void gru_cell(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
              const Tensor& b_in, const Tensor& b_rec, const Tensor& zr, const Tensor& rec_h, const Tensor& cand,
              const Tensor& h_new, const Tensor& x_proj, const Tensor& inner) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"gru_cell"}, {&x, &h, &kernel, &recurrent_kernel, &b_in, &b_rec},
                     {&zr, &rec_h, &cand, &h_new, &x_proj, &inner}, [](const Tensor* t) {
                       gru_cell(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11]);
                     });
  KernelClock clock;
  on_cpu("gru_cell", h, [&]<class T>() {
    cpu::gru_cell<T>(h.shape()[0], h.shape()[1], cell_input<T>(x, kernel, x_proj), h.data<T>(),
                     recurrent_kernel.data<T>(), typed_or_null<T>(b_in), typed_or_null<T>(b_rec), out<T>(zr), out<T>(rec_h),
                     out<T>(cand), out<T>(h_new), out<T>(inner));
  });
}

void gru_cell_backward(const Tensor& zr, const Tensor& rec_h, const Tensor& cand, const Tensor& h,
                       const Tensor& d, const Tensor& dX, const Tensor& dI, const Tensor& dh_direct) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"gru_cell_backward"}, {&zr, &rec_h, &cand, &h, &d}, {&dX, &dI, &dh_direct},
                     [](const Tensor* t) { gru_cell_backward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]); });
  KernelClock clock;
  on_cpu("gru_cell", cand, [&]<class T>() {
    cpu::gru_cell_backward<T>(cand.shape()[0], cand.shape()[1], zr.data<T>(), rec_h.data<T>(), cand.data<T>(),
                              rows<T>(h), rows<T>(d), out<T>(dX), out<T>(dI), out<T>(dh_direct));
  });
}

void gru_sequence(int parts, const Tensor& xz, const Tensor& recurrent_kernel, const Tensor& b_rec, const Tensor& h0,
                  const Tensor& h_read, const Tensor& zr, const Tensor& rec_h, const Tensor& cand,
                  const Tensor& outputs, const Tensor& h_last, const Tensor& inner) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts};
    return r->kernel({"gru_sequence", 0, 0, ints, 1}, {&xz, &recurrent_kernel, &b_rec, &h0},
                     {&h_read, &zr, &rec_h, &cand, &outputs, &h_last, &inner}, [parts](const Tensor* t) {
                       gru_sequence(parts, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
                     });
  }
  KernelClock clock;
  on_cpu("gru", h_last, [&]<class T>() {
    cpu::gru_sequence<T>(outputs.shape()[1], h_last.shape()[0], h_last.shape()[1], parts, xz.data<T>(),
                         recurrent_kernel.data<T>(), typed_or_null<T>(b_rec), rows<T>(h0), out<T>(h_read), out<T>(zr),
                         out<T>(rec_h), out<T>(cand), out<T>(outputs), out<T>(h_last), out<T>(inner));
  });
}

void gru_sequence_backward(int parts, const Tensor& zr, const Tensor& rec_h, const Tensor& cand, const Tensor& h_read,
                           const Tensor& d_out, const Tensor& dh_last, const Tensor& recurrent_kernel_t,
                           const Tensor& dX, const Tensor& dI, const Tensor& dh_first, const Tensor& work) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts};
    return r->kernel({"gru_sequence_backward", 0, 0, ints, 1},
                     {&zr, &rec_h, &cand, &h_read, &d_out, &dh_last, &recurrent_kernel_t}, {&dX, &dI, &dh_first, &work},
                     [parts](const Tensor* t) {
                       gru_sequence_backward(parts, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
                     });
  }
  KernelClock clock;
  const std::int64_t batch = dh_last.shape()[0], u = dh_last.shape()[1];
  on_cpu("gru", cand, [&]<class T>() {
    cpu::gru_sequence_backward<T>(cand.shape()[0] / batch, batch, u, parts, zr.data<T>(), rec_h.data<T>(),
                                  cand.data<T>(), h_read.data<T>(), d_out.data<T>(), rows<T>(dh_last),
                                  recurrent_kernel_t.data<T>(), out<T>(dX), out<T>(dI),
                                  dh_first.defined() ? out<T>(dh_first) : nullptr, out<T>(work));
  });
}

void recurrent_input_projection(const Tensor& x, const Tensor& kernel, const Tensor& bias, const Tensor& y, int parts,
                                std::int64_t time) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts, time};
    return r->kernel({"recurrent_input_projection", 0, 0, ints, 2}, {&x, &kernel, &bias}, {&y},
                     [=](const Tensor* t) { recurrent_input_projection(t[0], t[1], t[2], t[3], parts, time); });
  }
  KernelClock clock;
  on_cpu("recurrent_input_projection", x, [&]<class T>() {
    cpu::linear<T>(x.shape()[0], x.shape()[1], kernel.shape()[1], x.data<T>(), kernel.data<T>(), typed_or_null<T>(bias),
                   out<T>(y), parts, time);
  });
}

void recurrent_input_projection_backward(const Tensor& x, const Tensor& kernel, const Tensor& dy, const Tensor& dx,
                                         const Tensor& dkernel, const Tensor& dbias, int parts, std::int64_t time) {
  if (KernelRecorder* r = recorder()) {
    const std::int64_t ints[] = {parts, time};
    return r->kernel({"recurrent_input_projection_backward", 0, 0, ints, 2}, {&x, &kernel, &dy},
                     {&dx, &dkernel, &dbias}, [=](const Tensor* t) {
                       recurrent_input_projection_backward(t[0], t[1], t[2], t[3], t[4], t[5], parts, time);
                     });
  }
  KernelClock clock;
  on_cpu("recurrent_input_projection", x, [&]<class T>() {
    const auto maybe = [](const Tensor& t) { return t.defined() ? out<T>(t) : nullptr; };
    cpu::linear_backward<T>(x.shape()[0], x.shape()[1], kernel.shape()[1], x.data<T>(), kernel.data<T>(), dy.data<T>(),
                            maybe(dx), maybe(dkernel), maybe(dbias), parts, time);
  });
}

// ---- cross-entropies with logits -----------------------------------------------------------------

void softmax(const Tensor& x, const Tensor& y, bool log) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"softmax", log ? 1 : 0}, {&x}, {&y}, [log](const Tensor* t) { softmax(t[0], t[1], log); });
  KernelClock clock;
  const std::int64_t k = channels(x);
  on_cpu(log ? "log_softmax" : "softmax", x, [&]<class T>() {
    cpu::softmax_rows<T>(x.size() / k, k, x.data<T>(), out<T>(y), log);
  });
}

void softmax_backward(const Tensor& y, const Tensor& g, const Tensor& dx, bool log) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"softmax_backward", log ? 1 : 0}, {&y, &g}, {&dx},
                     [log](const Tensor* t) { softmax_backward(t[0], t[1], t[2], log); });
  KernelClock clock;
  const std::int64_t k = channels(y);
  on_cpu(log ? "log_softmax" : "softmax", y, [&]<class T>() {
    cpu::softmax_rows_backward<T>(y.size() / k, k, y.data<T>(), g.data<T>(), out<T>(dx), log);
  });
}

void softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"softmax_cross_entropy"}, {&labels, &logits}, {&loss},
                     [](const Tensor* t) { softmax_cross_entropy(t[0], t[1], t[2]); });
  KernelClock clock;
  const std::int64_t k = channels(logits);
  on_cpu("softmax_cross_entropy_with_logits", logits, [&]<class T>() {
    cpu::softmax_cross_entropy<T>(loss.size(), k, labels.data<T>(), logits.data<T>(), out<T>(loss));
  });
}

void sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"sparse_softmax_cross_entropy"}, {&labels, &logits}, {&loss},
                     [](const Tensor* t) { sparse_softmax_cross_entropy(t[0], t[1], t[2]); });
  KernelClock clock;
  const std::int64_t k = channels(logits);
  on_cpu("sparse_softmax_cross_entropy_with_logits", logits, [&]<class T>() {
    detail::dispatch_index(labels.dtype(), "sparse_softmax_cross_entropy_with_logits", [&]<class I>() {
      cpu::sparse_softmax_cross_entropy<T, I>(loss.size(), k, labels.data<I>(), logits.data<T>(), out<T>(loss));
    });
  });
}

void softmax_cross_entropy_backward(const Tensor& labels, const Tensor& logits, const Tensor& g, const Tensor& dx) {
  const bool sparse = !is_floating(labels.dtype());
  if (KernelRecorder* r = recorder())
    return r->kernel({"softmax_cross_entropy_backward", sparse ? 1 : 0}, {&labels, &logits, &g}, {&dx},
                     [](const Tensor* t) { softmax_cross_entropy_backward(t[0], t[1], t[2], t[3]); });
  KernelClock clock;
  const std::int64_t k = channels(logits);
  const char* op = sparse ? "sparse_softmax_cross_entropy_with_logits" : "softmax_cross_entropy_with_logits";
  on_cpu(op, logits, [&]<class T>() {
    if (!sparse)
      return cpu::softmax_cross_entropy_backward<T, std::int32_t>(g.size(), k, logits.data<T>(), g.data<T>(),
                                                                  labels.data<T>(), nullptr, out<T>(dx));
    detail::dispatch_index(labels.dtype(), op, [&]<class I>() {
      cpu::softmax_cross_entropy_backward<T, I>(g.size(), k, logits.data<T>(), g.data<T>(), nullptr, labels.data<I>(),
                                                out<T>(dx));
    });
  });
}

void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"sigmoid_cross_entropy"}, {&labels, &logits}, {&loss},
                     [](const Tensor* t) { sigmoid_cross_entropy(t[0], t[1], t[2]); });
  KernelClock clock;
  on_cpu("sigmoid_cross_entropy_with_logits", logits, [&]<class T>() {
    cpu::sigmoid_cross_entropy<T>(loss.size(), labels.data<T>(), logits.data<T>(), out<T>(loss));
  });
}

// ---- bias and activation -----------------------------------------------------------------------

void bias_activation(const Tensor& x, const Tensor& bias, bool linear, kernel::UnaryOp op, const Tensor& y) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"bias_activation", linear ? -1 : static_cast<int>(op)}, {&x, &bias}, {&y},
                     [=](const Tensor* t) { bias_activation(t[0], t[1], linear, op, t[2]); });
  KernelClock clock;
  if (!x.device().is_cpu()) no_kernel("bias_add", x.device());
  cpu::bias_unary(op, linear, x, bias, y);
}

// ---- fused elementwise programs ----------------------------------------------------------------

bool has_elementwise_program(Device device) { return device.is_cpu(); }

void elementwise_program(const kernel::ElementwiseProgram& program, std::int64_t n, const Tensor* inputs,
                         const Tensor* outputs) {
  KernelClock clock;
  std::vector<const void*> in(program.inputs.size());
  std::vector<void*> out(static_cast<std::size_t>(program.num_outputs));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = inputs[i].raw_data();
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = outputs[j].raw_data();
  cpu::run_elementwise_program(program, outputs[0].dtype(), n, in.data(), out.data());
}

}  // namespace keel::backend
