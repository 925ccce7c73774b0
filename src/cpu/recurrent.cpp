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

}  // namespace

// ---- LSTM --------------------------------------------------------------------------------------

// The recurrent product, then the gates, the state and the output in one SIMD pass per row
// (lstm_gates): as separate passes (the sums, sigmoid over all four gates, tanh over a copy of
// g, the state, tanh, the product) the gates took as long as the product.
template <class T>
void lstm_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& in, const T* h, const T* recurrent_kernel,
               const T* bias, Rows<T> c, T* act, T* c_new, T* tanh_c, T* h_new) {
  const std::int64_t width = 4 * u;
  gemm_to<T>(h, recurrent_kernel, batch, u, width, act);
  const Rows<T> xs = projected_rows<T>(in, batch, width);
  typed_kernels<T>().lstm_gates(batch, u, act, xs.p, xs.ld, bias, c.p, c.ld, c_new, tanh_c, h_new);
}

template <class T>
void lstm_cell_backward(std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c, Rows<T> dh, Rows<T> dc,
                        Rows<T> c, T* dz, T* dc_prev) {
  typed_kernels<T>().lstm_gate_grads(batch, u, act, tanh_c, dh.p, dh.ld, dc.p, dc.ld, c.p, c.ld, dz, dc_prev);
}

// ---- the LSTM recurrence -------------------------------------------------------------------------

namespace {

// dL/dh of step s's output for `rows` rows of a part starting at batch row r0: the output
// gradient d_out ([batch, time, u]) plus what the step after gives (`later`, rows).
template <class T>
void step_output_grads(std::int64_t rows, std::int64_t u, std::int64_t time, std::int64_t s, std::int64_t r0,
                       const T* d_out, Rows<T> later, T* dh) {
  for (std::int64_t r = 0; r < rows; ++r) sum_row<T>(u, d_out + ((r0 + r) * time + s) * u, later.row(r), dh + r * u);
}

// Multiply-adds of a whole recurrence below which it runs on one thread, and the fewest rows a
// part takes. A region per step cost more than it saved (the 2-thread cell of a [32, 50] LSTM took
// longer than the 1-thread one: a part's 4 us of work against a worker's wake-up); one region per
// sequence pays once.
constexpr double kMinRecurrenceMacs = 1 << 21;
constexpr std::int64_t kMinRecurrenceRows = 8;
}  // namespace

int recurrence_parts(std::int64_t time, std::int64_t batch, std::int64_t u, std::int64_t width) {
  if (in_parallel_region()) return 1;
  const double macs = static_cast<double>(time) * static_cast<double>(batch) * static_cast<double>(u * width);
  if (macs < kMinRecurrenceMacs) return 1;
  return static_cast<int>(std::clamp<std::int64_t>(batch / kMinRecurrenceRows, 1, parallel_threads()));
}

// Each part (the batch's rows [r0, r1), as parallel_ranges splits them) owns the block of rows
// [r0 * time, r1 * time) of every part-order buffer, step s's rows at s * (r1 - r0) within it.
template <class T>
void lstm_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* xz,
                   const T* recurrent_kernel, Rows<T> h0, Rows<T> c0, T* h_read, T* c_read, T* act, T* tanh_c,
                   T* outputs, T* h_last, T* c_last) {
  const std::int64_t width = 4 * u;
  parallel_ranges(batch, parts, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0, block = r0 * time;
    T* hr = h_read + block * u;
    T* cr = c_read + block * u;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(h0.row(r0 + r), u, hr + r * u);
      std::copy_n(c0.row(r0 + r), u, cr + r * u);
    }
    for (std::int64_t s = 0; s < time; ++s) {
      const std::int64_t at = s * rows;  // the step's first row in the block
      const bool last = s + 1 == time;
      T* h_new = last ? h_last + r0 * u : hr + (at + rows) * u;
      T* c_new = last ? c_last + r0 * u : cr + (at + rows) * u;
      CellInput<T> in;
      in.x = {xz + (block + at) * width, width};
      lstm_cell<T>(rows, u, in, hr + at * u, recurrent_kernel, nullptr, {cr + at * u, u}, act + (block + at) * width,
                   c_new, tanh_c + (block + at) * u, h_new);
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(h_new + r * u, u, outputs + ((r0 + r) * time + s) * u);
    }
  });
}

template <class T>
void lstm_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* act,
                            const T* tanh_c, const T* c_read, const T* d_out, Rows<T> dh_last, Rows<T> dc_last,
                            const T* recurrent_kernel_t, T* dz, T* dc_first, T* dh_first, T* work) {
  const std::int64_t width = 4 * u, state = batch * u;
  parallel_ranges(batch, parts, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0, block = r0 * time;
    T* dh = work + r0 * u;               // dL/dh of the step's output, all terms
    T* dh_next = work + state + r0 * u;  // dz[s] R^T: what step s - 1's output gets from step s
    T* const dc_bufs[2] = {work + 2 * state + r0 * u, work + 3 * state + r0 * u};
    Rows<T> dc{dc_last.row(r0), dc_last.ld};
    for (std::int64_t s = time - 1; s >= 0; --s) {
      const std::int64_t at = block + s * rows;
      const Rows<T> later = s + 1 == time ? Rows<T>{dh_last.row(r0), dh_last.ld} : Rows<T>{dh_next, u};
      step_output_grads<T>(rows, u, time, s, r0, d_out, later, dh);
      T* dc_prev = s == 0 ? dc_first + r0 * u : dc_bufs[s % 2];
      T* dz_s = dz + at * width;
      lstm_cell_backward<T>(rows, u, act + at * width, tanh_c + at * u, {dh, u}, dc, {c_read + at * u, u}, dz_s,
                            dc_prev);
      if (s > 0) gemm_to<T>(dz_s, recurrent_kernel_t, rows, width, u, dh_next);
      else if (dh_first != nullptr) gemm_to<T>(dz_s, recurrent_kernel_t, rows, width, u, dh_first + r0 * u);
      dc = {dc_prev, u};
    }
  });
}

// ---- GRU ---------------------------------------------------------------------------------------

template <class T>
void gru_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& input, const T* h, const T* recurrent_kernel,
              const T* b_in, const T* b_rec, T* zr, T* rec_h, T* cand, T* h_new, T* inner) {
  const std::int64_t width = 3 * u;
  gemm_to<T>(h, recurrent_kernel, batch, u, width, inner);  // h @ R (+ b_rec below)
  const T* in = inner;
  const Rows<T> xs = projected_rows<T>(input, batch, width);
  // An absent bias reads as zeros (gru_gates adds both biases, as the passes before it did).
  std::vector<T> no_bias;
  if (b_in == nullptr || b_rec == nullptr) no_bias.assign(static_cast<std::size_t>(width), T(0));
  const T* bi = b_in != nullptr ? b_in : no_bias.data();
  const T* br = b_rec != nullptr ? b_rec : no_bias.data();

  typed_kernels<T>().gru_gates(batch, u, in, xs.p, xs.ld, bi, br, h, zr, rec_h, cand, h_new);
}

template <class T>
void gru_cell_backward(std::int64_t batch, std::int64_t u, const T* zr, const T* rec_h, const T* cand, Rows<T> h,
                       Rows<T> d, T* dX, T* dI, T* dh_direct) {
  typed_kernels<T>().gru_gate_grads(batch, u, zr, rec_h, cand, h.p, h.ld, d.p, d.ld, dX, dI, dh_direct);
}

// The GRU recurrence, over parts as the LSTM's (lstm_sequence).
template <class T>
void gru_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* xz,
                  const T* recurrent_kernel, const T* b_rec, Rows<T> h0, T* h_read, T* zr, T* rec_h, T* cand,
                  T* outputs, T* h_last, T* inner) {
  const std::int64_t width = 3 * u;
  // xz holds the input bias; zeros in its place (and b_rec's, when absent) once per sequence, so
  // that no step's cell allocates its own.
  const std::vector<T> zeros(static_cast<std::size_t>(width), T(0));
  const T* b_r = b_rec != nullptr ? b_rec : zeros.data();
  parallel_ranges(batch, parts, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0, block = r0 * time;
    T* hr = h_read + block * u;
    for (std::int64_t r = 0; r < rows; ++r) std::copy_n(h0.row(r0 + r), u, hr + r * u);
    for (std::int64_t s = 0; s < time; ++s) {
      const std::int64_t at = s * rows;  // the step's first row in the block
      T* h_new = s + 1 == time ? h_last + r0 * u : hr + (at + rows) * u;
      CellInput<T> in;
      in.x = {xz + (block + at) * width, width};
      gru_cell<T>(rows, u, in, hr + at * u, recurrent_kernel, zeros.data(), b_r, zr + 2 * (block + at) * u,
                  rec_h + (block + at) * u, cand + (block + at) * u, h_new, inner + r0 * width);
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(h_new + r * u, u, outputs + ((r0 + r) * time + s) * u);
    }
  });
}

template <class T>
void gru_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* zr,
                           const T* rec_h, const T* cand, const T* h_read, const T* d_out, Rows<T> dh_last,
                           const T* recurrent_kernel_t, T* dX, T* dI, T* dh_first, T* work) {
  const std::int64_t width = 3 * u, state = batch * u;
  parallel_ranges(batch, parts, [&](std::int64_t r0, std::int64_t r1) {
    const std::int64_t rows = r1 - r0, block = r0 * time;
    T* dh = work + r0 * u;                   // dL/dh of the step's output, all terms
    T* dh_next = work + state + r0 * u;      // what step s - 1's output gets from step s
    T* dh_direct = work + 2 * state + r0 * u;
    for (std::int64_t s = time - 1; s >= 0; --s) {
      const std::int64_t at = block + s * rows;
      const Rows<T> later = s + 1 == time ? Rows<T>{dh_last.row(r0), dh_last.ld} : Rows<T>{dh_next, u};
      step_output_grads<T>(rows, u, time, s, r0, d_out, later, dh);
      T* dI_s = dI + at * width;
      gru_cell_backward<T>(rows, u, zr + 2 * at * u, rec_h + at * u, cand + at * u, {h_read + at * u, u}, {dh, u},
                           dX + at * width, dI_s, dh_direct);
      // h's gradient to the step before: dI R^T + d * z; for h0 the same into dh_first.
      T* before = s > 0 ? dh_next : dh_first != nullptr ? dh_first + r0 * u : nullptr;
      if (before == nullptr) continue;
      gemm_to<T>(dI_s, recurrent_kernel_t, rows, width, u, before);
      for (std::int64_t r = 0; r < rows; ++r) add_row<T>(u, before + r * u, dh_direct + r * u, nullptr);
    }
  });
}

// ---- the input projection of a sequence --------------------------------------------------------

namespace {

// Features up to which a projection's rows are sums of scaled kernel rows (an LSTM over a scalar
// series has one): a library call per step and part would cost more than the arithmetic.
constexpr std::int64_t kRowSumFeatures = 8;

// y[r] = bias + sum_k x[r, k] kernel[k] for rows [0, rows) (bias may be null).
template <class T>
void project_rows(std::int64_t rows, std::int64_t f, std::int64_t w, const T* x, const T* __restrict kernel,
                  const T* __restrict bias, T* __restrict y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* __restrict yr = y + r * w;
    const T* xr = x + r * f;
    if (bias != nullptr) std::copy_n(bias, w, yr);
    else std::fill_n(yr, w, T(0));
    for (std::int64_t k = 0; k < f; ++k) {
      const T xk = xr[k];
      const T* __restrict kr = kernel + k * w;
      for (std::int64_t j = 0; j < w; ++j) yr[j] += xk * kr[j];
    }
  }
}

}  // namespace

// With parts > 1, x is a sequence in part order (recurrence_parts; rows [r0 * time, r1 * time) are
// one part's) and each thread projects the block of the part whose recurrence it will run, so
// that the block is in its own core's cache. One product over all rows (split over the threads
// by the library's own rule) made the two-thread LSTM(50) read half its rows from the other core,
// and the next call's projection take the lines back: 46 us on one thread, 170 on two.
template <class T>
void linear(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* bias, T* y,
            int parts, std::int64_t time) {
  const auto project = [&](std::int64_t r0, std::int64_t r1) {
    if (f <= kRowSumFeatures) return project_rows<T>(r1 - r0, f, w, x + r0 * f, kernel, bias, y + r0 * w);
    gemm_to<T>(x + r0 * f, kernel, r1 - r0, f, w, y + r0 * w);
    if (bias != nullptr)
      for (std::int64_t r = r0; r < r1; ++r) add_row<T>(w, y + r * w, bias, nullptr);
  };
  if (parts <= 1 || time <= 0 || n % time != 0) return project(0, n);
  parallel_ranges(n / time, parts, [&](std::int64_t b0, std::int64_t b1) { project(b0 * time, b1 * time); });
}

// Each part's rows of dx, and its own dkernel and dbias, summed in part order at the end: every
// thread reads only the block of dy its recurrence's backward just wrote.
template <class T>
void linear_backward(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* dy,
                     T* dx, T* dkernel, T* dbias, int parts, std::int64_t time) {
  const std::int64_t batch = n / time, kw = f * w, stride = part_stride<T>(kw + w);
  parts = static_cast<int>(std::clamp<std::int64_t>(parts, 1, std::max<std::int64_t>(batch, 1)));
  std::vector<T> partial(static_cast<std::size_t>(parts * stride));
  // The parts' row ranges are parallel_ranges' (part p from batch * p / parts), as the forward's.
  parallel_parts(parts, [&](int p) {
    const std::int64_t r0 = batch * p / parts * time, rows = batch * (p + 1) / parts * time - r0;
    const T* dyp = dy + r0 * w;
    T* own = partial.data() + p * stride;  // [dkernel | dbias] of this part
    if (dx != nullptr)
      gemm(dtype_of<T>, rows, f, w, MatrixArg{dyp, w, false}, MatrixArg{kernel, w, true}, dx + r0 * f, f);
    if (dkernel != nullptr)
      gemm(dtype_of<T>, f, w, rows, MatrixArg{x + r0 * f, f, true}, MatrixArg{dyp, w, false}, own, w);
    if (dbias != nullptr) {
      T* sum = own + kw;
      std::fill_n(sum, w, T(0));
      for (std::int64_t r = 0; r < rows; ++r) add_row<T>(w, sum, dyp + r * w, nullptr);
    }
  });
  for (int p = 1; p < parts; ++p) add_row<T>(kw + w, partial.data(), partial.data() + p * stride, nullptr);
  if (dkernel != nullptr) std::copy_n(partial.data(), kw, dkernel);
  if (dbias != nullptr) std::copy_n(partial.data() + kw, w, dbias);
}

#define KEEL_RECURRENT_KERNELS(T)                                                                            \
  template void lstm_cell<T>(std::int64_t, std::int64_t, const CellInput<T>&, const T*, const T*, const T*,  \
                             Rows<T>, T*, T*, T*, T*);                                                       \
  template void lstm_cell_backward<T>(std::int64_t, std::int64_t, const T*, const T*, Rows<T>, Rows<T>,      \
                                      Rows<T>, T*, T*);                                                      \
  template void lstm_sequence<T>(std::int64_t, std::int64_t, std::int64_t, int, const T*, const T*, Rows<T>,    \
                                 Rows<T>, T*, T*, T*, T*, T*, T*, T*);                                       \
  template void lstm_sequence_backward<T>(std::int64_t, std::int64_t, std::int64_t, int, const T*, const T*,  \
                                          const T*, const T*, Rows<T>, Rows<T>, const T*, T*, T*, T*, T*);   \
  template void gru_cell<T>(std::int64_t, std::int64_t, const CellInput<T>&, const T*, const T*, const T*,   \
                            const T*, T*, T*, T*, T*, T*);                                                   \
  template void gru_sequence<T>(std::int64_t, std::int64_t, std::int64_t, int, const T*, const T*, const T*,  \
                                Rows<T>, T*, T*, T*, T*, T*, T*, T*);                                        \
  template void gru_sequence_backward<T>(std::int64_t, std::int64_t, std::int64_t, int, const T*, const T*,   \
                                         const T*, const T*, const T*, Rows<T>, const T*, T*, T*, T*, T*);   \
  template void gru_cell_backward<T>(std::int64_t, std::int64_t, const T*, const T*, const T*, Rows<T>,      \
                                     Rows<T>, T*, T*, T*);                                                   \
  template void linear<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*, const T*, T*, int,    \
                          std::int64_t);                                                                     \
  template void linear_backward<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const T*, const T*,    \
                                   T*, T*, T*, int, std::int64_t);
KEEL_RECURRENT_KERNELS(float)
KEEL_RECURRENT_KERNELS(double)
#undef KEEL_RECURRENT_KERNELS

}  // namespace keel::cpu
