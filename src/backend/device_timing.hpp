#pragma once
// The profiler's device clock (cuda/device_timer.hpp): marks on keel's stream of a GPU and the
// device time between two of them. In a build without CUDA no GPU exists, so the profiler never
// asks (the calls throw; src/backend/cuda_unavailable.cpp).
#include "cuda/device_timer.hpp"

namespace keel::backend {

namespace timing = cuda::timing;

}  // namespace keel::backend
