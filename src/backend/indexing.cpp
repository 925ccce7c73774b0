// Indexing kernels: gather, unsorted_segment_sum and one_hot on either device.
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "backend/device.hpp"
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/indexing.hpp"
#include "cuda/indexing.hpp"

namespace keel::backend {

namespace {

// A scalar in dtype `dt`, its bytes in the low end of a 64-bit word (little-endian).
std::uint64_t encode_scalar(double v, DType dt) {
  unsigned char bytes[8] = {};
  detail::dispatch_all(dt, "encode", [&]<class U>() {
    const U u = detail::convert<U>(v);
    std::memcpy(bytes, &u, sizeof(U));
  });
  std::uint64_t bits = 0;
  std::memcpy(&bits, bytes, sizeof bits);
  return bits;
}

}  // namespace

BadIndex gather_rows(const Tensor& params, std::int64_t outer, std::int64_t dim, std::size_t row_bytes,
                     const Tensor& indices, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    // The traced run hands its result back to the op (which words the error); a replay, where
    // no op is there to do it, throws for a bad index itself.
    auto traced = std::make_shared<std::optional<BadIndex>>();
    const std::int64_t ints[] = {outer, dim, static_cast<std::int64_t>(row_bytes)};
    r->kernel({"gather", 0, 0, ints, 3}, {&params, &indices}, {&out}, [=](const Tensor* t) {
      const BadIndex b = gather_rows(t[0], outer, dim, row_bytes, t[1], t[2]);
      if (!traced->has_value()) {
        *traced = b;
      } else if (b.position >= 0) {
        throw ValueError(fmt::format("gather: index {} out of range [0, {}) at position {} of indices {}", b.value,
                                     dim, b.position, t[1].shape().to_string()));
      }
    });
    return **traced;
  }
  KernelClock clock;
  if (on_cuda(params)) {
    const cuda::BadIndex b = cuda::gather_rows(params.raw_data(), outer, dim, row_bytes, indices.raw_data(),
                                               indices.dtype(), indices.size(), out.raw_data(),
                                               params.device().index());
    return {b.position, b.value};
  }
  const cpu::BadIndex b = cpu::gather_rows(params.raw_data(), outer, dim, row_bytes, indices.raw_data(),
                                           indices.dtype(), indices.size(), out.raw_data());
  return {b.position, b.value};
}

SegmentIds segment_sum(const Tensor& data, std::int64_t inner, const Tensor& ids, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    auto traced = std::make_shared<std::optional<SegmentIds>>();
    r->kernel({"segment_sum"}, {&data, &ids}, {&out}, [=](const Tensor* t) {
      // data is [ids' shape..., inner...]: inner from the operands (a graph generalised over
      // a size replays at others).
      const std::int64_t n = t[1].size();
      const SegmentIds s = segment_sum(t[0], n > 0 ? t[0].size() / n : inner, t[1], t[2]);
      if (!traced->has_value()) {
        *traced = s;
      } else if (s.bad.position >= 0) {
        throw ValueError(fmt::format("unsorted_segment_sum: segment id {} out of range [0, {}) at position {} of "
                                     "segment_ids {}", s.bad.value, t[2].shape()[0], s.bad.position,
                                     t[1].shape().to_string()));
      } else if (s.has_negative != (*traced)->has_negative) {
        // The traced gradient was chosen for the traced ids (negative ones dropped or not).
        throw ValueError("unsorted_segment_sum: negative segment ids appear or vanish between calls of a traced "
                         "function; its gradient was traced for the other case");
      }
    });
    return **traced;
  }
  KernelClock clock;
  const std::int64_t num_segments = out.shape()[0];
  if (on_cuda(data)) {
    const cuda::SegmentIds r = cuda::segment_sum(data.dtype(), data.raw_data(), ids.size(), inner, ids.raw_data(),
                                                 ids.dtype(), num_segments, out.raw_data(), data.device().index());
    return {{r.bad.position, r.bad.value}, r.has_negative};
  }
  const cpu::SegmentIds r = cpu::segment_sum(data.dtype(), data.raw_data(), ids.size(), inner, ids.raw_data(),
                                             ids.dtype(), num_segments, out.raw_data());
  return {{r.bad.position, r.bad.value}, r.has_negative};
}

void one_hot(const Tensor& indices, std::int64_t depth, double on_value, double off_value, const Tensor& out) {
  if (KernelRecorder* r = recorder())
    return r->kernel({"one_hot"}, {&indices}, {&out},
                     [=](const Tensor* t) { one_hot(t[0], depth, on_value, off_value, t[1]); });
  KernelClock clock;
  const std::uint64_t on = encode_scalar(on_value, out.dtype()), off = encode_scalar(off_value, out.dtype());
  const std::size_t item = itemsize(out.dtype());
  if (on_cuda(indices))
    return cuda::one_hot(indices.raw_data(), indices.dtype(), indices.size(), depth, on, off, item, out.raw_data(),
                         indices.device().index());
  cpu::one_hot(indices.raw_data(), indices.dtype(), indices.size(), depth, on, off, item, out.raw_data());
}

}  // namespace keel::backend
