#pragma once
// Neural-network ops. Images are NHWC (Keras channels_last); conv kernels are
// [kh, kw, in, out]. Padding is "valid" or "same" (TensorFlow's rule: for "same" the output is
// ceil(in / stride) and the extra padding, when odd, goes after).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);

// ---- bias ----
// activation(x + bias) with bias a vector the length of x's last axis (x at least 2-D):
// tf.nn.bias_add (channels_last) for "linear", and the bias and activation of the Dense and
// convolution layers. activation: "linear", "relu", "sigmoid", "tanh" or "exponential", the
// activations whose derivative is a function of their output, so that the sum x + bias is never
// stored: on the CPU a float32 or float64 x is read once and the result written once. Other
// activations apply to bias_add's result.
Tensor bias_add(const Tensor& x, const Tensor& bias, const std::string& activation = "linear");

// ---- convolution (x: [N, H, W, C]) ----
Tensor conv2d(const Tensor& x, const Tensor& kernel /*[kh,kw,in,out]*/,
              std::array<int, 2> strides = {1, 1}, std::string padding = "valid",
              std::array<int, 2> dilation = {1, 1});
// x: [N, W, C], kernel [kw, in, out].
Tensor conv1d(const Tensor& x, const Tensor& kernel, int stride = 1, std::string padding = "valid",
              int dilation = 1);
// kernel [kh, kw, in, multiplier] -> out channels in * multiplier (channel c*mult + m).
Tensor depthwise_conv2d(const Tensor& x, const Tensor& kernel, std::array<int, 2> strides = {1, 1},
                        std::string padding = "valid", std::array<int, 2> dilation = {1, 1});
// The gradient of conv2d with respect to its input, as a layer: kernel [kh, kw, out, in]
// (Keras Conv2DTranspose layout). Output size per axis (Keras' deconv_output_length, with
// k_eff = (k-1)*d + 1): valid: (in-1)*s + k_eff + output_padding; same:
// (in-1)*s + k_eff - 2*(k_eff/2) + output_padding (without output_padding: valid
// (in-1)*s + max(k_eff, s), same in*s).
Tensor conv2d_transpose(const Tensor& x, const Tensor& kernel, std::array<int, 2> strides = {1, 1},
                        std::string padding = "valid",
                        std::optional<std::array<int, 2>> output_padding = std::nullopt,
                        std::array<int, 2> dilation = {1, 1});

// ---- pooling ----
Tensor max_pool2d(const Tensor& x, std::array<int, 2> pool, std::array<int, 2> strides,
                  std::string padding = "valid");
// Averages exclude padded positions (as TensorFlow).
Tensor avg_pool2d(const Tensor& x, std::array<int, 2> pool, std::array<int, 2> strides,
                  std::string padding = "valid");
Tensor global_avg_pool2d(const Tensor& x, bool keepdims = false);  // [N,H,W,C] -> [N,C]
Tensor global_max_pool2d(const Tensor& x, bool keepdims = false);

// ---- normalisation ----
struct BatchNormResult {
  Tensor y;
  Tensor moving_mean;      // updated: moving * momentum + batch * (1 - momentum)
  Tensor moving_variance;  // (in inference mode: the inputs, unchanged)
};
// Normalises over every axis but the last (the channel axis). training = true uses the batch's
// mean and (biased) variance and returns updated moving statistics; false uses the moving ones.
BatchNormResult batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                           const Tensor& moving_mean, const Tensor& moving_variance, bool training,
                           double momentum = 0.99, double epsilon = 1e-3);
// Normalises over `axes` (default the last), then scales by gamma and shifts by beta (both
// shaped like those axes; either may be undefined).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  std::vector<int> axes = {-1}, double epsilon = 1e-3);
// Group normalisation of x [batch, ..., channels] (Keras' GroupNormalization over the last axis):
// the channels in `groups` groups of channels / groups; each image's group normalised with its
// mean and biased variance over the axes between and the group's channels, then scaled by gamma
// and shifted by beta ([channels] each; either may be undefined).
Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, double epsilon = 1e-3);
// Mean and variance over axes (tf.nn.moments).
std::pair<Tensor, Tensor> moments(const Tensor& x, std::vector<int> axes, bool keepdims = false);

// ---- regularisation ----
// Inverted dropout like tf.nn.dropout: zero with probability rate, scale the rest by 1/(1-rate).
Tensor dropout(const Tensor& x, double rate, std::optional<std::uint64_t> seed = {});

// ---- embeddings ----
Tensor embedding_lookup(const Tensor& params, const Tensor& ids);  // gather on axis 0

// ---- fused cross-entropies (per example; numerically stable) ----
// labels: probabilities shaped like logits; result: logits' shape without `axis`.
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits, int axis = -1);
// labels: int32/int64 class ids shaped like logits without the last axis.
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// Elementwise: max(x, 0) - x*z + log(1 + exp(-|x|)).
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);

// ---- recurrent cells (Keras layouts) ----
// LSTM, gates i, f, c, o: kernel [in, 4u], recurrent_kernel [u, 4u], bias [4u].
struct LSTMState { Tensor h, c; };
LSTMState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
                    const Tensor& recurrent_kernel, const Tensor& bias);
// GRU with reset_after = true, gates z, r, h: kernel [in, 3u], recurrent_kernel [u, 3u],
// bias [2, 3u] (input bias, recurrent bias).
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
                const Tensor& bias);
// Whole sequences, x: [batch, time, features]. Returns the outputs [batch, time, units] (in the
// order processed; reversed in time when go_backwards) and the final states.
struct LSTMSequence { Tensor outputs, h, c; };
LSTMSequence lstm(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& kernel,
                  const Tensor& recurrent_kernel, const Tensor& bias, bool go_backwards = false);
struct GRUSequence { Tensor outputs, h; };
GRUSequence gru(const Tensor& x, const Tensor& h0, const Tensor& kernel, const Tensor& recurrent_kernel,
                const Tensor& bias, bool go_backwards = false);

// ---- attention ----
// q: [..., Tq, d], k: [..., Tk, d], v: [..., Tk, dv]; mask (bool, broadcast to [..., Tq, Tk]):
// true = attend. softmax(q k^T / sqrt(d)) v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor());
// Multi-head attention: query [B, Tq, Dq], value [B, Tv, Dv], key (default value);
// wq [Dq, H*dk], wk [Dk, H*dk], wv [Dv, H*dv], wo [H*dv, Do]; biases optional (undefined).
struct MultiHeadAttentionWeights {
  Tensor wq, bq, wk, bk, wv, bv, wo, bo;
};
Tensor multi_head_attention(const Tensor& query, const Tensor& value, const Tensor& key,
                            const MultiHeadAttentionWeights& w, int num_heads,
                            const Tensor& mask = Tensor());

namespace losses {
// Per-example losses (the mean over the last axis where Keras takes it); no reduction over
// the batch. from_logits chooses the fused stable paths above.
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred);
Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta = 1.0);
Tensor sparse_categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                       bool from_logits = false, int axis = -1);
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                                double label_smoothing = 0, int axis = -1);
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false,
                           double label_smoothing = 0, int axis = -1);
Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred);
}  // namespace losses

}  // namespace keel
