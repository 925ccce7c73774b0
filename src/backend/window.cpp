// Sliding-window kernels: im2col + BLAS, depthwise and pooling loops on the CPU, cuDNN and the
// direct kernels of cuda/ on a GPU.
#include <array>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/fused.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "cpu/conv.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

namespace {

// A window's geometry as a traced graph keeps it: these fields, in this order.
template <class G>
auto geometry_fields(G& g) {
  return std::array{&g.n, &g.h, &g.w, &g.c, &g.kh, &g.kw, &g.sh, &g.sw, &g.dh, &g.dw, &g.pad_top, &g.pad_left,
                    &g.ho, &g.wo, &g.o};
}

std::array<std::int64_t, 15> geometry_ints(const WindowGeom& g) {
  std::array<std::int64_t, 15> ints{};
  const auto fields = geometry_fields(g);
  static_assert(fields.size() == ints.size());
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = *fields[i];
  return ints;
}

WindowGeom geometry_of(const std::vector<std::int64_t>& ints, const char* op) {
  WindowGeom g;
  const auto fields = geometry_fields(g);
  if (ints.size() != fields.size())
    throw ValueError(
        fmt::format("{}: a traced window geometry of {} integers, not {}", op, ints.size(), fields.size()));
  for (std::size_t i = 0; i < ints.size(); ++i) *fields[i] = ints[i];
  return g;
}

const void* input_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

void conv_native(ConvKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  const DType dt = out.dtype();
  const void *pa = input_or_null(a), *pb = input_or_null(b);
  void* po = out.raw_data();
  if (on_cuda(out)) {
    const int d = out.device().index();
    switch (k) {
      case ConvKernel::conv2d_forward: return cuda::conv2d_forward(dt, g, pa, pb, po, d);
      case ConvKernel::conv2d_backward_input: return cuda::conv2d_backward_input(dt, g, pa, pb, po, d);
      case ConvKernel::conv2d_backward_filter: return cuda::conv2d_backward_filter(dt, g, pa, pb, po, d);
      case ConvKernel::depthwise_forward: return cuda::depthwise_forward(dt, g, pa, pb, po, d);
      case ConvKernel::depthwise_backward_input: return cuda::depthwise_backward_input(dt, g, pa, pb, po, d);
      case ConvKernel::depthwise_backward_filter: return cuda::depthwise_backward_filter(dt, g, pa, pb, po, d);
    }
    return;
  }
  switch (k) {
    case ConvKernel::conv2d_forward: return cpu::conv2d_forward(dt, g, pa, pb, po);
    case ConvKernel::conv2d_backward_input: return cpu::conv2d_backward_input(dt, g, pa, pb, po);
    case ConvKernel::conv2d_backward_filter: return cpu::conv2d_backward_filter(dt, g, pa, pb, po);
    case ConvKernel::depthwise_forward: return cpu::depthwise_forward(dt, g, pa, pb, po);
    case ConvKernel::depthwise_backward_input: return cpu::depthwise_backward_input(dt, g, pa, pb, po);
    case ConvKernel::depthwise_backward_filter: return cpu::depthwise_backward_filter(dt, g, pa, pb, po);
  }
}

void pool_native(PoolKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  const DType dt = out.dtype();
  const void *pa = input_or_null(a), *pb = input_or_null(b);
  void* po = out.raw_data();
  if (on_cuda(out)) {
    const int d = out.device().index();
    switch (k) {
      case PoolKernel::max_forward: return cuda::max_pool_forward(dt, g, pa, po, d);
      case PoolKernel::max_backward: return cuda::max_pool_backward(dt, g, pa, pb, po, d);
      case PoolKernel::max_gather: return cuda::max_pool_gather(dt, g, pa, pb, po, d);
      case PoolKernel::avg_forward: return cuda::avg_pool_forward(dt, g, pa, po, d);
      case PoolKernel::avg_backward: return cuda::avg_pool_backward(dt, g, pa, po, d);
      case PoolKernel::max_backward_relu:  // the two kernels, the second in place
        cuda::max_pool_backward(dt, g, pa, pb, po, d);
        return binary(BinaryOp::relu_grad, out, a, out);
      case PoolKernel::max_backward_arg:
      case PoolKernel::max_backward_arg_relu:
        throw DeviceError(fmt::format("max_pool2d_grad_with_argmax: no kernel on {}", out.device().to_string()));
    }
    return;
  }
  switch (k) {
    case PoolKernel::max_forward: return cpu::max_pool_forward(dt, g, pa, po);
    case PoolKernel::max_backward: return cpu::max_pool_backward(dt, g, pa, pb, po);
    case PoolKernel::max_gather: return cpu::max_pool_gather(dt, g, pa, pb, po);
    case PoolKernel::avg_forward: return cpu::avg_pool_forward(dt, g, pa, po);
    case PoolKernel::avg_backward: return cpu::avg_pool_backward(dt, g, pa, po);
    case PoolKernel::max_backward_relu: return cpu::max_pool_backward_relu(dt, g, pa, pb, po);
    case PoolKernel::max_backward_arg: return cpu::max_pool_backward_arg(dt, g, pa, pb, po, /*relu=*/false);
    case PoolKernel::max_backward_arg_relu: return cpu::max_pool_backward_arg(dt, g, pa, pb, po, /*relu=*/true);
  }
}

// A replay takes the batch from its operands (the filter gradient's input x, else the result),
// so that a graph generalised over the batch (graph/generic.hpp) replays at every batch; the
// rest of the geometry must not change there.
WindowGeom at_batch_of(WindowGeom g, const Tensor& batched) {
  g.n = batched.shape()[0];
  return g;
}

}  // namespace

void conv(ConvKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const auto ints = geometry_ints(g);
    const bool filter = k == ConvKernel::conv2d_backward_filter || k == ConvKernel::depthwise_backward_filter;
    return r->kernel({"conv", int(k), 0, ints.data(), ints.size()}, {&a, &b}, {&out}, [=](const Tensor* t) {
      conv(k, at_batch_of(g, filter ? t[0] : t[2]), t[0], t[1], t[2]);
    });
  }
  KernelClock clock;
  if (!on_cuda(out) && is_half(out.dtype()))
    return via_float32({&a, &b}, out, [&](const std::vector<Tensor>& w, const Tensor& o) { conv_native(k, g, w[0], w[1], o); });
  conv_native(k, g, a, b, out);
}

WindowGeom window_geometry(const std::vector<std::int64_t>& ints) { return geometry_of(ints, "window"); }

KernelReplay pool_replay(PoolKernel k, const std::vector<std::int64_t>& ints) {
  const WindowGeom g = geometry_of(ints, "pool");
  return [=](const Tensor* t) { pool(k, at_batch_of(g, t[2]), t[0], t[1], t[2]); };
}

void pool(PoolKernel k, const WindowGeom& g, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const auto ints = geometry_ints(g);
    return r->kernel({"pool", int(k), 0, ints.data(), ints.size()}, {&a, &b}, {&out},
                     pool_replay(k, {ints.begin(), ints.end()}));
  }
  KernelClock clock;
  if (!on_cuda(out) && is_half(out.dtype()))
    return via_float32({&a, &b}, out, [&](const std::vector<Tensor>& w, const Tensor& o) { pool_native(k, g, w[0], w[1], o); });
  pool_native(k, g, a, b, out);
}

// ---- the max pool keeping its choices -----------------------------------------------------------

KernelReplay max_pool_with_argmax_replay(const std::vector<std::int64_t>& ints) {
  const WindowGeom g = geometry_of(ints, "max_pool2d");
  return [=](const Tensor* t) { max_pool_with_argmax(at_batch_of(g, t[1]), t[0], t[1], t[2]); };
}

bool max_pool_keeps_choices(const WindowGeom& g, bool relu, Device device) {
  return has_fused(Fused::max_pool_argmax, device) && cpu::max_pool_arg_fits(g, relu);
}

void max_pool_with_argmax(const WindowGeom& g, const Tensor& x, const Tensor& y, const Tensor& arg) {
  if (KernelRecorder* r = recorder()) {
    const auto ints = geometry_ints(g);
    return r->kernel({"pool_argmax", 0, 0, ints.data(), ints.size()}, {&x}, {&y, &arg},
                     max_pool_with_argmax_replay({ints.begin(), ints.end()}));
  }
  KernelClock clock;
  // Graph fusion makes this call only where the fused kernel exists: the CPU.
  if (!has_fused(Fused::max_pool_argmax, y.device()))
    throw DeviceError(fmt::format("max_pool2d_with_argmax: no kernel on {}", y.device().to_string()));
  cpu::max_pool_forward_arg(y.dtype(), g, x.raw_data(), y.raw_data(), arg.raw_data());
}

KernelReplay max_pool_grad_with_argmax_bias_replay(const std::vector<std::int64_t>& ints, bool relu) {
  const WindowGeom g = geometry_of(ints, "max_pool2d_grad");
  return [=](const Tensor* t) { max_pool_grad_with_argmax_bias(at_batch_of(g, t[2]), relu, t[0], t[1], t[2], t[3]); };
}

void max_pool_grad_with_argmax_bias(const WindowGeom& g, bool relu, const Tensor& arg, const Tensor& dy,
                                    const Tensor& dx, const Tensor& bias_grad) {
  if (KernelRecorder* r = recorder()) {
    const auto ints = geometry_ints(g);
    return r->kernel({"pool_arg_grad_bias", relu ? 1 : 0, 0, ints.data(), ints.size()}, {&arg, &dy}, {&dx, &bias_grad},
                     max_pool_grad_with_argmax_bias_replay({ints.begin(), ints.end()}, relu));
  }
  KernelClock clock;
  if (!has_fused(Fused::max_pool_argmax, dx.device()))
    throw DeviceError(fmt::format("max_pool2d_grad_with_argmax: no kernel on {}", dx.device().to_string()));
  cpu::max_pool_backward_arg(dx.dtype(), g, arg.raw_data(), dy.raw_data(), dx.raw_data(), relu, bias_grad.raw_data());
}

// ---- the fused convolution + bias + activation ---------------------------------------------------

KernelReplay conv2d_bias_activation_replay(const std::vector<std::int64_t>& ints, bool linear, UnaryOp op) {
  const WindowGeom g = geometry_of(ints, "conv2d");
  return [=](const Tensor* t) { conv2d_bias_activation(at_batch_of(g, t[3]), t[0], t[1], t[2], linear, op, t[3]); };
}

void conv2d_bias_activation(const WindowGeom& g, const Tensor& x, const Tensor& kernel, const Tensor& bias, bool linear,
                            UnaryOp op, const Tensor& y) {
  if (KernelRecorder* r = recorder()) {
    const auto ints = geometry_ints(g);
    return r->kernel({"conv_bias_activation", linear ? -1 : static_cast<int>(op), 0, ints.data(), ints.size()},
                     {&x, &kernel, &bias}, {&y}, conv2d_bias_activation_replay({ints.begin(), ints.end()}, linear, op));
  }
  KernelClock clock;
  // Graph fusion makes this call only where bias_activation has a kernel: the CPU.
  if (!has_fused(Fused::bias_activation, y.device()))
    throw DeviceError(fmt::format("conv2d with bias_add: no fused kernel on {}", y.device().to_string()));
  cpu::conv2d_forward(y.dtype(), g, x.raw_data(), kernel.raw_data(), y.raw_data(), {bias.raw_data(), linear, op});
}

}  // namespace keel::backend
