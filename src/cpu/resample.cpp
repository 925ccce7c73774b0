// Linear resampling along one axis (cpu/resample.hpp). The forward takes the composite's
// operations in its order, (b - a), times the weight, plus a, so it gives the same bits as
// gather, sub, mul and add one after the other, in one pass instead of six.
#include "cpu/resample.hpp"

#include <algorithm>

#include "cpu/strided.hpp"

namespace keel::cpu {

template <class T>
void resample_linear(const T* x, std::int64_t outer, std::int64_t in, std::int64_t inner, const std::int64_t* lower,
                     const std::int64_t* upper, const T* weight, std::int64_t out, T* y) {
  // Output rows (o, j) split over the threads.
  parallel_for(outer * out, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(inner, 1)),
               [&](std::int64_t r0, std::int64_t r1) {
                 for (std::int64_t r = r0; r < r1; ++r) {
                   const std::int64_t o = r / out, j = r % out;
                   const T* a = x + (o * in + lower[j]) * inner;
                   const T* b = x + (o * in + upper[j]) * inner;
                   const T w = weight[j];
                   T* yr = y + r * inner;
                   for (std::int64_t c = 0; c < inner; ++c) yr[c] = a[c] + (b[c] - a[c]) * w;
                 }
               });
}

template <class T>
void resample_linear_backward(const T* dy, std::int64_t outer, std::int64_t in, std::int64_t inner,
                              const std::int64_t* lower, const std::int64_t* upper, const T* weight, std::int64_t out,
                              T* dx) {
  // Whole [in, inner] blocks per thread: the rows an output row adds to belong to its block.
  parallel_for(outer, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(out * inner, 1)),
               [&](std::int64_t o0, std::int64_t o1) {
                 for (std::int64_t o = o0; o < o1; ++o) {
                   T* d = dx + o * in * inner;
                   std::fill(d, d + in * inner, T(0));
                   for (std::int64_t j = 0; j < out; ++j) {
                     const T* g = dy + (o * out + j) * inner;
                     T* da = d + lower[j] * inner;
                     T* db = d + upper[j] * inner;
                     const T w = weight[j];
                     for (std::int64_t c = 0; c < inner; ++c) {
                       const T t = g[c] * w;
                       da[c] += g[c] - t;
                       db[c] += t;
                     }
                   }
                 }
               });
}

template void resample_linear<float>(const float*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*,
                                     const std::int64_t*, const float*, std::int64_t, float*);
template void resample_linear<double>(const double*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*,
                                      const std::int64_t*, const double*, std::int64_t, double*);
template void resample_linear_backward<float>(const float*, std::int64_t, std::int64_t, std::int64_t,
                                              const std::int64_t*, const std::int64_t*, const float*, std::int64_t,
                                              float*);
template void resample_linear_backward<double>(const double*, std::int64_t, std::int64_t, std::int64_t,
                                               const std::int64_t*, const std::int64_t*, const double*, std::int64_t,
                                               double*);

}  // namespace keel::cpu
