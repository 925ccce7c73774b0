// The recurrences as one tape node each (LSTM; GRU with reset_after = true), where the device has
// the fused cells: ops/recurrent.cpp projects the whole input once and calls these.
//
// A node per step made T small products and T gradient accumulations per sequence. Here the
// forward runs the cells step by step into buffers of all steps; the backward runs the cells'
// backward in reverse into [time * batch, gates * u] buffers, so that the recurrent kernel's
// gradient is ONE product H^T dZ over all steps and the input side's buffer already is the
// projection's gradient. Under a recording outer tape the backward recomputes the states and gates
// with ops instead, so that tape sees how the gradients depend on the inputs.
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

namespace {

// The per-step views of a buffer read as `steps` ([steps, ...]; no tape sees the reshape or the
// views: the node is the one record).
std::vector<Tensor> steps_of(const Tensor& buffer, const Shape& steps) {
  autograd::NoRecordScope quiet;
  return unstack(reshape(buffer, steps), 0);
}

// The outputs [batch, time, u] from the states of all steps [time + 1, batch, u] (h0 first).
Tensor outputs_of(const Tensor& h_all, std::int64_t time) {
  autograd::NoRecordScope quiet;
  const std::int64_t batch = h_all.shape()[1], u = h_all.shape()[2];
  return transpose(slice(h_all, {1, 0, 0}, {time, batch, u}), {1, 0, 2}).contiguous();
}

// The state each step read, as rows [time * batch, u]: the left operand of H^T dZ.
Tensor states_read(const Tensor& h_all, std::int64_t time) {
  const std::int64_t batch = h_all.shape()[1], u = h_all.shape()[2];
  return reshape(slice(h_all, {0, 0, 0}, {time, batch, u}), Shape{time * batch, u});
}

// dL/dh of each step's output, time-major ([time, batch, u]) in a buffer of the node's own (a
// strided operand made each step's add copy it), the last state's gradient dh added to the last
// step's. The backward adds each step's gradient from the step after into it in place, and the
// cells read the sum.
Tensor output_grads(const Tensor& g_outputs, const Tensor& dh, std::int64_t time, const char* op) {
  const std::int64_t batch = dh.shape()[0], u = dh.shape()[1];
  const Tensor d_all = empty_like_shape(dh, Shape{time, batch, u});
  backend::copy(transpose(g_outputs, {1, 0, 2}), d_all, op);
  const Tensor last = steps_of(d_all, d_all.shape()).back();
  backend::binary(kernel::BinaryOp::add, last, dh, last);
  return d_all;
}

}  // namespace

// ---- the LSTM sequence ---------------------------------------------------------------------------
//
// Where the device has the fused cell, lstm() records the whole recurrence as ONE node over the
// time-major projection xz ([time * batch, 4u], step s in rows [s * batch, (s + 1) * batch)): the
// forward runs the cells step by step into buffers of all steps (h and c with the initial state at
// index 0, the activated gates, tanh(c)); the backward runs the cells' backward in reverse, each
// step's dz into one [time * batch, 4u] buffer, so that the recurrent kernel's gradient is ONE
// product H^T dZ over all steps (a node per step made T small products and T accumulations) and
// dZ is already the projection's gradient. Both loops are one backend call each
// (backend::lstm_sequence[_backward], a traced graph's BlockLSTM and BlockLSTMGrad), which splits
// the batch's rows over the threads for the whole sequence. Under a recording outer tape the backward recomputes
// the states and gates with ops instead, so that tape sees how the gradients depend on the inputs.
LSTMSequence lstm_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& c0, const Tensor& recurrent_kernel,
                                std::int64_t time) {
  const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
  // Every step's state (the initial one at index 0), activated gates and tanh(c), kept for the
  // backward.
  const Shape states{time + 1, batch, u};
  const Tensor h_all = empty_like_shape(h0, states), c_all = empty_like_shape(h0, states);
  const Tensor act = empty_like_shape(h0, Shape{time, batch, 4 * u});
  const Tensor tanh_c = empty_like_shape(h0, Shape{time, batch, u});
  const std::vector<Tensor> h = steps_of(h_all, states), c = steps_of(c_all, states);
  backend::copy(h0, h[0], "lstm");
  backend::copy(c0, c[0], "lstm");
  backend::lstm_sequence(xz.contiguous(), recurrent_kernel.contiguous(), h_all, c_all, act, tanh_c,
                         empty_like_shape(h0, Shape{batch, u}));
  const Tensor outputs = outputs_of(h_all, time);
  const Tensor h_t = h.back(), c_t = c.back();
  if (autograd::recording())
    autograd::record(
        "lstm", {xz, h0, c0, recurrent_kernel}, {outputs, h_t, c_t},
        [xz, h0, c0, recurrent_kernel, h_all, c_all, act, tanh_c, time](const Grads& g, const Needs& need) {
          const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
          Tensor dh = g[1], dc = g[2], dr;
          if (!autograd::recording()) {
            const Tensor dz_all = empty_like_shape(h0, Shape{time * batch, 4 * u});
            if (time > 0) {
              const Tensor d_all = output_grads(g[0], dh, time, "lstm");
              // R^T laid out once: the float GEMM took twice as long for dz R^T with a transposed
              // operand (8.4 against 4.8 us for [32, 200] x [200, 50]).
              const Tensor rk_t = transpose(recurrent_kernel).contiguous();
              const Tensor dc_first = empty_like_shape(h0, Shape{batch, u});
              const Tensor dh_first = need[1] ? empty_like_shape(h0, Shape{batch, u}) : Tensor();
              backend::lstm_sequence_backward(act, tanh_c, c_all, d_all, row_major(dc), rk_t, dz_all, dc_first,
                                              dh_first, empty_like_shape(h0, Shape{3, batch, u}));
              dh = dh_first;
              dc = dc_first;
            }
            if (need[3]) dr = matmul(states_read(h_all, time), dz_all, true, false);  // H^T dZ
            return Grads{need[0] ? dz_all : Tensor(), need[1] ? dh : Tensor(), need[2] ? dc : Tensor(), dr};
          }
          // Recorded by an outer tape: the states again from the node's inputs, with ops.
          const std::vector<Tensor> d_out = unstack(g[0], 1);
          std::vector<Tensor> dzs(static_cast<std::size_t>(time));
          const std::vector<Tensor> xs = unstack(reshape(xz, Shape{time, batch, 4 * u}), 0);
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
          return Grads{need[0] ? concat(dzs, 0) : Tensor(), need[1] ? dh : Tensor(), need[2] ? dc : Tensor(), dr};
        },
        {xz, h0, c0, recurrent_kernel});
  return {outputs, h_t, c_t};
}

// ---- the GRU sequence ----------------------------------------------------------------------------
//
// The same shape as the LSTM's (ops/recurrent.cpp has the cell's formulas): every step's state
// (h0 at index 0), its [z | r] gates, I_h (the recurrent candidate term with its bias) and the
// candidate are kept; the backward's dX buffer is the projection's gradient, dR = H^T dI and
// db_rec = the column sums of dI over all steps; h's gradient to the step before is its direct
// term d * z plus dI R^T. The loops are backend::gru_sequence[_backward] (BlockGRU, BlockGRUGrad),
// split over the threads by the batch's rows as the LSTM's.
GRUSequence gru_sequence_node(const Tensor& xz, const Tensor& h0, const Tensor& recurrent_kernel, const Tensor& b_rec,
                              std::int64_t time) {
  const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
  const Shape states{time + 1, batch, u};
  const Tensor h_all = empty_like_shape(h0, states);
  const Tensor zr = empty_like_shape(h0, Shape{time, batch, 2 * u});
  const Tensor rec_h = empty_like_shape(h0, Shape{time, batch, u}), cand = empty_like_shape(h0, Shape{time, batch, u});
  const std::vector<Tensor> h = steps_of(h_all, states);
  backend::copy(h0, h[0], "gru");
  backend::gru_sequence(xz.contiguous(), recurrent_kernel.contiguous(), b_rec.defined() ? b_rec.contiguous() : Tensor(),
                        h_all, zr, rec_h, cand, empty_like_shape(h0, Shape{batch, 3 * u}));
  const Tensor outputs = outputs_of(h_all, time);
  const Tensor h_t = h.back();
  if (autograd::recording())
    autograd::record(
        "gru", {xz, h0, recurrent_kernel, b_rec}, {outputs, h_t},
        [xz, h0, recurrent_kernel, b_rec, h_all, zr, rec_h, cand, time](const Grads& g, const Needs& need) {
          const std::int64_t batch = h0.shape()[0], u = h0.shape()[1];
          Tensor dh = g[1], dr, db;
          if (!autograd::recording()) {
            const Tensor dx_all = empty_like_shape(h0, Shape{time * batch, 3 * u});
            const Tensor di_all = empty_like_shape(h0, Shape{time * batch, 3 * u});
            if (time > 0) {
              const Tensor d_all = output_grads(g[0], dh, time, "gru");
              const Tensor rk_t = transpose(recurrent_kernel).contiguous();  // R^T laid out once
              const Tensor dh_first = need[1] ? empty_like_shape(h0, Shape{batch, u}) : Tensor();
              backend::gru_sequence_backward(zr, rec_h, cand, h_all, d_all, rk_t, dx_all, di_all, dh_first,
                                             empty_like_shape(h0, Shape{2, batch, u}));
              dh = dh_first;
            }
            if (need[2]) dr = matmul(states_read(h_all, time), di_all, true, false);  // H^T dI
            if (need[3] && b_rec.defined()) db = reduce_sum(di_all, {0});
            return Grads{need[0] ? dx_all : Tensor(), need[1] ? dh : Tensor(), dr, db};
          }
          // Recorded by an outer tape: the states again from the node's inputs, with ops.
          const std::vector<Tensor> d_out = unstack(g[0], 1);
          std::vector<Tensor> dxs(static_cast<std::size_t>(time));
          const std::vector<Tensor> xs = unstack(reshape(xz, Shape{time, batch, 3 * u}), 0);
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
          return Grads{need[0] ? concat(dxs, 0) : Tensor(), need[1] ? dh : Tensor(), dr, db};
        },
        {xz, h0, recurrent_kernel, b_rec});
  return {outputs, h_t};
}

}  // namespace keel::rnn
