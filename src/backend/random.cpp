// The random ops' seam: src/cpu/ or cuda/ by the device of the input.
#include "backend/random.hpp"

#include "core/dispatch.hpp"
#include "cpu/dropout.hpp"
#include "cuda/indexing.hpp"

namespace keel::backend {

void dropout(const Tensor& x, const PhiloxDraw& draw, std::uint32_t threshold, double scale, const Tensor& y,
             const Tensor& mask) {
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

}  // namespace keel::backend
