#pragma once
// Helpers shared by ops: allocating outputs, making views, checking arguments.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// A new contiguous tensor with uninitialised memory. `op` names the op in the errors: a
// ValueError when the shape's element or byte count overflows 64 bits, a
// ResourceExhaustedError with the bytes requested when the memory cannot be had. A shape passed
// as a temporary (or moved) becomes the tensor's own, without a copy.
Tensor empty_tensor(Shape shape, DType dtype, Device device, const char* op = "allocate");

// Runs f() for the composite op `op`: an error raised by an op inside it gets `op` in front of
// its message, keeping its type, so that it names what the user called ("softmax: reduce_max:
// ...") rather than only an internal step. Costs nothing unless something throws.
template <class F>
auto in_op(const char* op, F&& f) {
  const auto prefixed = [op](const Error& e) {
    const std::string what = e.what();
    return what.rfind(std::string(op) + ":", 0) == 0 ? what : std::string(op) + ": " + what;
  };
  try {
    return f();
  } catch (const ShapeError& e) {
    throw ShapeError(prefixed(e));
  } catch (const DTypeError& e) {
    throw DTypeError(prefixed(e));
  } catch (const ValueError& e) {
    throw ValueError(prefixed(e));
  } catch (const DeviceError& e) {
    throw DeviceError(prefixed(e));
  } catch (const ResourceExhaustedError& e) {
    throw ResourceExhaustedError(prefixed(e));
  }
}

// Size arithmetic that cannot wrap: ValueError "op: <what> overflows ..." instead.
std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* op, const std::string& what);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op, const std::string& what);
// The element count of a shape, with the op named when it overflows.
std::int64_t checked_elements(const Shape& shape, const char* op);
// A view of base's storage.
Tensor make_view(const Tensor& base, Shape shape, std::vector<std::int64_t> strides,
                 std::int64_t offset);

// Factories that compute their values (ranges, random numbers, constants from host data) fill a
// host tensor from factory_output and return backend::place_on_default(it), which copies it to
// default_device() when that is a GPU: the same numbers on every device for the same seed.
// ShapeError naming op for a negative dimension.
void check_dims(const Shape& shape, const char* op);
Tensor factory_output(const Shape& shape, DType dtype, const char* op);
// ValueError unless v is finite.
void check_finite(double v, const char* op, const char* what);

// Normalises a possibly negative axis; ValueError naming op, axis and rank when out of range.
int normalize_axis(int axis, std::int64_t rank, const char* op);
// Sorted, unique, normalised axes; empty input = all axes.
std::vector<int> normalize_axes(const std::vector<int>& axes, std::int64_t rank, const char* op,
                                bool empty_means_all = true);

// Throws ValueError when x is undefined; DeviceError when tensors are on different devices.
void check_defined(const Tensor& x, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

// The same wording in every op, so that a message names the op, the argument (`what`) and what
// was wrong. ValueError when x is undefined.
void check_defined(const Tensor& x, const char* op, const char* what);
// Defined and float32/float64, else ValueError/DTypeError (float16/bfloat16 are storage only).
void check_float(const Tensor& x, const char* op, const char* what = "x");
// DTypeError for the dtypes without arithmetic: bool and the half storage types.
void check_numeric(const Tensor& x, const char* op);

inline std::string shape_str(const Tensor& t) { return t.shape().to_string(); }
// "[1,-2,3]": an index, axis or size list as error messages write it.
template <class T>
std::string list_str(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// Converts one value to element type U. Integers convert to integers by wrapping (as NumPy's
// astype does); floating values convert to integers by truncation, saturating at the range
// ends, because an out-of-range float-to-int cast is undefined behaviour in C++.
template <class U, class T>
U convert(T v) {
  if constexpr (std::is_same_v<U, bool>) {
    return v != T(0);
  } else if constexpr (std::is_same_v<U, float16_t>) {
    return float_to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<U, bfloat16_t>) {
    return float_to_bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<U> || !std::is_floating_point_v<T>) {
    return static_cast<U>(v);
  } else {
    if (v != v) return U{0};
    if (v <= static_cast<T>(std::numeric_limits<U>::lowest())) return std::numeric_limits<U>::lowest();
    if (v >= static_cast<T>(std::numeric_limits<U>::max())) return std::numeric_limits<U>::max();
    return static_cast<U>(v);
  }
}


// t contiguous, or undefined when t is (an optional operand of a kernel).
inline Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? t.contiguous() : Tensor(); }

}  // namespace keel::detail
