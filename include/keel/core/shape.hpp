#pragma once
// A tensor's dimensions: Shape{2, 3}. Rank 0 is a scalar.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace keel {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}  // NOLINT: implicit on purpose

  const std::vector<std::int64_t>& dims() const { return dims_; }
  // The rank, under the name std::vector gives it. Tensor::size() counts elements, so this name
  // reads wrong next to it: write rank().
  [[deprecated("Shape::size() is the rank (Tensor::size() counts elements): use Shape::rank()")]]
  std::int64_t size() const { return static_cast<std::int64_t>(dims_.size()); }
  std::int64_t rank() const { return static_cast<std::int64_t>(dims_.size()); }
  std::int64_t operator[](std::int64_t i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](std::int64_t i) { return dims_[static_cast<std::size_t>(i)]; }
  // The product of the dimensions: 0 when any dimension is 0 (however large the others), and a
  // ValueError when it does not fit in 64 bits.
  std::int64_t num_elements() const {
    std::int64_t n = 1;
    bool overflow = false;  // only an error if no later dimension is 0
    for (auto d : dims_) {
      if (d == 0) return 0;
      overflow |= __builtin_mul_overflow(n, d, &n);
    }
    if (overflow) too_many_elements();
    return n;
  }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  std::string to_string() const;  // "[2,3]"

 private:
  [[noreturn]] void too_many_elements() const;
  std::vector<std::int64_t> dims_;
};

}  // namespace keel
