#pragma once
// The fused CPU kernels of the cross-entropies with logits (src/ops/losses.cpp records them,
// with their gradients) and of softmax and log_softmax over the last axis (src/ops/nn.cpp),
// float or double, on contiguous memory. The log-sum-exp of a row is shifted by the row max, so
// exp never overflows and nothing cancels to Inf - Inf.
#include <cstdint>

namespace keel::cpu {

// loss[r] = sum_j labels[r, j] * (lse(logits[r, :]) - logits[r, j]) over [rows, k].
template <class T>
void softmax_cross_entropy(std::int64_t rows, std::int64_t k, const T* labels, const T* logits, T* loss);

// loss[r] = lse(logits[r, :]) - logits[r, labels[r]]; every label lies in [0, k).
template <class T, class I>
void sparse_softmax_cross_entropy(std::int64_t rows, std::int64_t k, const I* labels, const T* logits, T* loss);

// The gradients of the two for logits [rows, k] and the losses' upstream gradient g [rows]:
// dx[r, j] = g[r] * (softmax(logits)[r, j] * sum_j labels[r, j] - labels[r, j]) with labels
// [rows, k] (ids null), or g[r] * (softmax(logits)[r, j] - (j == ids[r])) with ids (labels null):
// the bits of the composite ops' gradient, a block of rows at a time while it is in cache.
template <class T, class I>
void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t k, const T* logits, const T* g, const T* labels,
                                    const I* ids, T* dx);

// loss[i] = max(x, 0) - x z + log1p(exp(-|x|)) with x = logits[i], z = labels[i].
template <class T>
void sigmoid_cross_entropy(std::int64_t n, const T* labels, const T* logits, T* loss);

// y = softmax (log_softmax with `log`) of each row of x [rows, k].
template <class T>
void softmax_rows(std::int64_t rows, std::int64_t k, const T* x, T* y, bool log);

// Their gradients from the output y and the upstream gradient g, each [rows, k]:
// dx = y * (g - sum(g * y)), or for log_softmax dx = g - exp(y) * sum(g).
template <class T>
void softmax_rows_backward(std::int64_t rows, std::int64_t k, const T* y, const T* g, T* dx, bool log);

}  // namespace keel::cpu
