#pragma once
// Pieces of the recurrent ops (ops/recurrent.cpp) that the whole-sequence nodes
// (ops/recurrent_sequence.cpp) share. Internal to src/ops/.
#include <cstdint>
#include <utility>

#include "keel/core/tensor.hpp"
#include "keel/ops/nn.hpp"

namespace keel::rnn {

// A 2-D tensor as the cell kernels read it: its last axis with unit stride. Views (time steps of
// a sequence, split gradients) are read in place; anything else is copied once.
Tensor row_major(const Tensor& t);
// An uninitialised tensor of `shape` with like's dtype and device.
Tensor empty_like_shape(const Tensor& like, Shape shape);

// The cells as composites of ops (the CUDA path, and the states an outer tape must see).
LSTMState lstm_composite(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
                         const Tensor& recurrent_kernel, const Tensor& bias);
Tensor gru_composite(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
                     const Tensor& b_in, const Tensor& b_rec);

// One cell's gate gradients as differentiable ops, from gates recomputed from its inputs (for a
// backward pass an outer tape records). LSTM: dz and dc_prev. GRU: the input side dX, the
// recurrent side dI ([batch, 3u]) and h's direct term.
std::pair<Tensor, Tensor> lstm_gate_grads_with_ops(const Tensor& x, const Tensor& h, const Tensor& c,
                                                   const Tensor& kernel, const Tensor& recurrent_kernel,
                                                   const Tensor& bias, const Tensor& dh, const Tensor& dc);
struct GRUGateGrads {
  Tensor dX, dI, dh_direct;
};
GRUGateGrads gru_gate_grads_with_ops(const Tensor& x, const Tensor& h, const Tensor& kernel,
                                     const Tensor& recurrent_kernel, const Tensor& b_in, const Tensor& b_rec,
                                     const Tensor& d);

// The steps [time, batch, w] as rows [time * batch, w] in part order (backend::recurrence_parts:
// part p's rows of every step together, steps in order), and back. Ops, so gradients flow.
Tensor to_part_order(const Tensor& steps, int parts);
Tensor from_part_order(const Tensor& rows, std::int64_t time, std::int64_t batch, int parts);

// A whole recurrence as ONE tape node over xz, the input projection (the input bias included),
// where the device has the fused cells, in part order over `parts` ([time * batch, gates * u]).
// outputs: [batch, time, u].
LSTMSequence lstm_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& c0, const Tensor& recurrent_kernel,
                                std::int64_t time, int parts);
// b_rec: the recurrent bias [3u], or undefined.
GRUSequence gru_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& recurrent_kernel, const Tensor& b_rec,
                              std::int64_t time, int parts);

}  // namespace keel::rnn
