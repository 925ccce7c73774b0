#pragma once
// Small float64 inputs shared by the shape and indexing tests: distinct values, so that a wrong
// element order or axis shows in every comparison and gradient check.
#include <keel/keel.hpp>

#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace keel_test {

inline keel::Tensor f64(const std::vector<double>& v, keel::Shape s) {
  return keel::constant(v, std::move(s), keel::DType::float64);
}

// sin(1.1 i + salt) for i = 0, 1, ...: distinct float64 test values of shape s.
inline keel::Tensor wavy(keel::Shape s, double salt = 0.3) {
  std::vector<double> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.1 * double(i) + salt);
  return f64(v, std::move(s));
}

}  // namespace keel_test
