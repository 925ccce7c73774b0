#include "keel/core/tensor.hpp"

#include "keel/core/error.hpp"

namespace keel {

void Tensor::throw_undefined() {
  throw ValueError("Tensor: operation on an undefined tensor (default-constructed or moved-from)");
}

}  // namespace keel
