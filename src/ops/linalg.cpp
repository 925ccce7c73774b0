// matmul and its gradient.
//
// Runs where its operands are: OpenBLAS (and plain loops for integers) on the CPU, cuBLAS on a
// GPU. float16 and bfloat16 are native on the GPU (float32 accumulation); on the CPU they round
// trip through float32, as a composite of recorded casts so that their gradients come for free.
#include "keel/ops/linalg.hpp"

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "cuda/backend.hpp"
#include "core/tensor_util.hpp"
#include "cpu/elementwise.hpp"
#include "cpu/gemm.hpp"
#include "cpu/strided.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// How BLAS can read the last two axes of x (possibly transposed by the op's flag) without a copy.
bool blas_layout(const Tensor& x, bool transpose, cpu::MatrixArg& arg) {
  const auto r = static_cast<std::size_t>(x.rank());
  const std::int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
  const std::int64_t sr = x.strides()[r - 2], sc = x.strides()[r - 1];
  if (sc == 1 || cols == 1) {
    arg.ld = rows == 1 ? cols : sr;
    if (arg.ld >= cols) {
      arg.trans = transpose;
      return true;
    }
  }
  if (sr == 1 || rows == 1) {
    arg.ld = cols == 1 ? rows : sc;
    if (arg.ld >= rows) {
      arg.trans = !transpose;
      return true;
    }
  }
  return false;
}


// The element offset of every batch's matrix is i * stride for batch index i (after broadcasting
// the batch axes and flattening them), as one strided-batched cuBLAS call needs. `strides` are
// the operand's strides over the broadcast batch axes (0 where broadcast).
bool uniform_batch_stride(const Shape& batch, const std::vector<std::int64_t>& strides,
                          std::int64_t& stride) {
  stride = 0;
  std::int64_t inner = 1;  // elements of the flattened batch per step of axis d
  bool first = true;
  for (std::int64_t d = batch.rank() - 1; d >= 0; --d) {
    const std::int64_t size = batch[d], s = strides[static_cast<std::size_t>(d)];
    if (size == 1) continue;
    if (first) {  // the innermost non-trivial axis sets the stride
      stride = s;
      first = false;
    } else if (s != stride * inner) {
      return false;
    }
    inner *= size;
  }
  return stride >= 0;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool transpose_a, bool transpose_b) {
  detail::check_defined(a_in, "matmul");
  detail::check_defined(b_in, "matmul");
  detail::check_same_device(a_in, b_in, "matmul");
  detail::check_same_dtype(a_in, b_in, "matmul");
  if (a_in.rank() < 2 || b_in.rank() < 2)
    throw ShapeError(fmt::format("matmul: both operands need rank >= 2, got {} x {}",
                                 a_in.shape().to_string(), b_in.shape().to_string()));
  const DType dtype = a_in.dtype();
  const bool on_cuda = a_in.device().is_cuda();
  if (!is_half(dtype)) detail::check_numeric(a_in, "matmul");
  if (on_cuda && !is_floating(dtype))
    throw DTypeError(fmt::format("matmul: no CUDA kernel for {} operands ({} x {} on {}): cuBLAS "
                                 "multiplies float16, bfloat16, float32 and float64 only",
                                 name(dtype), a_in.shape().to_string(), b_in.shape().to_string(),
                                 a_in.device().to_string()));
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
  if (is_half(dtype) && !on_cuda)  // after the shape checks, so that their messages name the operands
    return cast(matmul(cast(a_in, DType::float32), cast(b_in, DType::float32), transpose_a, transpose_b),
                dtype);
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

  cpu::MatrixArg aa{}, bb{};
  const Tensor a = blas_layout(a_in, transpose_a, aa) ? a_in : a_in.contiguous();
  const Tensor b = blas_layout(b_in, transpose_b, bb) ? b_in : b_in.contiguous();
  blas_layout(a, transpose_a, aa);
  blas_layout(b, transpose_b, bb);

  // Offsets of each batch's matrices, with broadcasting over the batch axes.
  const auto strides_of_batch = [&](const Tensor& x) {
    std::vector<std::int64_t> s(static_cast<std::size_t>(batch.rank()), 0);
    const std::int64_t lead = batch.rank() - (x.rank() - 2);
    for (std::int64_t d = 0; d < x.rank() - 2; ++d)
      s[static_cast<std::size_t>(lead + d)] = x.shape()[d] == 1 ? 0 : x.strides()[static_cast<std::size_t>(d)];
    return s;
  };
  const auto sa = strides_of_batch(a), sb = strides_of_batch(b);
  const std::int64_t nbatch = batch.num_elements();
  const auto is = static_cast<std::int64_t>(itemsize(a.dtype()));
  const char* ap = static_cast<const char*>(a.raw_data());
  const char* bp = static_cast<const char*>(b.raw_data());
  char* cp = static_cast<char*>(c.raw_data());
  // Element offsets of batch i's matrices in a and b, with broadcasting over the batch axes.
  const auto offsets = [&](std::int64_t i, std::int64_t& oa, std::int64_t& ob) {
    oa = ob = 0;
    std::int64_t rem = i;
    for (std::int64_t d = batch.rank() - 1; d >= 0; --d) {
      const std::int64_t v = rem % batch[d];
      rem /= batch[d];
      oa += v * sa[static_cast<std::size_t>(d)];
      ob += v * sb[static_cast<std::size_t>(d)];
    }
  };
  if (on_cuda) {
    const int device = a.device().index();
    std::int64_t stride_a = 0, stride_b = 0;
    if (nbatch > 0 && uniform_batch_stride(batch, sa, stride_a) && uniform_batch_stride(batch, sb, stride_b)) {
      // The common case (each operand broadcast or evenly strided over the batch): one call.
      cuda::gemm(dtype, m, n, k, cuda::Matrix{ap, aa.ld, aa.trans, stride_a},
                 cuda::Matrix{bp, bb.ld, bb.trans, stride_b}, cp, n, m * n, nbatch, device);
    } else {
      for (std::int64_t i = 0; i < nbatch; ++i) {
        std::int64_t oa, ob;
        offsets(i, oa, ob);
        cuda::gemm(dtype, m, n, k, cuda::Matrix{ap + oa * is, aa.ld, aa.trans, 0},
                   cuda::Matrix{bp + ob * is, bb.ld, bb.trans, 0}, cp + i * m * n * is, n, m * n, 1, device);
      }
    }
  } else {
    for (std::int64_t i = 0; i < nbatch; ++i) {
      std::int64_t oa, ob;
      offsets(i, oa, ob);
      cpu::MatrixArg A = aa, B = bb;
      A.data = ap + oa * is;
      B.data = bp + ob * is;
      cpu::gemm(dtype, m, n, k, A, B, cp + i * m * n * is, n);
    }
  }

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
