#pragma once
// The functional API's graph record: each symbolic tensor points to the layer call that made it.
#include <memory>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel {

struct SymbolicNode {
  std::shared_ptr<layers::Layer> layer;  // null for an Input
  std::vector<Tensor> inputs;            // the symbolic tensors the layer was called on
  bool multi_input = false;              // called with a list (Add, Concatenate, ...)
  std::string input_name;                // for Inputs
};

namespace layers::detail {
// A tensor marked as the output of `node` (same values: the placeholder computed for it).
Tensor make_symbolic(const Tensor& value, std::shared_ptr<SymbolicNode> node);
// The placeholder values behind a symbolic tensor, as a plain tensor.
Tensor placeholder_of(const Tensor& symbolic);
inline bool is_symbolic(const Tensor& t) { return t.defined() && t.impl()->symbolic != nullptr; }
}  // namespace layers::detail

}  // namespace keel
