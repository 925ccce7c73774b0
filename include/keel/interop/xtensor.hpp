#pragma once
// Opt-in bridge between keel tensors and xtensor, for users whose data lives in xtensor. Never
// included by <keel/keel.hpp>: a target that includes it links xtensor itself
// (find_package(xtensor)). It includes only keel headers that also compile as C++17, so it may
// be used from translation units built in C++17 (xtensor 0.24's reducers need that mode with
// g++ 12, see the README).
//
//   auto v = keel::interop::adapt<float>(t);          // read-only xtensor view, no copy
//   keel::Tensor u = keel::interop::from_xtensor(xt::exp(v) + 1.0f);   // one copy
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xexpression.hpp>

#include "keel/core/device.hpp"
#include "keel/core/dtype.hpp"
#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"
#include "keel/ops/creation.hpp"

namespace keel::interop {

// A read-only xtensor adaptor over a CPU tensor's elements with its shape and strides (views
// included: a transpose or a strided slice is adapted as it is, with no copy). T must be the
// tensor's element type (DTypeError otherwise); a GPU tensor is a DeviceError (copy it with
// .to(keel::Device::cpu()) first); negative strides are a ValueError. The adaptor does not own
// the memory: keep the tensor alive while it is used.
template <class T>
auto adapt(const Tensor& t) {
  if (!t.defined()) throw ValueError("interop::adapt: the tensor is undefined");
  if (!t.device().is_cpu())
    throw DeviceError("interop::adapt: the tensor lives on " + t.device().to_string() +
                      "; xtensor reads host memory (copy it with .to(keel::Device::cpu()))");
  if (t.dtype() != dtype_of<T>)
    throw DTypeError(std::string("interop::adapt: the tensor holds ") + std::string(name(t.dtype())) + ", not " +
                     std::string(name(dtype_of<T>)));
  std::vector<std::size_t> shape;
  std::vector<std::ptrdiff_t> strides;
  for (std::int64_t d = 0; d < t.rank(); ++d) {
    const std::int64_t s = t.strides()[static_cast<std::size_t>(d)];
    if (s < 0) throw ValueError("interop::adapt: negative strides (a reversed view) cannot be adapted; copy it first");
    shape.push_back(static_cast<std::size_t>(t.shape()[d]));
    strides.push_back(static_cast<std::ptrdiff_t>(s));
  }
  // xtensor sizes a strided adaptor by its element count (it checks that count, not the span the
  // strides reach), and never copies or frees the memory with no_ownership.
  const auto count = static_cast<std::size_t>(t.size());
  return xt::adapt(t.data<T>(), count, xt::no_ownership(), shape, strides);
}

// A new CPU tensor with the values of an xtensor expression (evaluated once, row-major), its
// shape and the dtype of its value type (float, double, int32_t, int64_t, uint8_t or bool).
template <class E>
Tensor from_xtensor(const xt::xexpression<E>& expression) {
  using V = std::decay_t<typename E::value_type>;
  const xt::xarray<V, xt::layout_type::row_major> values = expression.derived_cast();
  std::vector<std::int64_t> dims;
  for (std::size_t d : values.shape()) dims.push_back(static_cast<std::int64_t>(d));
  DeviceScope on_host(Device::cpu());
  Tensor t = keel::empty(Shape(dims), dtype_of<V>);
  V* out = static_cast<V*>(t.raw_data());
  std::size_t i = 0;
  for (const V& v : values) out[i++] = v;
  return t;
}

}  // namespace keel::interop
