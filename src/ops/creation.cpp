// Factories: constants, filled tensors, ranges, on default_device(). Filled tensors are filled
// where they live; the others are computed on the host and copied (see place_on_default).
// (namespace random lives in random.cpp.)
#include "keel/ops/creation.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "core/dispatch.hpp"
#include "core/tensor_util.hpp"

namespace keel {

namespace {

// Writes f(i) (a double) for i in [0, n) converted to t's dtype.
template <class F>
void generate(Tensor& t, const char* op, F&& f) {
  const std::int64_t n = t.size();
  detail::dispatch_all(t.dtype(), op, [&]<class U>() {
    U* p = static_cast<U*>(t.raw_data());
    for (std::int64_t i = 0; i < n; ++i) p[i] = detail::convert<U>(f(i));
  });
}

}  // namespace

template <class T>
Tensor constant(const std::vector<T>& values, Shape shape, DType dtype) {
  detail::check_dims(shape, "constant");
  const auto n = static_cast<std::int64_t>(values.size());
  if (n != shape.num_elements())
    throw ShapeError(fmt::format("constant: {} values given for shape {} ({} elements)", n,
                                 shape.to_string(), shape.num_elements()));
  Tensor out = detail::factory_output(shape, dtype, "constant");
  if constexpr (!std::is_same_v<T, bool>) {
    // std::vector<bool> has no contiguous data(); every other T can be copied as bytes.
    if (dtype == dtype_of<T>) {
      if (n > 0) std::memcpy(out.raw_data(), values.data(), static_cast<std::size_t>(n) * sizeof(T));
      return backend::place_on_default(out);
    }
  }
  detail::dispatch_all(dtype, "constant", [&]<class U>() {
    U* p = static_cast<U*>(out.raw_data());
    for (std::int64_t i = 0; i < n; ++i) p[i] = detail::convert<U>(static_cast<T>(values[static_cast<std::size_t>(i)]));
  });
  return backend::place_on_default(out);
}

template Tensor constant<float>(const std::vector<float>&, Shape, DType);
template Tensor constant<double>(const std::vector<double>&, Shape, DType);
template Tensor constant<std::int32_t>(const std::vector<std::int32_t>&, Shape, DType);
template Tensor constant<std::int64_t>(const std::vector<std::int64_t>&, Shape, DType);
template Tensor constant<std::uint8_t>(const std::vector<std::uint8_t>&, Shape, DType);
template Tensor constant<bool>(const std::vector<bool>&, Shape, DType);

namespace {
// A tensor on the default device, filled there.
Tensor filled(const Shape& shape, DType dtype, double value, const char* op) {
  detail::check_dims(shape, op);
  Tensor out = detail::empty_tensor(shape, dtype, default_device(), op);
  backend::fill(out, value);
  return out;
}
}  // namespace

Tensor constant(double scalar, DType dtype) { return filled(Shape{}, dtype, scalar, "constant"); }

Tensor empty(Shape shape, DType dtype) {
  detail::check_dims(shape, "empty");
  return detail::empty_tensor(shape, dtype, default_device(), "empty");
}

Tensor zeros(Shape shape, DType dtype) { return filled(shape, dtype, 0.0, "zeros"); }
Tensor ones(Shape shape, DType dtype) { return filled(shape, dtype, 1.0, "ones"); }
Tensor full(Shape shape, double value, DType dtype) { return filled(shape, dtype, value, "full"); }

namespace {
Tensor filled_like(const Tensor& x, double value, const char* op) {
  detail::check_defined(x, op);
  Tensor out = detail::empty_tensor(x.shape(), x.dtype(), x.device(), op);
  backend::fill(out, value);
  return out;
}
}  // namespace

Tensor zeros_like(const Tensor& x) { return filled_like(x, 0.0, "zeros_like"); }
Tensor ones_like(const Tensor& x) { return filled_like(x, 1.0, "ones_like"); }
Tensor full_like(const Tensor& x, double value) { return filled_like(x, value, "full_like"); }

Tensor arange(double stop) { return arange(0.0, stop, 1.0, DType::float32); }

Tensor arange(double start, double stop, double step, DType dtype) {
  detail::check_finite(start, "arange", "start");
  detail::check_finite(stop, "arange", "stop");
  detail::check_finite(step, "arange", "step");
  if (dtype == DType::bool_) detail::unsupported_dtype("arange", dtype, "a numeric dtype");
  if (is_integral(dtype)) {
    // tf.range casts start, limit and delta to the requested dtype before counting.
    start = std::trunc(start);
    stop = std::trunc(stop);
    step = std::trunc(step);
  }
  if (step == 0)
    throw ValueError(fmt::format("arange: step must not be zero (start {}, stop {}, dtype {})", start, stop,
                                 name(dtype)));
  const double count = std::ceil((stop - start) / step);
  if (count > 9.0e15)
    throw ValueError(fmt::format("arange: range({}, {}, {}) has too many elements", start, stop, step));
  const auto n = count > 0 ? static_cast<std::int64_t>(count) : std::int64_t{0};
  Tensor out = detail::factory_output(Shape{n}, dtype, "arange");
  if (is_integral(dtype)) {
    const auto s = static_cast<std::int64_t>(start), d = static_cast<std::int64_t>(step);
    detail::dispatch_all(dtype, "arange", [&]<class U>() {
      U* p = static_cast<U*>(out.raw_data());
      if constexpr (std::is_arithmetic_v<U>) for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<U>(s + i * d);
    });
  } else {
    generate(out, "arange", [&](std::int64_t i) { return start + static_cast<double>(i) * step; });
  }
  return backend::place_on_default(out);
}

Tensor linspace(double start, double stop, std::int64_t num, DType dtype) {
  detail::check_finite(start, "linspace", "start");
  detail::check_finite(stop, "linspace", "stop");
  if (num < 0) throw ValueError(fmt::format("linspace: num must be >= 0, got {}", num));
  Tensor out = detail::factory_output(Shape{num}, dtype, "linspace");
  const double step = num > 1 ? (stop - start) / static_cast<double>(num - 1) : 0.0;
  // The last value is stop itself, not start + (num-1)*step with its rounding error.
  generate(out, "linspace", [&](std::int64_t i) {
    return i == num - 1 && num > 1 ? stop : start + static_cast<double>(i) * step;
  });
  return backend::place_on_default(out);
}

Tensor eye(std::int64_t n, DType dtype) {
  if (n < 0) throw ValueError(fmt::format("eye: n must be >= 0, got {}", n));
  Tensor out = detail::factory_output(Shape{n, n}, dtype, "eye");
  backend::fill(out, 0.0);
  detail::dispatch_all(dtype, "eye", [&]<class U>() {
    U* p = static_cast<U*>(out.raw_data());
    const U one = detail::convert<U>(1.0);
    for (std::int64_t i = 0; i < n; ++i) p[i * n + i] = one;
  });
  return backend::place_on_default(out);
}

}  // namespace keel
