#pragma once
// The backend seam of the fused ops (batch norm, layer norm, the LSTM and GRU cells, the
// cross-entropies with logits): one entry per kernel, taking tensors whose outputs the op has
// allocated. Each entry switches on the device once; an op asks has_fused() first and uses its
// composite of other ops where a device has no fused kernel (CUDA, for now).
//
// Common rules: float32 or float64, one dtype and one device for every argument; an undefined
// optional input reads as documented, an undefined output is not computed. Outputs are
// contiguous and written in full; nothing is allocated but scratch inside the kernels.
#include <cstdint>

#include "backend/recorder.hpp"
#include "core/elementwise_program.hpp"
#include "core/window.hpp"
#include "keel/core/device.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

enum class Fused : std::uint8_t {
  batch_norm,
  layer_norm,
  lstm_cell,
  gru_cell,
  recurrent_input_projection,
  softmax_cross_entropy,
  sparse_softmax_cross_entropy,
  sigmoid_cross_entropy,
  bias_activation,
  max_pool_argmax,  // max_pool_with_argmax (below)
  softmax,
  resample_linear,
  moments,
  group_norm,
};

// Whether `device` has the fused kernel of `op` (the entries below for it).
bool has_fused(Fused op, Device device);

// ---- normalisation: x is [rows, C] (the channel or normalised axes last), contiguous --------

// Training batch norm over x's leading axes. gamma, beta, moving_mean, moving_variance: [C]
// contiguous or undefined (ones, zeros; an undefined moving statistic is not updated).
// Outputs: y (x's shape), mean and rstd = 1/sqrt(biased variance + epsilon) ([C]), and the
// updated moving statistics ([C], defined where the input statistic is).
void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                      const Tensor& moving_variance, double momentum, double epsilon, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const Tensor& new_moving_mean,
                      const Tensor& new_moving_variance);
// y = (x - moving_mean) * gamma / sqrt(moving_variance + epsilon) + beta.
void batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& moving_mean,
                          const Tensor& moving_variance, double epsilon, const Tensor& y);
// The first-order training gradient from the saved mean and rstd; dy like x (contiguous).
void batch_norm_train_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                               const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta);

// Layer norm over the trailing axes of x where mean and rstd (x's rank) have 1, one row per
// statistic; gamma and beta hold a row's worth of values, contiguous, or are undefined.
// Outputs y, mean, rstd.
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
// Its first-order gradient from the saved statistics: dx (x's shape), dgamma, dbeta
// (gamma's number of elements).
void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta);

// ---- group norm: x [N, ..., C] contiguous, its channels in `groups` groups (Keras'
// GroupNormalization over the last axis); gamma, beta [C] contiguous or undefined -------------------
// y (x's shape) = (x - mean) * rstd * gamma + beta with each image's group statistics, written to
// mean and rstd = 1 / sqrt(biased variance + epsilon) ([N, groups]).
void group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, double epsilon, const Tensor& y,
                const Tensor& mean, const Tensor& rstd);
// Its first-order gradient from the saved statistics: dx (x's shape), dgamma, dbeta ([C]), each
// written when defined; dy contiguous, x's shape.
void group_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         int groups, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta);

// ---- moments: x contiguous, its axes [first, last) reduced; mean and variance have x's rank with
// 1 on those axes, contiguous -------------------------------------------------------------------
// The mean and the biased variance (tf.nn.moments) over those axes; NaN where they hold nothing.
void moments(const Tensor& x, int first, int last, const Tensor& mean, const Tensor& variance);
// Its gradient into dx (x's shape) from the forward's mean and the gradients of the two outputs
// (contiguous, mean's shape): dx = (x - mean) * 2 g_var / n + g_mean / n, n elements reduced.
void moments_backward(const Tensor& x, int first, int last, const Tensor& mean, const Tensor& g_mean,
                      const Tensor& g_var, const Tensor& dx);

// ---- linear resampling (resize_bilinear's passes) ------------------------------------------------
// x contiguous, seen as [outer, in, inner] around its axis `axis`; lower and upper int64 [out]
// (each in [0, in)) and weight [out] of x's dtype, contiguous; y (x's shape with out at `axis`):
// y[o, j, :] = a + (b - a) * weight[j] with a = x[o, lower[j], :] and b = x[o, upper[j], :].
void resample_linear(const Tensor& x, int axis, const Tensor& lower, const Tensor& upper, const Tensor& weight,
                     const Tensor& y);
// Its gradient wrt x into dx (x's shape): each output row's dy - dy * weight[j] added to its lower
// row and dy * weight[j] to its upper row.
void resample_linear_backward(const Tensor& dy, int axis, const Tensor& lower, const Tensor& upper,
                              const Tensor& weight, const Tensor& dx);

// ---- recurrent cells ---------------------------------------------------------------------------
// h [batch, u] and recurrent_kernel [u, G*u] contiguous. With `kernel` defined ([in, G*u],
// contiguous), x is [batch, in] contiguous and x_proj ([batch, G*u]) receives x @ kernel; without,
// x is already that projection (a sequence step): [batch, G*u] rows of unit inner stride, any row
// stride. States and gradients read as rows the same way ("rows" below).

// LSTM (Keras' gate order i, f, g, o). bias: [4u] contiguous or undefined. c: rows.
// Outputs: act ([batch, 4u], the activated gates the backward reuses), c_new, tanh_c = tanh(c_new),
// h_new ([batch, u]). Workspace: x_proj as above.
void lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
               const Tensor& recurrent_kernel, const Tensor& bias, const Tensor& act, const Tensor& c_new,
               const Tensor& tanh_c, const Tensor& h_new, const Tensor& x_proj);
// The gate gradients dz ([batch, 4u]) and dc_prev ([batch, u]) from the saved act and tanh_c;
// dh, dc, c: rows.
void lstm_cell_backward(const Tensor& act, const Tensor& tanh_c, const Tensor& dh, const Tensor& dc,
                        const Tensor& c, const Tensor& dz, const Tensor& dc_prev);

// How many parts a recurrence splits the batch's rows into (cpu/recurrent.hpp: one per thread
// when it has the work). The op asks once per sequence and gives the answer to the forward and the
// backward, whose buffers are laid out in that many parts ("part order", cpu/recurrent.hpp: each
// part's rows of every step together, steps in order; one part is plain time-major order).
int recurrence_parts(std::int64_t time, std::int64_t batch, std::int64_t units, std::int64_t width);

// The whole LSTM recurrence (TensorFlow's BlockLSTM without the input side) over `parts`: xz
// [time * batch, 4u], the projection with the input bias in part order; recurrent_kernel [u, 4u];
// h0, c0 [batch, u] rows. Writes in part order h_read and c_read ([time * batch, u], the state each
// step reads), act ([time * batch, 4u]) and tanh_c ([time * batch, u]); outputs [batch, time, u];
// h_last, c_last [batch, u]. All contiguous but h0 and c0.
void lstm_sequence(int parts, const Tensor& xz, const Tensor& recurrent_kernel, const Tensor& h0, const Tensor& c0,
                   const Tensor& h_read, const Tensor& c_read, const Tensor& act, const Tensor& tanh_c,
                   const Tensor& outputs, const Tensor& h_last, const Tensor& c_last);
// Its gradient (BlockLSTMGrad), steps in reverse over the forward's parts: d_out [batch, time, u]
// contiguous, dh_last and dc_last [batch, u] rows; recurrent_kernel_t =
// R^T [4u, u] contiguous. Writes dz [time * batch, 4u] in part order, dc_first [batch, u] and, when
// defined, dh_first [batch, u]; work [4, batch, u]. time > 0.
void lstm_sequence_backward(int parts, const Tensor& act, const Tensor& tanh_c, const Tensor& c_read,
                            const Tensor& d_out, const Tensor& dh_last, const Tensor& dc_last,
                            const Tensor& recurrent_kernel_t, const Tensor& dz, const Tensor& dc_first,
                            const Tensor& dh_first, const Tensor& work);

// GRU (reset_after = true; gate blocks z, r, h). b_in, b_rec: [3u] contiguous or undefined (zeros).
// Outputs: zr ([batch, 2u], the activated z and r), rec_h ([batch, u], h @ R_h + b_rec_h),
// cand ([batch, u], the candidate), h_new. Workspace: inner [batch, 3u]; x_proj as above.
void gru_cell(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
              const Tensor& b_in, const Tensor& b_rec, const Tensor& zr, const Tensor& rec_h, const Tensor& cand,
              const Tensor& h_new, const Tensor& x_proj, const Tensor& inner);
// The gradients of the input side dX and the recurrent side dI ([batch, 3u]) and h's direct
// term dh_direct ([batch, u]) from the saved zr, rec_h, cand; h, d: rows.
void gru_cell_backward(const Tensor& zr, const Tensor& rec_h, const Tensor& cand, const Tensor& h,
                       const Tensor& d, const Tensor& dX, const Tensor& dI, const Tensor& dh_direct);
// The whole GRU recurrence (BlockGRU) over `parts`, as lstm_sequence: xz [time * batch, 3u] in
// part order with the input bias; recurrent_kernel [u, 3u]; b_rec [3u] or undefined; h0 [batch, u]
// rows. Writes in part order h_read ([time * batch, u]), zr ([time * batch, 2u]), rec_h and cand
// ([time * batch, u]) as gru_cell's per step; outputs [batch, time, u]; h_last [batch, u]. inner:
// [batch, 3u] workspace.
void gru_sequence(int parts, const Tensor& xz, const Tensor& recurrent_kernel, const Tensor& b_rec, const Tensor& h0,
                  const Tensor& h_read, const Tensor& zr, const Tensor& rec_h, const Tensor& cand,
                  const Tensor& outputs, const Tensor& h_last, const Tensor& inner);
// Its gradient (BlockGRUGrad), as lstm_sequence_backward: d_out [batch, time, u] contiguous,
// dh_last [batch, u] rows; recurrent_kernel_t = R^T [3u, u]. Writes dX and dI [time * batch, 3u]
// in part order and, when defined, dh_first [batch, u]; work [3, batch, u]. time > 0.
void gru_sequence_backward(int parts, const Tensor& zr, const Tensor& rec_h, const Tensor& cand, const Tensor& h_read,
                           const Tensor& d_out, const Tensor& dh_last, const Tensor& recurrent_kernel_t,
                           const Tensor& dX, const Tensor& dI, const Tensor& dh_first, const Tensor& work);

// y [n, w] = x [n, f] @ kernel [f, w] (+ bias [w]): the whole-sequence input projection, all
// contiguous. With parts > 1, x is a sequence of `time` steps in part order, and each part's block
// is projected on the thread that runs its recurrence.
void recurrent_input_projection(const Tensor& x, const Tensor& kernel, const Tensor& bias, const Tensor& y,
                                int parts = 1, std::int64_t time = 0);
// Its gradient over the same parts (time > 0), all contiguous: dx = dy @ kernel^T, dkernel =
// x^T @ dy, dbias = the column sums of dy, each written when defined; each thread reads the rows
// of dy that its part of the recurrence's backward wrote.
void recurrent_input_projection_backward(const Tensor& x, const Tensor& kernel, const Tensor& dy, const Tensor& dx,
                                         const Tensor& dkernel, const Tensor& dbias, int parts, std::int64_t time);

// ---- softmax ----------------------------------------------------------------------------------------

// y = softmax(x) (log_softmax with `log`) over the last axis of x, contiguous.
void softmax(const Tensor& x, const Tensor& y, bool log);
// Its gradient dx from y and the upstream gradient g (contiguous, y's shape).
void softmax_backward(const Tensor& y, const Tensor& g, const Tensor& dx, bool log);

// ---- cross-entropies with logits -----------------------------------------------------------------

// Per row of logits and labels ([rows, k], contiguous): loss[r] = sum_j labels * (lse - logits).
void softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss);
// Per row of logits ([rows, k], contiguous): loss[r] = lse - logits[r, labels[r]]. labels: int32
// or int64, contiguous, [rows], every id already checked to lie in [0, k).
void sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss);
// Their gradients for the losses' upstream gradient g ([rows]): dx [rows, k] = g[r] * (softmax(logits)
// * sum(labels) - labels) for float labels [rows, k], g[r] * (softmax(logits) - one_hot(labels))
// for integer labels [rows]; all contiguous.
void softmax_cross_entropy_backward(const Tensor& labels, const Tensor& logits, const Tensor& g, const Tensor& dx);
// Elementwise max(x, 0) - x z + log1p(exp(-|x|)), all contiguous, one shape.
void sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& loss);

// ---- bias and activation (Dense and convolution layers) ------------------------------------------

// y = activation(x + bias) in one pass over x: x contiguous with C = its last axis, bias [C]
// contiguous, y like x. The activation is the unary kernel `op` (relu, sigmoid, tanh or exp), or
// none when `linear`: x is read once and y written once.
void bias_activation(const Tensor& x, const Tensor& bias, bool linear, kernel::UnaryOp op, const Tensor& y);

// y = activation(conv2d(x, kernel) + bias), bias [o] contiguous, activation as bias_activation's:
// graph mode's fused Conv2D + BiasAdd + activation (graph/fuse_patterns.cpp), on a device where
// has_fused(bias_activation). Each block of output rows gets its bias and activation while in
// cache, by the kernel bias_activation runs: the bits of the convolution, then bias_activation.
void conv2d_bias_activation(const kernel::WindowGeom& g, const Tensor& x, const Tensor& kernel, const Tensor& bias,
                            bool linear, kernel::UnaryOp op, const Tensor& y);
// What replays it for a traced graph, from the geometry the graph keeps (Node::ints).
KernelReplay conv2d_bias_activation_replay(const std::vector<std::int64_t>& ints, bool linear, kernel::UnaryOp op);

// ---- the max pool keeping its choices (graph mode's fusion; window.cpp) ----------------------------
// (x) -> y, as pool(max_forward), also writing each window's choice to arg (y's shape and dtype)
// for pool(max_backward_arg[_relu], g, arg, dy, dx); windows of at most 127 taps. And what
// replays it from the geometry as a graph keeps it.
void max_pool_with_argmax(const kernel::WindowGeom& g, const Tensor& x, const Tensor& y, const Tensor& arg);
KernelReplay max_pool_with_argmax_replay(const std::vector<std::int64_t>& ints);
// Whether `device` has those kernels for g (pool(max_backward_arg_relu) with relu).
bool max_pool_keeps_choices(const kernel::WindowGeom& g, bool relu, Device device);
// pool(max_backward_arg[_relu], g, arg, dy, dx) that also writes bias_grad (g.c values): dx summed
// over images and pixels, from each window's gradient as it is scattered (the sum a bias's
// gradient takes of dx, without reading dx again). Where max_pool_keeps_choices(g, relu).
void max_pool_grad_with_argmax_bias(const kernel::WindowGeom& g, bool relu, const Tensor& arg, const Tensor& dy,
                                    const Tensor& dx, const Tensor& bias_grad);
KernelReplay max_pool_grad_with_argmax_bias_replay(const std::vector<std::int64_t>& ints, bool relu);

// ---- fused elementwise programs (graph mode's fusion) ---------------------------------------------

// Runs `program` (core/elementwise_program.hpp) with inputs (contiguous; n, 1 or row_length
// elements by their kind) and outputs (contiguous, n elements), one float dtype for all; on a
// device has_elementwise_program() says yes to.
bool has_elementwise_program(Device device);
void elementwise_program(const kernel::ElementwiseProgram& program, std::int64_t n, const Tensor* inputs,
                         const Tensor* outputs);

}  // namespace keel::backend
