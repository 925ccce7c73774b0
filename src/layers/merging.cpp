// Average, Subtract, Maximum, Minimum and Dot: compositions of differentiable ops (their
// gradients are the ops'), with Keras' shape checks and mask rules.
#include "keel/layers/merging.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::merged_mask;
using detail::needs_list;
using detail::shapes_of;
using detail::shapes_text;

using detail::who;

namespace {

// Keras' Merge.compute_mask: an output step is kept where every input's mask keeps it.
}  // namespace

// ---- elementwise merges ----------------------------------------------------------------------

void ElementwiseMerge::build(const Shape&) { needs_list(*this); }
Tensor ElementwiseMerge::call(const Tensor&, bool) { needs_list(*this); }

// Keras' rule: the same rank and batch size; the other dimensions equal or 1 (broadcast).
void ElementwiseMerge::build(const std::vector<Shape>& shapes) {
  if (shapes.empty())
    throw ValueError(fmt::format("{}: a merge layer should be called on a list of at least 1 input", who(*this)));
  if (exact_inputs() != 0 && shapes.size() != exact_inputs())
    throw ValueError(fmt::format("{}: should be called on exactly {} inputs, got {} (shapes {})", who(*this),
                                 exact_inputs(), shapes.size(), shapes_text(shapes)));
  Shape running = shapes[0];
  for (const auto& s : shapes) {
    if (s.rank() != running.rank() || (s.rank() > 0 && s[0] != running[0]))
      throw ShapeError(fmt::format("{}: inputs must have the same rank and batch size, got shapes {}", who(*this),
                                   shapes_text(shapes)));
    for (std::int64_t d = 1; d < s.rank(); ++d) {
      if (running[d] == s[d] || s[d] == 1) continue;
      if (running[d] != 1)
        throw ShapeError(fmt::format("{}: inputs have incompatible shapes {} (dimension {}: {} and {})", who(*this),
                                     shapes_text(shapes), d, running[d], s[d]));
      running[d] = s[d];
    }
  }
}

Tensor ElementwiseMerge::call(const std::vector<Tensor>& inputs, bool) {
  build(shapes_of(inputs));  // the checks only: shapes may differ from call to call
  Tensor y = merge(inputs);
  const Tensor mask = merged_mask(inputs);
  return mask.defined() ? detail::attach_mask(y, mask) : y;
}

Average::Average(AverageOptions options) : ElementwiseMerge(std::move(options.name)) {}
Tensor Average::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = add(y, inputs[i]);
  return mul(y, scalar_like(y, 1.0 / static_cast<double>(inputs.size())));
}

Subtract::Subtract(SubtractOptions options) : ElementwiseMerge(std::move(options.name)) {}
Tensor Subtract::merge(const std::vector<Tensor>& inputs) const { return sub(inputs[0], inputs[1]); }

Maximum::Maximum(MaximumOptions options) : ElementwiseMerge(std::move(options.name)) {}
Tensor Maximum::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = maximum(y, inputs[i]);
  return y;
}

Minimum::Minimum(MinimumOptions options) : ElementwiseMerge(std::move(options.name)) {}
Tensor Minimum::merge(const std::vector<Tensor>& inputs) const {
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = minimum(y, inputs[i]);
  return y;
}

// ---- Dot -------------------------------------------------------------------------------------

Dot::Dot(DotAxes axes, DotOptions options) : Layer(options.name), axes_(axes), options_(std::move(options)) {}

void Dot::build(const Shape&) { needs_list(*this); }
Tensor Dot::call(const Tensor&, bool) { needs_list(*this); }

namespace {

// The dot axes of both inputs in [1, rank); Keras takes a negative axis modulo each input's rank.
std::array<int, 2> resolved_axes(const Layer& layer, const DotAxes& a, const std::vector<Shape>& shapes) {
  if (shapes.size() != 2)
    throw ValueError(fmt::format("{}: should be called on exactly 2 inputs, got {} (shapes {})", who(layer),
                                 shapes.size(), shapes_text(shapes)));
  std::array<int, 2> out{};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto rank = static_cast<int>(shapes[i].rank());
    const int axis = a.axes[i];
    if (rank < 2)
      throw ShapeError(fmt::format("{}: inputs must be of rank >= 2 ([batch, ...]), got shapes {}", who(layer),
                                   shapes_text(shapes)));
    if (axis < -rank || axis >= rank || axis == 0 || axis == -rank)
      throw ValueError(fmt::format("{}: axis {} of input {} is out of range [1, {}) for shape {} (the batch axis "
                                   "cannot be contracted)", who(layer), axis, i, rank, shapes[i].to_string()));
    out[i] = axis < 0 ? axis + rank : axis;
  }
  if (shapes[0][0] != shapes[1][0])
    throw ShapeError(fmt::format("{}: inputs must have the same batch size, got shapes {}", who(layer),
                                 shapes_text(shapes)));
  if (shapes[0][out[0]] != shapes[1][out[1]])
    throw ShapeError(fmt::format("{}: incompatible input shapes {}: axis {} has size {} and axis {} has size {}",
                                 who(layer), shapes_text(shapes), out[0], shapes[0][out[0]], out[1],
                                 shapes[1][out[1]]));
  return out;
}

// Moves `axis` of x to position `to` (the others keep their order).
Tensor move_axis(const Tensor& x, int axis, int to) {
  std::vector<int> perm;
  for (int d = 0; d < static_cast<int>(x.rank()); ++d)
    if (d != axis) perm.push_back(d);
  perm.insert(perm.begin() + to, axis);
  return transpose(x, perm);
}

std::int64_t product(const Shape& s, std::int64_t from, std::int64_t to) {
  std::int64_t p = 1;
  for (std::int64_t d = from; d < to; ++d) p *= s[d];
  return p;
}

}  // namespace

void Dot::build(const std::vector<Shape>& shapes) { resolved_axes(*this, axes_, shapes); }

Tensor Dot::call(const std::vector<Tensor>& inputs, bool) {
  const auto ax = resolved_axes(*this, axes_, shapes_of(inputs));
  Tensor a = inputs[0], b = inputs[1];
  if (options_.normalize) {
    // Keras' normalize(x, axis): x * min(rsqrt(sum x^2), 1 / epsilon), epsilon = 1e-7.
    const auto unit = [](const Tensor& x, int axis) {
      return mul(x, minimum(rsqrt(reduce_sum(square(x), {axis}, true)), 1e7));
    };
    a = unit(a, ax[0]);
    b = unit(b, ax[1]);
  }
  // batch_dot as one batched matmul: a -> [B, M, K] (axis last), b -> [B, K, N] (axis second).
  a = move_axis(a, ax[0], static_cast<int>(a.rank()) - 1);
  b = move_axis(b, ax[1], 1);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const std::int64_t batch = sa[0], k = sa[sa.rank() - 1];
  const std::int64_t m = product(sa, 1, sa.rank() - 1), n = product(sb, 2, sb.rank());
  Tensor y = matmul(reshape(a, Shape{batch, m, k}), reshape(b, Shape{batch, k, n}));
  std::vector<std::int64_t> dims{batch};
  for (std::int64_t d = 1; d + 1 < sa.rank(); ++d) dims.push_back(sa[d]);
  for (std::int64_t d = 2; d < sb.rank(); ++d) dims.push_back(sb[d]);
  if (dims.size() == 1) dims.push_back(1);  // two [B, n] inputs: [B, 1], as Keras' batch_dot
  return reshape(y, Shape(dims));
}

}  // namespace keel::layers
