// dropout on the GPU (see cuda/indexing.hpp): the keep mask is the CPU's, word for word. Each
// thread computes one Philox block (cuda/philox.cuh) and decides the four elements it covers,
// exactly as src/cpu/dropout.cpp does on the host, so a seed (or the global generator's state)
// drops the same elements on either device.
#include <cstdint>
#include <string>

#include "cuda/element_types.cuh"
#include "cuda/indexing.hpp"
#include "cuda/philox.cuh"

namespace keel::cuda {

namespace {

using elem::thread_count;
using elem::thread_index;

// y[i] = x[i] * scale when word i % 4 of block i / 4 is >= threshold, else +0 (also for a
// dropped NaN or Inf, as on the CPU); mask[i] = scale or +0.
template <class T>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(const T* x, T* y, T* mask, std::int64_t n, std::int64_t blocks, std::uint64_t key,
                   std::uint64_t counter, std::uint32_t stream_word, std::uint32_t threshold, T scale) {
  for (std::int64_t b = thread_index(), step = thread_count(); b < blocks; b += step) {
    const philox::Words w = philox::block(key, counter, static_cast<std::uint64_t>(b), stream_word);
    const std::int64_t first = 4 * b;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const std::int64_t i = first + k;
      if (i < n) {
        const bool keep = w.w[k] >= threshold;
        y[i] = keep ? x[i] * scale : T(0);
        if (mask) mask[i] = keep ? scale : T(0);
      }
    }
  }
}

template <class T>
void launch_dropout(const void* x, std::int64_t n, const PhiloxDraw& d, std::uint32_t threshold,
                    double scale, void* y, void* mask, int device) {
  const std::int64_t blocks = (n + 3) / 4;  // four words (elements) per Philox block
  dropout_kernel<T><<<blocks_for(blocks, device), kThreads, 0, stream(device)>>>(
      static_cast<const T*>(x), static_cast<T*>(y), static_cast<T*>(mask), n, blocks, d.key,
      d.counter, d.stream, threshold, static_cast<T>(scale));  // rounded as the CPU rounds it
  check_launch("dropout kernel", device);
}

}  // namespace

void dropout(DType dtype, const void* x, std::int64_t n, const PhiloxDraw& draw,
             std::uint32_t threshold, double scale, void* y, void* mask, int device) {
  if (dtype != DType::float32 && dtype != DType::float64)
    throw DTypeError("dropout: unsupported dtype " + std::string(name(dtype)) +
                     " (expected float32 or float64)");
  if (n <= 0) return;
  use_device(device);
  if (dtype == DType::float32)
    launch_dropout<float>(x, n, draw, threshold, scale, y, mask, device);
  else
    launch_dropout<double>(x, n, draw, threshold, scale, y, mask, device);
}

}  // namespace keel::cuda
