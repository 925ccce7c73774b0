#pragma once
// Merge layers beyond Add, Concatenate and Multiply (core.hpp): Average, Subtract, Maximum,
// Minimum and Dot, as Keras 3 has them. Each is called on a list of tensors: layer({x, y}).
//
// The elementwise merges take inputs of the same rank and batch size whose other dimensions are
// equal or 1 (size-1 dimensions broadcast), and pass on the logical and of the masks riding on
// their inputs, as Keras' Merge.compute_mask does. Dot returns no mask (Keras' Dot.compute_mask).
#include <array>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::layers {

// The part the four elementwise merges share: list-only calls, Keras' shape rule, the mask.
class ElementwiseMerge : public Layer {
 public:
  using Layer::Layer;
  void build(const Shape& input_shape) override;  // ValueError: needs a list
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;  // ValueError: needs a list
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;

 protected:
  // Combines the checked inputs; the mask is handled by call().
  virtual Tensor merge(const std::vector<Tensor>& inputs) const = 0;
  // The number of inputs the layer takes exactly (Subtract: 2); 0: any number >= 1.
  virtual std::size_t exact_inputs() const { return 0; }
};

struct AverageOptions {
  std::string name{};
};

// (x1 + ... + xn) / n.
class Average : public ElementwiseMerge {
 public:
  explicit Average(AverageOptions options = {});
  KEEL_LAYER_BOILERPLATE(Average)

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

struct SubtractOptions {
  std::string name{};
};

// x1 - x2; exactly two inputs (Keras' rule).
class Subtract : public ElementwiseMerge {
 public:
  explicit Subtract(SubtractOptions options = {});
  KEEL_LAYER_BOILERPLATE(Subtract)

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
  std::size_t exact_inputs() const override { return 2; }
};

struct MaximumOptions {
  std::string name{};
};

// Elementwise maximum of the inputs.
class Maximum : public ElementwiseMerge {
 public:
  explicit Maximum(MaximumOptions options = {});
  KEEL_LAYER_BOILERPLATE(Maximum)

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

struct MinimumOptions {
  std::string name{};
};

// Elementwise minimum of the inputs.
class Minimum : public ElementwiseMerge {
 public:
  explicit Minimum(MinimumOptions options = {});
  KEEL_LAYER_BOILERPLATE(Minimum)

 protected:
  Tensor merge(const std::vector<Tensor>& inputs) const override;
};

// Keras' `axes`: one axis for both inputs (`.axes = 1`) or one per input (`.axes = {1, 2}`).
struct DotAxes {
  std::array<int, 2> axes;
  DotAxes(int axis) : axes{axis, axis} {}             // NOLINT: implicit, as Keras' int
  DotAxes(int a, int b) : axes{a, b} {}               // NOLINT: {1, 2}
  bool single() const { return axes[0] == axes[1]; }  // written back as one int
};

struct DotOptions {
  // L2-normalise both inputs along the dot axes first: the output is then the cosine
  // similarity (Keras' normalize, x / max(||x||, 1e-7)).
  bool normalize = false;
  std::string name{};
};

// Keras' Dot: the batched dot product of two tensors along `axes` (batch_dot). For inputs
// [B, ...a] and [B, ...b] the output is [B, ...a without the axis, ...b without the axis]; two
// [B, n] inputs give [B, 1]. The axes may not be the batch axis; negative axes count from the end.
class Dot : public Layer {
 public:
  explicit Dot(DotAxes axes, DotOptions options = {});
  KEEL_LAYER_BOILERPLATE(Dot)
  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;
  const DotAxes& axes() const { return axes_; }
  bool normalize() const { return options_.normalize; }

 private:
  DotAxes axes_;
  DotOptions options_;
};

}  // namespace keel::layers
