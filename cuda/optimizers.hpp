#pragma once
// Fused optimizer updates on CUDA: one kernel launch updates one variable and its slots, where
// the update written with ops launches a dozen small kernels. Plain C++17 with no CUDA header:
// included by the backend layer (src/backend/optimizer.cpp) and cuda/optimizers.cu (nvcc).
// Builds without CUDA get stubs that throw DeviceError (src/backend/cuda_unavailable.cpp).
//
// The rules are the CPU's (core/optimizer_rules.hpp, one template for every path), computed
// without fused multiply-adds, so a float32 GPU update rounds as the CPU's does.
#include <cstdint>

#include "core/optimizer_rules.hpp"
#include "keel/core/dtype.hpp"

namespace keel::cuda {

using kernel::OptimizerParams;
using kernel::OptimizerRule;

// Updates n elements in place: the weight w, the slots slot[0..2] (nullptr where the rule has
// none), from the gradient g. All are contiguous arrays of `dtype` (float32 or float64, else
// DTypeError) on cuda:`device`, and none overlaps another. Queued on the device's stream.
void optimizer_update(DType dtype, const OptimizerParams& params, std::int64_t n, void* w,
                      const void* g, void* const slot[3], int device);

}  // namespace keel::cuda
