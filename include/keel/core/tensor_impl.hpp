#pragma once
// The state behind a Tensor handle: a strided view (shape, strides in elements, offset in
// elements) of a Storage. Users never need this header; ops and kernels do.
#include <cstdint>
#include <memory>
#include <vector>

#include "keel/core/dtype.hpp"
#include "keel/core/shape.hpp"
#include "keel/core/storage.hpp"

namespace keel {

// The functional API's record of which layer call produced a symbolic tensor (models::Input
// and layers called on it). Opaque here: defined by the Keras layer of the library.
struct SymbolicNode;

// Unique, never reused identity of a tensor value (what tapes key gradients by).
std::uint64_t next_tensor_id();

struct TensorImpl {
  Shape shape;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
  DType dtype = DType::float32;
  std::shared_ptr<Storage> storage;
  std::uint64_t id = next_tensor_id();
  std::shared_ptr<SymbolicNode> symbolic;  // set only on symbolic (functional API) tensors
  std::shared_ptr<TensorImpl> keras_mask;  // a Keras mask riding along (Embedding(mask_zero))

  bool is_contiguous() const {
    std::int64_t expected = 1;
    for (std::int64_t i = shape.rank() - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[static_cast<std::size_t>(i)] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
  char* byte_ptr() const {
    return static_cast<char*>(storage->data()) + offset * static_cast<std::int64_t>(itemsize(dtype));
  }
};

std::vector<std::int64_t> contiguous_strides(const Shape& shape);

}  // namespace keel
