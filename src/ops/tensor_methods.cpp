// Tensor's methods that compute: each is an op (or the backend's copy) under a method's name.
#include "keel/core/tensor.hpp"

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/shape.hpp"

namespace keel {

Tensor Tensor::contiguous() const {
  return backend::contiguous(*this);
}

Tensor Tensor::to(Device device) const {
  const Device from = this->device();
  if (device == from) return *this;
  Tensor out = backend::to_device(*this, device);
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
  return squeeze(keel::slice(*this, begin, size), {0});
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  const auto n = static_cast<std::size_t>(size());
  std::vector<T> out(n);
  if constexpr (std::is_same_v<T, bool>) {
    // Read bool bytes as bytes: a bool object holding another value would be undefined behaviour.
    std::vector<std::uint8_t> bytes(n);
    backend::read_into(*this, DType::bool_, bytes.data());
    for (std::size_t i = 0; i < n; ++i) out[i] = bytes[i] != 0;
  } else {
    backend::read_into(*this, dtype_of<T>, out.data());
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
