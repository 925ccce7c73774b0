#pragma once
// The fused CPU kernels of the LSTM and GRU cells (src/ops/recurrent.cpp records them, with
// their gradients), float or double. Matrices are row-major; a `Rows` operand is read in place
// with any row stride (time steps of a sequence, split gradients), everything else is contiguous.
#include <cstdint>

namespace keel::cpu {

// Row r of a matrix whose last axis has unit stride is p + r * ld.
template <class T>
struct Rows {
  const T* p = nullptr;
  std::int64_t ld = 0;
  const T* row(std::int64_t r) const { return p + r * ld; }
};

// The input side of a cell: with `kernel` ([features, width]), x is [batch, features] contiguous
// and x_proj ([batch, width]) receives x @ kernel; without, x.row(r) is already that projection.
template <class T>
struct CellInput {
  Rows<T> x;
  std::int64_t features = 0;
  const T* kernel = nullptr;
  T* x_proj = nullptr;
};

// LSTM, gates [i | f | g | o] of u columns each: z = x @ kernel + h @ recurrent_kernel + bias
// (bias [4u] or null); act = the activated gates [batch, 4u]; c_new = f*c + i*g,
// tanh_c = tanh(c_new), h_new = o * tanh_c ([batch, u]). g_buf: [batch, u] workspace.
template <class T>
void lstm_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& in, const T* h, const T* recurrent_kernel,
               const T* bias, Rows<T> c, T* act, T* g_buf, T* c_new, T* tanh_c, T* h_new);

// The LSTM gate gradients: dz [batch, 4u] and dc_prev [batch, u] from act and tanh_c.
template <class T>
void lstm_cell_backward(std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c, Rows<T> dh, Rows<T> dc,
                        Rows<T> c, T* dz, T* dc_prev);

// The whole LSTM recurrence of a sequence: lstm_cell for s = 0, 1, ..., time - 1 on the step's
// projection xz[s] ([time, batch, 4u]), h[s] and c[s] ([time + 1, batch, u]: index 0 holds the
// initial state), writing h[s + 1], c[s + 1], act[s] ([time, batch, 4u]) and tanh_c[s] ([time,
// batch, u]); g_buf [batch, u] workspace. A row of the batch depends on its own row only for the
// whole sequence, so the rows are split over the threads once per sequence, not once per step.
template <class T>
void lstm_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, const T* xz, const T* recurrent_kernel,
                   T* h, T* c, T* act, T* tanh_c, T* g_buf);

// Its gradient, steps in reverse: d ([time, batch, u], dL/dh of each step's output) is read and
// step s - 1's rows get dz[s] @ R^T added (recurrent_kernel_t = R^T, [4u, u]); dc_last = dL/dc of
// the last state (rows). Writes dz ([time, batch, 4u]), dc_first = dL/dc0 and, when not null,
// dh_first = dz[0] @ R^T (dL/dh0 less its direct term). work: [3, batch, u] workspace. time > 0.
template <class T>
void lstm_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c,
                            const T* c, T* d, Rows<T> dc_last, const T* recurrent_kernel_t, T* dz, T* dc_first,
                            T* dh_first, T* work);

// GRU (reset_after = true), blocks [z | r | h]: X = x @ kernel + b_in, I = h @ recurrent_kernel
// + b_rec (biases [3u] or null: zeros); zr = [sigmoid(X_z + I_z) | sigmoid(X_r + I_r)] [batch, 2u],
// rec_h = I_h, cand = tanh(X_h + r * I_h), h_new = z * h + (1 - z) * cand ([batch, u]).
// inner: [batch, 3u] workspace.
template <class T>
void gru_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& in, const T* h, const T* recurrent_kernel,
              const T* b_in, const T* b_rec, T* zr, T* rec_h, T* cand, T* h_new, T* inner);

// The GRU gradients: dX, dI [batch, 3u] and dh_direct = d * z [batch, u].
template <class T>
void gru_cell_backward(std::int64_t batch, std::int64_t u, const T* zr, const T* rec_h, const T* cand, Rows<T> h,
                       Rows<T> d, T* dX, T* dI, T* dh_direct);

// The whole GRU recurrence, as lstm_sequence: gru_cell for every step on xz[s] ([time, batch,
// 3u], the input bias included), h[s] ([time + 1, batch, u], h0 at index 0) and b_rec (or null),
// writing h[s + 1], zr[s] ([time, batch, 2u]), rec_h[s] and cand[s] ([time, batch, u]); inner
// [batch, 3u] workspace. The batch's rows are split over the threads once per sequence.
template <class T>
void gru_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, const T* xz, const T* recurrent_kernel,
                  const T* b_rec, T* h, T* zr, T* rec_h, T* cand, T* inner);

// Its gradient, steps in reverse: d ([time, batch, u], dL/dh of each step's output) is read and
// step s - 1's rows get dI[s] @ R^T and h's direct term added (recurrent_kernel_t = R^T, [3u, u]).
// Writes dX and dI ([time, batch, 3u]) and, when not null, dh_first = dL/dh0. work: [2, batch, u]
// workspace. time > 0.
template <class T>
void gru_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, const T* zr, const T* rec_h,
                           const T* cand, const T* h, T* d, const T* recurrent_kernel_t, T* dX, T* dI, T* dh_first,
                           T* work);

// y [n, w] = x [n, f] @ kernel [f, w], plus bias [w] (or null) on every row.
template <class T>
void linear(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* bias, T* y);

}  // namespace keel::cpu
