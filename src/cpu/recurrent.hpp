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
// tanh_c = tanh(c_new), h_new = o * tanh_c ([batch, u]).
template <class T>
void lstm_cell(std::int64_t batch, std::int64_t u, const CellInput<T>& in, const T* h, const T* recurrent_kernel,
               const T* bias, Rows<T> c, T* act, T* c_new, T* tanh_c, T* h_new);

// The LSTM gate gradients: dz [batch, 4u] and dc_prev [batch, u] from act and tanh_c.
template <class T>
void lstm_cell_backward(std::int64_t batch, std::int64_t u, const T* act, const T* tanh_c, Rows<T> dh, Rows<T> dc,
                        Rows<T> c, T* dz, T* dc_prev);

// How many parts a recurrence of `time` steps over `batch` rows (u units, `width` gate columns)
// splits its rows into: one per thread when it has the work, else 1.
int recurrence_parts(std::int64_t time, std::int64_t batch, std::int64_t u, std::int64_t width);

// Part order, the layout of a sequence's per-step buffers ([time * batch, w]): the batch's rows
// are split into `parts` ranges [r0, r1) as parallel_ranges splits them, and part p's rows of
// every step lie together, steps in order: row r of step s at r0 * time + s * (r1 - r0) + r - r0.
// One part is plain time-major order. Each thread then reads and writes one block of memory for
// the whole sequence, forward and backward: with the parts' rows interleaved step by step, every
// call moved cache lines between the cores, and two threads were no faster than one.

// The whole LSTM recurrence of a sequence, its rows split over the threads in `parts` (a row
// depends on its own row only): lstm_cell for s = 0, 1, ..., time - 1 on the step's projection
// xz ([time * batch, 4u], part order) from h0 and c0 ([batch, u] rows). Writes, in part order,
// the state each step reads (h_read, c_read: [time * batch, u], the initial one first), act
// ([time * batch, 4u]) and tanh_c ([time * batch, u]); outputs [batch, time, u]; the last state
// h_last, c_last [batch, u].
template <class T>
void lstm_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* xz,
                   const T* recurrent_kernel, Rows<T> h0, Rows<T> c0, T* h_read, T* c_read, T* act, T* tanh_c,
                   T* outputs, T* h_last, T* c_last);

// Its gradient, steps in reverse, over the forward's parts: d_out ([batch, time, u], dL/d of each
// output), dh_last and dc_last (dL/dh and dL/dc of the last state, rows);
// recurrent_kernel_t = R^T ([4u, u]). Writes dz ([time * batch, 4u], part order), dc_first =
// dL/dc0 and, when not null, dh_first = dz[0] @ R^T (dL/dh0). work: [4, batch, u] workspace.
// time > 0.
template <class T>
void lstm_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* act,
                            const T* tanh_c, const T* c_read, const T* d_out, Rows<T> dh_last, Rows<T> dc_last,
                            const T* recurrent_kernel_t, T* dz, T* dc_first, T* dh_first, T* work);

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

// The whole GRU recurrence over parts, as lstm_sequence: gru_cell for every step on xz ([time *
// batch, 3u] in part order, the input bias included) from h0 ([batch, u] rows), b_rec [3u] or
// null. Writes in part order h_read ([time * batch, u], the state each step reads), zr ([time *
// batch, 2u]), rec_h and cand ([time * batch, u]); outputs [batch, time, u]; h_last [batch, u].
// inner: [batch, 3u] workspace.
template <class T>
void gru_sequence(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* xz,
                  const T* recurrent_kernel, const T* b_rec, Rows<T> h0, T* h_read, T* zr, T* rec_h, T* cand,
                  T* outputs, T* h_last, T* inner);

// Its gradient, steps in reverse over the forward's parts: d_out ([batch, time, u]) and dh_last
// (rows); recurrent_kernel_t = R^T ([3u, u]). Writes dX and dI ([time * batch,
// 3u], part order) and, when not null, dh_first = dL/dh0. work: [3, batch, u] workspace. time > 0.
template <class T>
void gru_sequence_backward(std::int64_t time, std::int64_t batch, std::int64_t u, int parts, const T* zr,
                           const T* rec_h, const T* cand, const T* h_read, const T* d_out, Rows<T> dh_last,
                           const T* recurrent_kernel_t, T* dX, T* dI, T* dh_first, T* work);

// y [n, w] = x [n, f] @ kernel [f, w], plus bias [w] (or null) on every row. parts > 1: x is a
// sequence of `time` steps in part order, and each part's block is projected on the thread that
// will run its recurrence.
template <class T>
void linear(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* bias, T* y,
            int parts = 1, std::int64_t time = 0);

// Its gradient over the same parts (parts >= 1, time > 0): dx = dy @ kernel^T, dkernel = x^T @ dy
// and dbias = the column sums of dy, each written when not null. Each thread takes its part's
// rows; the parts' dkernel and dbias are added in part order.
template <class T>
void linear_backward(std::int64_t n, std::int64_t f, std::int64_t w, const T* x, const T* kernel, const T* dy,
                     T* dx, T* dkernel, T* dbias, int parts, std::int64_t time);

}  // namespace keel::cpu
