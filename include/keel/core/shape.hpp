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
  std::int64_t size() const { return static_cast<std::int64_t>(dims_.size()); }  // = rank()
  std::int64_t rank() const { return static_cast<std::int64_t>(dims_.size()); }
  std::int64_t operator[](std::int64_t i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](std::int64_t i) { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t num_elements() const {
    std::int64_t n = 1;
    for (auto d : dims_) n *= d;
    return n;
  }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  std::string to_string() const;  // "[2,3]"

 private:
  std::vector<std::int64_t> dims_;
};

}  // namespace keel
