#pragma once
// Helpers shared by ops: allocating outputs, making views, checking arguments.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// A new contiguous tensor with uninitialised memory.
Tensor empty_tensor(const Shape& shape, DType dtype, Device device);
// A view of base's storage.
Tensor make_view(const Tensor& base, Shape shape, std::vector<std::int64_t> strides,
                 std::int64_t offset);
// Copies any strided view into a new contiguous tensor of the same dtype.
Tensor contiguous_copy(const Tensor& x);

// Normalises a possibly negative axis; ValueError naming op, axis and rank when out of range.
int normalize_axis(int axis, std::int64_t rank, const char* op);
// Sorted, unique, normalised axes; empty input = all axes.
std::vector<int> normalize_axes(const std::vector<int>& axes, std::int64_t rank, const char* op,
                                bool empty_means_all = true);

// Throws ValueError when x is undefined; DeviceError when tensors are on different devices.
void check_defined(const Tensor& x, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);

inline std::string shape_str(const Tensor& t) { return t.shape().to_string(); }

}  // namespace keel::detail
