// dropout: inverted dropout like tf.nn.dropout. Each element is kept with probability 1 - rate
// and scaled by 1 / (1 - rate), so the expected value of every element is unchanged.
//
// The keep decision of element i is one 32-bit Philox word: with a seed, a pure function of
// (seed, i); without, of fresh counter space drawn from the global generator with
// random::reserve, so that set_seed makes unseeded dropout reproducible too. Because every
// element's word depends only on its index, the mask does not depend on the thread count.
// On a CUDA device a kernel computes the same words (cuda/random.cu), so a seed, or the global
// generator's state, drops the same elements on either device.
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/strided.hpp"
#include "cuda/indexing.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) with the
// counter layout documented in random.cpp: block b of a reservation {key, counter} is the
// Philox block of counter words {lo32(counter + b), hi32(counter + b), stream, 0} under the key
// {lo32(key), hi32(key)}. random.cpp keeps its generator private, so dropout carries this one;
// the two must produce the same words (test_dropout checks an unseeded mask against
// random::uniform after the same set_seed), which keeps "one global stream" true.
//
// kLanes consecutive blocks are computed together, lane by lane, so that the compiler turns the
// rounds into SIMD multiplies (a block at a time is a chain of dependent scalar multiplies and
// made dropout ~25x slower than relu).
constexpr std::int64_t kLanes = 16;

// On x86-64 an AVX2 clone, picked at load time (the library is built for baseline x86-64),
// does twice the 32x32->64-bit multiplies per instruction: about 1.4x faster dropout.
#if defined(__x86_64__) && defined(__GNUC__)
#define KEEL_DROPOUT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KEEL_DROPOUT_CLONES
#endif

// out[4 g + k] = word k of block counter0 + g, for g < kLanes.
KEEL_DROPOUT_CLONES void philox_blocks(std::uint64_t key, std::uint64_t counter0, std::uint32_t stream, std::uint32_t* out) {
  constexpr std::uint64_t kMulA = 0xD2511F53u, kMulB = 0xCD9E8D57u;
  constexpr std::uint32_t kBumpA = 0x9E3779B9u, kBumpB = 0xBB67AE85u;  // key schedule (Weyl)
  std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (std::int64_t g = 0; g < kLanes; ++g) {
    const std::uint64_t ctr = counter0 + static_cast<std::uint64_t>(g);
    c0[g] = static_cast<std::uint32_t>(ctr);
    c1[g] = static_cast<std::uint32_t>(ctr >> 32);
    c2[g] = stream;
    c3[g] = 0;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma omp simd
    for (std::int64_t g = 0; g < kLanes; ++g) {
      const std::uint64_t pa = kMulA * c0[g], pb = kMulB * c2[g];
      const std::uint32_t n0 = static_cast<std::uint32_t>(pb >> 32) ^ c1[g] ^ k0;
      const std::uint32_t n2 = static_cast<std::uint32_t>(pa >> 32) ^ c3[g] ^ k1;
      c1[g] = static_cast<std::uint32_t>(pb);
      c3[g] = static_cast<std::uint32_t>(pa);
      c0[g] = n0;
      c2[g] = n2;
    }
    k0 += kBumpA;
    k1 += kBumpB;
  }
  for (std::int64_t g = 0; g < kLanes; ++g) {
    out[4 * g] = c0[g];
    out[4 * g + 1] = c1[g];
    out[4 * g + 2] = c2[g];
    out[4 * g + 3] = c3[g];
  }
}

// Seeded dropout uses its own Philox stream word: random.cpp uses words 0-63 (first draws and
// truncated-normal redraws), so a dropout seed never replays the numbers that set_seed(seed)
// gives the global generator. ("drop" in ASCII.)
constexpr std::uint32_t kSeededStream = 0x64726f70u;

}  // namespace

Tensor dropout(const Tensor& x, double rate, std::optional<std::uint64_t> seed) {
  detail::check_defined(x, "dropout");
  if (!(rate >= 0 && rate < 1))  // also rejects NaN
    throw ValueError(fmt::format("dropout: rate must be in [0, 1), got {}", rate));
  detail::check_float(x, "dropout", "x");
  if (rate == 0) return x;

  const std::int64_t n = x.size();
  const std::int64_t blocks = (n + 3) / 4;  // four words (elements) per Philox block
  random::PhiloxState state{};
  std::uint32_t stream = 0;
  if (seed) {
    state = {*seed, 0};
    stream = kSeededStream;
  } else {
    state = random::reserve(static_cast<std::uint64_t>(n));
  }
  // Keep element i when its word w satisfies w / 2^32 >= rate, i.e. w >= ceil(rate * 2^32)
  // (tf.nn.dropout keeps where uniform >= rate). That bound is 2^32, above every word, for
  // rates within 2^-32 of 1: then nothing is kept.
  const auto bound = static_cast<std::uint64_t>(std::ceil(std::ldexp(rate, 32)));
  if (bound > 0xFFFFFFFFu) {  // everything is dropped
    Tensor y = zeros_like(x);
    if (autograd::recording())
      autograd::record("dropout", {x}, {y}, [](const Grads& g, const Needs&) { return Grads{zeros_like(g[0])}; });
    return y;
  }
  const auto threshold = static_cast<std::uint32_t>(bound);

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  // The mask (0 or 1 / (1 - rate), x's dtype) exists only for the tape: the backward is g * mask.
  Tensor mask;
  const bool keep_mask = autograd::recording();
  if (keep_mask) mask = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  if (x.device().is_cuda()) {
    // The same Philox words from the same {key, counter, stream} (cuda/philox.cuh): the same
    // elements are dropped on either device.
    cuda::dropout(x.dtype(), xc.raw_data(), n, cuda::PhiloxDraw{state.key, state.counter, stream}, threshold,
                  1.0 / (1.0 - rate), y.raw_data(), keep_mask ? mask.raw_data() : nullptr, x.device().index());
  } else {
    detail::dispatch_float(x.dtype(), "dropout", [&]<class T>() {
      using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;  // T's bits
      const T scale = static_cast<T>(1.0 / (1.0 - rate));
      const T* xp = xc.data<T>();
      T* yp = static_cast<T*>(y.raw_data());
      T* mp = keep_mask ? static_cast<T*>(mask.raw_data()) : nullptr;
      cpu::parallel_for(blocks, cpu::kParallelGrain / 4, [&](std::int64_t b0, std::int64_t b1) {
        std::uint32_t words[4 * kLanes];
        for (std::int64_t b = b0; b < b1; b += kLanes) {
          // Blocks past b1 in the last group are computed and ignored (each is a pure function
          // of its index, so this changes nothing).
          philox_blocks(state.key, state.counter + static_cast<std::uint64_t>(b), stream, words);
          const std::int64_t first = 4 * b;
          const std::int64_t count = std::min(4 * std::min(kLanes, b1 - b), n - first);
          const T* xs = xp + first;
          T* ys = yp + first;
          // Branch-free selects on the bits (the mask is random, so a branch would mispredict
          // half the time, and GCC will not vectorise a floating-point ?: under trapping math):
          // all-ones keeps the value, zero gives +0.0 -- also for a dropped NaN or Inf, as with
          // tf.where rather than x * mask.
#pragma omp simd
          for (std::int64_t k = 0; k < count; ++k) {
            const U keep = U(0) - static_cast<U>(words[k] >= threshold);
            ys[k] = std::bit_cast<T>(std::bit_cast<U>(xs[k] * scale) & keep);
          }
          if (mp) {
            T* ms = mp + first;
#pragma omp simd
            for (std::int64_t k = 0; k < count; ++k) {
              const U keep = U(0) - static_cast<U>(words[k] >= threshold);
              ms[k] = std::bit_cast<T>(std::bit_cast<U>(scale) & keep);
            }
          }
        }
      });
    });
  }

  if (keep_mask)
    autograd::record("dropout", {x}, {y}, [mask](const Grads& g, const Needs&) {
      return Grads{mul(g[0], mask)};  // dy/dx = mask / (1 - rate), stored pre-scaled
    }, {mask});
  return y;
}

}  // namespace keel
