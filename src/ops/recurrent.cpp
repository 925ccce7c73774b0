// Recurrent cells (LSTM; GRU with reset_after = true) as fused ops, and the whole-sequence
// drivers built on them.
//
// Each cell call is ONE tape node. Forward, where the device has the fused kernels
// (backend/fused.hpp; src/cpu/recurrent.cpp): the input and recurrent projections go to BLAS, one
// pass over the rows adds them (and the bias), and the gate nonlinearities run through the SIMD
// sigmoid/tanh kernels over whole buffers (a couple of kernel calls per step instead of a dozen
// recorded ops). Elsewhere the cells are composites of ops. Backward: the closed-form gate gradients.
//  * When no tape records the backward pass (plain first-order gradients, the training case),
//    they come from one loop over the activations the forward saved.
//  * When a tape does record it (second-order gradients, gradient penalties), the same formulas
//    run as ordinary keel ops on gates recomputed from the node's inputs: the saved activations
//    have no tape history, so only the recomputed ones tell the outer tape how the gradient
//    depends on x, h, c and the weights.
// Both paths feed the same matmuls for the gradients of x, h and the weights.
//
// The sequence ops project the whole input once ([batch*time, features] @ kernel, + bias) and
// then run a "step" per time step that only does the recurrent product and the gates: the
// per-step cost is what dominates small recurrent models (the LSTM benchmark). With the fused
// cells, the LSTM's and the GRU's whole recurrence is one tape node (ops/recurrent_sequence.cpp);
// elsewhere they record a node per step.
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/fused.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/indexing.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "ops/recurrent_internal.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// ---- argument checks -------------------------------------------------------------------------

struct Arg {
  const char* name;
  const Tensor* t;  // may point at an undefined tensor for optional arguments
};

// Every defined argument: float32/float64, one dtype, one device.
void check_dtypes_devices(const char* op, std::initializer_list<Arg> args) {
  const Tensor* first = nullptr;
  const char* first_name = "";
  for (const Arg& a : args) {
    if (!a.t->defined()) continue;
    detail::check_float(*a.t, op, a.name);
    if (first == nullptr) {
      first = a.t;
      first_name = a.name;
    } else if (a.t->device() != first->device()) {
      throw DeviceError(fmt::format("{}: {} is on {} but {} is on {}", op, a.name, a.t->device().to_string(),
                                    first_name, first->device().to_string()));
    } else if (a.t->dtype() != first->dtype()) {
      throw DTypeError(fmt::format("{}: {} is {} but {} is {}", op, a.name, name(a.t->dtype()),
                                   first_name, name(first->dtype())));
    }
  }
}

void require_shape(const char* op, const char* what, const char* layout, const Tensor& t,
                   const Shape& want) {
  if (t.shape() != want)
    throw ShapeError(fmt::format("{}: {} must be {} = {}, got {}", op, what, layout,
                                 want.to_string(), t.shape().to_string()));
}

// Checks the weights and states of a cell with `gates` gate blocks against the batch size and
// input size (taken from x). Returns the number of units (from recurrent_kernel). The bias,
// when defined, is [gates*units] for LSTM and [2, gates*units] for GRU (`gru_bias`).
std::int64_t check_cell_args(const char* op, int gates, std::int64_t batch, std::int64_t input,
                             const Tensor& h, const Tensor* c, const Tensor& kernel,
                             const Tensor& recurrent_kernel, const Tensor& bias, bool gru_bias) {
  const std::string g = std::to_string(gates);
  if (recurrent_kernel.rank() != 2 || recurrent_kernel.shape()[1] != gates * recurrent_kernel.shape()[0])
    throw ShapeError(fmt::format("{}: recurrent_kernel must be [units, {}*units], got {}", op, g,
                                 recurrent_kernel.shape().to_string()));
  const std::int64_t units = recurrent_kernel.shape()[0];
  const std::int64_t width = gates * units;
  if (kernel.shape() != Shape{input, width})
    throw ShapeError(fmt::format(
        "{}: kernel must be [input_size, {}*units] = {} for an input of {} features and "
        "recurrent_kernel {}, got {}",
        op, g, Shape{input, width}.to_string(), input, recurrent_kernel.shape().to_string(),
        kernel.shape().to_string()));
  require_shape(op, "h", "[batch, units]", h, Shape{batch, units});
  if (c != nullptr) require_shape(op, "c", "[batch, units]", *c, Shape{batch, units});
  if (bias.defined()) {
    if (gru_bias)
      require_shape(op, "bias", ("[2, " + g + "*units] (input bias, recurrent bias)").c_str(),
                    bias, Shape{2, width});
    else
      require_shape(op, "bias", ("[" + g + "*units]").c_str(), bias, Shape{width});
  }
  return units;
}

}  // namespace

namespace rnn {

// ---- small helpers -----------------------------------------------------------------------------

// A 2-D tensor as the cell kernels read it: its last axis with unit stride. Views (time steps of
// a sequence, split gradients) are read in place; anything else is copied once.
Tensor row_major(const Tensor& t) { return (t.shape()[1] <= 1 || t.strides()[1] == 1) ? t : t.contiguous(); }

Tensor empty_like_shape(const Tensor& like, Shape shape) {
  return detail::empty_tensor(shape, like.dtype(), like.device());
}

Tensor one_like(const Tensor& t) { return scalar_like(t, 1.0); }

// A cell's x as the kernels take it: contiguous when the node multiplies it by `kernel`, else
// (a sequence step: x is the projection already) rows read in place.
Tensor cell_x(const Tensor& x, const Tensor& kernel) { return kernel.defined() ? x.contiguous() : row_major(x); }

// The gradients that go through the node's matrix products, shared by LSTM and GRU:
// x (or, in a sequence step, the precomputed projection of x), the kernel and the bias of the
// input side from the gate gradient dx_side; h, the recurrent kernel and bias from dh_side
// (GRU adds its direct h term to .h itself).
struct ProjectionGrads {
  Tensor x, kernel, b_in, recurrent_kernel, b_rec, h;
};
ProjectionGrads projection_grads(const Tensor& dx_side, const Tensor& dh_side, const Tensor& x,
                                 const Tensor& h, const Tensor& kernel,
                                 const Tensor& recurrent_kernel, bool need_x, bool need_h,
                                 bool need_kernel, bool need_rk, bool need_b_in, bool need_b_rec) {
  ProjectionGrads r;
  if (need_x) r.x = kernel.defined() ? matmul(dx_side, kernel, false, true) : dx_side;
  if (need_kernel) r.kernel = matmul(x, dx_side, true, false);
  if (need_b_in) r.b_in = reduce_sum(dx_side, {0});
  if (need_h) r.h = matmul(dh_side, recurrent_kernel, false, true);
  if (need_rk) r.recurrent_kernel = matmul(h, dh_side, true, false);
  if (need_b_rec) r.b_rec = reduce_sum(dh_side, {0});
  return r;
}

// ---- LSTM --------------------------------------------------------------------------------------
//
// z = x @ kernel + h @ recurrent_kernel + bias, split into blocks [i | f | g | o] of `units`
// columns (Keras' order); i, f, o = sigmoid, g = tanh;  c' = f*c + i*g;  h' = o * tanh(c').
//
// Backward, with dh = dL/dh', dc = dL/dc' and tc = tanh(c'):
//   dct = dc + dh * o * (1 - tc^2)            (everything that reaches c')
//   dz_i = dct * g * i(1-i)      dz_f = dct * c * f(1-f)
//   dz_g = dct * i * (1-g^2)     dz_o = dh * tc * o(1-o)
//   dc_prev = dct * f
// and dz goes through the products: dx = dz K^T, dK = x^T dz, db = sum_rows dz,
// dh_prev = dz R^T, dR = h^T dz.

// dz and dc_prev of one cell as differentiable ops, for a backward pass an outer tape records: the
// gates are recomputed from the cell's inputs (the saved activations have no tape history, so
// only recomputed ones tell the outer tape how the gradient depends on x, h, c and the weights).
std::pair<Tensor, Tensor> lstm_gate_grads_with_ops(const Tensor& x, const Tensor& h, const Tensor& c,
                                                   const Tensor& kernel, const Tensor& recurrent_kernel,
                                                   const Tensor& bias, const Tensor& dh, const Tensor& dc) {
  Tensor z = kernel.defined() ? matmul(x, kernel) : x;
  z = add(z, matmul(h, recurrent_kernel));
  if (bias.defined()) z = add(z, bias);
  const std::vector<Tensor> zs = split(z, 4, 1);
  const Tensor i = sigmoid(zs[0]), f = sigmoid(zs[1]), gg = tanh(zs[2]), o = sigmoid(zs[3]);
  const Tensor t = tanh(add(mul(f, c), mul(i, gg)));
  const Tensor one = one_like(t);
  const Tensor dct = add(dc, mul(dh, mul(o, sub(one, square(t)))));
  Tensor dz = concat({mul(mul(dct, gg), mul(i, sub(one, i))), mul(mul(dct, c), mul(f, sub(one, f))),
                      mul(mul(dct, i), sub(one, square(gg))), mul(mul(dh, t), mul(o, sub(one, o)))},
                     1);
  return {std::move(dz), mul(dct, f)};
}

// Node inputs: {x, h, c, kernel, recurrent_kernel, bias}. When `kernel` is undefined, x is
// already x @ kernel + bias for this step ([batch, 4u], possibly a strided view) and bias is
// undefined too: that is a sequence step.
LSTMState lstm_node(const char* op, const Tensor& x, const Tensor& h, const Tensor& c,
                    const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias) {
  const std::int64_t batch = h.shape()[0], u = h.shape()[1], width = 4 * u;
  // act: the activated gates [i | f | g | o] per row, kept for the backward pass.
  Tensor act = empty_like_shape(h, Shape{batch, width});
  Tensor c_new = empty_like_shape(h, Shape{batch, u});
  Tensor tanh_c = empty_like_shape(h, Shape{batch, u});
  Tensor h_new = empty_like_shape(h, Shape{batch, u});
  const Tensor x_proj = kernel.defined() ? empty_like_shape(h, Shape{batch, width}) : Tensor();
  backend::lstm_cell(cell_x(x, kernel), h.contiguous(), row_major(c), detail::contiguous_or_none(kernel),
                     recurrent_kernel.contiguous(), detail::contiguous_or_none(bias), act, c_new, tanh_c, h_new,
                     x_proj);

  if (autograd::recording()) {
    autograd::record(
        op, {x, h, c, kernel, recurrent_kernel, bias}, {h_new, c_new},
        [x, h, c, kernel, recurrent_kernel, bias, act, tanh_c](const Grads& g, const Needs& need) {
          const Tensor& dh = g[0];
          const Tensor& dc = g[1];
          Tensor dz, dc_prev;
          if (!autograd::recording()) {
            // First-order: one fused loop over the saved activations.
            dz = empty_like_shape(act, act.shape());
            dc_prev = empty_like_shape(act, tanh_c.shape());
            backend::lstm_cell_backward(act, tanh_c, row_major(dh), row_major(dc), row_major(c), dz, dc_prev);
          } else {
            std::tie(dz, dc_prev) = lstm_gate_grads_with_ops(x, h, c, kernel, recurrent_kernel, bias, dh, dc);
          }
          const ProjectionGrads p =
              projection_grads(dz, dz, x, h, kernel, recurrent_kernel, need[0], need[1], need[3],
                               need[4], need[5], false);
          return Grads{p.x, p.h, need[2] ? dc_prev : Tensor(), p.kernel, p.recurrent_kernel,
                       p.b_in};
        },
        {x, h, c, kernel, recurrent_kernel, bias});
  }
  return {h_new, c_new};
}

// On CUDA the cells are written with ops (matmuls on cuBLAS, gates as elementwise kernels), so
// their gradients come from those ops. Gate order and formulas are the fused CPU nodes'.
LSTMState lstm_composite(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
                         const Tensor& recurrent_kernel, const Tensor& bias) {
  Tensor z = add(kernel.defined() ? matmul(x, kernel) : x, matmul(h, recurrent_kernel));
  if (bias.defined()) z = add(z, bias);
  const std::vector<Tensor> gates = split(z, 4, 1);  // i, f, g, o
  const Tensor c_new = add(mul(sigmoid(gates[1]), c), mul(sigmoid(gates[0]), tanh(gates[2])));
  return {mul(sigmoid(gates[3]), tanh(c_new)), c_new};
}

Tensor gru_composite(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
                     const Tensor& b_in, const Tensor& b_rec) {
  Tensor xp = kernel.defined() ? matmul(x, kernel) : x;
  if (b_in.defined()) xp = add(xp, b_in);
  Tensor inner = matmul(h, recurrent_kernel);
  if (b_rec.defined()) inner = add(inner, b_rec);
  const std::vector<Tensor> xs = split(xp, 3, 1), is = split(inner, 3, 1);  // z, r, h blocks
  const Tensor zg = sigmoid(add(xs[0], is[0]));
  const Tensor r = sigmoid(add(xs[1], is[1]));
  const Tensor hh = tanh(add(xs[2], mul(r, is[2])));
  return add(mul(zg, h), mul(sub(scalar_like(zg, 1.0), zg), hh));
}

LSTMState lstm_dispatch(const char* op, const Tensor& x, const Tensor& h, const Tensor& c,
                        const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias) {
  if (!backend::has_fused(backend::Fused::lstm_cell, h.device()))
    return lstm_composite(x, h, c, kernel, recurrent_kernel, bias);
  return lstm_node(op, x, h, c, kernel, recurrent_kernel, bias);
}

// ---- GRU (reset_after = true) -----------------------------------------------------------------
//
// X = x @ kernel + b_in, I = h @ recurrent_kernel + b_rec, each split into blocks [z | r | h]:
//   z = sigmoid(X_z + I_z),  r = sigmoid(X_r + I_r),  hh = tanh(X_h + r * I_h),
//   h' = z * h + (1 - z) * hh.
//
// Backward, with d = dL/dh':
//   dz_pre = d * (h - hh) * z(1-z)
//   dh_pre = d * (1 - z) * (1 - hh^2)            (the candidate's pre-activation)
//   dr_pre = dh_pre * I_h * r(1-r)
//   dX = [dz_pre | dr_pre | dh_pre],  dI = [dz_pre | dr_pre | dh_pre * r]
//   dh_prev = d * z + dI R^T,  dx = dX K^T,  dK = x^T dX,  dR = h^T dI,
//   db_in = sum_rows dX,  db_rec = sum_rows dI.

GRUGateGrads gru_gate_grads_with_ops(const Tensor& x, const Tensor& h, const Tensor& kernel,
                                     const Tensor& recurrent_kernel, const Tensor& b_in, const Tensor& b_rec,
                                     const Tensor& d) {
  Tensor X = kernel.defined() ? matmul(x, kernel) : x;
  if (b_in.defined()) X = add(X, b_in);
  Tensor I = matmul(h, recurrent_kernel);
  if (b_rec.defined()) I = add(I, b_rec);
  const std::vector<Tensor> xs = split(X, 3, 1), is = split(I, 3, 1);
  const Tensor z = sigmoid(add(xs[0], is[0])), r = sigmoid(add(xs[1], is[1]));
  const Tensor c = tanh(add(xs[2], mul(r, is[2])));
  const Tensor one = one_like(c);
  const Tensor dz_pre = mul(mul(d, sub(h, c)), mul(z, sub(one, z)));
  const Tensor dh_pre = mul(mul(d, sub(one, z)), sub(one, square(c)));
  const Tensor dr_pre = mul(mul(dh_pre, is[2]), mul(r, sub(one, r)));
  return {concat({dz_pre, dr_pre, dh_pre}, 1), concat({dz_pre, dr_pre, mul(dh_pre, r)}, 1), mul(d, z)};
}

// Node inputs: {x, h, kernel, recurrent_kernel, b_in, b_rec}; a sequence step passes the
// precomputed x @ kernel + b_in as x with kernel and b_in undefined.
Tensor gru_node(const char* op, const Tensor& x, const Tensor& h, const Tensor& kernel,
                const Tensor& recurrent_kernel, const Tensor& b_in, const Tensor& b_rec) {
  const std::int64_t batch = h.shape()[0], u = h.shape()[1], width = 3 * u;
  // zr: [z | r] per row; rec_h: I_h (with its bias); cand: the candidate hh. All three are
  // saved for the backward pass.
  Tensor zr = empty_like_shape(h, Shape{batch, 2 * u});
  Tensor rec_h = empty_like_shape(h, Shape{batch, u});
  Tensor cand = empty_like_shape(h, Shape{batch, u});
  Tensor h_new = empty_like_shape(h, Shape{batch, u});
  const Tensor x_proj = kernel.defined() ? empty_like_shape(h, Shape{batch, width}) : Tensor();
  const Tensor inner = empty_like_shape(h, Shape{batch, width});  // h @ R
  backend::gru_cell(cell_x(x, kernel), h.contiguous(), detail::contiguous_or_none(kernel), recurrent_kernel.contiguous(),
                    detail::contiguous_or_none(b_in), detail::contiguous_or_none(b_rec), zr, rec_h, cand, h_new, x_proj, inner);

  if (autograd::recording()) {
    autograd::record(
        op, {x, h, kernel, recurrent_kernel, b_in, b_rec}, {h_new},
        [x, h, kernel, recurrent_kernel, b_in, b_rec, zr, rec_h, cand](const Grads& g,
                                                                       const Needs& need) {
          const Tensor& d = g[0];
          Tensor dX, dI, dh_direct;
          if (!autograd::recording()) {
            const std::int64_t batch = cand.shape()[0], u = cand.shape()[1];
            dX = empty_like_shape(cand, Shape{batch, 3 * u});
            dI = empty_like_shape(cand, Shape{batch, 3 * u});
            dh_direct = empty_like_shape(cand, Shape{batch, u});
            backend::gru_cell_backward(zr, rec_h, cand, row_major(h), row_major(d), dX, dI, dh_direct);
          } else {
            // Recorded by an outer tape: the gates recomputed with differentiable ops.
            GRUGateGrads gg = gru_gate_grads_with_ops(x, h, kernel, recurrent_kernel, b_in, b_rec, d);
            dX = std::move(gg.dX);
            dI = std::move(gg.dI);
            dh_direct = std::move(gg.dh_direct);
          }
          ProjectionGrads p = projection_grads(dX, dI, x, h, kernel, recurrent_kernel, need[0],
                                               need[1], need[2], need[3], need[4], need[5]);
          if (need[1]) p.h = add(dh_direct, p.h);
          return Grads{p.x, p.h, p.kernel, p.recurrent_kernel, p.b_in, p.b_rec};
        },
        {x, h, kernel, recurrent_kernel, b_in, b_rec});
  }
  return h_new;
}

Tensor gru_dispatch(const char* op, const Tensor& x, const Tensor& h, const Tensor& kernel,
                    const Tensor& recurrent_kernel, const Tensor& b_in, const Tensor& b_rec) {
  if (!backend::has_fused(backend::Fused::gru_cell, h.device()))
    return gru_composite(x, h, kernel, recurrent_kernel, b_in, b_rec);
  return gru_node(op, x, h, kernel, recurrent_kernel, b_in, b_rec);
}

// ---- sequences ---------------------------------------------------------------------------------

// x [n, f] @ kernel [f, w] + bias [w] as one node: the bias is added in a pass over the rows
// of the fresh product (a broadcasting add would be another op, node and output). Linear, so
// its gradient needs no recomputation: the usual dense rule, written with ops. With parts > 1, x
// is a sequence of `time` steps in part order (backend::recurrent_input_projection).
Tensor projection_node(const Tensor& x, const Tensor& kernel, const Tensor& bias, int parts, std::int64_t time) {
  Tensor y = empty_like_shape(kernel, Shape{x.shape()[0], kernel.shape()[1]});
  backend::recurrent_input_projection(x.contiguous(), kernel.contiguous(), detail::contiguous_or_none(bias), y, parts,
                                      time);
  if (autograd::recording())
    autograd::record(
        "recurrent_input_projection", {x, kernel, bias}, {y},
        [x, kernel, parts, time](const Grads& g, const Needs& need) {
          if (parts > 1 && !autograd::recording()) {
            // In the recurrence's parts (backend::recurrent_input_projection_backward).
            const Tensor dx = need[0] ? empty_like_shape(kernel, x.shape()) : Tensor();
            const Tensor dk = need[1] ? empty_like_shape(kernel, kernel.shape()) : Tensor();
            const Tensor db = need[2] ? empty_like_shape(kernel, Shape{kernel.shape()[1]}) : Tensor();
            backend::recurrent_input_projection_backward(x.contiguous(), kernel.contiguous(), g[0].contiguous(), dx, dk,
                                                         db, parts, time);
            return Grads{dx, dk, db};
          }
          return Grads{need[0] ? matmul(g[0], kernel, false, true) : Tensor(),
                       need[1] ? matmul(x, g[0], true, false) : Tensor(),
                       need[2] ? reduce_sum(g[0], {0}) : Tensor()};
        },
        {x, kernel, bias});
  return y;
}

// A sequence node's input projection and the number of parts its rows are laid out in.
struct SequenceInput {
  Tensor xz;
  int parts;
};

// The input side of a sequence node of `gates` gates: x [batch, time, features], its steps in the
// order they run, in part order over backend::recurrence_parts' split, projected at once.
SequenceInput sequence_input(const Tensor& x, const Tensor& kernel, const Tensor& bias, bool go_backwards,
                             std::int64_t gates) {
  const std::int64_t batch = x.shape()[0], time = x.shape()[1], units = kernel.shape()[1] / gates;
  const int parts = backend::recurrence_parts(time, batch, units, gates * units);
  const Tensor steps_first = transpose(go_backwards ? reverse(x, {1}) : x, {1, 0, 2});
  return {projection_node(to_part_order(steps_first, parts), kernel, bias, parts, time), parts};
}

// [batch, time, features] -> x @ kernel (+ bias) for every step at once (ONE product), as
// per-step views [batch, gates*units]. unstack is one tape node, so the backward pass stacks
// the T step gradients once instead of padding each to the full sequence.
std::vector<Tensor> project_steps(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  const std::int64_t batch = x.shape()[0], time = x.shape()[1], features = x.shape()[2];
  const std::int64_t width = kernel.shape()[1];
  const Tensor x2 = reshape(x, Shape{batch * time, features});
  if (!backend::has_fused(backend::Fused::recurrent_input_projection, x.device())) {
    Tensor xz = matmul(x2, kernel);
    if (bias.defined()) xz = add(xz, bias);
    return unstack(reshape(xz, Shape{batch, time, width}), 1);
  }
  const Tensor xz = projection_node(x2, kernel, bias, 1, 0);
  return unstack(reshape(xz, Shape{batch, time, width}), 1);
}

}  // namespace rnn

namespace {

using namespace rnn;

// GRU's [2, 3u] bias as its input and recurrent rows (both undefined without a bias). The
// unstack is recorded, so their gradients stack back to [2, 3u].
struct GRUBias {
  Tensor in, rec;
};
GRUBias split_gru_bias(const Tensor& bias) {
  if (!bias.defined()) return {};
  const std::vector<Tensor> b = unstack(bias, 0);
  return {b[0], b[1]};
}

void check_sequence_input(const char* op, const Tensor& x) {
  detail::check_defined(x, op, "x");
  if (x.rank() != 3)
    throw ShapeError(fmt::format("{}: x must be [batch, time, features], got {}", op,
                                 x.shape().to_string()));
}

// Half-precision shim (until the kernels take float16/bfloat16): operands all of one half dtype
// run in float32 and the results are rounded once; a composite, so gradients flow through the casts.
bool half_operands(std::initializer_list<const Tensor*> ts) {
  const DType d = (*ts.begin())->defined() ? (*ts.begin())->dtype() : DType::float32;
  return is_half(d) && std::all_of(ts.begin(), ts.end(), [&](const Tensor* t) { return !t->defined() || t->dtype() == d; });
}
Tensor f32(const Tensor& t) { return t.defined() ? cast(t, DType::float32) : t; }

}  // namespace

// ---- public ops --------------------------------------------------------------------------------

LSTMState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
                    const Tensor& recurrent_kernel, const Tensor& bias) {
  if (half_operands({&x, &h, &c, &kernel, &recurrent_kernel, &bias})) {
    const LSTMState s = lstm_cell(f32(x), f32(h), f32(c), f32(kernel), f32(recurrent_kernel), f32(bias));
    return {cast(s.h, x.dtype()), cast(s.c, x.dtype())};
  }
  const char* op = "lstm_cell";
  detail::check_defined(x, op, "x");
  detail::check_defined(h, op, "h");
  detail::check_defined(c, op, "c");
  detail::check_defined(kernel, op, "kernel");
  detail::check_defined(recurrent_kernel, op, "recurrent_kernel");
  if (x.rank() != 2)
    throw ShapeError(fmt::format("{}: x must be [batch, input_size], got {}", op, x.shape().to_string()));
  check_cell_args(op, 4, x.shape()[0], x.shape()[1], h, &c, kernel, recurrent_kernel, bias, false);
  check_dtypes_devices(op, {{"x", &x}, {"h", &h}, {"c", &c}, {"kernel", &kernel},
                            {"recurrent_kernel", &recurrent_kernel}, {"bias", &bias}});
  return lstm_dispatch(op, x, h, c, kernel, recurrent_kernel, bias);
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& kernel, const Tensor& recurrent_kernel,
                const Tensor& bias) {
  if (half_operands({&x, &h, &kernel, &recurrent_kernel, &bias}))
    return cast(gru_cell(f32(x), f32(h), f32(kernel), f32(recurrent_kernel), f32(bias)), x.dtype());
  const char* op = "gru_cell";
  detail::check_defined(x, op, "x");
  detail::check_defined(h, op, "h");
  detail::check_defined(kernel, op, "kernel");
  detail::check_defined(recurrent_kernel, op, "recurrent_kernel");
  if (x.rank() != 2)
    throw ShapeError(fmt::format("{}: x must be [batch, input_size], got {}", op, x.shape().to_string()));
  check_cell_args(op, 3, x.shape()[0], x.shape()[1], h, nullptr, kernel, recurrent_kernel, bias, true);
  check_dtypes_devices(op, {{"x", &x}, {"h", &h}, {"kernel", &kernel},
                            {"recurrent_kernel", &recurrent_kernel}, {"bias", &bias}});
  const auto [b_in, b_rec] = split_gru_bias(bias);
  return gru_dispatch(op, x, h, kernel, recurrent_kernel, b_in, b_rec);
}

LSTMSequence lstm(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& kernel,
                  const Tensor& recurrent_kernel, const Tensor& bias, bool go_backwards) {
  if (half_operands({&x, &h0, &c0, &kernel, &recurrent_kernel, &bias})) {
    const LSTMSequence s = lstm(f32(x), f32(h0), f32(c0), f32(kernel), f32(recurrent_kernel), f32(bias), go_backwards);
    return {cast(s.outputs, x.dtype()), cast(s.h, x.dtype()), cast(s.c, x.dtype())};
  }
  const char* op = "lstm";
  check_sequence_input(op, x);
  detail::check_defined(h0, op, "h0");
  detail::check_defined(c0, op, "c0");
  detail::check_defined(kernel, op, "kernel");
  detail::check_defined(recurrent_kernel, op, "recurrent_kernel");
  const std::int64_t units = check_cell_args(op, 4, x.shape()[0], x.shape()[2], h0, &c0, kernel,
                                             recurrent_kernel, bias, false);
  check_dtypes_devices(op, {{"x", &x}, {"h0", &h0}, {"c0", &c0}, {"kernel", &kernel},
                            {"recurrent_kernel", &recurrent_kernel}, {"bias", &bias}});
  const std::int64_t batch = x.shape()[0], time = x.shape()[1];
  if (time == 0) {
    DeviceScope scope(x.device());
    return {zeros(Shape{batch, 0, units}, x.dtype()), h0, c0};
  }
  if (backend::has_fused(backend::Fused::lstm_cell, x.device()) &&
      backend::has_fused(backend::Fused::recurrent_input_projection, x.device())) {
    const SequenceInput in = sequence_input(x, kernel, bias, go_backwards, 4);
    return lstm_sequence_node(in.xz, h0, c0, recurrent_kernel, time, in.parts);
  }
  const std::vector<Tensor> steps = project_steps(x, kernel, bias);
  std::vector<Tensor> outputs;
  outputs.reserve(steps.size());
  LSTMState state{h0, c0};
  for (std::int64_t s = 0; s < time; ++s) {
    const std::int64_t t = go_backwards ? time - 1 - s : s;
    state = lstm_dispatch("lstm_step", steps[static_cast<std::size_t>(t)], state.h, state.c,
                          Tensor(), recurrent_kernel, Tensor());
    outputs.push_back(state.h);
  }
  return {stack(outputs, 1), state.h, state.c};
}

GRUSequence gru(const Tensor& x, const Tensor& h0, const Tensor& kernel, const Tensor& recurrent_kernel,
                const Tensor& bias, bool go_backwards) {
  if (half_operands({&x, &h0, &kernel, &recurrent_kernel, &bias})) {
    const GRUSequence s = gru(f32(x), f32(h0), f32(kernel), f32(recurrent_kernel), f32(bias), go_backwards);
    return {cast(s.outputs, x.dtype()), cast(s.h, x.dtype())};
  }
  const char* op = "gru";
  check_sequence_input(op, x);
  detail::check_defined(h0, op, "h0");
  detail::check_defined(kernel, op, "kernel");
  detail::check_defined(recurrent_kernel, op, "recurrent_kernel");
  const std::int64_t units = check_cell_args(op, 3, x.shape()[0], x.shape()[2], h0, nullptr, kernel,
                                             recurrent_kernel, bias, true);
  check_dtypes_devices(op, {{"x", &x}, {"h0", &h0}, {"kernel", &kernel},
                            {"recurrent_kernel", &recurrent_kernel}, {"bias", &bias}});
  const std::int64_t batch = x.shape()[0], time = x.shape()[1];
  if (time == 0) {
    DeviceScope scope(x.device());
    return {zeros(Shape{batch, 0, units}, x.dtype()), h0};
  }
  const auto [b_in, b_rec] = split_gru_bias(bias);
  if (backend::has_fused(backend::Fused::gru_cell, x.device()) &&
      backend::has_fused(backend::Fused::recurrent_input_projection, x.device())) {
    const SequenceInput in = sequence_input(x, kernel, b_in, go_backwards, 3);
    return gru_sequence_node(in.xz, h0, recurrent_kernel, b_rec, time, in.parts);
  }
  const std::vector<Tensor> steps = project_steps(x, kernel, b_in);
  std::vector<Tensor> outputs;
  outputs.reserve(steps.size());
  Tensor h = h0;
  for (std::int64_t s = 0; s < time; ++s) {
    const std::int64_t t = go_backwards ? time - 1 - s : s;
    h = gru_dispatch("gru_step", steps[static_cast<std::size_t>(t)], h, Tensor(), recurrent_kernel,
                     Tensor(), b_rec);
    outputs.push_back(h);
  }
  return {stack(outputs, 1), h};
}

}  // namespace keel
