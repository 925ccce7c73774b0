// Differentiable bilinear resizing (tf.image.resize, half_pixel_centers, no antialias): a linear
// resampling along each axis in turn, a fused kernel with its own gradient where the device has
// one, else gathers and a blend whose gradient comes from gather's.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/record.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/conv_nd.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"
#include "ops/gather_adjoint.hpp"

namespace keel {

namespace {

// Resamples axis `axis` of x from `in` to `out` elements. TF's rule (half pixel centers):
// src = (o + 0.5) * in / out - 0.5, lower = max(floor(src), 0), upper = min(ceil(src), in - 1),
// weight of upper = src - floor(src). y = a + (b - a) * weight with a, b the lower and upper rows:
// one fused pass where the device has it (the same bits), else gathers and a blend.
Tensor resample_axis(const Tensor& x, int axis, std::int64_t in, std::int64_t out) {
  if (in == out) return x;
  std::vector<std::int64_t> lower(static_cast<std::size_t>(out)), upper(lower.size());
  std::vector<double> weight(lower.size());
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double src = (static_cast<double>(o) + 0.5) * scale - 0.5;
    const double fl = std::floor(src);
    const auto i = static_cast<std::size_t>(o);
    lower[i] = std::max<std::int64_t>(static_cast<std::int64_t>(fl), 0);
    upper[i] = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(src)), in - 1);
    weight[i] = src - fl;
  }
  const Device dev = x.device();
  const Tensor lo = constant(lower, Shape{out}).to(dev), hi = constant(upper, Shape{out}).to(dev);
  if (!backend::has_fused(backend::Fused::resample_linear, dev)) {
    std::vector<std::int64_t> wshape(static_cast<std::size_t>(x.rank()), 1);
    wshape[static_cast<std::size_t>(axis)] = out;
    const Tensor w = constant(weight, Shape{wshape}, x.dtype()).to(dev);
    const Tensor a = gather(x, lo, axis), b = gather(x, hi, axis);
    return a + (b - a) * w;
  }
  const Tensor w = constant(weight, Shape{out}, x.dtype()).to(dev);
  std::vector<std::int64_t> ydims = x.shape().dims();
  ydims[static_cast<std::size_t>(axis)] = out;
  Tensor y = detail::empty_tensor(Shape(ydims), x.dtype(), dev);
  backend::resample_linear(x.contiguous(), axis, lo, hi, w, y);
  if (autograd::recording())
    autograd::record("resize_bilinear", {x}, {y}, [xshape = x.shape(), axis, in, lo, hi, w](const autograd::Grads& g,
                                                                                             const autograd::Needs& n) {
      using Grads = autograd::Grads;
      if (!n[0]) return Grads{Tensor()};
      if (!autograd::recording()) {
        Tensor dx = detail::empty_tensor(xshape, g[0].dtype(), g[0].device());
        backend::resample_linear_backward(g[0].contiguous(), axis, lo, hi, w, dx);
        return Grads{dx};
      }
      // Under a tape recording this backward: the same sums from differentiable ops.
      std::vector<std::int64_t> wshape(static_cast<std::size_t>(g[0].rank()), 1);
      wshape[static_cast<std::size_t>(axis)] = w.size();
      const Tensor gw = g[0] * reshape(w, Shape(wshape));
      return Grads{detail::gather_adjoint(g[0] - gw, lo, axis, in) + detail::gather_adjoint(gw, hi, axis, in)};
    });
  return y;
}

}  // namespace

Tensor resize_bilinear(const Tensor& x, std::array<std::int64_t, 2> size) {
  constexpr const char* op = "resize_bilinear";
  detail::check_defined(x, op);
  if (x.rank() != 4)
    throw ShapeError(fmt::format("{}: expected a rank-4 NHWC input [batch, height, width, channels], got shape {}",
                                 op, x.shape().to_string()));
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: expected a floating input, got {}", op, name(x.dtype())));
  if (size[0] <= 0 || size[1] <= 0)
    throw ValueError(fmt::format("{}: size must be positive, got [{}, {}]", op, size[0], size[1]));
  const std::int64_t h = x.shape()[1], w = x.shape()[2];
  if (h == 0 || w == 0)
    throw ShapeError(fmt::format("{}: cannot resize an empty image, got shape {}", op, x.shape().to_string()));
  return resample_axis(resample_axis(x, 1, h, size[0]), 2, w, size[1]);
}

}  // namespace keel
