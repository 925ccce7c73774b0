// Elementwise kernels: broadcasting views for the GPU, the strided CPU drivers otherwise.
#include "backend/backend.hpp"
#include "backend/cuda_views.hpp"
#include "backend/device.hpp"
#include "cpu/elementwise.hpp"
#include "cuda/backend.hpp"

namespace keel::backend {

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha) {
  if (on_cuda(x)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&x, &out}, out.shape(), "unary");
    cuda::unary(op, v[0], v[1], alpha);
    return;
  }
  if (is_half(x.dtype()))
    return via_float32({&x}, out, [&](const std::vector<Tensor>& in, const Tensor& o) { cpu::unary(op, in[0], o, alpha); });
  cpu::unary(op, x, out, alpha);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (on_cuda(a)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&a, &b, &out}, out.shape(), "binary");
    cuda::binary(op, v[0], v[1], v[2]);
    return;
  }
  if (is_half(a.dtype()))
    return via_float32({&a, &b}, out, [&](const std::vector<Tensor>& in, const Tensor& o) {
      cpu::binary(op, in[0], in[1], o);
    });
  cpu::binary(op, a, b, out);
}

void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (on_cuda(a)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&a, &b, &out}, out.shape(), "compare");
    cuda::compare(op, v[0], v[1], v[2]);
    return;
  }
  if (is_half(a.dtype()))
    return via_float32({&a, &b}, out, [&](const std::vector<Tensor>& in, const Tensor& o) {
      cpu::compare(op, in[0], in[1], o);
    });
  cpu::compare(op, a, b, out);
}

void logical(LogicalOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (on_cuda(a)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&a, &b, &out}, out.shape(), "logical");
    cuda::logical(op, v[0], v[1], v[2]);
    return;
  }
  cpu::logical(op, a, b, out);
}

void logical_not(const Tensor& x, const Tensor& out) {
  if (on_cuda(x)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&x, &out}, out.shape(), "logical_not");
    cuda::logical_not(v[0], v[1]);
    return;
  }
  cpu::logical_not(x, out);
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (on_cuda(a)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&cond, &a, &b, &out}, out.shape(), "where");
    cuda::where(v[0], v[1], v[2], v[3]);
    return;
  }
  cpu::where(cond, a, b, out);
}

void float_test(FloatTest test, const Tensor& x, const Tensor& out) {
  if (on_cuda(x)) {
    if (out.size() == 0) return;
    const auto v = cuda_views({&x, &out}, out.shape(), test == FloatTest::nan ? "is_nan" : "is_finite");
    cuda::float_test(test, v[0], v[1]);
    return;
  }
  cpu::float_test(test, x, out);
}

}  // namespace keel::backend
