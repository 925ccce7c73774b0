// Convolutions: conv2d, conv1d, depthwise_conv2d and conv2d_transpose, each forward with its
// gradient rule beside it.
//
// Gradients are written with three internal ops per convolution family, each recorded on the tape
// with its own gradient, so that second derivatives work. With y = conv(x, k) linear in each
// argument, writing A_k for "conv with k" and B_x for "conv of x":
//   backprop_input(dy, k)  = A_k^T dy     (shape of x)
//   backprop_filter(x, dy) = B_x^T dy     (shape of k)
// and the three are each other's adjoints:
//   conv:            dx = backprop_input(g, k)        dk = backprop_filter(x, g)
//   backprop_input:  d(dy) = conv(g, k)                dk = backprop_filter(g, dy)
//   backprop_filter: dx = backprop_input(dy, g)        d(dy) = conv(x, g)
// conv2d_transpose is backprop_input with the output size of Keras' Conv2DTranspose.
//
// The kernels run where the operands are (backend::conv: src/cpu/ or cuDNN), in float32 or
// float64. float16 and bfloat16 operands round trip through float32 on either device: the
// public ops cast in and out, and the casts carry the gradients.
#include <fmt/core.h>

#include <array>
#include <optional>
#include <string>

#include "autograd/record.hpp"
#include "core/tensor_util.hpp"
#include "backend/backend.hpp"
#include "ops/padding.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;
using kernel::Padding;
using kernel::WindowGeom;

namespace {

// ---- argument checks -------------------------------------------------------------------------


// x and kernel: defined, on one device, of one floating dtype.
void check_operands(const char* op, const Tensor& x, const Tensor& kernel) {
  detail::check_defined(x, op);
  detail::check_defined(kernel, op);
  detail::check_same_device(x, kernel, op);
  if (!is_floating(x.dtype()))
    throw DTypeError(fmt::format("{}: input must be float16, bfloat16, float32 or float64, got {} {}", op,
                                 name(x.dtype()), x.shape().to_string()));
  if (kernel.dtype() != x.dtype())
    throw DTypeError(fmt::format("{}: input and kernel dtypes differ: input {} {}, kernel {} {}", op,
                                 name(x.dtype()), x.shape().to_string(), name(kernel.dtype()),
                                 kernel.shape().to_string()));
}

void check_rank(const char* op, const char* what, const Tensor& t, std::int64_t rank,
                const char* layout) {
  if (t.rank() != rank)
    throw ShapeError(fmt::format("{}: {} must have rank {} ({}), got rank {} shape {}", op, what, rank,
                                 layout, t.rank(), t.shape().to_string()));
}

void check_positive(const char* op, const char* what, std::array<int, 2> v) {
  if (v[0] <= 0 || v[1] <= 0)
    throw ValueError(fmt::format("{}: {} must be positive, got [{}, {}]", op, what, v[0], v[1]));
}

void check_kernel_size(const char* op, const Tensor& x, const Tensor& kernel) {
  if (kernel.shape()[0] <= 0 || kernel.shape()[1] <= 0)
    throw ShapeError(fmt::format("{}: the kernel's spatial size must be positive, got kernel {} for input {}",
                                 op, kernel.shape().to_string(), x.shape().to_string()));
}

// The kernel's in_channels (its axis `axis`) against the input's channels (x's last axis).
void check_in_channels(const char* op, const Tensor& x, const Tensor& kernel, std::int64_t axis) {
  const std::int64_t channels = x.shape()[x.rank() - 1];
  if (kernel.shape()[axis] != channels)
    throw ShapeError(fmt::format("{}: kernel in_channels {} differ from the input's channels {}: input {}, kernel {}",
                                 op, kernel.shape()[axis], channels, x.shape().to_string(),
                                 kernel.shape().to_string()));
}

// Output geometry of a convolution-like op over x [n,h,w,c] with kh x kw taps; ShapeError when a
// "valid" window does not fit (TensorFlow's "computed output size would be negative").
WindowGeom conv_geometry(const char* op, const Tensor& x, const Tensor& kernel, std::int64_t kh,
                         std::int64_t kw, std::array<int, 2> strides, Padding padding,
                         std::array<int, 2> dilation, const std::string& padding_name) {
  WindowGeom g;
  g.n = x.shape()[0];
  g.h = x.shape()[1];
  g.w = x.shape()[2];
  g.c = x.shape()[3];
  g.kh = kh;
  g.kw = kw;
  g.sh = strides[0];
  g.sw = strides[1];
  g.dh = dilation[0];
  g.dw = dilation[1];
  const std::int64_t eh = (kh - 1) * g.dh + 1, ew = (kw - 1) * g.dw + 1;
  if (padding == Padding::valid && (eh > g.h || ew > g.w))
    throw ShapeError(fmt::format(
        "{}: kernel {} with dilation [{}, {}] spans {}x{}, larger than the input {} ({}x{}) with "
        "padding \"{}\"",
        op, kernel.shape().to_string(), g.dh, g.dw, eh, ew, x.shape().to_string(), g.h, g.w,
        padding_name));
  kernel::place_windows(g, padding);
  return g;
}

// conv2d and depthwise_conv2d: x [n, h, w, c] and a kernel [kh, kw, c, *] laid out as
// `kernel_layout`, checked; their geometry but the output channels g.o.
WindowGeom image_conv_geometry(const char* op, const Tensor& x, const Tensor& kernel, const char* kernel_layout,
                               std::array<int, 2> strides, const std::string& padding, std::array<int, 2> dilation) {
  check_operands(op, x, kernel);
  check_rank(op, "input", x, 4, "NHWC [batch, height, width, channels]");
  check_rank(op, "kernel", kernel, 4, kernel_layout);
  check_in_channels(op, x, kernel, 2);
  check_kernel_size(op, x, kernel);
  check_positive(op, "strides", strides);
  check_positive(op, "dilation", dilation);
  const Padding pad = detail::parse_padding(padding, op);
  return conv_geometry(op, x, kernel, kernel.shape()[0], kernel.shape()[1], strides, pad, dilation, padding);
}

Shape input_shape(const WindowGeom& g) { return Shape{g.n, g.h, g.w, g.c}; }
Shape output_shape(const WindowGeom& g) { return Shape{g.n, g.ho, g.wo, g.o}; }

// ---- conv2d, depthwise_conv2d and their backprop ops -------------------------------------------

// The two convolution families share the adjoint structure above; only their kernels, op names
// and filter shapes differ. Tape closures keep a reference to the family: both are static.
struct ConvFamily {
  const char* name;             // the forward op
  const char* input_name;       // its backprop_input
  const char* filter_name;      // its backprop_filter
  kernel::ConvKernel forward, backward_input, backward_filter;
  Shape (*filter_shape)(const WindowGeom&);
};

const ConvFamily kConv2d{"conv2d", "conv2d_backprop_input", "conv2d_backprop_filter",
                         kernel::ConvKernel::conv2d_forward, kernel::ConvKernel::conv2d_backward_input,
                         kernel::ConvKernel::conv2d_backward_filter,
                         [](const WindowGeom& g) { return Shape{g.kh, g.kw, g.c, g.o}; }};
const ConvFamily kDepthwise{"depthwise_conv2d", "depthwise_conv2d_backprop_input",
                            "depthwise_conv2d_backprop_filter", kernel::ConvKernel::depthwise_forward,
                            kernel::ConvKernel::depthwise_backward_input,
                            kernel::ConvKernel::depthwise_backward_filter,
                            [](const WindowGeom& g) { return Shape{g.kh, g.kw, g.c, g.c == 0 ? 0 : g.o / g.c}; }};

Tensor conv_backprop_input(const ConvFamily& f, const Tensor& dy, const Tensor& k, const WindowGeom& g);
Tensor conv_backprop_filter(const ConvFamily& f, const Tensor& x, const Tensor& dy, const WindowGeom& g);

Tensor conv_forward(const ConvFamily& f, const Tensor& x, const Tensor& k, const WindowGeom& g) {
  Tensor y = detail::empty_tensor(output_shape(g), x.dtype(), x.device());
  backend::conv(f.forward, g, x.contiguous(), k.contiguous(), y);
  if (autograd::recording())
    autograd::record(f.name, {x, k}, {y}, [&f, x, k, g](const Grads& gr, const Needs& need) {
      return Grads{need[0] ? conv_backprop_input(f, gr[0], k, g) : Tensor(),
                   need[1] ? conv_backprop_filter(f, x, gr[0], g) : Tensor()};
    }, {x, k});
  return y;
}

Tensor conv_backprop_input(const ConvFamily& f, const Tensor& dy, const Tensor& k, const WindowGeom& g) {
  Tensor dx = detail::empty_tensor(input_shape(g), dy.dtype(), dy.device());
  backend::conv(f.backward_input, g, dy.contiguous(), k.contiguous(), dx);
  if (autograd::recording())
    autograd::record(f.input_name, {dy, k}, {dx}, [&f, dy, k, g](const Grads& gr, const Needs& need) {
      return Grads{need[0] ? conv_forward(f, gr[0], k, g) : Tensor(),
                   need[1] ? conv_backprop_filter(f, gr[0], dy, g) : Tensor()};
    }, {dy, k});
  return dx;
}

Tensor conv_backprop_filter(const ConvFamily& f, const Tensor& x, const Tensor& dy, const WindowGeom& g) {
  Tensor dk = detail::empty_tensor(f.filter_shape(g), x.dtype(), x.device());
  backend::conv(f.backward_filter, g, x.contiguous(), dy.contiguous(), dk);
  if (autograd::recording())
    autograd::record(f.filter_name, {x, dy}, {dk}, [&f, x, dy, g](const Grads& gr, const Needs& need) {
      return Grads{need[0] ? conv_backprop_input(f, dy, gr[0], g) : Tensor(),
                   need[1] ? conv_forward(f, x, gr[0], g) : Tensor()};
    }, {x, dy});
  return dk;
}

// Keras' deconv_output_length for one axis, with the dilated kernel size.
std::int64_t deconv_output_length(std::int64_t in, std::int64_t k_eff, std::int64_t stride,
                                  Padding padding, std::optional<int> output_padding) {
  const auto mul = [](std::int64_t a, std::int64_t b) {
    return detail::checked_mul(a, b, "conv2d_transpose", "the output size");
  };
  const auto add = [](std::int64_t a, std::int64_t b) {
    return detail::checked_add(a, b, "conv2d_transpose", "the output size");
  };
  if (!output_padding)
    return padding == Padding::valid ? add(mul(in, stride), std::max<std::int64_t>(k_eff - stride, 0))
                                          : mul(in, stride);
  const std::int64_t pad = padding == Padding::same ? k_eff / 2 : 0;
  return add(add(mul(in - 1, stride), k_eff - 2 * pad), *output_padding);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& kernel, std::array<int, 2> strides, std::string padding,
              std::array<int, 2> dilation) {
  WindowGeom g = image_conv_geometry("conv2d", x, kernel, "[height, width, in_channels, out_channels]", strides,
                                     padding, dilation);
  if (is_half(x.dtype()))
    return cast(conv2d(cast(x, DType::float32), cast(kernel, DType::float32), strides, padding, dilation),
                x.dtype());
  g.o = kernel.shape()[3];
  return conv_forward(kConv2d, x, kernel, g);
}

// Also accepts padding "causal" (Keras' Conv1D: k_eff - 1 zeros before, none after).
Tensor conv1d(const Tensor& x, const Tensor& kernel, int stride, std::string padding, int dilation) {
  constexpr const char* op = "conv1d";
  check_operands(op, x, kernel);
  check_rank(op, "input", x, 3, "NWC [batch, width, channels]");
  check_rank(op, "kernel", kernel, 3, "[width, in_channels, out_channels]");
  check_in_channels(op, x, kernel, 1);
  if (kernel.shape()[0] <= 0)
    throw ShapeError(fmt::format("{}: the kernel's width must be positive, got kernel {} for input {}",
                                 op, kernel.shape().to_string(), x.shape().to_string()));
  if (stride <= 0) throw ValueError(fmt::format("{}: stride must be positive, got {}", op, stride));
  if (dilation <= 0) throw ValueError(fmt::format("{}: dilation must be positive, got {}", op, dilation));
  const Padding pad = detail::parse_padding(padding, op, /*allow_causal=*/true);
  if (is_half(x.dtype()))
    return cast(conv1d(cast(x, DType::float32), cast(kernel, DType::float32), stride, padding, dilation),
                x.dtype());
  const std::int64_t n = x.shape()[0], w = x.shape()[1], c = x.shape()[2];
  const std::int64_t kw = kernel.shape()[0], o = kernel.shape()[2];
  const std::int64_t k_eff = (kw - 1) * dilation + 1;
  if (pad == Padding::valid && k_eff > w)
    throw ShapeError(fmt::format("{}: kernel {} with dilation {} spans {}, longer than the input {} (width {}) "
                                 "with padding \"{}\"",
                                 op, kernel.shape().to_string(), dilation, k_eff, x.shape().to_string(), w,
                                 padding));
  // conv2d over [n, 1, w, c] with a [1, kw, c, o] kernel; reshape views keep the gradient flowing.
  const kernel::AxisWindow aw = kernel::window_axis(w, kw, stride, dilation, pad);
  WindowGeom g;
  g.n = n;
  g.h = 1;
  g.w = w;
  g.c = c;
  g.kh = 1;
  g.kw = kw;
  g.sw = stride;
  g.dw = dilation;
  g.ho = 1;
  g.wo = aw.out;
  g.pad_left = aw.pad_before;
  g.o = o;
  const Tensor y = conv_forward(kConv2d, reshape(x, Shape{n, 1, w, c}), reshape(kernel, Shape{1, kw, c, o}), g);
  return reshape(y, Shape{n, g.wo, o});
}

Tensor depthwise_conv2d(const Tensor& x, const Tensor& kernel, std::array<int, 2> strides,
                        std::string padding, std::array<int, 2> dilation) {
  WindowGeom g = image_conv_geometry("depthwise_conv2d", x, kernel, "[height, width, in_channels, channel_multiplier]",
                                     strides, padding, dilation);
  if (is_half(x.dtype()))
    return cast(depthwise_conv2d(cast(x, DType::float32), cast(kernel, DType::float32), strides, padding, dilation),
                x.dtype());
  g.o = x.shape()[3] * kernel.shape()[3];
  return conv_forward(kDepthwise, x, kernel, g);
}

Tensor conv2d_transpose(const Tensor& x, const Tensor& kernel, std::array<int, 2> strides,
                        std::string padding, std::optional<std::array<int, 2>> output_padding,
                        std::array<int, 2> dilation) {
  constexpr const char* op = "conv2d_transpose";
  check_operands(op, x, kernel);
  check_rank(op, "input", x, 4, "NHWC [batch, height, width, channels]");
  check_rank(op, "kernel", kernel, 4, "[height, width, out_channels, in_channels]");
  if (kernel.shape()[3] != x.shape()[3])
    throw ShapeError(fmt::format("{}: kernel in_channels (its last axis) {} differ from the input's channels {}: "
                                 "input {}, kernel {}",
                                 op, kernel.shape()[3], x.shape()[3], x.shape().to_string(),
                                 kernel.shape().to_string()));
  check_kernel_size(op, x, kernel);
  check_positive(op, "strides", strides);
  check_positive(op, "dilation", dilation);
  const Padding pad = detail::parse_padding(padding, op);
  if (output_padding) {
    const auto& op_pad = *output_padding;
    for (int a = 0; a < 2; ++a)
      if (op_pad[a] < 0 || op_pad[a] >= strides[a])
        throw ValueError(fmt::format("{}: output_padding [{}, {}] must be >= 0 and smaller than the strides [{}, {}]",
                                     op, op_pad[0], op_pad[1], strides[0], strides[1]));
  }
  // The result is the input of a conv2d (kernel [kh, kw, out, in]) whose output has x's shape.
  WindowGeom g;
  g.n = x.shape()[0];
  g.kh = kernel.shape()[0];
  g.kw = kernel.shape()[1];
  g.c = kernel.shape()[2];
  g.o = kernel.shape()[3];
  g.sh = strides[0];
  g.sw = strides[1];
  g.dh = dilation[0];
  g.dw = dilation[1];
  g.ho = x.shape()[1];
  g.wo = x.shape()[2];
  const auto axis_padding = [&](int a) {
    return output_padding ? std::optional<int>((*output_padding)[static_cast<std::size_t>(a)]) : std::nullopt;
  };
  const std::int64_t eh = (g.kh - 1) * g.dh + 1, ew = (g.kw - 1) * g.dw + 1;
  g.h = deconv_output_length(g.ho, eh, g.sh, pad, axis_padding(0));
  g.w = deconv_output_length(g.wo, ew, g.sw, pad, axis_padding(1));
  const kernel::AxisWindow ah = kernel::window_axis(g.h, g.kh, g.sh, g.dh, pad);
  const kernel::AxisWindow aw = kernel::window_axis(g.w, g.kw, g.sw, g.dw, pad);
  // Keras' size rule can name a size whose forward conv does not give x back (padding "same",
  // an even dilated kernel and output_padding 0); TensorFlow rejects that too.
  if (g.h < 0 || g.w < 0 || ah.out != g.ho || aw.out != g.wo)
    throw ValueError(fmt::format("{}: output size {}x{} (from input {}, kernel {}, strides [{}, {}], padding \"{}\") "
                                 "does not map back to the input's {}x{}",
                                 op, g.h, g.w, x.shape().to_string(), kernel.shape().to_string(), g.sh, g.sw,
                                 padding, g.ho, g.wo));
  if (is_half(x.dtype()))
    return cast(conv2d_transpose(cast(x, DType::float32), cast(kernel, DType::float32), strides, padding,
                                 output_padding, dilation),
                x.dtype());
  g.pad_top = ah.pad_before;
  g.pad_left = aw.pad_before;
  return conv_backprop_input(kConv2d, x, kernel, g);
}

}  // namespace keel
