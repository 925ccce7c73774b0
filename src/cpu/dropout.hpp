#pragma once
// dropout's CPU kernel: the keep mask from Philox-4x32-10 words, as cuda/random.cu draws them.
#include <cstdint>

namespace keel::cpu {

// Element i is kept when word i % 4 of Philox block counter + i / 4 (under `key`, counter word
// 2 = stream) is >= threshold: y[i] = x[i] * scale there, +0 where dropped (also for a dropped
// NaN or Inf); mask (or null) = scale or +0. float or double, contiguous. The words depend only
// on the element's index, so the result does not depend on the thread count.
template <class T>
void dropout(std::int64_t n, const T* x, std::uint64_t key, std::uint64_t counter, std::uint32_t stream,
             std::uint32_t threshold, T scale, T* y, T* mask);

}  // namespace keel::cpu
