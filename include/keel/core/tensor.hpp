#pragma once
// Tensor: a cheap, reference-counted handle to an immutable n-d array. Copies share data.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "keel/core/device.hpp"
#include "keel/core/dtype.hpp"
#include "keel/core/error.hpp"
#include "keel/core/shape.hpp"
#include "keel/core/slice_spec.hpp"
#include "keel/core/tensor_impl.hpp"

namespace keel {

class Tensor {
 public:
  Tensor() = default;  // undefined
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return checked()->shape; }
  std::int64_t rank() const { return checked()->shape.rank(); }
  std::int64_t size() const { return checked()->shape.num_elements(); }  // number of elements
  DType dtype() const { return checked()->dtype; }
  Device device() const { return checked()->storage->device(); }

  Tensor to(Device device) const;
  Tensor astype(DType dtype) const;
  template <class T> T item() const;                 // one-element tensors only; converts
  template <class T> std::vector<T> to_vector() const;  // row-major copy; converts
  Tensor reshape(Shape shape) const;
  Tensor operator[](std::int64_t i) const;            // first-axis index, a view
  // NumPy basic indexing (keel/core/slice_spec.hpp): x.slice({keel::range(1, -1), keel::all, 2})
  // is x[1:-1, :, 2]. A view unless a step is negative; differentiable.
  Tensor slice(const SliceSpec& spec) const;

  // Lower-level access, for ops and kernels.
  const std::vector<std::int64_t>& strides() const { return checked()->strides; }
  std::int64_t offset() const { return checked()->offset; }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  Tensor contiguous() const;                          // this, or a contiguous copy
  std::uint64_t id() const { return checked()->id; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  void* raw_data() const { return checked()->byte_ptr(); }  // first element of the view
  template <class T> const T* data() const { return static_cast<const T*>(raw_data()); }
  std::string to_string() const;                      // what operator<< prints

 private:
  TensorImpl* checked() const {
    if (!impl_) throw_undefined();
    return impl_.get();
  }
  [[noreturn]] static void throw_undefined();
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream&, const Tensor&);
std::ostream& operator<<(std::ostream&, const Shape&);
std::ostream& operator<<(std::ostream&, DType);
std::ostream& operator<<(std::ostream&, const Device&);

// Arithmetic and comparison operators (NumPy broadcasting; comparisons give bool tensors).
Tensor operator+(const Tensor&, const Tensor&);
Tensor operator-(const Tensor&, const Tensor&);
Tensor operator*(const Tensor&, const Tensor&);
Tensor operator/(const Tensor&, const Tensor&);
Tensor operator-(const Tensor&);
Tensor operator+(const Tensor&, double);
Tensor operator-(const Tensor&, double);
Tensor operator*(const Tensor&, double);
Tensor operator/(const Tensor&, double);
Tensor operator+(double, const Tensor&);
Tensor operator-(double, const Tensor&);
Tensor operator*(double, const Tensor&);
Tensor operator/(double, const Tensor&);
Tensor operator==(const Tensor&, const Tensor&);
Tensor operator!=(const Tensor&, const Tensor&);
Tensor operator<(const Tensor&, const Tensor&);
Tensor operator<=(const Tensor&, const Tensor&);
Tensor operator>(const Tensor&, const Tensor&);
Tensor operator>=(const Tensor&, const Tensor&);
Tensor operator==(const Tensor&, double);
Tensor operator!=(const Tensor&, double);
Tensor operator<(const Tensor&, double);
Tensor operator<=(const Tensor&, double);
Tensor operator>(const Tensor&, double);
Tensor operator>=(const Tensor&, double);
Tensor operator&&(const Tensor&, const Tensor&);  // logical and of bool tensors
Tensor operator||(const Tensor&, const Tensor&);
Tensor operator!(const Tensor&);

}  // namespace keel
