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
  // The shape Keras shows: the batch and every dimension that follows from an Input's None
  // dimension are -1 (None); the placeholder has kNoneProbe in their place.
  Shape shape;
  // Where some Input upstream has None dimensions: the placeholder computed with kNoneProbeAlt
  // in their place (undefined otherwise). A dimension that differs between the two is None.
  Tensor alternate;
};

namespace layers::detail {
// The sizes an Input's None dimensions take in the two placeholders a functional model is traced
// on. The second is twice the first, so striding and pooling keep them apart; both are large
// enough for the usual kernels and pools under "valid" padding.
inline constexpr std::int64_t kNoneProbe = 32;
inline constexpr std::int64_t kNoneProbeAlt = 64;

// `shape` (batch first, -1 for None) with a batch of one and `probe` for each None dimension.
Shape probe_shape(const Shape& shape, std::int64_t probe);
// The shape Keras shows for a layer output computed on both probes: the batch and each dimension
// that differs between them are -1. ValueError naming `who` when the ranks differ.
Shape shape_from_probes(const Shape& probe, const Shape& probe_alt, const std::string& who);
// A shape as Keras prints it: a Python tuple with None for the batch (the first dimension) and
// for each -1, "(None, 16)", "(None,)".
std::string shape_text(const Shape& s);
// Records the output shape summary() shows for a layer traced on both probes (Sequential).
void set_output_shape(Layer& layer, const Shape& shape);
// The shape Keras shows for a symbolic tensor (the batch as -1).
inline const Shape& static_shape(const Tensor& symbolic) { return symbolic.impl()->symbolic->shape; }
// A tensor marked as the output of `node` (same values: the placeholder computed for it).
Tensor make_symbolic(const Tensor& value, std::shared_ptr<SymbolicNode> node);
// The placeholder values behind a symbolic tensor, as a plain tensor.
Tensor placeholder_of(const Tensor& symbolic);
inline bool is_symbolic(const Tensor& t) { return t.defined() && t.impl()->symbolic != nullptr; }
}  // namespace layers::detail

}  // namespace keel
