// Matrix products: BLAS reads each operand's last two axes in place where their strides allow
// it (a transposed view is a transposed BLAS operand), and the batch axes broadcast.
#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "cpu/gemm.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

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

void matmul_native(const Tensor& a_in, bool transpose_a, const Tensor& b_in, bool transpose_b, const Tensor& c) {
  const DType dtype = a_in.dtype();
  const bool cuda_device = on_cuda(a_in);
  if (cuda_device && !is_floating(dtype))
    throw DTypeError(fmt::format("matmul: no CUDA kernel for {} operands ({} x {} on {}): cuBLAS "
                                 "multiplies float16, bfloat16, float32 and float64 only",
                                 name(dtype), a_in.shape().to_string(), b_in.shape().to_string(),
                                 a_in.device().to_string()));
  const std::int64_t ra = a_in.rank();
  const std::int64_t m = c.shape()[c.rank() - 2], n = c.shape()[c.rank() - 1];
  const std::int64_t k = transpose_a ? a_in.shape()[ra - 2] : a_in.shape()[ra - 1];
  const Shape batch(std::vector<std::int64_t>(c.shape().dims().begin(), c.shape().dims().end() - 2));

  cpu::MatrixArg aa{}, bb{};
  const Tensor a = blas_layout(a_in, transpose_a, aa) ? a_in : contiguous(a_in);
  const Tensor b = blas_layout(b_in, transpose_b, bb) ? b_in : contiguous(b_in);
  blas_layout(a, transpose_a, aa);
  blas_layout(b, transpose_b, bb);

  // Strides of each operand over the broadcast batch axes (0 where broadcast).
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
  if (cuda_device) {
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
    return;
  }
  for (std::int64_t i = 0; i < nbatch; ++i) {
    std::int64_t oa, ob;
    offsets(i, oa, ob);
    cpu::MatrixArg A = aa, B = bb;
    A.data = ap + oa * is;
    B.data = bp + ob * is;
    cpu::gemm(dtype, m, n, k, A, B, cp + i * m * n * is, n);
  }
}

}  // namespace

void matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"matmul", int(transpose_a) + 2 * int(transpose_b)}, {&a, &b}, {&out},
                     [=](const Tensor* t) { matmul(t[0], transpose_a, t[1], transpose_b, t[2]); });
  KernelClock clock;
  if (!on_cuda(a) && is_half(a.dtype()))
    return via_float32({&a, &b}, out, [&](const std::vector<Tensor>& in, const Tensor& o) {
      matmul_native(in[0], transpose_a, in[1], transpose_b, o);
    });
  matmul_native(a, transpose_a, b, transpose_b, out);
}

}  // namespace keel::backend
