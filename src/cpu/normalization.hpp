#pragma once
// Fused CPU kernels of batch_norm, layer_norm and moments on a row-major [rows, cols] matrix (the
// normalised axis or axes last), float or double. Every pointer is contiguous; the optional
// parameters (gamma, beta, moving statistics) may be null, which reads as ones for gamma and
// the moving variance, zeros for beta and the moving mean. Outputs are written, never resized.
//
// Results do not depend on the thread count: column sums run over chunks of rows whose
// boundaries depend only on the shape.
#include <cstdint>

namespace keel::cpu {

// Training batch norm over the `rows` rows of each of `cols` channels: the batch mean and
// 1/sqrt(biased variance + epsilon) into mean[cols] and rstd[cols], y = (x - mean) * rstd *
// gamma + beta, and, for each moving statistic given, Keras' update
// new = moving * momentum + batch * (1 - momentum) into new_moving_mean / new_moving_variance
// (null when that statistic is absent).
template <class T>
void batch_norm_train(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                      const T* moving_mean, const T* moving_variance, double momentum, double epsilon, T* y,
                      T* mean, T* rstd, T* new_moving_mean, T* new_moving_variance);

// Inference batch norm: y = (x - moving_mean) * gamma / sqrt(moving_variance + epsilon) + beta.
template <class T>
void batch_norm_inference(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                          const T* moving_mean, const T* moving_variance, double epsilon, T* y);

// The first-order training gradient from the statistics the forward saved: with
// xhat = (x - mean) * rstd, dbeta = sum(g), dgamma = sum(g * xhat) and
// dx = gamma * rstd * (g - dbeta / rows - xhat * dgamma / rows). dx, dgamma, dbeta may each be
// null (not wanted).
template <class T>
void batch_norm_train_backward(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                               const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta);

// Layer norm over each row: mean[rows], rstd[rows] = 1/sqrt(var + epsilon), and
// y = (x - mean) * rstd * gamma + beta (gamma, beta: [cols]).
template <class T>
void layer_norm(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta, double epsilon,
                T* y, T* mean, T* rstd);

// Its first-order gradient from the saved statistics: with xhat = (x - mean) * rstd and
// h = g * gamma, dx = rstd * (h - mean(h) - xhat * mean(h * xhat)) per row, and over the rows
// dgamma = sum(g * xhat), dbeta = sum(g). dx, dgamma, dbeta may each be null.
template <class T>
void layer_norm_backward(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                         const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta);

// The mean and biased variance over the middle axis of x seen as [outer, rows, inner] (the
// reduced axes one block of consecutive axes), into mean and variance [outer, inner]; NaN where
// rows is 0.
template <class T>
void moments(const T* x, std::int64_t outer, std::int64_t rows, std::int64_t inner, T* mean, T* variance);

// Its gradient from the forward's mean and the outputs' gradients g_mean, g_var ([outer, inner]):
// dx = (x - mean) * (2 g_var / rows) + g_mean / rows.
template <class T>
void moments_backward(const T* x, std::int64_t outer, std::int64_t rows, std::int64_t inner, const T* mean,
                      const T* g_mean, const T* g_var, T* dx);

// Group norm over [n, hw, c] (Keras' GroupNormalization over the last axis): each image's c
// channels in `groups` groups, normalised with the group's mean and biased variance over its hw
// rows and c / groups channels; y = (x - mean) * rstd * gamma + beta. Writes mean and rstd
// [n, groups].
template <class T>
void group_norm(const T* x, std::int64_t n, std::int64_t hw, std::int64_t c, std::int64_t groups, const T* gamma,
                const T* beta, double epsilon, T* y, T* mean, T* rstd);

// Its first-order gradient from the saved statistics: dx (may be null), dgamma, dbeta ([c], each
// may be null).
template <class T>
void group_norm_backward(const T* x, const T* dy, std::int64_t n, std::int64_t hw, std::int64_t c,
                         std::int64_t groups, const T* gamma, const T* mean, const T* rstd, T* dx, T* dgamma,
                         T* dbeta);

}  // namespace keel::cpu
