#pragma once
// Tensor-level int8 kernels of post-training quantization (keel::quantization), on the CPU
// kernels of cpu/int8_gemm.hpp. Quantized weights are symmetric int8 values stored as uint8
// codes with a zero point of 128 (code = q + 128, q in -127..127); activations are quantized
// to unsigned 7 bits on the way in, and every kernel returns float32 (bias and the activation
// applied in the GEMM's epilogue).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/int8_gemm.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend::int8 {

// The instruction set of the int8 GEMM here ("avx512vnni", "avx2" or "scalar").
std::string kernel_level();

// Symmetric quantization of float32 weights: along `axis` (the output channels) one scale per
// index when per_channel, else one scale. scale = max|w| / 127 (1 for all-zero weights).
struct QuantizedWeights {
  Tensor codes;  // uint8, w's shape
  Tensor scale;  // float32 [channels] or [1]
};
QuantizedWeights quantize_weights(const Tensor& w, int axis, bool per_channel);
// codes * scale back to float32 (the values the int8 kernels compute with).
Tensor dequantize_weights(const Tensor& codes, const Tensor& scale, int axis);

// A weight matrix [k, n] (n output columns, a scale each or one) packed for the kernels.
struct Matrix {
  cpu::int8::PackedWeights packed;
  std::vector<float> scale;
};
// The packing of one weight, made again when its codes or scale change (an assign, a load),
// also when a traced graph replays the kernel. Calls from several threads are safe (the first
// packs under a lock); changing the weights while another thread computes with them is not.
class MatrixCache {
 public:
  const Matrix& get(const Tensor& codes, const Tensor& scale, std::int64_t rows);

 private:
  std::mutex mu_;
  std::uint64_t codes_version_ = ~0ull, scale_version_ = ~0ull;
  const void* codes_storage_ = nullptr;
  Matrix matrix_;
};

// Where the activations' range comes from: a calibrated [lo, hi] tensor (float32 [2]) when
// defined, else the fixed range when `fixed`, else the input of each call.
struct Range {
  Tensor calibrated;
  bool fixed = false;
  float lo = 0, hi = 0;
};

// The activation a kernel applies in its epilogue, to each block of its result while in cache:
// none, or one elementwise kernel (ReLU in the GEMM's own store; the others, sigmoid, tanh,
// gelu, ..., as layers/elementwise_activations.hpp lists them, through the float kernels).
struct Activation {
  bool on = false;
  kernel::UnaryOp op = kernel::UnaryOp::relu;
  double alpha = 0;
};

// The kernels below write their float32 result into `y`, which the caller allocates; under a
// recorder (keel::function) each is one kernel, replayed with its operands. `who` names the layer
// in errors (a NaN or infinite input is a ValueError: 7-bit codes cannot hold it).

// y[m, n] = act(x[m, k] . W + bias); W = codes [k, n] (uint8) x scale.
void linear(const Tensor& x, const Tensor& codes, const Tensor& scale, const std::shared_ptr<MatrixCache>& cache,
            const Tensor& bias, const Range& range, const Activation& act, const std::string& who, const Tensor& y);

// A 2-D convolution's geometry (NHWC input, Keras' padding already turned into pads).
struct ConvGeometry {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t pad_top = 0, pad_left = 0, out_h = 0, out_w = 0;
};
// Keras' "valid" / "same" (and Conv1D's "causal": all padding before) along one axis.
void plan_axis(const std::string& padding, std::int64_t in, std::int64_t k, std::int64_t stride,
               std::int64_t dilation, std::int64_t& pad_before, std::int64_t& out);
// x [N, H, W, C] with codes [kh * kw * C, F] (Keras' kernel [kh, kw, C, F] flattened) into
// y [N, out_h, out_w, F].
void conv2d(const Tensor& x, const Tensor& codes, const Tensor& scale, const std::shared_ptr<MatrixCache>& cache,
            const ConvGeometry& g, const Tensor& bias, const Range& range, const Activation& act, const std::string& who,
            const Tensor& y);
// x [N, H, W, C] with codes [kh, kw, C, M] (DepthwiseConv2D's kernel) and scale [C * M] or [1].
void depthwise2d(const Tensor& x, const Tensor& codes, const Tensor& scale, const ConvGeometry& g, const Tensor& bias,
                 const Range& range, const Activation& act, const std::string& who, const Tensor& y);
// Rows `ids` of codes [vocab, dim] times their scale ([vocab] or [1]) into y [ids..., dim];
// ValueError for an id outside [0, vocab).
void embedding(const Tensor& ids, const Tensor& codes, const Tensor& scale, const std::string& who, const Tensor& y);

// The range of x's finite values (what static calibration records), and a strided sample of at
// most `max_samples` of them (for percentile calibration).
void observe(const Tensor& x, float& lo, float& hi, std::vector<float>* sample, std::size_t max_samples);

}  // namespace keel::backend::int8
