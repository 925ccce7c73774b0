// dropout's CPU kernel.
#include "cpu/dropout.hpp"

#include <algorithm>
#include <cstdint>

#include "cpu/kernels.hpp"
#include "cpu/strided.hpp"

namespace keel::cpu {

// Block b of the reservation {key, counter} in `stream` gives elements 4b..4b+3 their words (the
// kernel table's philox_words), the words random::uniform draws from the same reservation
// (test_dropout checks an unseeded mask against random::uniform after the same set_seed), which
// keeps "one global stream" true.
template <class T>
void dropout(std::int64_t n, const T* x, std::uint64_t key, std::uint64_t counter, std::uint32_t stream,
             std::uint32_t threshold, T scale, T* y, T* mask) {
  const std::int64_t blocks = (n + 3) / 4;  // four words (elements) per Philox block
  const T* xp = x;
  T* yp = y;
  T* mp = mask;
  const auto philox_words = simd().philox_words;
  const auto select = typed_kernels<T>().dropout_select;
  const bool streaming = x != y && static_cast<std::size_t>(n) * sizeof(T) >= kStreamOutputBytes;
  parallel_for(blocks, kParallelGrain / 4, [&](std::int64_t b0, std::int64_t b1) {
    std::uint32_t words[4 * kPhiloxChunk];
    for (std::int64_t b = b0; b < b1; b += kPhiloxChunk) {
      const std::int64_t chunk = std::min(kPhiloxChunk, b1 - b);
      philox_words(key, counter + static_cast<std::uint64_t>(b), stream, chunk, words);
      const std::int64_t first = 4 * b;
      const std::int64_t count = std::min(4 * chunk, n - first);
      select(words, threshold, xp + first, scale, yp + first, mp == nullptr ? nullptr : mp + first, count,
             streaming);
    }
  });
}

template void dropout<float>(std::int64_t, const float*, std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t,
                             float, float*, float*);
template void dropout<double>(std::int64_t, const double*, std::uint64_t, std::uint64_t, std::uint32_t,
                              std::uint32_t, double, double*, double*);

}  // namespace keel::cpu
