// The recurrences as one tape node each (LSTM; GRU with reset_after = true), where the device has
// the fused cells: ops/recurrent.cpp projects the whole input once and calls these.
//
// A node per step made T small products and T gradient accumulations per sequence. Here the
// forward runs the cells step by step into buffers of all steps; the backward runs the cells'
// backward in reverse into [time * batch, gates * u] buffers, so that the recurrent kernel's
// gradient is ONE product H^T dZ over all steps and the input side's buffer already is the
// projection's gradient. The buffers are in part order (cpu/recurrent.hpp): the batch's rows split
// over the threads, each part's rows of all steps together, so that a thread's rows stay in its
// core's cache from the projection through the backward. Under a recording outer tape the backward
// recomputes the states and gates with ops instead, so that tape sees how the gradients depend on
// the inputs.
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/fused.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/recurrent_internal.hpp"

namespace keel::rnn {

using autograd::Grads;
using autograd::Needs;

// ---- part order ----------------------------------------------------------------------------------

Tensor to_part_order(const Tensor& steps, int parts) {
  const std::int64_t time = steps.shape()[0], batch = steps.shape()[1], w = steps.shape()[2];
  std::vector<Tensor> blocks;
  for (int p = 0; p < parts; ++p) {
    const std::int64_t r0 = batch * p / parts, rows = batch * (p + 1) / parts - r0;
    blocks.push_back(reshape(slice(steps, {0, r0, 0}, {time, rows, w}), Shape{time * rows, w}));
  }
  return parts == 1 ? blocks[0] : concat(blocks, 0);
}

Tensor from_part_order(const Tensor& rows, std::int64_t time, std::int64_t batch, int parts) {
  const std::int64_t w = rows.shape()[1];
  std::vector<Tensor> blocks;
  for (int p = 0; p < parts; ++p) {
    const std::int64_t r0 = batch * p / parts, n = batch * (p + 1) / parts - r0;
    blocks.push_back(reshape(slice(rows, {r0 * time, 0}, {n * time, w}), Shape{time, n, w}));
  }
  return parts == 1 ? blocks[0] : concat(blocks, 1);
}

// ---- the LSTM sequence ---------------------------------------------------------------------------
//
// Where the device has the fused cell, lstm() records the whole recurrence as ONE node over the
// projection xz in part order (the batch's rows split over `parts` threads, each part's rows of
// every step together): the forward runs the cells step by step into buffers of all steps (the
// state each step reads, the activated gates, tanh(c)) and writes the outputs; the backward runs
// the cells' backward in reverse, each step's dz into one [time * batch, 4u] buffer, so that the
// recurrent kernel's gradient is ONE product H^T dZ over all steps (a node per step made T small
// products and T accumulations) and dZ is already the projection's gradient. Both loops are one
// backend call each (backend::lstm_sequence[_backward], a traced graph's BlockLSTM and
// BlockLSTMGrad); each thread runs its part's rows for the whole sequence in a block of memory of
// its own. Under a recording outer tape the backward recomputes the states and gates with ops
// instead, so that tape sees how the gradients depend on the inputs.
LSTMSequence lstm_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& c0, const Tensor& recurrent_kernel,
                                std::int64_t time, int parts) {
  const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
  const Shape steps{time * batch, u};
  const Tensor h_read = empty_like_shape(h0, steps), c_read = empty_like_shape(h0, steps);
  const Tensor act = empty_like_shape(h0, Shape{time * batch, 4 * u}), tanh_c = empty_like_shape(h0, steps);
  const Tensor outputs = empty_like_shape(h0, Shape{batch, time, u});
  const Tensor h_t = empty_like_shape(h0, Shape{batch, u}), c_t = empty_like_shape(h0, Shape{batch, u});
  backend::lstm_sequence(parts, xz.contiguous(), recurrent_kernel.contiguous(), row_major(h0), row_major(c0), h_read,
                         c_read, act, tanh_c, outputs, h_t, c_t);
  if (autograd::recording())
    autograd::record(
        "lstm", {xz, h0, c0, recurrent_kernel}, {outputs, h_t, c_t},
        [xz, h0, c0, recurrent_kernel, h_read, c_read, act, tanh_c, time, parts](const Grads& g, const Needs& need) {
          const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
          if (!autograd::recording()) {
            const Tensor dz_all = empty_like_shape(h0, Shape{time * batch, 4 * u});
            // R^T laid out once: the float GEMM took twice as long for dz R^T with a transposed
            // operand (8.4 against 4.8 us for [32, 200] x [200, 50]).
            const Tensor rk_t = transpose(recurrent_kernel).contiguous();
            const Tensor dc_first = empty_like_shape(h0, Shape{batch, u});
            const Tensor dh_first = need[1] ? empty_like_shape(h0, Shape{batch, u}) : Tensor();
            backend::lstm_sequence_backward(parts, act, tanh_c, c_read, g[0].contiguous(), row_major(g[1]),
                                            row_major(g[2]), rk_t, dz_all, dc_first, dh_first,
                                            empty_like_shape(h0, Shape{4, batch, u}));
            // H^T dZ: both in part order, so a split of the product's rows over the threads
            // finds each part's rows where its recurrence left them.
            const Tensor dr = need[3] ? matmul(h_read, dz_all, true, false) : Tensor();
            return Grads{need[0] ? dz_all : Tensor(), dh_first, need[2] ? dc_first : Tensor(), dr};
          }
          // Recorded by an outer tape: the states again from the node's inputs, with ops.
          Tensor dh = g[1], dc = g[2], dr;
          const std::vector<Tensor> d_out = unstack(g[0], 1);
          std::vector<Tensor> dzs(static_cast<std::size_t>(time));
          const std::vector<Tensor> xs = unstack(from_part_order(xz, time, batch, parts), 0);
          std::vector<Tensor> hs{h0}, cs{c0};
          for (std::int64_t s = 0; s < time; ++s) {
            const LSTMState next = lstm_composite(xs[static_cast<std::size_t>(s)], hs.back(), cs.back(), Tensor(),
                                                  recurrent_kernel, Tensor());
            hs.push_back(next.h);
            cs.push_back(next.c);
          }
          for (std::int64_t s = time - 1; s >= 0; --s) {
            const auto i = static_cast<std::size_t>(s);
            auto [dz, dc_prev] = lstm_gate_grads_with_ops(xs[i], hs[i], cs[i], Tensor(), recurrent_kernel, Tensor(),
                                                          add(dh, d_out[i]), dc);
            dh = matmul(dz, recurrent_kernel, false, true);
            if (need[3]) dr = dr.defined() ? add(dr, matmul(hs[i], dz, true, false)) : matmul(hs[i], dz, true, false);
            dzs[i] = std::move(dz);
            dc = std::move(dc_prev);
          }
          return Grads{need[0] ? to_part_order(stack(dzs, 0), parts) : Tensor(), need[1] ? dh : Tensor(),
                       need[2] ? dc : Tensor(), dr};
        },
        {xz, h0, c0, recurrent_kernel});
  return {outputs, h_t, c_t};
}

// ---- the GRU sequence ----------------------------------------------------------------------------
//
// The same shape as the LSTM's (ops/recurrent.cpp has the cell's formulas): the state each step
// reads, its [z | r] gates, I_h (the recurrent candidate term with its bias) and the candidate are
// kept, in part order; the backward's dX buffer is the projection's gradient, dR = H^T dI and
// db_rec = the column sums of dI over all steps; h's gradient to the step before is its direct
// term d * z plus dI R^T. The loops are backend::gru_sequence[_backward] (BlockGRU, BlockGRUGrad),
// over the parts as the LSTM's.
GRUSequence gru_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& recurrent_kernel, const Tensor& b_rec,
                              std::int64_t time, int parts) {
  const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
  const Shape steps{time * batch, u};
  const Tensor h_read = empty_like_shape(h0, steps), zr = empty_like_shape(h0, Shape{time * batch, 2 * u});
  const Tensor rec_h = empty_like_shape(h0, steps), cand = empty_like_shape(h0, steps);
  const Tensor outputs = empty_like_shape(h0, Shape{batch, time, u}), h_t = empty_like_shape(h0, Shape{batch, u});
  backend::gru_sequence(parts, xz.contiguous(), recurrent_kernel.contiguous(),
                        b_rec.defined() ? b_rec.contiguous() : Tensor(), row_major(h0), h_read, zr, rec_h, cand,
                        outputs, h_t, empty_like_shape(h0, Shape{batch, 3 * u}));
  if (autograd::recording())
    autograd::record(
        "gru", {xz, h0, recurrent_kernel, b_rec}, {outputs, h_t},
        [xz, h0, recurrent_kernel, b_rec, h_read, zr, rec_h, cand, time, parts](const Grads& g, const Needs& need) {
          const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
          Tensor dr, db;
          if (!autograd::recording()) {
            const Tensor dx_all = empty_like_shape(h0, Shape{time * batch, 3 * u});
            const Tensor di_all = empty_like_shape(h0, Shape{time * batch, 3 * u});
            const Tensor rk_t = transpose(recurrent_kernel).contiguous();  // R^T laid out once
            const Tensor dh_first = need[1] ? empty_like_shape(h0, Shape{batch, u}) : Tensor();
            backend::gru_sequence_backward(parts, zr, rec_h, cand, h_read, g[0].contiguous(), row_major(g[1]), rk_t,
                                           dx_all, di_all, dh_first, empty_like_shape(h0, Shape{3, batch, u}));
            if (need[2]) dr = matmul(h_read, di_all, true, false);  // H^T dI, both in part order
            if (need[3] && b_rec.defined()) db = reduce_sum(di_all, {0});
            return Grads{need[0] ? dx_all : Tensor(), dh_first, dr, db};
          }
          // Recorded by an outer tape: the states again from the node's inputs, with ops.
          Tensor dh = g[1];
          const std::vector<Tensor> d_out = unstack(g[0], 1);
          std::vector<Tensor> dxs(static_cast<std::size_t>(time));
          const std::vector<Tensor> xs = unstack(from_part_order(xz, time, batch, parts), 0);
          std::vector<Tensor> hs{h0};
          for (std::int64_t s = 0; s < time; ++s)
            hs.push_back(gru_composite(xs[static_cast<std::size_t>(s)], hs.back(), Tensor(), recurrent_kernel, Tensor(),
                                       b_rec));
          for (std::int64_t s = time - 1; s >= 0; --s) {
            const auto i = static_cast<std::size_t>(s);
            GRUGateGrads gg = gru_gate_grads_with_ops(xs[i], hs[i], Tensor(), recurrent_kernel, Tensor(), b_rec,
                                                      add(dh, d_out[i]));
            dh = add(gg.dh_direct, matmul(gg.dI, recurrent_kernel, false, true));
            if (need[2]) {
              const Tensor term = matmul(hs[i], gg.dI, true, false);
              dr = dr.defined() ? add(dr, term) : term;
            }
            if (need[3] && b_rec.defined()) {
              const Tensor term = reduce_sum(gg.dI, {0});
              db = db.defined() ? add(db, term) : term;
            }
            dxs[i] = std::move(gg.dX);
          }
          return Grads{need[0] ? to_part_order(stack(dxs, 0), parts) : Tensor(), need[1] ? dh : Tensor(), dr, db};
        },
        {xz, h0, recurrent_kernel, b_rec});
  return {outputs, h_t};
}

}  // namespace keel::rnn
