#pragma once
// The gradient all-reduce of a data-parallel train step, in buckets (PyTorch DDP's reducer):
// gradients are fused into buckets in the reverse order of the weights (the order the backward
// pass finishes them), and a bucket's all-reduce starts as soon as its last gradient is final,
// while the backward pass goes on. Internal to keel.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "distribute/collective_kernels.hpp"

namespace keel::distribute::detail {

class GradientBuckets {
 public:
  // What gradient i will be; an entry with an undefined dtype (present = false) is not reduced.
  struct Slot {
    Shape shape;
    DType dtype = DType::float32;
    bool present = true;
  };
  // Buckets of consecutive slots of one dtype, taken from the last slot to the first, of at most
  // bucket_bytes each (the first at most first_bucket_bytes, so that it starts early; a larger
  // gradient alone in its own). Each gradient is multiplied by weight() (read when the kernels
  // run) and the buckets summed over the ranks. A bucket whose gradients are final is started
  // (non-blocking) by the next progress() call and waited for in finish(); finish() reduces the
  // buckets not started yet at once, with the transport's blocking algorithm (faster, and
  // nothing is left to overlap). Without progress() calls every bucket is reduced that way.
  GradientBuckets(std::shared_ptr<Communicator> comm, std::vector<Slot> slots, std::size_t first_bucket_bytes,
                  std::size_t bucket_bytes, std::function<double()> weight);

  // Gradient i is final (undefined: no gradient; reduced as zeros).
  void ready(std::size_t i, const Tensor& grad);
  // Before each node of the backward pass: starts the buckets whose gradients are all final
  // (in plan order: every rank must start the same collectives in the same order), then moves
  // the all-reduces in flight on.
  void progress();
  // Reduces the buckets not started yet, waits for the others, and returns the reduced
  // gradients (undefined where the gradient was).
  std::vector<Tensor> finish();

  std::size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<std::size_t> members;  // in bucket order
    DType dtype = DType::float32;
    std::int64_t numel = 0;
    std::size_t waiting = 0;  // members not yet final
    Tensor flat;              // the reduced values, once started
    std::unique_ptr<BucketReduction> reduction;  // float32 / float64: in flight until finish()
    Device device = Device::cpu();               // where its gradients are
  };
  void launch(Bucket& b, bool in_flight);

  std::shared_ptr<Communicator> comm_;
  std::vector<Slot> slots_;
  std::function<double()> weight_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<Tensor> grads_;
  std::vector<char> defined_, final_;
  std::size_t complete_ = 0;  // the leading buckets whose gradients are all final
  std::size_t launched_ = 0;
};

}  // namespace keel::distribute::detail
