// Pooling: max_pool2d, avg_pool2d (windows over NHWC images, TensorFlow's padding rule) and the
// global pools, each forward with its gradient rule beside it.
//
// Every backward is itself a recorded op, so second derivatives work:
//   max_pool2d(x)           -> dx = max_pool_grad(x, g): g routed to the first maximum of each window
//   max_pool_grad(x, dy)    -> d(dy) = max_pool_gather(x, g): g read at those same positions;
//                              dx = 0 (the routing is piecewise constant in x)
//   max_pool_gather(x, dx)  -> d(dx) = max_pool_grad(x, g); dx = 0
// The maxima are found again from x in each of these kernels; a first-order gradient on the CPU
// scatters by the choices the forward kept instead (max_pool_forward_keeping_choices).
//   avg_pool2d(x)           -> dx = avg_pool_grad(g): g / count spread over each window
//   avg_pool_grad(dy)       -> d(dy) = avg_pool2d(g)     (the two are adjoint linear maps)
//
// The kernels run where x is (backend::pool: src/cpu/pooling.cpp or cuda/pool.cu), in float32 or float64;
// float16 and bfloat16 round trip through float32 on either device (recorded casts carry the
// gradient).
#include <fmt/core.h>

#include <array>
#include <string>

#include "autograd/record.hpp"
#include "core/tensor_util.hpp"
#include "backend/backend.hpp"
#include "backend/fused.hpp"
#include "backend/recorder.hpp"
#include "ops/padding.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using kernel::Padding;
using kernel::PoolKernel;
using kernel::WindowGeom;

namespace {

WindowGeom pool_geometry(const char* op, const Tensor& x, std::array<int, 2> pool,
                         std::array<int, 2> strides, const std::string& padding) {
  detail::check_defined(x, op);
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: input must be float16, bfloat16, float32 or float64, got {} {}", op,
                                 name(x.dtype()), x.shape().to_string()));
  if (x.rank() != 4)
    throw ShapeError(fmt::format("{}: input must have rank 4 (NHWC [batch, height, width, channels]), "
                                 "got rank {} shape {}",
                                 op, x.rank(), x.shape().to_string()));
  if (pool[0] <= 0 || pool[1] <= 0)
    throw ValueError(fmt::format("{}: pool size must be positive, got [{}, {}]", op, pool[0], pool[1]));
  if (strides[0] <= 0 || strides[1] <= 0)
    throw ValueError(fmt::format("{}: strides must be positive, got [{}, {}]", op, strides[0], strides[1]));
  const Padding pad = detail::parse_padding(padding, op);
  WindowGeom g;
  g.n = x.shape()[0];
  g.h = x.shape()[1];
  g.w = x.shape()[2];
  g.c = x.shape()[3];
  g.o = g.c;
  g.kh = pool[0];
  g.kw = pool[1];
  g.sh = strides[0];
  g.sw = strides[1];
  if (pad == Padding::valid && (g.kh > g.h || g.kw > g.w))
    throw ShapeError(fmt::format("{}: pool size [{}, {}] is larger than the input {} ({}x{}) with padding \"{}\"",
                                 op, pool[0], pool[1], x.shape().to_string(), g.h, g.w, padding));
  kernel::place_windows(g, pad);
  return g;
}


Shape pool_input_shape(const WindowGeom& g) { return Shape{g.n, g.h, g.w, g.c}; }
Shape pool_output_shape(const WindowGeom& g) { return Shape{g.n, g.ho, g.wo, g.c}; }

// ---- max ---------------------------------------------------------------------------------------

Tensor max_pool_grad(const Tensor& x, const Tensor& dy, const WindowGeom& g);
Tensor max_pool_gather(const Tensor& x, const Tensor& dx, const WindowGeom& g);

// Eagerly under a tape, where the device has the kernels (the CPU), the forward also keeps each
// window's choice (arg, y's shape): a first-order gradient then scatters dy by it, reading arg
// instead of x. By the backward, x has long left the caches: the seed CNN's first MaxPoolGrad read
// its 4 MB input back from memory. With a tape above the backward (higher derivatives), the
// gradient is max_pool_grad's recorded op, as before.
Tensor max_pool_forward_keeping_choices(const Tensor& x, const WindowGeom& g) {
  Tensor y = detail::empty_tensor(pool_output_shape(g), x.dtype(), x.device());
  Tensor arg = detail::empty_tensor(pool_output_shape(g), x.dtype(), x.device());
  backend::max_pool_with_argmax(g, x.contiguous(), y, arg);
  autograd::record("max_pool2d", {x}, {y}, [x, g, arg](const Grads& gr, const Needs&) {
    if (autograd::recording()) return Grads{max_pool_grad(x, gr[0], g)};
    Tensor dx = detail::empty_tensor(pool_input_shape(g), x.dtype(), x.device());
    backend::pool(PoolKernel::max_backward_arg, g, arg, gr[0].contiguous(), dx);
    return Grads{dx};
  }, {x});
  return y;
}

Tensor max_pool_forward(const Tensor& x, const WindowGeom& g) {
  // Not while a graph is traced: its fusion passes find the pool and its gradient as MaxPool and
  // MaxPoolGrad and keep the choices themselves, joining the ReLU gradient and the bias sum.
  if (autograd::recording() && !backend::recorder_fuses() &&
      backend::max_pool_keeps_choices(g, /*relu=*/false, x.device()))
    return max_pool_forward_keeping_choices(x, g);
  Tensor y = detail::empty_tensor(pool_output_shape(g), x.dtype(), x.device());
  backend::pool(PoolKernel::max_forward, g, x.contiguous(), Tensor(), y);
  if (autograd::recording())
    autograd::record("max_pool2d", {x}, {y}, [x, g](const Grads& gr, const Needs&) {
      return Grads{max_pool_grad(x, gr[0], g)};
    }, {x});
  return y;
}

Tensor max_pool_grad(const Tensor& x, const Tensor& dy, const WindowGeom& g) {
  Tensor dx = detail::empty_tensor(pool_input_shape(g), x.dtype(), x.device());
  backend::pool(PoolKernel::max_backward, g, x.contiguous(), dy.contiguous(), dx);
  if (autograd::recording())
    autograd::record("max_pool2d_grad", {x, dy}, {dx}, [x, g](const Grads& gr, const Needs& need) {
      return Grads{need[0] ? zeros_like(x) : Tensor(), need[1] ? max_pool_gather(x, gr[0], g) : Tensor()};
    }, {x});
  return dx;
}

Tensor max_pool_gather(const Tensor& x, const Tensor& dx, const WindowGeom& g) {
  Tensor out = detail::empty_tensor(pool_output_shape(g), x.dtype(), x.device());
  backend::pool(PoolKernel::max_gather, g, x.contiguous(), dx.contiguous(), out);
  if (autograd::recording())
    autograd::record("max_pool2d_grad_grad", {x, dx}, {out}, [x, g](const Grads& gr, const Needs& need) {
      return Grads{need[0] ? zeros_like(x) : Tensor(), need[1] ? max_pool_grad(x, gr[0], g) : Tensor()};
    }, {x});
  return out;
}

// ---- average -----------------------------------------------------------------------------------

Tensor avg_pool_grad(const Tensor& dy, const WindowGeom& g);

Tensor avg_pool_forward(const Tensor& x, const WindowGeom& g) {
  Tensor y = detail::empty_tensor(pool_output_shape(g), x.dtype(), x.device());
  backend::pool(PoolKernel::avg_forward, g, x.contiguous(), Tensor(), y);
  if (autograd::recording())
    autograd::record("avg_pool2d", {x}, {y}, [g](const Grads& gr, const Needs&) {
      return Grads{avg_pool_grad(gr[0], g)};
    });
  return y;
}

Tensor avg_pool_grad(const Tensor& dy, const WindowGeom& g) {
  Tensor dx = detail::empty_tensor(pool_input_shape(g), dy.dtype(), dy.device());
  backend::pool(PoolKernel::avg_backward, g, dy.contiguous(), Tensor(), dx);
  if (autograd::recording())
    autograd::record("avg_pool2d_grad", {dy}, {dx}, [g](const Grads& gr, const Needs&) {
      return Grads{avg_pool_forward(gr[0], g)};
    });
  return dx;
}

void check_global(const char* op, const Tensor& x) {
  detail::check_defined(x, op);
  if (x.rank() != 4)
    throw ShapeError(fmt::format("{}: input must have rank 4 (NHWC [batch, height, width, channels]), "
                                 "got rank {} shape {}",
                                 op, x.rank(), x.shape().to_string()));
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::array<int, 2> pool, std::array<int, 2> strides,
                  std::string padding) {
  const WindowGeom g = pool_geometry("max_pool2d", x, pool, strides, padding);
  if (is_half(x.dtype())) return cast(max_pool_forward(cast(x, DType::float32), g), x.dtype());
  return max_pool_forward(x, g);
}

Tensor avg_pool2d(const Tensor& x, std::array<int, 2> pool, std::array<int, 2> strides,
                  std::string padding) {
  const WindowGeom g = pool_geometry("avg_pool2d", x, pool, strides, padding);
  if (is_half(x.dtype())) return cast(avg_pool_forward(cast(x, DType::float32), g), x.dtype());
  return avg_pool_forward(x, g);
}

// The global pools are reductions over the spatial axes; their gradients come with the reductions.
Tensor global_avg_pool2d(const Tensor& x, bool keepdims) {
  check_global("global_avg_pool2d", x);
  if (is_half(x.dtype())) return cast(global_avg_pool2d(cast(x, DType::float32), keepdims), x.dtype());
  return reduce_mean(x, {1, 2}, keepdims);
}

Tensor global_max_pool2d(const Tensor& x, bool keepdims) {
  check_global("global_max_pool2d", x);
  if (is_half(x.dtype())) return cast(global_max_pool2d(cast(x, DType::float32), keepdims), x.dtype());
  return reduce_max(x, {1, 2}, keepdims);
}

}  // namespace keel
