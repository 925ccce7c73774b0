#include "keel/core/tensor.hpp"

#include <fmt/core.h>

#include "core/dispatch.hpp"
#include "autograd/record.hpp"
#include "core/cuda_view.hpp"
#include "core/tensor_util.hpp"
#include "cpu/copy.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

void Tensor::throw_undefined() {
  throw ValueError("Tensor: operation on an undefined tensor (default-constructed or moved-from)");
}

Tensor Tensor::contiguous() const {
  return is_contiguous() ? *this : detail::contiguous_copy(*this);
}

Tensor Tensor::to(Device device) const {
  const Device from = this->device();
  if (device == from) return *this;
  Tensor out = detail::transfer(*this, device);
  // Differentiable, as tf.identity across devices: the gradient goes back where x lives.
  if (autograd::recording())
    autograd::record("to", {*this}, {out}, [from](const autograd::Grads& g, const autograd::Needs&) {
      return autograd::Grads{g[0].to(from)};
    });
  return out;
}

Tensor Tensor::astype(DType dtype) const { return cast(*this, dtype); }

Tensor Tensor::reshape(Shape shape) const { return keel::reshape(*this, std::move(shape)); }

Tensor Tensor::operator[](std::int64_t i) const {
  if (rank() == 0) throw ShapeError("operator[]: cannot index a scalar (shape [])");
  const std::int64_t n = shape()[0];
  const std::int64_t j = i < 0 ? i + n : i;
  if (j < 0 || j >= n)
    throw ValueError(fmt::format("operator[]: index {} is out of range for shape {}", i, shape().to_string()));
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rank()), 0), size(shape().dims());
  begin[0] = j;
  size[0] = 1;
  return squeeze(slice(*this, begin, size), {0});
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = device().is_cpu() ? *this : to(Device::cpu());
  host = host.contiguous();
  const auto n = host.size();
  std::vector<T> out(static_cast<std::size_t>(n));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> tmp(static_cast<std::size_t>(n));
    cpu::convert(host.dtype(), host.raw_data(), DType::bool_, tmp.data(), n);
    for (std::size_t i = 0; i < tmp.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    cpu::convert(host.dtype(), host.raw_data(), dtype_of<T>, out.data(), n);
  }
  return out;
}

template <class T>
T Tensor::item() const {
  if (size() != 1)
    throw ValueError(fmt::format("item: expected a tensor with one element, got shape {} ({} elements)",
                                 shape().to_string(), size()));
  return to_vector<T>()[0];
}

#define KEEL_INSTANTIATE_ACCESSORS(T)                  \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
KEEL_INSTANTIATE_ACCESSORS(float)
KEEL_INSTANTIATE_ACCESSORS(double)
KEEL_INSTANTIATE_ACCESSORS(std::int32_t)
KEEL_INSTANTIATE_ACCESSORS(std::int64_t)
KEEL_INSTANTIATE_ACCESSORS(std::uint8_t)
KEEL_INSTANTIATE_ACCESSORS(bool)
KEEL_INSTANTIATE_ACCESSORS(float16_t)
KEEL_INSTANTIATE_ACCESSORS(bfloat16_t)
#undef KEEL_INSTANTIATE_ACCESSORS

}  // namespace keel
