#pragma once
// int8 matrix products with int32 accumulation, for post-training quantization
// (keel::quantization). Activations are unsigned 7-bit (0..127, with a zero point), weights
// signed 8-bit (-127..127, symmetric, a scale per output column or one for all):
//
//   out[i, j] = float(sum_k a[i, k] * w[k, j] - zero_point * colsum[j]) * (a_scale * w_scale[j])
//               + bias[j],  then max(., 0) when relu (or another activation, see Epilogue)
//
// 7-bit activations keep AVX2's vpmaddubsw (u8 x s8 pairs summed into int16, saturating) exact:
// 127 * 127 * 2 < 32767. AVX-512 VNNI's vpdpbusd has no such limit, but every level computes the
// same integers (and the same float epilogue, without FMA contraction), so results do not depend
// on the machine.
//
// Weights are packed once per layer: columns in blocks of 16, for each block K/4 groups of
// [16 columns x 4 consecutive k], the layout in which one vpdpbusd (or vpmaddubsw + vpmaddwd)
// multiplies 4 activations broadcast from a row by 4 weights of each of 16 columns.
#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel_kinds.hpp"

namespace keel::cpu::int8 {

struct PackedWeights {
  std::int64_t k = 0, n = 0;    // logical [k, n]
  std::int64_t k4 = 0, n16 = 0; // k rounded up to 4, n to 16
  std::vector<std::int8_t> data;      // n16 / 16 blocks of k4 * 16 bytes
  std::vector<std::int32_t> colsum;   // n16 sums of each column's weights (zero-point correction)
};

// q: [k, n] row-major, the weights as int8 values (-127..127).
PackedWeights pack(const std::int8_t* q, std::int64_t k, std::int64_t n);

struct Epilogue {
  float a_scale = 1;
  std::int32_t a_zero_point = 0;
  const float* w_scale = nullptr;  // n values, or 1 when !per_channel
  bool per_channel = true;
  const float* bias = nullptr;     // n values, or null
  bool relu = false;
  // Another elementwise activation (sigmoid, tanh, gelu, ...): the float kernels' own, run over
  // each block of output rows right after the micro-kernels wrote it (still in cache), so the
  // result is the same as that activation applied to the whole output afterwards.
  bool activate = false;
  kernel::UnaryOp activation = kernel::UnaryOp::relu;
  float alpha = 0;
};

// The epilogue's other activation (when `activate`) over n contiguous outputs, in place.
void activate(const Epilogue& e, float* y, std::int64_t n);

// a: [m, k4] unsigned 7-bit, row stride lda >= w.k4 (bytes k..k4 of each row may hold anything:
// they meet zero weights). out: [m, n] float, row stride ldo.
void gemm(const std::uint8_t* a, std::int64_t lda, std::int64_t m, const PackedWeights& w, const Epilogue& e,
          float* out, std::int64_t ldo);

// A 2-D convolution over NHWC activation codes xq [n, h, w, c] (the zero point stands for the
// padding) with weights packed from Keras' kernel [kh, kw, c, f] as a [kh * kw * c, f] matrix:
// out [n, out_h, out_w, f]. im2col and the GEMM run on blocks of output pixels small enough for
// the cache, in parallel.
struct ConvShape {
  std::int64_t n = 0, h = 0, w = 0, c = 0;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t pad_top = 0, pad_left = 0, out_h = 0, out_w = 0;
};
void conv2d(const std::uint8_t* xq, const ConvShape& s, const PackedWeights& w, const Epilogue& e, float* out);

// The instruction-set levels available here, best first ("avx512vnni", "avx2", "scalar"), and the
// one gemm() uses. KEEL_SIMD=avx2 or sse2 (the float kernels' switch) caps it too.
const std::vector<std::string>& levels();
const std::string& active_level();
// For tests and benchmarks: use `level` from now on; false when it is not available here.
bool set_level(const std::string& level);

// Affine 7-bit quantization of activations: q = clamp(round(x / scale) + zero_point, 0, 127).
struct ActivationParams {
  float scale = 1;
  std::int32_t zero_point = 0;
};
// From a range: [lo, hi] widened to hold 0 (so that 0 is exact: zero padding, ReLU outputs).
ActivationParams params_for_range(float lo, float hi);
// The smallest and largest of x[0..n), NaN skipped; lo and hi are widened from what they hold.
void value_range(const float* x, std::int64_t n, float& lo, float& hi);
// q[i * ldq + j] for the [rows, cols] x (row stride ldx); false when x holds a NaN or infinity.
bool quantize_rows(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, ActivationParams p,
                   std::uint8_t* q, std::int64_t ldq);

}  // namespace keel::cpu::int8
