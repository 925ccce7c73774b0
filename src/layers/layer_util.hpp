#pragma once
// Helpers the layer implementations share: how a layer names itself in errors, weights in the
// dtype of their inputs, and how Keras spells the pieces of a config.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/core.h>

#include "keel/core/error.hpp"
#include "keel/layers/layer.hpp"

namespace keel::activations {
class ActivationFn;
}

namespace keel::layers::detail {

// "dense/kernel" of the layer "dense" -> "kernel" (what wrappers call their layer's weights); a
// sublayer's weight keeps its layer's name ("forward_lstm/kernel" of a Bidirectional).
inline std::string relative_weight_name(const std::string& weight, const std::string& layer) {
  const std::string prefix = layer + "/";
  return weight.compare(0, prefix.size(), prefix) == 0 ? weight.substr(prefix.size()) : weight;
}

// "conv2d_1 (Conv2D)": how a constructed layer is named in errors.
std::string who(const Layer& layer);

// Ops report shapes, not layers: runs f() and prefixes the message of a ShapeError or
// ValueError it throws with the layer, keeping the error type.
template <class F>
auto in_layer(const Layer& layer, F&& f) {
  try {
    return f();
  } catch (const ShapeError& e) {
    throw ShapeError(fmt::format("{}: {}", who(layer), e.what()));
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: {}", who(layer), e.what()));
  }
}

// The weight behind an accessor; ValueError before build() or when `flag` (use_bias, center...)
// turned it off.
Variable& required(const Layer& layer, Variable* v, const char* what, const char* flag);

// `axis` (negative counts from the end) as an index into the dimensions of `s`; ValueError naming
// the layer when it is out of range.
int normalized_axis(const Layer& layer, int axis, const Shape& s);

std::string lowercase(std::string s);
// Keras lower-cases data_format before checking it; so do we. ValueError naming the layer.
std::string checked_data_format(const Layer& layer, const std::string& data_format);

// t in `dtype`; an undefined t (an optional weight) stays undefined.
Tensor as_dtype(const Tensor& t, DType dtype);
// "Dense" or "Dense 'head'": how a layer's constructor names it in errors (before a name exists).
std::string ctor_label(const char* cls, const std::string& name);
// The output carries the input's mask (Keras' supports_masking layers); attach_mask below.
Tensor pass_mask(const Tensor& input, Tensor output);
// Keras' merge layers: the output is masked where any input is (the logical and of the masks).
Tensor merged_mask(const std::vector<Tensor>& inputs);
std::vector<Shape> shapes_of(const std::vector<Tensor>& xs);
// "[2,3], [2,4]": shapes for an error message.
std::string shapes_text(const std::vector<Shape>& shapes);
// The ValueError of a merge layer called on one tensor.
[[noreturn]] void needs_list(const Layer& layer);
// A mask (any dtype) as bool.
Tensor as_bool(const Tensor& t);
// Both masks (logical and); an undefined mask is all true, so the other one is returned.
Tensor and_masks(const Tensor& a, const Tensor& b);
// A weight (float32) in the dtype of the input it meets.
Tensor like(const Tensor& w, const Tensor& x);

// activation(y + bias) (without bias where it is undefined), as the Dense and convolution layers
// end: the library's own linear, relu, sigmoid, tanh and exponential go through bias_add in one
// pass; any other activation (or a function of the user's, whatever its name) applies after it.
Tensor bias_activation(const Tensor& y, const Tensor& bias, const activations::ActivationFn& activation);

// Hands `mask` on with `y`, a tensor the layer has just computed. with_mask() would make a new
// view of y, and a GradientTape keys gradients by tensor identity, so the view would cut the
// output off from the tape; the mask is attached to y itself instead (nothing else holds y yet).
Tensor attach_mask(Tensor y, const Tensor& mask);

// SplitMix64's step: decorrelates the per-call dropout seeds derived from one user seed.
std::uint64_t mix(std::uint64_t z);

// Keras serialises a regularizer as {"class_name", "config"}; None when there is none.
nlohmann::json regularizer_config(const regularizers::Regularizer& r);
// The same with Keras 3's "module" and "registered_name" keys.
nlohmann::json regularizer_json(const regularizers::Regularizer& r);
nlohmann::json seed_config(const std::optional<std::uint64_t>& seed);
// Keras serialises a named initializer as its name and a parameterised one (Constant) as
// {"module": "keras.initializers", "class_name": "Constant", "config": {"value": ...}}.
nlohmann::json initializer_json(const initializers::Initializer& i);

}  // namespace keel::layers::detail
