// Recurrent cells (LSTM; GRU with reset_after = true) as fused ops, and the whole-sequence
// drivers built on them.
//
// Each cell call is ONE tape node. Forward: the input and recurrent projections go to BLAS, one
// pass over the rows adds them (and the bias), and the gate nonlinearities run through the SIMD
// sigmoid/tanh kernels over whole buffers (a couple of kernel calls per step instead of a dozen
// recorded ops). Backward: the closed-form gate gradients.
//  * When no tape records the backward pass (plain first-order gradients, the training case),
//    they come from one loop over the activations the forward saved.
//  * When a tape does record it (second-order gradients, gradient penalties), the same formulas
//    run as ordinary keel ops on gates recomputed from the node's inputs: the saved activations
//    have no tape history, so only the recomputed ones tell the outer tape how the gradient
//    depends on x, h, c and the weights.
// Both paths feed the same matmuls for the gradients of x, h and the weights.
//
// The sequence ops project the whole input once ([batch*time, features] @ kernel, + bias) and
// then run a "step" node per time step that only does the recurrent product and the gates: the
// per-step cost is what dominates small recurrent models (the LSTM benchmark).
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/gemm.hpp"
#include "cpu/kernels.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

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

// ---- small CPU helpers -------------------------------------------------------------------------

// Rows of a 2-D tensor whose last axis has unit stride: element (r, j) is p[r*ld + j].
// Views (time steps of a sequence, split gradients) are read in place; anything else is
// copied once into `hold`.
template <class T>
struct Rows {
  const T* p = nullptr;
  std::int64_t ld = 0;
  const T* row(std::int64_t r) const { return p + r * ld; }
};

template <class T>
Rows<T> rows_of(const Tensor& t, Tensor& hold) {
  hold = (t.shape()[1] <= 1 || t.strides()[1] == 1) ? t : t.contiguous();
  return {hold.template data<T>(), hold.shape()[0] <= 1 ? 0 : hold.strides()[0]};
}

template <class T>
T* mutable_data(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// out[m, n] (contiguous) = a[m, k] @ b[k, n]: the forward products, straight to BLAS (no tape
// node, no output shape bookkeeping).
void gemm_to(const Tensor& a, const Tensor& b, void* out) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const std::int64_t m = ac.shape()[0], k = ac.shape()[1], n = bc.shape()[1];
  cpu::gemm(ac.dtype(), m, n, k, cpu::MatrixArg{ac.raw_data(), k, false},
            cpu::MatrixArg{bc.raw_data(), n, false}, out, n);
}

Tensor empty_like_shape(const Tensor& like, Shape shape) {
  return detail::empty_tensor(shape, like.dtype(), like.device());
}

Tensor one_like(const Tensor& t) { return scalar_like(t, 1.0); }

// The rows of x @ kernel, [batch, width] with batch from h, computed into `hold`; a sequence
// step (kernel undefined) passes that product already as x.
template <class T>
Rows<T> projected_rows(const Tensor& x, const Tensor& kernel, const Tensor& h, std::int64_t width,
                       Tensor& hold) {
  if (!kernel.defined()) return rows_of<T>(x, hold);
  hold = empty_like_shape(h, Shape{h.shape()[0], width});
  gemm_to(x, kernel, hold.raw_data());
  return {hold.template data<T>(), width};
}

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

// ---- row kernels ----------------------------------------------------------------------------------
// Plain loops over one batch row. Each __restrict pointer names its own block of memory (gate
// blocks of one row never overlap), which is what lets the compiler vectorise them: with
// possible aliasing between a dozen pointers it gives up.

template <class T>
void add_row(std::int64_t n, T* __restrict a, const T* __restrict x, const T* __restrict b) {
  if (b != nullptr)
    for (std::int64_t j = 0; j < n; ++j) a[j] += x[j] + b[j];
  else
    for (std::int64_t j = 0; j < n; ++j) a[j] += x[j];
}

template <class T>
void sum_row(std::int64_t n, const T* __restrict a, const T* __restrict b, T* __restrict y) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = a[j] + b[j];
}

// c' = f*c + i*g
template <class T>
void lstm_state_row(std::int64_t u, const T* __restrict i, const T* __restrict f,
                    const T* __restrict g, const T* __restrict c, T* __restrict c_new) {
  for (std::int64_t j = 0; j < u; ++j) c_new[j] = f[j] * c[j] + i[j] * g[j];
}

template <class T>
void mul_row(std::int64_t n, const T* __restrict a, const T* __restrict b, T* __restrict y) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = a[j] * b[j];
}

// The LSTM gate gradients of one row (formulas above lstm_node).
template <class T>
void lstm_grad_row(std::int64_t u, const T* __restrict i, const T* __restrict f,
                   const T* __restrict g, const T* __restrict o, const T* __restrict tc,
                   const T* __restrict dh, const T* __restrict dc, const T* __restrict c,
                   T* __restrict dzi, T* __restrict dzf, T* __restrict dzg, T* __restrict dzo,
                   T* __restrict dc_prev) {
  for (std::int64_t j = 0; j < u; ++j) {
    const T one(1);
    const T dct = dc[j] + dh[j] * o[j] * (one - tc[j] * tc[j]);
    dzi[j] = dct * g[j] * i[j] * (one - i[j]);
    dzf[j] = dct * c[j] * f[j] * (one - f[j]);
    dzg[j] = dct * i[j] * (one - g[j] * g[j]);
    dzo[j] = dh[j] * tc[j] * o[j] * (one - o[j]);
    dc_prev[j] = dct * f[j];
  }
}

// GRU: the z and r pre-activations x + i + b_in + b_rec.
template <class T>
void gru_zr_row(std::int64_t n, const T* __restrict x, const T* __restrict in,
                const T* __restrict bi, const T* __restrict br, T* __restrict zr) {
  for (std::int64_t j = 0; j < n; ++j) zr[j] = x[j] + in[j] + bi[j] + br[j];
}

// hh pre-activation: x_h (+ b_in_h) + r * rec_h.
template <class T>
void gru_cand_row(std::int64_t u, const T* __restrict x, const T* __restrict bi,
                  const T* __restrict r, const T* __restrict rec, T* __restrict hh) {
  for (std::int64_t j = 0; j < u; ++j) hh[j] = x[j] + bi[j] + r[j] * rec[j];
}

// h' = z*h + (1-z)*hh
template <class T>
void gru_out_row(std::int64_t u, const T* __restrict z, const T* __restrict h,
                 const T* __restrict hh, T* __restrict out) {
  for (std::int64_t j = 0; j < u; ++j) out[j] = z[j] * h[j] + (T(1) - z[j]) * hh[j];
}

// The GRU gate gradients of one row (formulas above gru_node).
template <class T>
void gru_grad_row(std::int64_t u, const T* __restrict z, const T* __restrict r,
                  const T* __restrict hh, const T* __restrict rec, const T* __restrict h,
                  const T* __restrict d, T* __restrict dxz, T* __restrict dxr, T* __restrict dxh,
                  T* __restrict diz, T* __restrict dir, T* __restrict dih, T* __restrict dh_direct) {
  for (std::int64_t j = 0; j < u; ++j) {
    const T one(1);
    const T dz_pre = d[j] * (h[j] - hh[j]) * z[j] * (one - z[j]);
    const T dh_pre = d[j] * (one - z[j]) * (one - hh[j] * hh[j]);
    const T dr_pre = dh_pre * rec[j] * r[j] * (one - r[j]);
    dxz[j] = dz_pre;
    diz[j] = dz_pre;
    dxr[j] = dr_pre;
    dir[j] = dr_pre;
    dxh[j] = dh_pre;
    dih[j] = dh_pre * r[j];
    dh_direct[j] = d[j] * z[j];
  }
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

// Node inputs: {x, h, c, kernel, recurrent_kernel, bias}. When `kernel` is undefined, x is
// already x @ kernel + bias for this step ([batch, 4u], possibly a strided view) and bias is
// undefined too: that is a sequence step.
template <class T>
LSTMState lstm_node(const char* op, const Tensor& x, const Tensor& h, const Tensor& c,
                    const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias) {
  const std::int64_t batch = h.shape()[0], u = h.shape()[1], width = 4 * u;
  const auto& k = cpu::typed_kernels<T>();

  // act: the activated gates [i | f | g | o] per row, kept for the backward pass.
  Tensor act = empty_like_shape(h, Shape{batch, width});
  T* a = mutable_data<T>(act);
  gemm_to(h, recurrent_kernel, a);
  Tensor x_hold;
  const Rows<T> xs = projected_rows<T>(x, kernel, h, width, x_hold);
  Tensor b_hold = bias.defined() ? bias.contiguous() : Tensor();
  const T* b = bias.defined() ? b_hold.template data<T>() : nullptr;

  // Sum the pre-activations; the g block goes to its own buffer so that both nonlinearities
  // run as one kernel call each over contiguous memory (sigmoid over all of act; its g block
  // is overwritten below).
  Tensor g_buf = empty_like_shape(h, Shape{batch, u});
  T* gb = mutable_data<T>(g_buf);
  for (std::int64_t r = 0; r < batch; ++r) {
    T* ar = a + r * width;
    add_row<T>(width, ar, xs.row(r), b);
    std::copy_n(ar + 2 * u, u, gb + r * u);
  }
  k.unary(cpu::UnaryOp::sigmoid, a, a, batch * width, T(0));
  k.unary(cpu::UnaryOp::tanh, gb, gb, batch * u, T(0));

  Tensor c_hold;
  const Rows<T> cs = rows_of<T>(c, c_hold);
  Tensor c_new = empty_like_shape(h, Shape{batch, u});
  Tensor tanh_c = empty_like_shape(h, Shape{batch, u});
  Tensor h_new = empty_like_shape(h, Shape{batch, u});
  T* cn = mutable_data<T>(c_new);
  T* tc = mutable_data<T>(tanh_c);
  T* hn = mutable_data<T>(h_new);
  for (std::int64_t r = 0; r < batch; ++r) {
    T* ar = a + r * width;
    std::copy_n(gb + r * u, u, ar + 2 * u);
    lstm_state_row<T>(u, ar, ar + u, gb + r * u, cs.row(r), cn + r * u);
  }
  k.unary(cpu::UnaryOp::tanh, cn, tc, batch * u, T(0));
  for (std::int64_t r = 0; r < batch; ++r) mul_row<T>(u, a + r * width + 3 * u, tc + r * u, hn + r * u);

  if (autograd::recording()) {
    autograd::record(
        op, {x, h, c, kernel, recurrent_kernel, bias}, {h_new, c_new},
        [x, h, c, kernel, recurrent_kernel, bias, act, tanh_c](const Grads& g, const Needs& need) {
          const Tensor& dh = g[0];
          const Tensor& dc = g[1];
          Tensor dz, dc_prev;
          if (!autograd::recording()) {
            // First-order: one fused loop over the saved activations.
            const std::int64_t batch = act.shape()[0], width = act.shape()[1], u = width / 4;
            dz = empty_like_shape(act, Shape{batch, width});
            dc_prev = empty_like_shape(act, Shape{batch, u});
            Tensor dh_hold, dc_hold, c_hold;
            const Rows<T> dhs = rows_of<T>(dh, dh_hold), dcs = rows_of<T>(dc, dc_hold),
                          cs = rows_of<T>(c, c_hold);
            const T* a = act.template data<T>();
            const T* tc = tanh_c.template data<T>();
            T* dzp = mutable_data<T>(dz);
            T* dcp = mutable_data<T>(dc_prev);
            for (std::int64_t r = 0; r < batch; ++r) {
              const T* ar = a + r * width;
              T* dzr = dzp + r * width;
              lstm_grad_row<T>(u, ar, ar + u, ar + 2 * u, ar + 3 * u, tc + r * u, dhs.row(r),
                               dcs.row(r), cs.row(r), dzr, dzr + u, dzr + 2 * u, dzr + 3 * u,
                               dcp + r * u);
            }
          } else {
            // Recorded by an outer tape: recompute the gates with differentiable ops.
            Tensor z = kernel.defined() ? matmul(x, kernel) : x;
            z = add(z, matmul(h, recurrent_kernel));
            if (bias.defined()) z = add(z, bias);
            const std::vector<Tensor> zs = split(z, 4, 1);
            const Tensor i = sigmoid(zs[0]), f = sigmoid(zs[1]), gg = tanh(zs[2]),
                         o = sigmoid(zs[3]);
            const Tensor t = tanh(add(mul(f, c), mul(i, gg)));
            const Tensor one = one_like(t);
            const Tensor dct = add(dc, mul(dh, mul(o, sub(one, square(t)))));
            dz = concat({mul(mul(dct, gg), mul(i, sub(one, i))),
                         mul(mul(dct, c), mul(f, sub(one, f))),
                         mul(mul(dct, i), sub(one, square(gg))),
                         mul(mul(dh, t), mul(o, sub(one, o)))},
                        1);
            dc_prev = mul(dct, f);
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
  if (h.device().is_cuda()) return lstm_composite(x, h, c, kernel, recurrent_kernel, bias);
  return detail::dispatch_float(h.dtype(), op, [&]<class T>() {
    return lstm_node<T>(op, x, h, c, kernel, recurrent_kernel, bias);
  });
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

// Node inputs: {x, h, kernel, recurrent_kernel, b_in, b_rec}; a sequence step passes the
// precomputed x @ kernel + b_in as x with kernel and b_in undefined.
template <class T>
Tensor gru_node(const char* op, const Tensor& x, const Tensor& h, const Tensor& kernel,
                const Tensor& recurrent_kernel, const Tensor& b_in, const Tensor& b_rec) {
  const std::int64_t batch = h.shape()[0], u = h.shape()[1], width = 3 * u;
  const auto& k = cpu::typed_kernels<T>();

  Tensor inner = empty_like_shape(h, Shape{batch, width});  // h @ R (+ b_rec below)
  gemm_to(h, recurrent_kernel, inner.raw_data());
  const T* in = inner.template data<T>();
  Tensor x_hold;
  const Rows<T> xs = projected_rows<T>(x, kernel, h, width, x_hold);
  // An absent bias reads as zeros (the loops stay branch-free).
  std::vector<T> no_bias;
  if (!b_in.defined() || !b_rec.defined()) no_bias.assign(static_cast<std::size_t>(width), T(0));
  Tensor bi_hold = b_in.defined() ? b_in.contiguous() : Tensor();
  Tensor br_hold = b_rec.defined() ? b_rec.contiguous() : Tensor();
  const T* bi = b_in.defined() ? bi_hold.template data<T>() : no_bias.data();
  const T* br = b_rec.defined() ? br_hold.template data<T>() : no_bias.data();

  // zr: [z | r] per row; rec_h: I_h (with its bias); cand: the candidate hh. All three are
  // saved for the backward pass.
  Tensor zr = empty_like_shape(h, Shape{batch, 2 * u});
  Tensor rec_h = empty_like_shape(h, Shape{batch, u});
  Tensor cand = empty_like_shape(h, Shape{batch, u});
  T* zrp = mutable_data<T>(zr);
  T* rh = mutable_data<T>(rec_h);
  T* hh = mutable_data<T>(cand);
  for (std::int64_t r = 0; r < batch; ++r) {
    const T* ir = in + r * width;
    gru_zr_row<T>(2 * u, xs.row(r), ir, bi, br, zrp + r * 2 * u);
    sum_row<T>(u, ir + 2 * u, br + 2 * u, rh + r * u);
  }
  k.unary(cpu::UnaryOp::sigmoid, zrp, zrp, batch * 2 * u, T(0));
  for (std::int64_t r = 0; r < batch; ++r)
    gru_cand_row<T>(u, xs.row(r) + 2 * u, bi + 2 * u, zrp + r * 2 * u + u, rh + r * u, hh + r * u);
  k.unary(cpu::UnaryOp::tanh, hh, hh, batch * u, T(0));
  Tensor h_hold;
  const Rows<T> hs = rows_of<T>(h, h_hold);
  Tensor h_new = empty_like_shape(h, Shape{batch, u});
  T* hn = mutable_data<T>(h_new);
  for (std::int64_t r = 0; r < batch; ++r)
    gru_out_row<T>(u, zrp + r * 2 * u, hs.row(r), hh + r * u, hn + r * u);

  if (autograd::recording()) {
    autograd::record(
        op, {x, h, kernel, recurrent_kernel, b_in, b_rec}, {h_new},
        [x, h, kernel, recurrent_kernel, b_in, b_rec, zr, rec_h, cand](const Grads& g,
                                                                       const Needs& need) {
          const Tensor& d = g[0];
          Tensor dX, dI, dh_direct;
          if (!autograd::recording()) {
            const std::int64_t batch = cand.shape()[0], u = cand.shape()[1], width = 3 * u;
            dX = empty_like_shape(cand, Shape{batch, width});
            dI = empty_like_shape(cand, Shape{batch, width});
            dh_direct = empty_like_shape(cand, Shape{batch, u});
            Tensor d_hold, h_hold;
            const Rows<T> ds = rows_of<T>(d, d_hold), hs = rows_of<T>(h, h_hold);
            const T* zrp = zr.template data<T>();
            const T* rh = rec_h.template data<T>();
            const T* hh = cand.template data<T>();
            T* dxp = mutable_data<T>(dX);
            T* dip = mutable_data<T>(dI);
            T* dhd = mutable_data<T>(dh_direct);
            for (std::int64_t r = 0; r < batch; ++r) {
              T *dxr = dxp + r * width, *dir = dip + r * width;
              gru_grad_row<T>(u, zrp + r * 2 * u, zrp + r * 2 * u + u, hh + r * u, rh + r * u,
                              hs.row(r), ds.row(r), dxr, dxr + u, dxr + 2 * u, dir, dir + u,
                              dir + 2 * u, dhd + r * u);
            }
          } else {
            // Recorded by an outer tape: recompute the gates with differentiable ops.
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
            dX = concat({dz_pre, dr_pre, dh_pre}, 1);
            dI = concat({dz_pre, dr_pre, mul(dh_pre, r)}, 1);
            dh_direct = mul(d, z);
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
  if (h.device().is_cuda()) return gru_composite(x, h, kernel, recurrent_kernel, b_in, b_rec);
  return detail::dispatch_float(h.dtype(), op, [&]<class T>() {
    return gru_node<T>(op, x, h, kernel, recurrent_kernel, b_in, b_rec);
  });
}

// ---- sequences ---------------------------------------------------------------------------------

// x [n, f] @ kernel [f, w] + bias [w] as one node: the bias is added in a pass over the rows
// of the fresh product (a broadcasting add would be another op, node and output). Linear, so
// its gradient needs no recomputation: the usual dense rule, written with ops.
template <class T>
Tensor projection_node(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  const std::int64_t n = x.shape()[0], w = kernel.shape()[1];
  Tensor y = empty_like_shape(kernel, Shape{n, w});
  T* yp = mutable_data<T>(y);
  gemm_to(x, kernel, yp);
  if (bias.defined()) {
    const Tensor b = bias.contiguous();
    for (std::int64_t r = 0; r < n; ++r) add_row<T>(w, yp + r * w, b.template data<T>(), nullptr);
  }
  if (autograd::recording())
    autograd::record(
        "recurrent_input_projection", {x, kernel, bias}, {y},
        [x, kernel](const Grads& g, const Needs& need) {
          return Grads{need[0] ? matmul(g[0], kernel, false, true) : Tensor(),
                       need[1] ? matmul(x, g[0], true, false) : Tensor(),
                       need[2] ? reduce_sum(g[0], {0}) : Tensor()};
        },
        {x, kernel, bias});
  return y;
}

// [batch, time, features] -> x @ kernel (+ bias) for every step at once (ONE product), as
// per-step views [batch, gates*units]. unstack is one tape node, so the backward pass stacks
// the T step gradients once instead of padding each to the full sequence.
std::vector<Tensor> project_steps(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  const std::int64_t batch = x.shape()[0], time = x.shape()[1], features = x.shape()[2];
  const std::int64_t width = kernel.shape()[1];
  const Tensor x2 = reshape(x, Shape{batch * time, features});
  if (x.device().is_cuda()) {
    Tensor xz = matmul(x2, kernel);
    if (bias.defined()) xz = add(xz, bias);
    return unstack(reshape(xz, Shape{batch, time, width}), 1);
  }
  const Tensor xz = detail::dispatch_float(x.dtype(), "recurrent_input_projection", [&]<class T>() {
    return projection_node<T>(x2, kernel, bias);
  });
  return unstack(reshape(xz, Shape{batch, time, width}), 1);
}

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

}  // namespace

// ---- public ops --------------------------------------------------------------------------------

LSTMState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& kernel,
                    const Tensor& recurrent_kernel, const Tensor& bias) {
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
