#include "core/tensor_util.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dispatch.hpp"

namespace keel {

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(shape.rank()));
  std::int64_t s = 1;
  for (std::int64_t i = shape.rank() - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = s;
    // Only a tensor with no elements can get here with a product past 64 bits ([0, 2^62, 4]);
    // its strides address nothing, so they saturate instead of wrapping.
    if (__builtin_mul_overflow(s, std::max<std::int64_t>(shape[i], 1), &s)) s = std::numeric_limits<std::int64_t>::max();
  }
  return strides;
}

std::uint64_t next_tensor_id() {
  // Each thread takes ids in blocks so that creating tensors needs no shared atomic per tensor.
  static std::atomic<std::uint64_t> next_block{1};
  constexpr std::uint64_t kBlock = 1 << 16;
  thread_local std::uint64_t next = 0, end = 0;
  if (next == end) {
    next = next_block.fetch_add(1, std::memory_order_relaxed) * kBlock;
    end = next + kBlock;
  }
  return next++;
}

namespace detail {

std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* op, const std::string& what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw ValueError(fmt::format("{}: {} overflows a 64-bit size ({} + {})", op, what, a, b));
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op, const std::string& what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw ValueError(fmt::format("{}: {} overflows a 64-bit size ({} x {})", op, what, a, b));
  return r;
}

std::int64_t checked_elements(const Shape& shape, const char* op) {
  try {
    return shape.num_elements();
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: {}", op, e.what()));
  }
}

Tensor empty_tensor(Shape shape, DType dtype, Device device, const char* op) {
  for (auto d : shape.dims())
    if (d < 0) throw ShapeError(fmt::format("{}: negative dimension in shape {}", op, shape.to_string()));
  const std::int64_t n = checked_elements(shape, op);
  std::int64_t nbytes;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(itemsize(dtype)), &nbytes))
    throw ValueError(fmt::format("{}: a {} tensor of shape {} needs more bytes than a 64-bit size holds", op,
                                 name(dtype), shape.to_string()));
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(nbytes), device);
  } catch (const ResourceExhaustedError& e) {
    throw ResourceExhaustedError(fmt::format("{}: {} tensor of shape {}: {}", op, name(dtype), shape.to_string(), e.what()));
  }
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape shape, std::vector<std::int64_t> strides,
                 std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->storage = base.impl()->storage;
  return Tensor(std::move(impl));
}

void check_dims(const Shape& shape, const char* op) {
  for (auto d : shape)
    if (d < 0) throw ShapeError(fmt::format("{}: negative dimension in shape {}", op, shape.to_string()));
}

Tensor factory_output(const Shape& shape, DType dtype, const char* op) {
  check_dims(shape, op);
  return empty_tensor(shape, dtype, Device::cpu(), op);
}

void check_finite(double v, const char* op, const char* what) {
  if (!std::isfinite(v)) throw ValueError(fmt::format("{}: {} must be finite, got {}", op, what, v));
}

int normalize_axis(int axis, std::int64_t rank, const char* op) {
  const std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<std::int64_t>(rank, 1) || (rank == 0)) {
    throw ValueError(fmt::format("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank));
  }
  return static_cast<int>(a);
}

std::vector<int> normalize_axes(const std::vector<int>& axes, std::int64_t rank, const char* op,
                                bool empty_means_all) {
  std::vector<int> out;
  if (axes.empty()) {
    if (empty_means_all)
      for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) {
    const std::int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank)
      throw ValueError(fmt::format("{}: axis {} is out of range for a tensor of rank {}", op, a, rank));
    out.push_back(static_cast<int>(n));
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw ValueError(fmt::format("{}: repeated axis in the axes list", op));
  return out;
}

void check_defined(const Tensor& x, const char* op) {
  if (!x.defined()) throw ValueError(fmt::format("{}: got an undefined tensor", op));
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() != b.device())
    throw DeviceError(fmt::format("{}: tensors are on different devices: {} and {}", op,
                                  a.device().to_string(), b.device().to_string()));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dtype() != b.dtype())
    throw DTypeError(fmt::format("{}: dtypes differ: {} {} and {} {}", op, name(a.dtype()),
                                 a.shape().to_string(), name(b.dtype()), b.shape().to_string()));
}

void check_defined(const Tensor& x, const char* op, const char* what) {
  if (!x.defined()) throw ValueError(fmt::format("{}: {} is undefined", op, what));
}

void check_float(const Tensor& x, const char* op, const char* what) {
  check_defined(x, op, what);
  if (x.dtype() != DType::float32 && x.dtype() != DType::float64)
    throw DTypeError(fmt::format("{}: {} must be float32 or float64, got {} {}{}", op, what, name(x.dtype()),
                                 x.shape().to_string(),
                                 is_floating(x.dtype()) ? " (float16/bfloat16 are storage types: astype(float32) first)"
                                                        : ""));
}

void check_numeric(const Tensor& x, const char* op) {
  if (x.dtype() == DType::bool_ || x.dtype() == DType::float16 || x.dtype() == DType::bfloat16)
    throw DTypeError(fmt::format("{}: arithmetic is not defined for {} (shape {}); cast first", op,
                                 name(x.dtype()), x.shape().to_string()));
}

}  // namespace detail
}  // namespace keel
