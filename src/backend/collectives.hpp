#pragma once
// The device side of keel::distribute's collectives: NCCL on GPU buffers (cuda/nccl.hpp: a
// communicator, its all-reduce and broadcast on keel's stream of the device, and the pending
// operations' deadlines). In a build without CUDA or without NCCL, nccl::built() is false and
// the rest throws (src/backend/cuda_unavailable.cpp, cuda/nccl.cu).
#include "cuda/nccl.hpp"

namespace keel::backend {

namespace nccl = cuda::nccl;

}  // namespace keel::backend
