// Collectives on tensors as recorded kernel calls (see collective_kernels.hpp).
#include "distribute/collective_kernels.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/recorder.hpp"
#include "core/kernel_kinds.hpp"
#include "core/tensor_util.hpp"
#include "distribute/hooks.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel::distribute::detail {

namespace {

std::atomic<std::int64_t> collective_ns{0};

// Adds the time until it ends to collective_ns.
struct CollectiveClock {
  std::chrono::steady_clock::time_point begin = std::chrono::steady_clock::now();
  ~CollectiveClock() {
    collective_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count();
  }
};

// Runs `run` on {in, out} now, or records it (and runs it) under a recorder.
void run_kernel(const char* family, int kind, const Tensor& in, const Tensor& out,
                const backend::KernelReplay& run) {
  if (backend::KernelRecorder* r = backend::recorder()) return r->kernel({family, kind}, {&in}, {&out}, run);
  const Tensor ops[2] = {in, out};
  run(ops);
}

// The float loops carry `omp simd`: at -O2 g++ 12 vectorises only loops that need no scalar
// remainder, so these ran an element at a time, at half of memcpy's speed on a 100 MB bucket.
template <class T>
void scale_as(void* buf, std::size_t n, double factor) {
  auto* p = static_cast<T*>(buf);
  if constexpr (std::is_floating_point_v<T>) {
    const auto f = static_cast<T>(factor);
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) p[i] *= f;
  } else {
    // Integers: a mean is the sum divided by the replicas, truncated (factor = 1 / replicas).
    const auto divisor = static_cast<T>(std::llround(1.0 / factor));
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / divisor);
  }
}

// Host copies of tensors that may live on a GPU: collectives read and write host memory.
Tensor on_host(const Tensor& t) { return (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous(); }

// Where a collective's buffer lives: in the transport's GPU memory when the value is there and
// floating (NCCL reduces it in place), else on the host.
Tensor staged(const Communicator& comm, const Tensor& t) {
  const Device d = comm.buffer_device();
  if (!d.is_cpu() && t.device() == d && is_floating(t.dtype())) return t.contiguous();
  return on_host(t);
}

// A new tensor of t's shape and dtype on t's device.
Tensor empty_beside(const Tensor& t) {
  DeviceScope here(t.device());
  return empty(t.shape(), t.dtype());
}

// dst = src * factor on a GPU (floating dtypes), by the backend's kernel on the device's stream.
void scale_on_device(const Tensor& dst, const Tensor& src, double factor) {
  backend::RecordedCall inside;  // part of the collective's recorded kernel, not one of its own
  if (factor == 1.0) {
    if (dst.impl() != src.impl()) backend::copy(src, dst, "all_reduce");
    return;
  }
  Tensor f;
  {
    DeviceScope here(dst.device());
    f = empty(Shape{}, dst.dtype());
  }
  backend::fill(f, factor);
  backend::binary(kernel::BinaryOp::mul, src, f, dst);
}

template <class T>
void scaled_copy_as(void* dst, const void* src, std::size_t n, double factor) {
  auto* __restrict d = static_cast<T*>(dst);
  const auto* __restrict s = static_cast<const T*>(src);
  const auto f = static_cast<T>(factor);
  if (f == T(1)) {
    std::memcpy(d, s, n * sizeof(T));
    return;
  }
#pragma omp simd
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

void Communicator::all_reduce_widened(void* buf, std::size_t count, DType dtype, Combine op) {
  std::vector<float> wide(count);
  auto* h = static_cast<std::uint16_t*>(buf);
  for (std::size_t i = 0; i < count; ++i)
    wide[i] = dtype == DType::float16 ? half_to_float(float16_t{h[i]}) : bfloat16_to_float(bfloat16_t{h[i]});
  all_reduce(wide.data(), count, DType::float32, op);
  for (std::size_t i = 0; i < count; ++i)
    h[i] = dtype == DType::float16 ? float_to_half(wide[i]).bits : float_to_bfloat16(wide[i]).bits;
}

void Communicator::all_reduce_into(const void* in, void* out, std::size_t count, DType dtype, Combine op) {
  std::memcpy(out, in, count * itemsize(dtype));
  all_reduce(out, count, dtype, op);
}

std::unique_ptr<PendingCollective> Communicator::start_all_reduce(void* buf, std::size_t count, DType dtype,
                                                                  Combine op) {
  struct Done final : PendingCollective {
    bool test() override { return true; }
    void wait() override {}
  };
  all_reduce(buf, count, dtype, op);
  return std::make_unique<Done>();
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
  const Tensor in = staged(*comm, value);
  const Tensor out = empty_beside(in);
  const Combine c = op == ReduceOp::max ? Combine::max : op == ReduceOp::min ? Combine::min : Combine::sum;
  run_kernel("all_reduce", static_cast<int>(op), in, out, [comm, op, c, pre_scale](const Tensor* t) {
    const auto n = static_cast<std::size_t>(t[0].size());
    const DType dt = t[0].dtype();
    const double factor = pre_scale && is_floating(dt) ? pre_scale() : 1.0;
    if (!t[0].device().is_cpu()) {  // a floating tensor in the transport's GPU memory
      if (factor == 1.0) {
        CollectiveClock clock;
        comm->all_reduce_into(t[0].raw_data(), t[1].raw_data(), n, dt, c);
      } else {
        scale_on_device(t[1], t[0], factor);
        CollectiveClock clock;
        comm->all_reduce(t[1].raw_data(), n, dt, c);
      }
      if (op == ReduceOp::mean) scale_on_device(t[1], t[1], 1.0 / comm->size());
      return;
    }
    if (factor == 1.0) {  // the transport reads the input itself (no copy of keel's)
      CollectiveClock clock;
      comm->all_reduce_into(t[0].raw_data(), t[1].raw_data(), n, dt, c);
    } else {
      if (dt == DType::float32 || dt == DType::float64) {
        scaled_copy(t[1].raw_data(), t[0].raw_data(), n, dt, factor);  // one pass instead of two
      } else {
        std::memcpy(t[1].raw_data(), t[0].raw_data(), n * itemsize(dt));
        scale_buffer(t[1].raw_data(), n, dt, factor);
      }
      CollectiveClock clock;
      comm->all_reduce(t[1].raw_data(), n, dt, c);
    }
    if (op == ReduceOp::mean) scale_buffer(t[1].raw_data(), n, dt, 1.0 / comm->size());
  });
  return value.device() == out.device() ? out : out.to(value.device());
}

double collective_seconds() { return static_cast<double>(collective_ns.load()) * 1e-9; }

void fill_bucket(const Tensor& bucket, std::int64_t offset, const Tensor& part, const std::function<double()>& weight) {
  Tensor src = part.dtype() == bucket.dtype() ? part : cast(part, bucket.dtype());
  src = (src.device() == bucket.device() ? src : src.to(bucket.device())).contiguous();
  run_kernel("bucket_fill", 0, src, bucket, [offset, weight](const Tensor* t) {
    CollectiveClock clock;
    if (!t[1].device().is_cpu()) {  // a bucket in the transport's GPU memory
      scale_on_device(keel::detail::make_view(t[1], t[0].shape(), {1}, t[1].offset() + offset), t[0], weight());
      return;
    }
    auto* dst = static_cast<char*>(t[1].raw_data()) + static_cast<std::size_t>(offset) * itemsize(t[1].dtype());
    scaled_copy(dst, t[0].raw_data(), static_cast<std::size_t>(t[0].size()), t[0].dtype(), weight());
  });
}

struct BucketReduction::State {
  std::shared_ptr<Communicator> comm;
  Tensor held;  // the buffer the collective writes, alive until it is done
  std::unique_ptr<PendingCollective> op;  // test() after completion is a no-op
};

BucketReduction::BucketReduction(std::shared_ptr<Communicator> comm, Tensor bucket)
    : state_(std::make_shared<State>()), bucket_(std::move(bucket)) {
  if (bucket_.dtype() != DType::float32 && bucket_.dtype() != DType::float64)
    throw DTypeError(fmt::format("BucketReduction: a {} bucket (float32 or float64 only)", name(bucket_.dtype())));
  state_->comm = std::move(comm);
}

// Each kernel lists the bucket as its input and its output: it reads and writes it (a traced
// step keeps it, and keeps its memory to itself, from the first fill to the last reader).
void BucketReduction::run() {
  run_kernel("all_reduce", static_cast<int>(ReduceOp::sum), bucket_, bucket_, [st = state_](const Tensor* t) {
    CollectiveClock clock;
    st->comm->all_reduce(t[1].raw_data(), static_cast<std::size_t>(t[1].size()), t[1].dtype(), Combine::sum);
  });
}

void BucketReduction::start() {
  run_kernel("all_reduce_start", 0, bucket_, bucket_, [st = state_](const Tensor* t) {
    CollectiveClock clock;
    if (st->op) st->op->wait();  // an earlier call's, left behind by an exception
    st->held = t[1];
    st->op = st->comm->start_all_reduce(t[1].raw_data(), static_cast<std::size_t>(t[1].size()), t[1].dtype(),
                                        Combine::sum);
  });
}

void BucketReduction::progress() {
  run_kernel("all_reduce_progress", 0, bucket_, bucket_, [st = state_](const Tensor*) {
    CollectiveClock clock;
    if (st->op) st->op->test();
  });
}

void BucketReduction::finish() {
  run_kernel("all_reduce_wait", 0, bucket_, bucket_, [st = state_](const Tensor*) {
    CollectiveClock clock;
    if (st->op) st->op->wait();
    st->op.reset();
    st->held = Tensor();
  });
}

Tensor broadcast_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, int root) {
  const Tensor in = staged(*comm, value);
  const Tensor out = empty_beside(in);
  run_kernel("broadcast", root, in, out, [comm, root](const Tensor* t) {
    const std::size_t bytes = static_cast<std::size_t>(t[0].size()) * itemsize(t[0].dtype());
    if (t[0].device().is_cpu()) {
      std::memcpy(t[1].raw_data(), t[0].raw_data(), bytes);
    } else {
      backend::RecordedCall inside;
      backend::copy(t[0], t[1], "broadcast");
    }
    comm->broadcast(t[1].raw_data(), bytes, root);
  });
  return value.device() == out.device() ? out : out.to(value.device());
}

}  // namespace keel::distribute::detail
