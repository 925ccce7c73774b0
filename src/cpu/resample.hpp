#pragma once
// Linear resampling along one axis (resize_bilinear's two passes): the CPU kernels behind
// backend/fused.hpp's resample_linear. x is [outer, in, inner], y [outer, out, inner], contiguous.
#include <cstdint>

namespace keel::cpu {

// y[o, j, :] = a + (b - a) * weight[j], a = x[o, lower[j], :], b = x[o, upper[j], :].
template <class T>
void resample_linear(const T* x, std::int64_t outer, std::int64_t in, std::int64_t inner, const std::int64_t* lower,
                     const std::int64_t* upper, const T* weight, std::int64_t out, T* y);
// Its gradient wrt x: dx zeroed, then per j in order dx[o, lower[j], :] += dy - dy * weight[j] and
// dx[o, upper[j], :] += dy * weight[j] (dy = dy[o, j, :]).
template <class T>
void resample_linear_backward(const T* dy, std::int64_t outer, std::int64_t in, std::int64_t inner,
                              const std::int64_t* lower, const std::int64_t* upper, const T* weight, std::int64_t out,
                              T* dx);

}  // namespace keel::cpu
