// The random ops' seam: src/cpu/ or cuda/ by the device of the input.
#include "backend/kernel_clock.hpp"
#include "backend/recorder.hpp"
#include "backend/random.hpp"

#include "core/dispatch.hpp"
#include "keel/core/error.hpp"
#include "cpu/dropout.hpp"
#include "cpu/random.hpp"
#include "cuda/indexing.hpp"

namespace keel::backend {

void dropout(const Tensor& x, const PhiloxDraw& draw, std::uint32_t threshold, double scale, const Tensor& y,
             const Tensor& mask) {
  if (KernelRecorder* r = recorder()) {
    if (draw.reserved_words == 0)  // seeded: the same mask on every call, as eagerly
      return r->kernel({"dropout"}, {&x}, {&y, &mask},
                       [=](const Tensor* t) { dropout(t[0], draw, threshold, scale, t[1], t[2]); });
    return r->random({"dropout"}, {&x}, {&y, &mask}, draw.reserved_words, draw.key, draw.counter,
                     [=](const Tensor* t, std::uint64_t key, std::uint64_t counter) {
                       PhiloxDraw d = draw;
                       d.key = key;
                       d.counter = counter;
                       dropout(t[0], d, threshold, scale, t[1], t[2]);
                     });
  }
  KernelClock clock;
  if (x.device().is_cuda()) {
    cuda::dropout(x.dtype(), x.raw_data(), x.size(), cuda::PhiloxDraw{draw.key, draw.counter, draw.stream}, threshold,
                  scale, y.raw_data(), mask.defined() ? mask.raw_data() : nullptr, x.device().index());
    return;
  }
  detail::dispatch_float(x.dtype(), "dropout", [&]<class T>() {
    cpu::dropout<T>(x.size(), x.data<T>(), draw.key, draw.counter, draw.stream, threshold, static_cast<T>(scale),
                    static_cast<T*>(y.raw_data()), mask.defined() ? static_cast<T*>(mask.raw_data()) : nullptr);
  });
}

std::int64_t random_blocks(kernel::Distribution d, DType dtype, std::int64_t n) {
  return cpu::random_blocks(d, dtype, n);
}

void random_fill(const kernel::RandomDraw& draw, std::uint64_t key, std::uint64_t counter, const Tensor& out) {
  if (KernelRecorder* r = recorder()) {
    const auto words = static_cast<std::uint64_t>(random_blocks(draw.distribution, out.dtype(), out.size())) * 4;
    return r->random({"random", int(draw.distribution)}, {}, {&out}, words, key, counter,
                     [=](const Tensor* t, std::uint64_t k, std::uint64_t c) { random_fill(draw, k, c, t[0]); });
  }
  KernelClock clock;
  // Factories compute on the host (then place the result), so that a seed gives the same
  // numbers on every device.
  if (out.device().is_cuda())
    throw DeviceError("random: the factories draw on the host; got an output on " + out.device().to_string());
  cpu::random_fill(draw, out.dtype(), key, counter, out.size(), out.raw_data());
}

}  // namespace keel::backend
