// Collectives on tensors as recorded kernel calls (see collective_kernels.hpp).
#include "distribute/collective_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/core.h>

#include "backend/recorder.hpp"
#include "keel/ops/creation.hpp"

namespace keel::distribute::detail {

namespace {

// Runs `run` on {in, out} now, or records it (and runs it) under a recorder.
void run_kernel(const char* family, int kind, const Tensor& in, const Tensor& out,
                const backend::KernelReplay& run) {
  if (backend::KernelRecorder* r = backend::recorder()) return r->kernel({family, kind}, {&in}, {&out}, run);
  const Tensor ops[2] = {in, out};
  run(ops);
}

template <class T>
void scale_as(void* buf, std::size_t n, double factor) {
  auto* p = static_cast<T*>(buf);
  if constexpr (std::is_floating_point_v<T>) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] * factor);
  } else {
    // Integers: a mean is the sum divided by the replicas, truncated (factor = 1 / replicas).
    const auto divisor = static_cast<T>(std::llround(1.0 / factor));
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
  }
}

// Host copies of tensors that may live on a GPU: collectives read and write host memory.
Tensor on_host(const Tensor& t) { return (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous(); }

template <class T>
void scaled_copy_as(void* dst, const void* src, std::size_t n, double factor) {
  auto* d = static_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  const auto f = static_cast<T>(factor);
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i] * f;
}

// dst = src * factor for float32 / float64.
void scaled_copy(void* dst, const void* src, std::size_t n, DType dt, double factor) {
  if (dt == DType::float32) return scaled_copy_as<float>(dst, src, n, factor);
  scaled_copy_as<double>(dst, src, n, factor);
}


}  // namespace

void scale_buffer(void* buf, std::size_t count, DType dtype, double factor) {
  if (factor == 1.0) return;
  switch (dtype) {
    case DType::float32: return scale_as<float>(buf, count, factor);
    case DType::float64: return scale_as<double>(buf, count, factor);
    case DType::int32: return scale_as<std::int32_t>(buf, count, factor);
    case DType::int64: return scale_as<std::int64_t>(buf, count, factor);
    case DType::uint8: return scale_as<std::uint8_t>(buf, count, factor);
    case DType::float16:
    case DType::bfloat16: {
      auto* h = static_cast<std::uint16_t*>(buf);
      for (std::size_t i = 0; i < count; ++i) {
        if (dtype == DType::float16)
          h[i] = float_to_half(static_cast<float>(half_to_float(float16_t{h[i]}) * factor)).bits;
        else
          h[i] = float_to_bfloat16(static_cast<float>(bfloat16_to_float(bfloat16_t{h[i]}) * factor)).bits;
      }
      return;
    }
    case DType::bool_: return;  // a mean of bools is their "any"
  }
}

bool same_on_every_rank(Communicator& comm, const std::vector<std::int64_t>& values) {
  // The values as max and as -min in one all-reduce of max: equal everywhere when max == min.
  std::vector<std::int64_t> buf = values;
  for (std::int64_t v : values) buf.push_back(-v);
  comm.all_reduce(buf.data(), buf.size(), DType::int64, Combine::max);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (buf[i] != -buf[i + values.size()]) return false;
  return true;
}

void check_same_everywhere(const std::shared_ptr<Communicator>& comm, const Tensor& value, const char* op) {
  if (comm->size() == 1) return;
  // {numel, dtype, rank, dims...}
  std::vector<std::int64_t> sig{value.size(), static_cast<std::int64_t>(value.dtype()), value.rank()};
  for (std::int64_t d : value.shape().dims()) sig.push_back(d);
  sig.resize(3 + 8, -1);  // ranks above 8 are compared by their element count only
  if (!same_on_every_rank(*comm, sig))
    throw ShapeError(fmt::format("{}: rank {} passes a {} tensor of shape {}, and another worker a different dtype "
                                   "or shape (every worker must pass the same)",
                                   op, comm->rank(), name(value.dtype()), value.shape().to_string()));
}

Tensor all_reduce_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, ReduceOp op,
                         std::function<double()> pre_scale) {
  const Tensor in = on_host(value);
  Tensor out;
  {
    DeviceScope host(Device::cpu());
    out = empty(in.shape(), in.dtype());
  }
  const Combine c = op == ReduceOp::max ? Combine::max : op == ReduceOp::min ? Combine::min : Combine::sum;
  run_kernel("all_reduce", static_cast<int>(op), in, out, [comm, op, c, pre_scale](const Tensor* t) {
    const auto n = static_cast<std::size_t>(t[0].size());
    const DType dt = t[0].dtype();
    const double factor = pre_scale && is_floating(dt) ? pre_scale() : 1.0;
    if (factor != 1.0 && (dt == DType::float32 || dt == DType::float64)) {
      scaled_copy(t[1].raw_data(), t[0].raw_data(), n, dt, factor);  // one pass instead of two
    } else {
      std::memcpy(t[1].raw_data(), t[0].raw_data(), n * itemsize(dt));
      scale_buffer(t[1].raw_data(), n, dt, factor);
    }
    comm->all_reduce(t[1].raw_data(), n, dt, c);
    if (op == ReduceOp::mean) scale_buffer(t[1].raw_data(), n, dt, 1.0 / comm->size());
  });
  return value.device().is_cpu() ? out : out.to(value.device());
}

Tensor weighted_all_reduce_sum(const std::shared_ptr<Communicator>& comm, const std::vector<Tensor>& parts,
                               const std::function<double()>& weight) {
  std::int64_t total = 0;
  for (const Tensor& p : parts) total += p.size();
  const DType dt = parts.at(0).dtype();
  if (!is_floating(dt) || is_half(dt)) throw DTypeError("weighted_all_reduce_sum: float32 or float64 parts only");
  Tensor bucket;
  {
    DeviceScope host(Device::cpu());
    bucket = empty(Shape({total}), dt);
  }
  // Each part copied into its place times this run's weight (one kernel per part: a kernel's
  // operands are fixed in number), then the bucket reduced where it is. The bucket is each
  // kernel's output; the reduction also lists it as its input, since it reads it.
  std::int64_t offset = 0;
  for (const Tensor& part : parts) {
    const Tensor src = on_host(part);
    if (src.dtype() != dt) throw DTypeError("weighted_all_reduce_sum: parts of different dtypes");
    run_kernel("bucket_fill", 0, src, bucket, [offset, weight](const Tensor* t) {
      auto* dst = static_cast<char*>(t[1].raw_data()) + static_cast<std::size_t>(offset) * itemsize(t[1].dtype());
      scaled_copy(dst, t[0].raw_data(), static_cast<std::size_t>(t[0].size()), t[0].dtype(), weight());
    });
    offset += part.size();
  }
  run_kernel("all_reduce", static_cast<int>(ReduceOp::sum), bucket, bucket, [comm](const Tensor* t) {
    comm->all_reduce(t[1].raw_data(), static_cast<std::size_t>(t[1].size()), t[1].dtype(), Combine::sum);
  });
  return parts[0].device().is_cpu() ? bucket : bucket.to(parts[0].device());
}

Tensor broadcast_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, int root) {
  const Tensor in = on_host(value);
  Tensor out;
  {
    DeviceScope host(Device::cpu());
    out = empty(in.shape(), in.dtype());
  }
  run_kernel("broadcast", root, in, out, [comm, root](const Tensor* t) {
    const std::size_t bytes = static_cast<std::size_t>(t[0].size()) * itemsize(t[0].dtype());
    std::memcpy(t[1].raw_data(), t[0].raw_data(), bytes);
    comm->broadcast(t[1].raw_data(), bytes, root);
  });
  return value.device().is_cpu() ? out : out.to(value.device());
}

}  // namespace keel::distribute::detail
