#pragma once
// The backend seam of the ops with their own randomness: one entry per kernel, outputs
// allocated by the op, one switch on the device.
#include <cstdint>

#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::backend {

// Where a kernel's Philox-4x32-10 words come from: block b is the Philox block of counter words
// {lo32(counter + b), hi32(counter + b), stream, 0} under the key {lo32(key), hi32(key)}.
// reserved_words: how many words the op reserved from the current random stream for this draw
// (0 for a stateless, seeded draw): a traced function reserves that many afresh on each call.
struct PhiloxDraw {
  std::uint64_t key = 0;
  std::uint64_t counter = 0;
  std::uint32_t stream = 0;
  std::uint64_t reserved_words = 0;
};

// Inverted dropout of x (float32 or float64, contiguous): element i is kept when word i % 4 of
// block i / 4 is >= threshold; y = x * scale where kept, +0 where dropped, and mask (undefined:
// not computed) = scale or +0. y and mask: x's shape, dtype and device, contiguous. The CPU and
// CUDA kernels draw the same words, so they drop the same elements.
void dropout(const Tensor& x, const PhiloxDraw& draw, std::uint32_t threshold, double scale, const Tensor& y,
             const Tensor& mask);

// The random factories (uniform, normal, truncated_normal, uniform_int) fill a contiguous host
// tensor: random_blocks(...) Philox blocks are reserved (random::reserve) and their start
// handed to random_fill, which writes every element of out.
std::int64_t random_blocks(kernel::Distribution d, DType dtype, std::int64_t n);
void random_fill(const kernel::RandomDraw& draw, std::uint64_t key, std::uint64_t counter, const Tensor& out);

}  // namespace keel::backend
