// dropout: inverted dropout like tf.nn.dropout. Each element is kept with probability 1 - rate
// and scaled by 1 / (1 - rate), so the expected value of every element is unchanged.
//
// The keep decision of element i is one 32-bit Philox word: with a seed, a pure function of
// (seed, i); without, of fresh counter space drawn from the global generator with
// random::reserve, so that set_seed makes unseeded dropout reproducible too. Because every
// element's word depends only on its index, the mask does not depend on the thread count.
// The kernels (src/cpu/dropout.cpp, cuda/random.cu, behind backend/random.hpp) compute the same
// words on either device, so a seed, or the global generator's state, drops the same elements.
#include "keel/ops/nn.hpp"

#include <cmath>
#include <cstdint>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/random.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel {

using autograd::Grads;
using autograd::Needs;

namespace {

// Seeded dropout uses its own Philox stream word: random.cpp uses words 0-63 (first draws and
// truncated-normal redraws), so a dropout seed never replays the numbers that set_seed(seed)
// gives the global generator. ("drop" in ASCII.)
constexpr std::uint32_t kSeededStream = 0x64726f70u;

}  // namespace

Tensor dropout(const Tensor& x, double rate, std::optional<std::uint64_t> seed) {
  // Half-precision shim (until the kernel takes float16/bfloat16): float32 inside, rounded once.
  if (x.defined() && is_half(x.dtype())) return cast(dropout(cast(x, DType::float32), rate, seed), x.dtype());
  detail::check_defined(x, "dropout");
  if (!(rate >= 0 && rate < 1))  // also rejects NaN
    throw ValueError(fmt::format("dropout: rate must be in [0, 1), got {}", rate));
  detail::check_float(x, "dropout", "x");
  if (rate == 0) return x;

  const std::int64_t n = x.size();
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
  // The CPU and CUDA kernels draw the same Philox words from the same {key, counter, stream}:
  // the same elements are dropped on either device.
  backend::dropout(xc, backend::PhiloxDraw{state.key, state.counter, stream, seed ? 0 : static_cast<std::uint64_t>(n)},
                   threshold, 1.0 / (1.0 - rate), y, mask);

  if (keep_mask)
    autograd::record("dropout", {x}, {y}, [mask](const Grads& g, const Needs&) {
      return Grads{mul(g[0], mask)};  // dy/dx = mask / (1 - rate), stored pre-scaled
    }, {mask});
  return y;
}

}  // namespace keel
