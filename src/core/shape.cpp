#include "keel/core/shape.hpp"

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

}  // namespace keel
