#pragma once
// Collectives on tensors as backend kernel calls: eagerly they run at once; under keel::function
// (a traced train step) they are recorded, and every replay runs the collective again on that
// call's buffers. Internal to keel.
#include <functional>
#include <memory>

#include "distribute/communicator.hpp"
#include "keel/core/tensor.hpp"

namespace keel::distribute::detail {

// ShapeError unless every rank passes a tensor of the same dtype and shape (one small
// all-reduce); `op` names the caller.
void check_same_everywhere(const std::shared_ptr<Communicator>& comm, const Tensor& value, const char* op);

// A new tensor: sum / mean / max / min over the ranks of value (mean = sum / size, integer
// division for integer dtypes). pre_scale, when given, is read each time the kernel runs and
// multiplies this rank's contribution first (floating dtypes only).
Tensor all_reduce_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, ReduceOp op,
                         std::function<double()> pre_scale = {});

// A new tensor holding root's value.
Tensor broadcast_tensor(const std::shared_ptr<Communicator>& comm, const Tensor& value, int root);

// buf[i] *= factor for count elements of a floating dtype, or buf[i] /= divisor (truncating)
// for integers when factor is 1 / divisor.
void scale_buffer(void* buf, std::size_t count, DType dtype, double factor);

}  // namespace keel::distribute::detail
