// Dense linear algebra entries: LAPACK kernels of src/cpu/lapack.cpp behind the recorder hook,
// with the host fallback for CUDA operands described in lapack.hpp.
#include "backend/lapack.hpp"

#include <memory>
#include <optional>
#include <vector>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "cpu/lapack.hpp"

namespace keel::backend {

namespace {

using Tensors = std::vector<Tensor>;

std::int64_t dim(const Tensor& t, int from_end) { return t.shape()[t.rank() - from_end]; }

// The number of matrices in t (the product of its leading axes; the op checked it fits).
std::int64_t batch_of(const Tensor& t) {
  std::int64_t b = 1;
  for (std::int64_t d = 0; d + 2 < t.rank(); ++d) b *= t.shape()[d];
  return b;
}

// Runs kernel(inputs, outputs) on host tensors. The host fallback for CUDA operands (no CUDA
// kernels for these families yet): inputs are copied to the host, the kernel writes host
// outputs, and those are copied into the device outputs.
template <class K>
std::int64_t lapack_on_host(const Tensors& in, const Tensors& out, K&& kernel) {
  bool cuda_operand = false;
  for (const Tensor& t : in) cuda_operand = cuda_operand || (t.defined() && on_cuda(t));
  if (!cuda_operand) return kernel(in, out);
  Tensors host_in, host_out;
  for (const Tensor& t : in) host_in.push_back(t.defined() ? to_device(t, Device::cpu()) : t);
  for (const Tensor& t : out)
    host_out.push_back(t.defined() ? detail::empty_tensor(t.shape(), t.dtype(), Device::cpu(), "linalg") : t);
  const std::int64_t failed = kernel(host_in, host_out);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].defined()) transfer(host_out[i], out[i]);
  return failed;
}

// A failure status under a graph recorder: the traced run hands its status back to the op (which
// words the error); a replay, where no op is there to do it, throws itself.
class TracedStatus {
 public:
  void report(std::int64_t failed, const char* op, const char* problem, const Tensor& a) const {
    if (!traced_->has_value()) {
      *traced_ = failed;
    } else if (failed >= 0) {
      throw ValueError(fmt::format("{}: matrix {} of the batch {} (input {})", op, failed, problem,
                                   a.shape().to_string()));
    }
  }
  std::int64_t value() const { return traced_->value_or(-1); }

 private:
  std::shared_ptr<std::optional<std::int64_t>> traced_ = std::make_shared<std::optional<std::int64_t>>();
};

void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

}  // namespace

std::int64_t inverse(const Tensor& a, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"inverse"}, {&a}, {&out},
              [=](const Tensor* t) { status.report(inverse(t[0], t[1]), "inv", "is singular", t[0]); });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a}, {out}, [](const Tensors& in, const Tensors& o) {
    copy(in[0], o[0], "inv");  // getri inverts in place
    return cpu::lapack::inverse(o[0].dtype(), batch_of(o[0]), dim(o[0], 1), o[0].raw_data());
  });
}

std::int64_t solve(const Tensor& a, const Tensor& b, bool adjoint, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"solve", int(adjoint)}, {&a, &b}, {&out},
              [=](const Tensor* t) { status.report(solve(t[0], t[1], adjoint, t[2]), "solve", "is singular", t[0]); });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a, b}, {out}, [adjoint](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]), bc = contiguous(in[1]);
    return cpu::lapack::solve(ac.dtype(), batch_of(ac), dim(ac, 1), dim(bc, 1), ac.raw_data(), bc.raw_data(),
                              adjoint, o[0].raw_data());
  });
}

std::int64_t cholesky(const Tensor& a, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"cholesky"}, {&a}, {&out}, [=](const Tensor* t) {
      status.report(cholesky(t[0], t[1]), "cholesky", "is not positive definite", t[0]);
    });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a}, {out}, [](const Tensors& in, const Tensors& o) {
    copy(in[0], o[0], "cholesky");  // potrf factors in place
    return cpu::lapack::cholesky(o[0].dtype(), batch_of(o[0]), dim(o[0], 1), o[0].raw_data());
  });
}

std::int64_t triangular_solve(const Tensor& a, const Tensor& b, bool lower, bool adjoint, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"triangular_solve", int(lower) + 2 * int(adjoint)}, {&a, &b}, {&out}, [=](const Tensor* t) {
      status.report(triangular_solve(t[0], t[1], lower, adjoint, t[2]), "triangular_solve",
                    "has a zero on its diagonal", t[0]);
    });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a, b}, {out}, [lower, adjoint](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]);
    copy(in[1], o[0], "triangular_solve");  // trsm solves in place
    return cpu::lapack::triangular_solve(ac.dtype(), batch_of(ac), dim(ac, 1), dim(o[0], 1), ac.raw_data(), lower,
                                         adjoint, o[0].raw_data());
  });
}

void qr(const Tensor& a, bool full, const Tensor& q, const Tensor& r) {
  if (KernelRecorder* rec = recorder())
    return rec->kernel({"qr", int(full)}, {&a}, {&q, &r}, [=](const Tensor* t) { qr(t[0], full, t[1], t[2]); });
  KernelClock clock;
  lapack_on_host({a}, {q, r}, [full](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]);
    cpu::lapack::qr(ac.dtype(), batch_of(ac), dim(ac, 2), dim(ac, 1), full, ac.raw_data(), o[0].raw_data(),
                    o[1].raw_data());
    return std::int64_t{-1};
  });
}

std::int64_t svd(const Tensor& a, bool full, const Tensor& s, const Tensor& u, const Tensor& vt) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"svd", int(full) + 2 * int(u.defined())}, {&a}, {&s, &u, &vt}, [=](const Tensor* t) {
      status.report(svd(t[0], full, t[1], t[2], t[3]), "svd", "did not converge", t[0]);
    });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a}, {s, u, vt}, [full](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]);
    return cpu::lapack::svd(ac.dtype(), batch_of(ac), dim(ac, 2), dim(ac, 1), full, o[1].defined(), ac.raw_data(),
                            o[0].raw_data(), data_or_null(o[1]), data_or_null(o[2]));
  });
}

std::int64_t eigh(const Tensor& a, const Tensor& e, const Tensor& vt) {
  if (KernelRecorder* r = recorder()) {
    const TracedStatus status;
    r->kernel({"eigh"}, {&a}, {&e, &vt},
              [=](const Tensor* t) { status.report(eigh(t[0], t[1], t[2]), "eigh", "did not converge", t[0]); });
    return status.value();
  }
  KernelClock clock;
  return lapack_on_host({a}, {e, vt}, [](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]);
    return cpu::lapack::eigh(ac.dtype(), batch_of(ac), dim(ac, 1), ac.raw_data(), o[0].raw_data(), o[1].raw_data());
  });
}

void determinant(const Tensor& a, const Tensor& det, const Tensor& sign, const Tensor& log_abs) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"determinant", int(det.defined())}, {&a}, {&det, &sign, &log_abs},
                     [=](const Tensor* t) { determinant(t[0], t[1], t[2], t[3]); });
  KernelClock clock;
  lapack_on_host({a}, {det, sign, log_abs}, [](const Tensors& in, const Tensors& o) {
    const Tensor ac = contiguous(in[0]);
    cpu::lapack::determinant(ac.dtype(), batch_of(ac), dim(ac, 1), ac.raw_data(), data_or_null(o[0]),
                             data_or_null(o[1]), data_or_null(o[2]));
    return std::int64_t{-1};
  });
}

}  // namespace keel::backend
