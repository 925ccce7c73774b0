#pragma once
// Collectives on tensors as backend kernel calls: eagerly they run at once; under keel::function
// (a traced train step) they are recorded, and every replay runs the collective again on that
// call's buffers. Internal to keel.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "distribute/communicator.hpp"
#include "keel/core/tensor.hpp"

namespace keel::distribute::detail {

// Whether every rank passes the same values (one small all-reduce; every rank must call it).
bool same_on_every_rank(Communicator& comm, const std::vector<std::int64_t>& values);

// ShapeError unless every rank passes a tensor of the same dtype and shape (one small
// all-reduce); `op` names the caller.
void check_same_everywhere(const std::shared_ptr<Communicator>& comm, const Tensor& value, const char* op);

// A new tensor: sum / mean / max / min over the ranks of value (mean = sum / size, integer
// division for integer dtypes). pre_scale, when given, is read each time the kernel runs and
// multiplies this rank's contribution first (floating dtypes only).
Tensor all_reduce_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, ReduceOp op,
                         std::function<double()> pre_scale = {});

// ---- a gradient bucket (float32 / float64), each step a kernel of its own ----

// bucket[offset, offset + part.size()) = weight() * part (flattened, on the host); weight is
// read each time the kernel runs.
void fill_bucket(const Tensor& bucket, std::int64_t offset, const Tensor& part, const std::function<double()>& weight);

// A bucket's all-reduce (sum, in place): run() at once (the transport's blocking algorithm), or
// in flight: start() begins it, progress() moves it on while other work runs, finish() waits for
// it. Each records a kernel, so that a traced step replays the same sequence with that call's
// buffer.
class BucketReduction {
 public:
  BucketReduction(std::shared_ptr<Communicator> comm, Tensor bucket);
  void run();
  void start();
  void progress();
  void finish();

 private:
  struct State;
  std::shared_ptr<State> state_;
  Tensor bucket_;
};


// A new tensor holding root's value.
Tensor broadcast_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, int root);

// buf[i] *= factor for count elements of a floating dtype, or buf[i] /= divisor (truncating)
// for integers when factor is 1 / divisor.
void scale_buffer(void* buf, std::size_t count, DType dtype, double factor);

}  // namespace keel::distribute::detail
