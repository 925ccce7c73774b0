// The bucketed gradient all-reduce (see gradient_buckets.hpp).
#include "distribute/gradient_buckets.hpp"

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel::distribute::detail {

GradientBuckets::GradientBuckets(std::shared_ptr<Communicator> comm, std::vector<Slot> slots,
                                 std::size_t first_bucket_bytes, std::size_t bucket_bytes,
                                 std::function<double()> weight)
    : comm_(std::move(comm)),
      slots_(std::move(slots)),
      weight_(std::move(weight)),
      bucket_of_(slots_.size(), 0),
      grads_(slots_.size()),
      defined_(slots_.size(), 0),
      final_(slots_.size(), 0) {
  std::size_t bytes = 0;
  for (std::size_t k = slots_.size(); k-- > 0;) {
    const Slot& s = slots_[k];
    if (!s.present) continue;
    const std::size_t b = static_cast<std::size_t>(s.shape.num_elements()) * itemsize(s.dtype);
    // The bucket being filled holds at most its cap (the first one's is smaller).
    const std::size_t limit = buckets_.size() == 1 ? first_bucket_bytes : bucket_bytes;
    if (buckets_.empty() || buckets_.back().dtype != s.dtype || bytes + b > limit) {
      buckets_.emplace_back();
      buckets_.back().dtype = s.dtype;
      bytes = 0;
    }
    Bucket& bk = buckets_.back();
    bk.members.push_back(k);
    bk.numel += s.shape.num_elements();
    ++bk.waiting;
    bytes += b;
    bucket_of_[k] = buckets_.size() - 1;
  }
}

void GradientBuckets::ready(std::size_t i, const Tensor& grad) {
  if (i >= slots_.size() || !slots_[i].present || final_[i]) return;
  if (grad.defined() && grad.shape() != slots_[i].shape)
    throw ShapeError(fmt::format("distribute: gradient {} has shape {}, its weight {}", i, grad.shape().to_string(),
                                 slots_[i].shape.to_string()));
  grads_[i] = grad;
  defined_[i] = grad.defined();
  final_[i] = 1;
  --buckets_[bucket_of_[i]].waiting;
  while (complete_ < buckets_.size() && buckets_[complete_].waiting == 0) ++complete_;
}

void GradientBuckets::launch(Bucket& b, bool in_flight) {
  for (std::size_t m : b.members)
    if (grads_[m].defined()) b.device = grads_[m].device();
  if (b.dtype == DType::float32 || b.dtype == DType::float64) {
    // In the transport's GPU memory when the gradients are there (NCCL), else on the host.
    const Device where = b.device == comm_->buffer_device() ? b.device : Device::cpu();
    DeviceScope in(where);
    b.flat = empty(Shape({b.numel}), b.dtype);
    std::int64_t offset = 0;
    for (std::size_t m : b.members) {
      const std::int64_t n = slots_[m].shape.num_elements();
      const Tensor part = grads_[m].defined() ? reshape(grads_[m], Shape({n})) : zeros(Shape({n}), b.dtype);
      fill_bucket(b.flat, offset, part, weight_);
      offset += n;
    }
    b.reduction = std::make_unique<BucketReduction>(comm_, b.flat);
    if (in_flight) {
      b.reduction->start();
    } else {
      b.reduction->run();
      b.reduction.reset();
    }
  } else {
    // Half gradients: concatenated and reduced in float32 by the general all-reduce, at once.
    std::vector<Tensor> parts;
    for (std::size_t m : b.members) {
      const std::int64_t n = slots_[m].shape.num_elements();
      parts.push_back(grads_[m].defined() ? reshape(grads_[m], Shape({n})) : zeros(Shape({n}), b.dtype));
    }
    b.flat = all_reduce_tensor(comm_, parts.size() == 1 ? parts[0] : concat(parts, 0), ReduceOp::sum, weight_);
  }
  for (std::size_t m : b.members) grads_[m] = Tensor();  // the bucket holds their values now
}

void GradientBuckets::progress() {
  while (launched_ < complete_) launch(buckets_[launched_++], /*in_flight=*/true);
  // Testing the latest collective moves every one in flight on (MPI progresses them all).
  for (std::size_t k = launched_; k-- > 0;) {
    if (buckets_[k].reduction) {
      buckets_[k].reduction->progress();
      return;
    }
  }
}

std::vector<Tensor> GradientBuckets::finish() {
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].present && !final_[i])
      throw ValueError(fmt::format("distribute: the gradient all-reduce finished before gradient {} was", i));
  while (launched_ < buckets_.size()) launch(buckets_[launched_++], /*in_flight=*/false);
  std::vector<Tensor> out(slots_.size());
  for (Bucket& b : buckets_) {
    if (b.reduction) {
      b.reduction->finish();
      b.reduction.reset();
    }
    if (b.flat.device() != b.device) b.flat = b.flat.to(b.device);
    std::int64_t offset = 0;
    for (std::size_t m : b.members) {
      const std::int64_t n = slots_[m].shape.num_elements();
      // A gradient undefined here stays undefined (the optimizer skips it); the bucket kept its
      // place as zeros, so that every rank's buckets line up.
      if (defined_[m]) out[m] = reshape(b.members.size() == 1 ? b.flat : slice(b.flat, {offset}, {n}), slots_[m].shape);
      offset += n;
    }
  }
  return out;
}

}  // namespace keel::distribute::detail
