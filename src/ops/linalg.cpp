// matmul and its gradient.
//
// Runs where its operands are (backend::matmul): OpenBLAS (and plain loops for integers) on the
// CPU, cuBLAS on a GPU. float16 and bfloat16 are native on the GPU (float32 accumulation); on the
// CPU the backend computes them in float32 and rounds the product once.
#include "keel/ops/linalg.hpp"

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool transpose_a, bool transpose_b) {
  detail::check_defined(a_in, "matmul");
  detail::check_defined(b_in, "matmul");
  detail::check_same_device(a_in, b_in, "matmul");
  detail::check_same_dtype(a_in, b_in, "matmul");
  if (a_in.rank() < 2 || b_in.rank() < 2)
    throw ShapeError(fmt::format("matmul: both operands need rank >= 2, got {} x {}",
                                 a_in.shape().to_string(), b_in.shape().to_string()));
  const DType dtype = a_in.dtype();
  if (!is_half(dtype)) detail::check_numeric(a_in, "matmul");
  const std::int64_t ra = a_in.rank(), rb = b_in.rank();
  const std::int64_t m = transpose_a ? a_in.shape()[ra - 1] : a_in.shape()[ra - 2];
  const std::int64_t k = transpose_a ? a_in.shape()[ra - 2] : a_in.shape()[ra - 1];
  const std::int64_t k2 = transpose_b ? b_in.shape()[rb - 1] : b_in.shape()[rb - 2];
  const std::int64_t n = transpose_b ? b_in.shape()[rb - 2] : b_in.shape()[rb - 1];
  if (k != k2)
    throw ShapeError(fmt::format("matmul: inner dimensions differ: {} x {}{}", a_in.shape().to_string(),
                                 b_in.shape().to_string(),
                                 transpose_a || transpose_b
                                     ? fmt::format(" (transpose_a={}, transpose_b={})", transpose_a, transpose_b)
                                     : std::string()));
  const Shape batch_a(std::vector<std::int64_t>(a_in.shape().dims().begin(), a_in.shape().dims().end() - 2));
  const Shape batch_b(std::vector<std::int64_t>(b_in.shape().dims().begin(), b_in.shape().dims().end() - 2));
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError(fmt::format("matmul: batch dimensions do not broadcast: {} x {}",
                                 a_in.shape().to_string(), b_in.shape().to_string()));
  }
  std::vector<std::int64_t> out_dims = batch.dims();
  out_dims.push_back(m);
  out_dims.push_back(n);
  Tensor c = detail::empty_tensor(Shape(out_dims), a_in.dtype(), a_in.device());

  backend::matmul(a_in, transpose_a, b_in, transpose_b, c);

  if (autograd::recording())
    autograd::record("matmul", {a_in, b_in}, {c}, [a_in, b_in, transpose_a, transpose_b](const Grads& g, const Needs& need) {
      const Tensor& gc = g[0];
      Tensor ga, gb;
      if (!transpose_a && !transpose_b) {
        if (need[0]) ga = matmul(gc, b_in, false, true);
        if (need[1]) gb = matmul(a_in, gc, true, false);
      } else if (!transpose_a && transpose_b) {
        if (need[0]) ga = matmul(gc, b_in, false, false);
        if (need[1]) gb = matmul(gc, a_in, true, false);
      } else if (transpose_a && !transpose_b) {
        if (need[0]) ga = matmul(b_in, gc, false, true);
        if (need[1]) gb = matmul(a_in, gc, false, false);
      } else {
        if (need[0]) ga = matmul(b_in, gc, true, true);
        if (need[1]) gb = matmul(gc, a_in, true, true);
      }
      return Grads{ga.defined() ? sum_to(ga, a_in.shape()) : ga, gb.defined() ? sum_to(gb, b_in.shape()) : gb};
    }, {a_in, b_in});
  return c;
}

}  // namespace keel
