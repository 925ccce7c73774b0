#include "keel/core/shape.hpp"

#include "keel/core/error.hpp"

namespace keel {

std::string Shape::to_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims_[i]);
  }
  s += ']';
  return s;
}

void Shape::too_many_elements() const {
  throw ValueError("shape " + to_string() + " has more elements than a 64-bit count holds");
}

}  // namespace keel
