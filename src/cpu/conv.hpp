#pragma once
// Sliding-window kernels over NHWC images on the CPU: convolution (im2col + BLAS), depthwise
// convolution (direct loops) and max/average pooling, each with the kernels its gradients need.
// Every pointer is to contiguous row-major data of the given dtype (float32 or float64); outputs
// are fully written (callers need not zero them). Shapes and arguments are validated by the ops
// in src/ops/; these functions trust the geometry they are given.
#include <cstdint>

#include "core/kernel_kinds.hpp"
#include "core/window.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

using kernel::WindowGeom;

// ---- conv2d: x [n,h,w,c], kernel [kh,kw,c,o], y [n,ho,wo,o] --------------------------------------
// What conv2d_forward does to each block of output rows while the block is still in cache:
// y = activation(y + bias) with bias [o] of y's dtype, the bias_unary kernel of `op` (relu,
// sigmoid, tanh or exp) or none when `linear`, so the bits are those of the convolution followed
// by that kernel (graph mode's fused Conv2D + BiasAdd + activation, graph/fuse_patterns.cpp).
// Nothing when bias is null.
struct ConvEpilogue {
  const void* bias = nullptr;
  bool linear = true;
  kernel::UnaryOp op = kernel::UnaryOp::relu;
};
void conv2d_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y,
                    const ConvEpilogue& epilogue = {});
// dx = the adjoint of conv2d in x applied to dy (col2im of dy @ kernel^T).
void conv2d_backward_input(DType dtype, const WindowGeom& g, const void* dy, const void* kernel,
                           void* dx);
// dkernel = sum over the batch of im2col(x)^T @ dy.
void conv2d_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                            void* dkernel);

// ---- depthwise: kernel [kh,kw,c,m], y [n,ho,wo,c*m] (g.o = c*m; channel c*m + j) -----------------
void depthwise_forward(DType dtype, const WindowGeom& g, const void* x, const void* kernel, void* y);
void depthwise_backward_input(DType dtype, const WindowGeom& g, const void* dy, const void* kernel,
                              void* dx);
void depthwise_backward_filter(DType dtype, const WindowGeom& g, const void* x, const void* dy,
                               void* dkernel);

// ---- pooling (g.o == g.c, dilation 1; every window holds at least one input pixel) -------------
void max_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y);
// dx[argmax of each window] += dy (the first maximum in row-major window order, as TensorFlow).
void max_pool_backward(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx);
// max_pool_backward, then dx = relu_grad(dx, x) (x a ReLU's output), in one pass: the mask is
// applied inside the scatter where windows do not overlap, else to each image once its
// gradient is complete, while it is still in cache.
void max_pool_backward_relu(DType dtype, const WindowGeom& g, const void* x, const void* dy, void* dx);
// max_pool_forward that also writes each window's choice to `arg` (y's shape and dtype; windows
// of at most 127 taps), and max_pool_backward (with relu: max_pool_backward_relu, windows not
// overlapping) from those choices instead of x, with the same bits.
void max_pool_forward_arg(DType dtype, const WindowGeom& g, const void* x, void* y, void* arg);
// Whether those kernels take g: fewer than 128 taps (simd/pooling_impl.hpp's flag sits above the
// choice), and with relu, windows that do not overlap (overlapping ones mask each pixel's sum).
bool max_pool_arg_fits(const WindowGeom& g, bool relu);
// A non-null `sum` (C values) also gets dx's sum over images and pixels (a bias gradient), from
// the windows' gradients as they are scattered.
void max_pool_backward_arg(DType dtype, const WindowGeom& g, const void* arg, const void* dy, void* dx, bool relu,
                           void* sum = nullptr);
// The adjoint of max_pool_backward in dy: out[window] = dx[argmax of the window] (shape of y).
void max_pool_gather(DType dtype, const WindowGeom& g, const void* x, const void* dx, void* out);
// Averages over the window's pixels inside the image (padding is not counted).
void avg_pool_forward(DType dtype, const WindowGeom& g, const void* x, void* y);
void avg_pool_backward(DType dtype, const WindowGeom& g, const void* dy, void* dx);

}  // namespace keel::cpu
