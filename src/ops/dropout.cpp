// dropout: inverted dropout like tf.nn.dropout. Each element is kept with probability 1 - rate
// and scaled by 1 / (1 - rate), so the expected value of every element is unchanged.
//
// The keep decision of element i is one 32-bit Philox word: with a seed, a pure function of
// (seed, i); without, of fresh counter space drawn from the global generator with
// random::reserve, so that set_seed makes unseeded dropout reproducible too. Because every
// element's word depends only on its index, the mask does not depend on the thread count.
#include "keel/ops/nn.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"
#include "cpu/strided.hpp"
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
using Words = std::array<std::uint32_t, 4>;

inline Words philox_block(std::uint64_t key, std::uint64_t counter, std::uint32_t stream) {
  constexpr std::uint64_t kMulA = 0xD2511F53u, kMulB = 0xCD9E8D57u;
  constexpr std::uint32_t kBumpA = 0x9E3779B9u, kBumpB = 0xBB67AE85u;  // key schedule (Weyl)
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = stream, c3 = 0;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t pa = kMulA * c0, pb = kMulB * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(pb >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(pa >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(pb);
    c3 = static_cast<std::uint32_t>(pa);
    c0 = n0;
    c2 = n2;
    k0 += kBumpA;
    k1 += kBumpB;
  }
  return {c0, c1, c2, c3};
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
  if (x.dtype() != DType::float32 && x.dtype() != DType::float64)
    throw DTypeError(fmt::format("dropout: x must be float32 or float64, got {} {}", name(x.dtype()),
                                 x.shape().to_string()));
  if (!x.device().is_cpu())
    throw DeviceError(fmt::format("dropout: no kernel for device {} yet", x.device().to_string()));
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
  // (tf.nn.dropout keeps where uniform >= rate). 64-bit, as the bound can be 2^32 (never keep).
  const auto threshold = static_cast<std::uint64_t>(std::ceil(std::ldexp(rate, 32)));

  const Tensor xc = x.contiguous();
  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  // The mask (0 or 1 / (1 - rate), x's dtype) exists only for the tape: the backward is g * mask.
  Tensor mask;
  const bool keep_mask = autograd::recording();
  if (keep_mask) mask = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  detail::dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    const T scale = static_cast<T>(1.0 / (1.0 - rate));
    const T* xp = xc.data<T>();
    T* yp = static_cast<T*>(y.raw_data());
    T* mp = keep_mask ? static_cast<T*>(mask.raw_data()) : nullptr;
    cpu::parallel_for(blocks, cpu::kParallelGrain / 4, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {
        const Words w = philox_block(state.key, state.counter + static_cast<std::uint64_t>(b), stream);
        const std::int64_t end = std::min<std::int64_t>(4, n - 4 * b);
        for (std::int64_t k = 0; k < end; ++k) {
          const std::int64_t i = 4 * b + k;
          const bool keep = w[static_cast<std::size_t>(k)] >= threshold;
          // A select, not x * mask: a dropped NaN or Inf becomes 0 (as tf.where does).
          yp[i] = keep ? xp[i] * scale : T(0);
          if (mp) mp[i] = keep ? scale : T(0);
        }
      }
    });
  });

  if (keep_mask)
    autograd::record("dropout", {x}, {y}, [mask](const Grads& g, const Needs&) {
      return Grads{mul(g[0], mask)};  // dy/dx = mask / (1 - rate), stored pre-scaled
    }, {mask});
  return y;
}

}  // namespace keel
