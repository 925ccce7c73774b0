// The fused CPU kernels of the LSTM and GRU cells. The input and recurrent projections go to
// BLAS, one pass over the rows adds them (and the bias), and the gate nonlinearities run through
// the SIMD sigmoid/tanh kernels over whole buffers.
#include "cpu/recurrent.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/gemm.hpp"
#include "cpu/kernels.hpp"
#include "cpu/thread_pool.hpp"
#include "keel/core/config.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cpu {

namespace {

// out[m, n] (contiguous) = a[m, k] @ b[k, n], all contiguous.
template <class T>
void gemm_to(const T* a, const T* b, std::int64_t m, std::int64_t k, std::int64_t n, T* out) {
  gemm(dtype_of<T>, m, n, k, MatrixArg{a, k, false}, MatrixArg{b, n, false}, out, n);
}

// The rows of x @ kernel ([batch, width]), computed into in.x_proj; a sequence step (no kernel)
// passes that product already as x.
template <class T>
Rows<T> projected_rows(const CellInput<T>& in, std::int64_t batch, std::int64_t width) {
  if (in.kernel == nullptr) return in.x;
  gemm_to<T>(in.x.p, in.kernel, batch, in.features, width, in.x_proj);
  return {in.x_proj, width};
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

// The LSTM gate gradients of one row, with dh = dL/dh', dc = dL/dc' and tc = tanh(c'):
//   dct = dc + dh * o * (1 - tc^2)            (everything that reaches c')
//   dz_i = dct * g * i(1-i)      dz_f = dct * c * f(1-f)
//   dz_g = dct * i * (1-g^2)     dz_o = dh * tc * o(1-o)
//   dc_prev = dct * f
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

// The GRU gate gradients of one row, with d = dL/dh':
//   dz_pre = d * (h - hh) * z(1-z)
//   dh_pre = d * (1 - z) * (1 - hh^2)            (the candidate's pre-activation)
//   dr_pre = dh_pre * I_h * r(1-r)
//   dX = [dz_pre | dr_pre | dh_pre],  dI = [dz_pre | dr_pre | dh_pre * r],  dh_direct = d * z
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

}  // namespace

// ---- LSTM --------------------------------------------------------------------------------------

template <class T>
void lstm_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& in, const T* h, const T* recurrent_kernel,
               const T* bias, Rows<T> c, T* act, T* g_buf, T* c_new, T* tanh_c, T* h_new) {
  const std::int64_t width = 4 * u;
  const auto& k = typed_kernels<T>();
  T* a = act;
  gemm_to<T>(h, recurrent_kernel, batch, u, width, a);
  const Rows<T> xs = projected_rows<T>(in, batch, width);
  const T* b = bias;

  // Sum the pre-activations; the g block goes to its own buffer so that both nonlinearities
  // run as one kernel call each over contiguous memory (sigmoid over all of act; its g block
  // is overwritten below).
  T* gb = g_buf;
  for (std::int64_t r = 0; r < batch; ++r) {
    T* ar = a + r * width;
    add_row<T>(width, ar, xs.row(r), b);
    std::copy_n(ar + 2 * u, u, gb + r * u);
  }
  k.unary(UnaryOp::sigmoid, a, a, batch * width, T(0));
  k.unary(UnaryOp::tanh, gb, gb, batch * u, T(0));

  T* cn = c_new;
  T* tc = tanh_c;
  T* hn = h_new;
  for (std::int64_t r = 0; r < batch; ++r) {
    T* ar = a + r * width;
    std::copy_n(gb + r * u, u, ar + 2 * u);
    lstm_state_row<T>(u, ar, ar + u, gb + r * u, c.row(r), cn + r * u);
  }
  k.unary(UnaryOp::tanh, cn, tc, batch * u, T(0));
  for (std::int64_t r = 0; r < batch; ++r) mul_row<T>(u, a + r * width + 3 * u, tc + r * u, hn + r * u);
}

template <class T>
void lstm_cell_backward(std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c, Rows<T> dh, Rows<T> dc,
                        Rows<T> c, T* dz, T* dc_prev) {
  const std::int64_t width = 4 * u;
  for (std::int64_t r = 0; r < batch; ++r) {
    const T* ar = act + r * width;
    T* dzr = dz + r * width;
    lstm_grad_row<T>(u, ar, ar + u, ar + 2 * u, ar + 3 * u, tanh_c + r * u, dh.row(r), dc.row(r), c.row(r), dzr,
                     dzr + u, dzr + 2 * u, dzr + 3 * u, dc_prev + r * u);
  }
}

// ---- the LSTM recurrence -------------------------------------------------------------------------

namespace {

// Multiply-adds of a whole recurrence below which it runs on one thread, and the fewest rows a
// part takes. A region per step cost more than it saved (the 2-thread cell of a [32, 50] LSTM took
// longer than the 1-thread one: a part's 4 us of work against a worker's wake-up); one region per
// sequence pays once.
constexpr double kMinRecurrenceMacs = 1 << 21;
constexpr std::int64_t kMinRecurrenceRows = 8;

int recurrence_parts(std::int64_t time, std::int64_t batch, std::int64_t u, std::int64_t width) {
  if (in_parallel_region()) return 1;
  const double macs = static_cast<double>(time) * static_cast<double>(batch) * static_cast<double>(u * width);
  if (macs < kMinRecurrenceMacs) return 1;
  return static_cast<int>(std::clamp<std::int64_t>(batch / kMinRecurrenceRows, 1, config::num_threads()));
}

}  // namespace

template <class T>
void lstm_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, const T* xz, const T* recurrent_kernel,
                   T* h, T* c, T* act, T* tanh_c, T* g_buf) {
  const std::int64_t width = 4 * u, state = batch * u, gates = batch * width;
  parallel_ranges(batch, recurrence_parts(time, batch, u, width), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t s = 0; s < time; ++s) {
      CellInput<T> in;
      in.x = {xz + s * gates + r0 * width, width};
      const std::int64_t at = s * state + r0 * u, next = at + state;
      lstm_cell<T>(r1 - r0, u, in, h + at, recurrent_kernel, nullptr, {c + at, u}, act + s * gates + r0 * width,
                   g_buf + r0 * u, c + next, tanh_c + at, h + next);
    }
  });
}

template <class T>
void lstm_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c,
                            const T* c, T* d, Rows<T> dc_last, const T* recurrent_kernel_t, T* dz, T* dc_first,
                            T* dh_first, T* work) {
  const std::int64_t width = 4 * u, state = batch * u, gates = batch * width;
  parallel_ranges(batch, recurrence_parts(time, batch, u, width), [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0;
    T* dh_step = work + 2 * state + r0 * u;
    Rows<T> dc{dc_last.row(r0), dc_last.ld};
    for (std::int64_t s = time - 1; s >= 0; --s) {
      const std::int64_t at = s * state + r0 * u;
      T* dz_s = dz + s * gates + r0 * width;
      // dL/dc of the state before: dc_first at the first step, else the work buffer dc is not in.
      T* dc_prev = s == 0 ? dc_first + r0 * u : work + (s % 2) * state + r0 * u;
      lstm_cell_backward<T>(rows, u, act + s * gates + r0 * width, tanh_c + at, {d + at, u}, dc, {c + at, u}, dz_s,
                            dc_prev);
      if (s > 0) {
        gemm_to<T>(dz_s, recurrent_kernel_t, rows, width, u, dh_step);
        T* d_before = d + at - state;
        for (std::int64_t r = 0; r < rows; ++r) add_row<T>(u, d_before + r * u, dh_step + r * u, nullptr);
      } else if (dh_first != nullptr) {
        gemm_to<T>(dz_s, recurrent_kernel_t, rows, width, u, dh_first + r0 * u);
      }
      dc = {dc_prev, u};
    }
  });
}

// ---- GRU ---------------------------------------------------------------------------------------

template <class T>
void gru_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& input, const T* h, const T* recurrent_kernel,
              const T* b_in, const T* b_rec, T* zr, T* rec_h, T* cand, T* h_new, T* inner) {
  const std::int64_t width = 3 * u;
  const auto& k = typed_kernels<T>();

  gemm_to<T>(h, recurrent_kernel, batch, u, width, inner);  // h @ R (+ b_rec below)
  const T* in = inner;
  const Rows<T> xs = projected_rows<T>(input, batch, width);
  // An absent bias reads as zeros (the loops stay branch-free).
  std::vector<T> no_bias;
  if (b_in == nullptr || b_rec == nullptr) no_bias.assign(static_cast<std::size_t>(width), T(0));
  const T* bi = b_in != nullptr ? b_in : no_bias.data();
  const T* br = b_rec != nullptr ? b_rec : no_bias.data();

  T* zrp = zr;
  T* rh = rec_h;
  T* hh = cand;
  for (std::int64_t r = 0; r < batch; ++r) {
    const T* ir = in + r * width;
    gru_zr_row<T>(2 * u, xs.row(r), ir, bi, br, zrp + r * 2 * u);
    sum_row<T>(u, ir + 2 * u, br + 2 * u, rh + r * u);
  }
  k.unary(UnaryOp::sigmoid, zrp, zrp, batch * 2 * u, T(0));
  for (std::int64_t r = 0; r < batch; ++r)
    gru_cand_row<T>(u, xs.row(r) + 2 * u, bi + 2 * u, zrp + r * 2 * u + u, rh + r * u, hh + r * u);
  k.unary(UnaryOp::tanh, hh, hh, batch * u, T(0));
  T* hn = h_new;
  for (std::int64_t r = 0; r < batch; ++r) gru_out_row<T>(u, zrp + r * 2 * u, h + r * u, hh + r * u, hn + r * u);
}

template <class T>
void gru_cell_backward(std::int64_t batch, std::int64_t u, const T* zr, const T* rec_h, const T* cand, Rows<T> h,
                       Rows<T> d, T* dX, T* dI, T* dh_direct) {
  const std::int64_t width = 3 * u;
  for (std::int64_t r = 0; r < batch; ++r) {
    T *dxr = dX + r * width, *dir = dI + r * width;
    gru_grad_row<T>(u, zr + r * 2 * u, zr + r * 2 * u + u, cand + r * u, rec_h + r * u, h.row(r), d.row(r), dxr,
                    dxr + u, dxr + 2 * u, dir, dir + u, dir + 2 * u, dh_direct + r * u);
  }
}

// The GRU recurrence, split as the LSTM's (lstm_sequence).
template <class T>
void gru_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, const T* xz, const T* recurrent_kernel,
                  const T* b_rec, T* h, T* zr, T* rec_h, T* cand, T* inner) {
  const std::int64_t width = 3 * u, state = batch * u, gates = batch * width;
  // xz holds the input bias; zeros in its place (and b_rec's, when absent) once per sequence, so
  // that no step's cell allocates its own.
  const std::vector<T> zeros(static_cast<std::size_t>(width), T(0));
  const T* b_r = b_rec != nullptr ? b_rec : zeros.data();
  parallel_ranges(batch, recurrence_parts(time, batch, u, width), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t s = 0; s < time; ++s) {
      CellInput<T> in;
      in.x = {xz + s * gates + r0 * width, width};
      const std::int64_t at = s * state + r0 * u;
      gru_cell<T>(r1 - r0, u, in, h + at, recurrent_kernel, zeros.data(), b_r, zr + 2 * at, rec_h + at, cand + at,
                  h + at + state, inner + r0 * width);
    }
  });
}

template <class T>
void gru_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, const T* zr, const T* rec_h,
                           const T* cand, const T* h, T* d, const T* recurrent_kernel_t, T* dX, T* dI, T* dh_first,
                           T* work) {
  const std::int64_t width = 3 * u, state = batch * u, gates = batch * width;
  parallel_ranges(batch, recurrence_parts(time, batch, u, width), [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0;
    T* dh_direct = work + r0 * u;
    T* dh_step = work + state + r0 * u;
    for (std::int64_t s = time - 1; s >= 0; --s) {
      const std::int64_t at = s * state + r0 * u;
      T* dI_s = dI + s * gates + r0 * width;
      gru_cell_backward<T>(rows, u, zr + 2 * at, rec_h + at, cand + at, {h + at, u}, {d + at, u},
                           dX + s * gates + r0 * width, dI_s, dh_direct);
      // h's gradient to the step before: (d + dI R^T) + d * z, as the two adds made it; for h0,
      // d * z + dI R^T.
      if (s > 0) {
        gemm_to<T>(dI_s, recurrent_kernel_t, rows, width, u, dh_step);
        T* d_before = d + at - state;
        for (std::int64_t r = 0; r < rows; ++r) {
          add_row<T>(u, d_before + r * u, dh_step + r * u, nullptr);
          add_row<T>(u, d_before + r * u, dh_direct + r * u, nullptr);
        }
      } else if (dh_first != nullptr) {
        T* first = dh_first + r0 * u;
        gemm_to<T>(dI_s, recurrent_kernel_t, rows, width, u, first);
        for (std::int64_t r = 0; r < rows; ++r) add_row<T>(u, first + r * u, dh_direct + r * u, nullptr);
      }
    }
  });
}

// ---- the input projection of a sequence --------------------------------------------------------

// The bias is added in a pass over the rows of the fresh product.
template <class T>
void linear(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* bias, T* y) {
  gemm_to<T>(x, kernel, n, f, w, y);
  if (bias != nullptr)
    for (std::int64_t r = 0; r < n; ++r) add_row<T>(w, y + r * w, bias, nullptr);
}

#define KEEL_RECURRENT_KERNELS(T)                                                                            \
  template void lstm_cell<T>(std::int64_t, std::int64_t, const CellInput<T>&, const T*, const T*, const T*,  \
                             Rows<T>, T*, T*, T*, T*, T*);                                                   \
  template void lstm_cell_backward<T>(std::int64_t, std::int64_t, const T*, const T*, Rows<T>, Rows<T>,      \
                                      Rows<T>, T*, T*);                                                      \
  template void lstm_sequence<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*, T*, T*, T*, T*,  \
                                 T*);                                                                        \
  template void lstm_sequence_backward<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*,       \
                                          const T*, T*, Rows<T>, const T*, T*, T*, T*, T*);                  \
  template void gru_cell<T>(std::int64_t, std::int64_t, const CellInput<T>&, const T*, const T*, const T*,   \
                            const T*, T*, T*, T*, T*, T*);                                                   \
  template void gru_sequence<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*, const T*, T*,   \
                                T*, T*, T*, T*);                                                             \
  template void gru_sequence_backward<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*,        \
                                         const T*, const T*, T*, const T*, T*, T*, T*, T*);                  \
  template void gru_cell_backward<T>(std::int64_t, std::int64_t, const T*, const T*, const T*, Rows<T>,      \
                                     Rows<T>, T*, T*, T*);                                                   \
  template void linear<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*, const T*, T*);
KEEL_RECURRENT_KERNELS(float)
KEEL_RECURRENT_KERNELS(double)
#undef KEEL_RECURRENT_KERNELS

}  // namespace keel::cpu
