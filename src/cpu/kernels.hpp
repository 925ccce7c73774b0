#pragma once
// The CPU kernels of contiguous runs, compiled once per instruction set (src/cpu/simd/) and
// picked at start-up by what the processor supports (AVX-512 F/CD/DQ/BW/VL, else AVX2+FMA, else
// SSE2).
//
// Capping the level (tests, benchmarks of the baseline paths): the environment variable
// KEEL_SIMD=sse2|avx2|avx512 is read once, at the first kernel call; a level the processor or
// the build lacks falls back to the best one, with a warning on stderr. Tests that sweep every
// level in one process use simd_levels() and set_simd_level() below.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/kernel_kinds.hpp"
#include "core/optimizer_rules.hpp"

namespace keel::cpu {

using kernel::BinaryOp;
using kernel::ReduceOp;
using kernel::UnaryOp;

// Outputs of at least this many bytes are written with streaming stores (see kernels_impl.hpp).
inline constexpr std::size_t kStreamOutputBytes = std::size_t{4} << 20;

// A step of a fused elementwise program as the SIMD table runs it (cpu/elementwise_program.cpp
// lowers kernel::ProgramStep to these). The steps run on a few batches at a time, the result of
// each kept in registers for the next: an operand is that previous result, a run of memory
// (slots[i] + the position) or one value broadcast (slots[i][0]).
struct TileStep {
  enum Source : std::uint8_t { previous, memory, scalar };
  bool binary = false;
  UnaryOp unary_op = UnaryOp::neg;
  BinaryOp binary_op = BinaryOp::add;
  double alpha = 0;
  Source a_source = memory, b_source = memory;
  int a = 0, b = 0;  // slots of memory and scalar operands
  int out = -1;      // the slot the result is stored to, or -1: only the next step reads it
};

// window_arg_grad's rows of sums: pixel q adds to row q % kArgSumRows, so that consecutive
// pixels' additions do not wait for each other's stores.
constexpr std::int64_t kArgSumRows = 4;

// The two per-column sums of column_pair_sums, with d = x - ref[c] and the row's
// xhat = (x - row_mean[r]) * row_rstd[r]: batch_norm's moments (d, d*d), its gradient's
// (g, g*d), and layer_norm's parameter gradients (g*xhat, g).
enum class ColumnPair { moments, bn_grad, ln_grad };

template <class T>
struct TypedKernels {
  // y[i] = op(x[i]); alpha parameterises leaky_relu and elu.
  void (*unary)(UnaryOp op, const T* x, T* y, std::int64_t n, T alpha);
  // y[i] = op(a[i*sa], b[i*sb]) with sa, sb in {0, 1} (0 broadcasts a scalar). y may alias a or b.
  void (*binary)(BinaryOp op, const T* a, std::int64_t sa, const T* b, std::int64_t sb, T* y,
                 std::int64_t n);
  // Reduces x[0..n) to one value.
  T (*reduce)(ReduceOp op, const T* x, std::int64_t n);
  // acc[j] = op(acc[j], x[j]) for j < n (the rows of a leading-axis reduction).
  void (*accumulate)(ReduceOp op, T* acc, const T* x, std::int64_t n);
  // y[i] = x[i] with streaming stores (no read-for-ownership of y, y not kept in cache): the
  // write-back of a fused program's large outputs from their cached tiles.
  void (*stream_copy)(const T* x, T* y, std::int64_t n);
  // The max pool over runs of NHWC windows (simd/pooling_impl.hpp): pixel q < pixels of a run
  // has taps x[q * step + offset[t] + c], t < taps, for its channels c < channels.
  // y[q * channels + c] = the taps' maximum, NaN when one is NaN.
  void (*window_max)(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y,
                     std::int64_t pixels, std::int64_t channels);
  // Its gradient into dx (x's layout): dy[q * channels + c] to the first maximum (the first NaN
  // if any), 0 to the window's other taps; added to dx when accumulate, else stored. With relu
  // (not with accumulate), the maximum's tap gets dy * (x > 0 ? 1 : 0): relu_grad's bits.
  void (*window_max_grad)(const T* x, std::int64_t step, const std::int64_t* offset, int taps, const T* dy,
                          T* dx, std::int64_t pixels, std::int64_t channels, bool accumulate, bool relu);
  // window_max that also writes each window's choice to arg (y's layout): the tap window_max_grad
  // gives dy to, plus 128 where the max is not > 0 (a ReLU's mask there is 0). Taps < 128.
  void (*window_max_arg)(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y, T* arg,
                         std::int64_t pixels, std::int64_t channels);
  // window_max_grad from that choice instead of x: the same bits, with or without relu; with
  // `stream` (not with accumulate), dx is written with streaming stores. A non-null `sum` (rows of
  // kArgSumRows x channels) gets each window's gradient added to its row q % kArgSumRows (the
  // pixels' sum of dx, for a bias gradient, in independent chains of additions).
  void (*window_arg_grad)(const T* arg, std::int64_t step, const std::int64_t* offset, int taps, const T* dy,
                          T* dx, std::int64_t pixels, std::int64_t channels, bool accumulate, bool relu,
                          bool stream, T* sum);
  // The adjoint of window_max_grad in dy: out[q * channels + c] = dx at the tap it chose.
  void (*window_max_gather)(const T* x, std::int64_t step, const std::int64_t* offset, int taps, const T* dx,
                            T* out, std::int64_t pixels, std::int64_t channels);
  // The average pool over the same runs (the mean of the taps given: those inside the image), and
  // its gradient: dy / taps to every tap of dx (whose pixel q is at q * step), added or stored.
  void (*window_mean)(const T* x, std::int64_t step, const std::int64_t* offset, int taps, T* y,
                      std::int64_t pixels, std::int64_t channels);
  void (*window_mean_grad)(const T* dy, std::int64_t step, const std::int64_t* offset, int taps, T* dx,
                           std::int64_t pixels, std::int64_t channels, bool accumulate);
  // y[i] = op(x[i] + bias[i % c]) for i < n, n a multiple of c (rows of c): op is relu, sigmoid,
  // tanh or exp, or none when `linear` (false, and nothing written, for another op). One pass:
  // x read once, y written once (streaming stores for a large y whose rows are whole batches).
  bool (*bias_unary)(UnaryOp op, bool linear, const T* x, const T* bias, std::int64_t c, T* y, std::int64_t n);
  // Runs steps[0..count) on elements [0, n) of the slots, element by element in program order:
  // each op gives the bits of its unary/binary kernel above.
  void (*program)(const TileStep* steps, std::size_t count, T* const* slots, std::int64_t n);
  // The LSTM cell's gates for `rows` rows of u units, Keras' gate blocks [i | f | g | o] of u
  // columns: a (rows of 4u, the recurrent product h @ R) becomes the activated gates of
  // a + (x + bias) (x's rows xld apart; bias 4u or null): sigmoid of i, f and o, tanh of g; then
  // c_new = f*c + i*g (c's rows cld apart), tanh_c = tanh(c_new), h_new = o * tanh_c (rows of u).
  void (*lstm_gates)(std::int64_t rows, std::int64_t u, T* a, const T* x, std::int64_t xld, const T* bias,
                     const T* c, std::int64_t cld, T* c_new, T* tanh_c, T* h_new);
  // Its gradient for `rows` rows: from act (rows of 4u, the activated gates) and tanh_c, with
  // dh = dL/dh' and dc = dL/dc' (rows dhld and dcld apart) and c the state before (cld), writes
  // dz (rows of 4u, the pre-activations' gradients) and dc_prev (rows of u):
  //   dct = dc + dh * o * (1 - tc^2)            (everything that reaches c')
  //   dz_i = dct * g * i * (1 - i)    dz_f = dct * c * f * (1 - f)
  //   dz_g = dct * i * (1 - g^2)      dz_o = dh * tc * o * (1 - o)      dc_prev = dct * f
  // each product taken left to right.
  void (*lstm_gate_grads)(std::int64_t rows, std::int64_t u, const T* act, const T* tanh_c, const T* dh,
                          std::int64_t dhld, const T* dc, std::int64_t dcld, const T* c, std::int64_t cld, T* dz,
                          T* dc_prev);
  // The GRU cell (reset_after) after its recurrent product, gate blocks [z | r | h] of u columns,
  // for `rows` rows: with in (rows of 3u) = h @ R, x the input projection (rows xld apart) and
  // the biases bi, br (3u each; zeros where absent), each sum left to right:
  //   zr (rows of 2u) = sigmoid(x + in + bi + br) of the z and r blocks
  //   rec_h (rows of u) = in_h + br_h,  cand = tanh(x_h + bi_h + r * rec_h)
  //   h_new = z * h + (1 - z) * cand    (h: rows of u)
  void (*gru_gates)(std::int64_t rows, std::int64_t u, const T* in, const T* x, std::int64_t xld, const T* bi,
                    const T* br, const T* h, T* zr, T* rec_h, T* cand, T* h_new);
  // Its gradient, with d = dL/dh' (rows dld apart) and h (rows hld apart), products left to right:
  //   dz_pre = d * (h - cand) * z * (1 - z),  dh_pre = d * (1 - z) * (1 - cand^2)
  //   dr_pre = dh_pre * rec_h * r * (1 - r)
  //   dX = [dz_pre | dr_pre | dh_pre],  dI = [dz_pre | dr_pre | dh_pre * r] (rows of 3u)
  //   dh_direct = d * z (rows of u)
  void (*gru_gate_grads)(std::int64_t rows, std::int64_t u, const T* zr, const T* rec_h, const T* cand, const T* h,
                         std::int64_t hld, const T* d, std::int64_t dld, T* dX, T* dI, T* dh_direct);
  // layer_norm over `rows` rows of `cols` (simd/normalization_impl.hpp): per row the mean and
  // rstd = 1 / sqrt(var + epsilon) (statistics summed in a fixed order, so every level gives the
  // same bits), then y = (x - mean) * rstd * gamma + beta.
  void (*layer_norm_rows)(const T* x, std::int64_t rows, std::int64_t cols, const T* gamma, const T* beta,
                          double epsilon, T* y, T* mean, T* rstd);
  // Its gradient wrt x from dy and the forward's mean and rstd (gamma not null).
  void (*layer_norm_grad_rows)(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* gamma,
                               const T* mean, const T* rstd, T* dx);
  // Over `rows` rows of `cols` (simd/batch_norm_impl.hpp), in blocks of block_rows rows: each
  // block's two sums of each column (ColumnPair; g is dy, unused for moments) taken in T in row
  // order, then added to s1[c] and s2[c] in double.
  void (*column_pair_sums)(ColumnPair kind, const T* x, const T* g, const T* ref, const T* row_mean,
                           const T* row_rstd, std::int64_t rows, std::int64_t cols, std::int64_t block_rows,
                           double* s1, double* s2);
  // batch_norm's normalisation y = (x - center) * scale + offset and its gradient wrt x,
  // dx = a * dy + b * (x - mean) + e, per column, left to right. `stream`: the output is too large
  // to stay in cache (streaming stores).
  void (*batch_norm_rows)(const T* x, std::int64_t rows, std::int64_t cols, const T* center, const T* scale,
                          const T* offset, T* y, bool stream);
  void (*batch_norm_grad_rows)(const T* x, const T* dy, std::int64_t rows, std::int64_t cols, const T* mean,
                               const T* a, const T* b, const T* e, T* dx, bool stream);
  // dropout after its Philox words (simd/philox_impl.hpp): y[k] = x[k] * scale where
  // words[k] >= threshold, else +0.0; mask[k] (when not null) = scale or +0.0 likewise; k < n.
  // `stream`: y is part of an output too large to stay in cache (streaming stores).
  void (*dropout_select)(const std::uint32_t* words, std::uint32_t threshold, const T* x, T scale, T* y, T* mask,
                         std::int64_t n, bool stream);
  // The first i < n with !(x[i] <= threshold), or n (top_k's scan for a candidate).
  std::int64_t (*next_above)(const T* x, std::int64_t n, T threshold);
  // The mean and biased variance of each of `rows` rows of `cols` (simd/normalization_impl.hpp:
  // layer_norm_rows' statistics, the same bits at every level), rounded to T.
  void (*row_moments)(const T* x, std::int64_t rows, std::int64_t cols, T* mean, T* variance);
  // batch_norm_rows with one center, scale and offset per row: y[r, c] = (x[r, c] - center[r]) *
  // scale[r] + offset[r] (moments' gradient over trailing axes).
  void (*row_affine)(const T* x, std::int64_t rows, std::int64_t cols, const T* center, const T* scale,
                     const T* offset, T* y, bool stream);
  // y[i] = op(x[i], row[i % c]), or op(row[i % c], x[i]) when row_first, for i < n (n a multiple
  // of c): binary's bits, with streaming stores for a large y. y may alias x.
  void (*binary_repeat)(BinaryOp op, const T* x, const T* row, std::int64_t c, bool row_first, T* y,
                        std::int64_t n);
  // y[i] = op(x[i], column[i / c]), or op(column[i / c], x[i]) when column_first, for i < n (n a
  // multiple of c): binary's bits, with streaming stores for a large y. y may alias x.
  void (*binary_columns)(BinaryOp op, const T* x, const T* column, std::int64_t c, bool column_first, T* y,
                         std::int64_t n);
  // y[r] = each of `rows` contiguous rows of `cols` reduced left to right from op's identity (for
  // rows shorter than a batch, reduce()'s bits), the rows side by side in SIMD lanes.
  void (*reduce_rows)(ReduceOp op, const T* x, std::int64_t rows, std::int64_t cols, T* y);
};

// Rows shorter than this reduce side by side in SIMD lanes (reduce_rows), in reductions over the
// last axis and in the fused softmax alike (so that it keeps the composite's bits): a kernel call
// per row cost more than the row ([1048576, 4] summed over its last axis: 46 ms).
inline constexpr std::int64_t kShortReduceRow = 64;

// Rows of binary_columns' values laid out at a time when its rows are shorter than a batch (a
// multiple of every batch width, so that whole tiles keep the output's alignment).
inline constexpr std::int64_t kColumnTileRows = 256;

inline constexpr std::int64_t kPhiloxChunk = 256;

struct SimdKernels {
  const char* isa;  // "avx512bw", "avx2+fma" or "sse2"
  TypedKernels<float> f32;
  TypedKernels<double> f64;
  // The fused float32 optimizer step of cpu/optimizer.hpp (slots the rule does not use are null).
  void (*optimizer_update)(const kernel::OptimizerParams& params, std::int64_t n, float* w, const float* g,
                           float* const slot[3]);
  // out[4 g + k] = word k of philox::block(key, counter, g, stream) (core/philox.hpp), g < blocks;
  // its callers draw kPhiloxChunk blocks (4 KiB of words) a call.
  void (*philox_words)(std::uint64_t key, std::uint64_t counter, std::uint32_t stream, std::int64_t blocks,
                       std::uint32_t* out);
  // random::uniform's float32 values from those words (simd/philox_impl.hpp): p[k] =
  // float(minval + (maxval - minval) * ((words[k] >> 8) * 2^-24)) in double, or below_hi where
  // that reaches hi, k < n.
  void (*uniform_floats)(const std::uint32_t* words, std::int64_t n, double minval, double maxval, float hi,
                         float below_hi, float* p);
  // random::normal's Box-Muller transform (simd/box_muller_impl.hpp): z[2j] = sqrt(-2 log(u_open[j]))
  // cos(2 pi u[j]) and z[2j+1] the same with sin, j < n; the same bits at every level.
  void (*box_muller)(const double* u_open, const double* u, std::int64_t n, double* z);
};

// The active kernel table.
const SimdKernels& simd();

// Internal, for tests: the tables this processor can run, best first ("avx512bw", "avx2+fma", "sse2").
const std::vector<SimdKernels>& simd_levels();
// Makes the table named `isa` ("avx512" or "avx512bw", "avx2" or "avx2+fma", "sse2") the active one for every thread;
// false (and no change) if this processor or build has no such table. Not for use while
// kernels run on other threads.
bool set_simd_level(std::string_view isa);

template <class T> const TypedKernels<T>& typed_kernels();
template <> inline const TypedKernels<float>& typed_kernels<float>() { return simd().f32; }
template <> inline const TypedKernels<double>& typed_kernels<double>() { return simd().f64; }

// y[r] = row r of x [rows, cols] reduced as a reduction over the last axis reduces it: rows
// shorter than kShortReduceRow side by side in lanes (reduce_rows), longer ones a reduce() call
// each. The fused softmax and cross-entropies take their row statistics here, so they keep the
// bits of reduce_max / reduce_sum.
template <class T>
void reduce_each_row(ReduceOp op, const T* x, std::int64_t rows, std::int64_t cols, T* y) {
  const TypedKernels<T>& k = typed_kernels<T>();
  if (cols < kShortReduceRow) return k.reduce_rows(op, x, rows, cols, y);
  for (std::int64_t r = 0; r < rows; ++r) y[r] = k.reduce(op, x + r * cols, cols);
}

}  // namespace keel::cpu
