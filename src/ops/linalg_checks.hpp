#pragma once
// Argument checks and small building blocks shared by the keel::linalg ops (src/ops/linalg_*.cpp).
#include <cstdint>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::linalg_detail {

inline std::int64_t rows(const Tensor& x) { return x.shape()[x.rank() - 2]; }
inline std::int64_t cols(const Tensor& x) { return x.shape()[x.rank() - 1]; }
// The leading (batch) axes of a matrix tensor.
Shape batch_shape(const Tensor& x);
// batch + [m, n] (or + [m] when n < 0), its element count checked for overflow.
Shape with_matrix(const Shape& batch, std::int64_t m, std::int64_t n, const char* op);

// Defined, float32 or float64 (DTypeError), rank >= 2 (ShapeError), dimensions LAPACK's 32-bit
// integers can index (ValueError). `what` names the argument.
void check_matrix(const Tensor& x, const char* op, const char* what = "input");
// check_matrix and square (ShapeError).
void check_square(const Tensor& x, const char* op, const char* what = "input");
// rhs [..., n, k] matching matrix [..., n, n]: dtype, device, rank and rows; the batch axes
// broadcast (ShapeError naming both shapes when they do not).
void check_rhs(const Tensor& matrix, const Tensor& rhs, const char* op);
// Both operands broadcast to their common batch axes (broadcast_to: differentiable).
std::pair<Tensor, Tensor> broadcast_batch(const Tensor& matrix, const Tensor& rhs, const char* op);

// ValueError "<op>: matrix <i> of the batch (batch index [..]) <problem> (input <shape>)".
[[noreturn]] void throw_failed(const char* op, std::int64_t index, const char* problem, const Tensor& x);

// The last two axes swapped, a view recorded nowhere (for outputs whose gradient the op records).
Tensor swapped_view(const Tensor& x);
// x[..., :, begin:begin+count] (count -1: to the end), differentiable.
Tensor column_slice(const Tensor& x, std::int64_t begin, std::int64_t count);
// The n x n identity in x's dtype on x's device.
Tensor eye_like(const Tensor& x, std::int64_t n);
// An uninitialised output of `shape` in x's dtype, on x's device (`op` names a failed allocation).
Tensor output_like(const Shape& shape, const Tensor& x, const char* op);
// TensorFlow's _SafeReciprocal: x / (x^2 + 1e-20), 0 where x is 0.
Tensor safe_reciprocal(const Tensor& x);

}  // namespace keel::linalg_detail
