#pragma once
// Matrix products (OpenBLAS for float32/float64).
#include "keel/core/tensor.hpp"

namespace keel {

// a: [..., m, k], b: [..., k, n] (after the optional transposes of the last two axes);
// leading axes broadcast. Result [..., m, n].
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

}  // namespace keel
