// The core Keras layers. Each is a thin composition of differentiable ops, so their gradients
// come from the ops' own rules; what lives here is Keras' argument checking, shape rules,
// configuration and mask propagation.
#include "keel/layers/core.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

using detail::ctor_label;
using detail::merged_mask;
using detail::needs_list;
using detail::shapes_of;
using detail::shapes_text;

using detail::who;

namespace {

// How a layer is named in errors thrown from its constructor. Calling name() there would take
// a unique name ("dropout") from the pool for a layer that never comes to exist.
// Keras passes a mask through every layer that supports masking; here the mask rides on the
// tensor, so a layer that computes a new tensor hands its input's mask on explicitly.
Tensor mask_view(const Tensor& input, const Tensor& output) {
  const Tensor mask = get_mask(input);
  if (!mask.defined() || output.impl() == input.impl()) return output;  // identity keeps it
  return with_mask(output, mask);
}

// Keras' merge layers: the output is masked where any input is (the logical and of the masks).
// Add and Multiply: at least one input, all of the same rank and batch size, the other
// dimensions equal or 1 (Keras' elementwise-merge rule: size-1 dimensions broadcast).
void check_elementwise_merge(const Layer& layer, const std::vector<Shape>& shapes) {
  if (shapes.empty())
    throw ValueError(fmt::format("{}: a merge layer should be called on a list of at least 1 input", who(layer)));
  Shape running = shapes[0];  // the broadcast shape of the inputs so far
  for (const auto& s : shapes) {
    if (s.rank() != running.rank() || (s.rank() > 0 && s[0] != running[0]))
      throw ShapeError(fmt::format("{}: inputs must have the same rank and batch size, got shapes {}", who(layer),
                                   shapes_text(shapes)));
    for (std::int64_t d = 1; d < s.rank(); ++d) {
      if (running[d] == s[d] || s[d] == 1) continue;
      if (running[d] != 1)
        throw ShapeError(fmt::format("{}: inputs have incompatible shapes {} (dimension {}: {} and {})", who(layer),
                                     shapes_text(shapes), d, running[d], s[d]));
      running[d] = s[d];
    }
  }
}

// A new 64-bit seed for each training call of a seeded Dropout (output call + 1 of a SplitMix64
// generator started at the user's seed), so that successive steps draw different, reproducible
// masks.
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t call) {
  return detail::mix(seed + 0x9E3779B97F4A7C15ull * call);
}

}  // namespace

// ---- Dense -----------------------------------------------------------------------------------

Dense::Dense(int units, DenseOptions options) : Layer(options.name), units_(units), options_(std::move(options)) {
  if (!options_.dtype.empty()) set_dtype_policy(options_.dtype);
  if (units <= 0)
    throw ValueError(fmt::format("{}: units must be a positive integer, got {}", ctor_label("Dense", options_.name),
                                 units));
}

void Dense::build(const Shape& input_shape) {
  if (input_shape.rank() < 2)
    throw ShapeError(fmt::format("{}: expects inputs of rank >= 2 ([batch, ..., features]), got shape {}",
                                 who(*this), input_shape.to_string()));
  if (kernel_) {  // built before: a second build() must not add a second set of weights
    check_input_shape(input_shape);
    return;
  }
  const std::int64_t in = input_shape[input_shape.rank() - 1];
  kernel_ = &add_weight("kernel", Shape{in, units_}, options_.kernel_initializer, true, options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{units_}, options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
  // As in Keras, `layer.build(shape)` called by the user marks the layer built, so that the first
  // call does not build it again.
  set_built(input_shape);
}

void Dense::check_input_shape(const Shape& s) const {
  // Keras' InputSpec(min_ndim=2, axes={-1: input_dim}): the rank may change, the features not.
  const std::int64_t in = kernel_ ? kernel_->shape()[0] : built_shape()[built_shape().rank() - 1];
  if (s.rank() < 2 || s[s.rank() - 1] != in)
    throw ShapeError(fmt::format("{}: expects inputs [batch, ..., {}], got shape {} (built for {})", who(*this), in,
                                 s.to_string(), built_shape().to_string()));
}

Tensor Dense::call(const Tensor& inputs, bool) {
  // The inputs arrive in the compute dtype (Layer::operator()); the kernel is read in it.
  const Tensor& x = inputs;
  const Tensor k = detail::like(kernel_->value(), x);
  Tensor y;
  if (x.rank() == 2) {
    y = matmul(x, k);
  } else {
    // One GEMM over every leading position rather than a batched product of small ones.
    const std::vector<std::int64_t>& d = x.shape().dims();
    const std::int64_t rows = std::accumulate(d.begin(), d.end() - 1, std::int64_t{1}, std::multiplies<>());
    std::vector<std::int64_t> out_dims(d.begin(), d.end() - 1);
    out_dims.push_back(units_);
    y = reshape(matmul(reshape(x, Shape{rows, d.back()}), k), Shape(out_dims));
  }
  y = detail::bias_activation(y, bias_ ? detail::like(bias_->value(), y) : Tensor(), options_.activation);
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  return mask_view(inputs, y);
}

Variable& Dense::kernel() {
  if (!kernel_) throw ValueError(fmt::format("{}: kernel() before the layer is built", who(*this)));
  return *kernel_;
}

Variable& Dense::bias() {
  if (!options_.use_bias) throw ValueError(fmt::format("{}: the layer has no bias (use_bias = false)", who(*this)));
  if (!bias_) throw ValueError(fmt::format("{}: bias() before the layer is built", who(*this)));
  return *bias_;
}

// ---- Activation, ReLU, LeakyReLU, Softmax ---------------------------------------------------

Activation::Activation(activations::ActivationFn activation, ActivationOptions options)
    : Layer(std::move(options.name)), activation_(std::move(activation)) {
  if (!options.dtype.empty()) set_dtype_policy(options.dtype);
}

Tensor Activation::call(const Tensor& inputs, bool) { return mask_view(inputs, activation_(inputs)); }

ReLU::ReLU(ReLUOptions options) : Layer(options.name), options_(std::move(options)) {
  const std::string who = ctor_label("ReLU", options_.name);
  // Keras' checks; !(v >= 0) also rejects NaN.
  if (options_.max_value && !(*options_.max_value >= 0))
    throw ValueError(fmt::format("{}: max_value cannot be negative, got {}", who, *options_.max_value));
  if (!(options_.negative_slope >= 0))
    throw ValueError(fmt::format("{}: negative_slope cannot be negative, got {}", who, options_.negative_slope));
  if (!(options_.threshold >= 0))
    throw ValueError(fmt::format("{}: threshold cannot be negative, got {}", who, options_.threshold));
}

Tensor ReLU::call(const Tensor& x, bool) {
  const auto& o = options_;
  Tensor y;
  if (o.negative_slope != 0 && !o.max_value && o.threshold == 0) {
    y = leaky_relu(x, o.negative_slope);
  } else if (o.negative_slope == 0 && o.threshold == 0 && o.max_value && *o.max_value == 6) {
    y = relu6(x);
  } else {
    // Keras' piecewise definition: x where x > threshold (so the output jumps from 0 to
    // threshold there), clipped to max_value; negative_slope * (x - threshold) elsewhere.
    // Keras masks by multiplying, x * (x > threshold), so a NaN input stays NaN.
    Tensor pos = o.threshold == 0 ? relu(x) : mul(x, cast(greater(x, scalar_like(x, o.threshold)), x.dtype()));
    if (o.max_value) pos = minimum(pos, *o.max_value);
    y = pos;
    if (o.negative_slope != 0) y = sub(pos, mul(scalar_like(x, o.negative_slope), relu(sub(scalar_like(x, o.threshold), x))));
  }
  return mask_view(x, y);
}

LeakyReLU::LeakyReLU(LeakyReLUOptions options) : Layer(options.name), options_(std::move(options)) {
  if (!(options_.negative_slope >= 0))
    throw ValueError(fmt::format("{}: negative_slope cannot be negative, got {}", ctor_label("LeakyReLU", options_.name),
                                 options_.negative_slope));
}

Tensor LeakyReLU::call(const Tensor& x, bool) { return mask_view(x, leaky_relu(x, options_.negative_slope)); }

Softmax::Softmax(SoftmaxOptions options) : Layer(options.name), options_(std::move(options)) {
  if (!options_.dtype.empty()) set_dtype_policy(options_.dtype);
}

Tensor Softmax::call(const Tensor& inputs, bool) {
  const std::int64_t rank = inputs.rank();
  if (options_.axis < -rank || options_.axis >= rank)
    throw ValueError(fmt::format("{}: axis {} is out of range for inputs of shape {}", who(*this), options_.axis,
                                 inputs.shape().to_string()));
  Tensor x = inputs;
  const Tensor mask = get_mask(inputs);
  if (mask.defined() && mask.rank() == rank) {
    // Keras adds (1 - mask) * large_negative, so masked positions get (almost) no weight; the
    // number is one float16 can hold where the inputs are float16.
    const double large_negative = x.dtype() == DType::float16 ? -3e4 : -1e9;
    x = add(x, mul(sub(scalar_like(x, 1.0), cast(mask, x.dtype())), scalar_like(x, large_negative)));
  }
  return mask_view(inputs, softmax(x, options_.axis));
}

// ---- Flatten, Reshape, Permute ---------------------------------------------------------------

Flatten::Flatten(FlattenOptions options) : Layer(options.name), options_(std::move(options)) {
  if (options_.data_format != "channels_last" && options_.data_format != "channels_first")
    throw ValueError(fmt::format("{}: data_format must be \"channels_last\" or \"channels_first\", got \"{}\"",
                                 ctor_label("Flatten", options_.name), options_.data_format));
}

void Flatten::check_input_shape(const Shape& s) const {
  // Keras' InputSpec(min_ndim=1); call() flattens whatever follows the batch dimension.
  if (s.rank() < 1)
    throw ShapeError(fmt::format("{}: expects inputs with a batch dimension, got a scalar", who(*this)));
}

Tensor Flatten::call(const Tensor& inputs, bool) {
  check_input_shape(inputs.shape());
  Tensor x = inputs;
  const auto rank = static_cast<int>(x.rank());
  if (options_.data_format == "channels_first" && rank > 2) {
    // Move the channels last so that the flattened order is the same as for channels_last data.
    std::vector<int> perm{0};
    for (int d = 2; d < rank; ++d) perm.push_back(d);
    perm.push_back(1);
    x = transpose(x, perm);
  }
  const std::int64_t batch = x.shape()[0];
  std::int64_t per_example = 1;
  for (std::int64_t d = 1; d < x.rank(); ++d) per_example *= x.shape()[d];
  return reshape(x, Shape{batch, per_example});
}

Reshape::Reshape(Shape target_shape, ReshapeOptions options)
    : Layer(std::move(options.name)), target_shape_(std::move(target_shape)) {
  int unknown = 0;
  for (auto d : target_shape_) {
    if (d == -1) ++unknown;
    if ((d <= 0 && d != -1) || unknown > 1)
      throw ValueError(fmt::format("Reshape: target_shape {} must hold positive sizes and at most one -1",
                                   target_shape_.to_string()));
  }
}

Tensor Reshape::call(const Tensor& inputs, bool) {
  if (inputs.rank() < 1)
    throw ShapeError(fmt::format("{}: expects inputs with a batch dimension, got a scalar", who(*this)));
  std::int64_t per_example = 1;
  for (std::int64_t d = 1; d < inputs.rank(); ++d) per_example *= inputs.shape()[d];
  std::int64_t known = 1, unknown_at = -1;
  for (std::int64_t i = 0; i < target_shape_.rank(); ++i) {
    if (target_shape_[i] == -1) unknown_at = i;
    else known *= target_shape_[i];
  }
  std::vector<std::int64_t> dims{inputs.shape()[0]};
  dims.insert(dims.end(), target_shape_.begin(), target_shape_.end());
  const bool ok = unknown_at < 0 ? known == per_example : per_example % known == 0;
  if (!ok)
    throw ShapeError(fmt::format("{}: cannot reshape inputs of shape {} ({} values per example) to target_shape {}",
                                 who(*this), inputs.shape().to_string(), per_example, target_shape_.to_string()));
  if (unknown_at >= 0) dims[static_cast<std::size_t>(unknown_at) + 1] = per_example / known;
  return reshape(inputs, Shape(dims));
}

Permute::Permute(std::vector<int> dims, PermuteOptions options) : Layer(std::move(options.name)), dims_(std::move(dims)) {
  std::vector<int> sorted = dims_;
  std::sort(sorted.begin(), sorted.end());
  bool ok = !sorted.empty();
  for (std::size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int>(i) + 1;
  if (!ok) {
    std::string text;
    for (int d : dims_) text += (text.empty() ? "" : ", ") + std::to_string(d);
    throw ValueError(fmt::format("Permute: dims ({}) must be a permutation of 1..{} (the non-batch axes, 1-based)",
                                 text, dims_.size()));
  }
}

void Permute::check_input_shape(const Shape& s) const {
  if (s.rank() != static_cast<std::int64_t>(dims_.size()) + 1)
    throw ShapeError(fmt::format("{}: expects inputs of rank {} (batch + {} permuted axes), got shape {}", who(*this),
                                 dims_.size() + 1, dims_.size(), s.to_string()));
}

Tensor Permute::call(const Tensor& inputs, bool) {
  check_input_shape(inputs.shape());
  std::vector<int> perm{0};  // the batch axis stays first
  perm.insert(perm.end(), dims_.begin(), dims_.end());
  return transpose(inputs, perm);
}

// ---- Dropout ---------------------------------------------------------------------------------

Dropout::Dropout(double rate, DropoutOptions options) : Layer(options.name), rate_(rate), options_(std::move(options)) {
  const std::string who = ctor_label("Dropout", options_.name);
  if (!(rate >= 0 && rate < 1))  // also rejects NaN
    throw ValueError(fmt::format("{}: rate must be in [0, 1), got {}", who, rate));
  for (auto d : options_.noise_shape)
    if (d <= 0 && d != -1)
      throw ValueError(fmt::format("{}: noise_shape {} must hold positive sizes or -1 (the input's size)", who,
                                   Shape(options_.noise_shape).to_string()));
}

Tensor Dropout::call(const Tensor& inputs, bool training) {
  if (!(training || in_training_call()) || rate_ == 0) return inputs;
  std::optional<std::uint64_t> seed;
  if (options_.seed) seed = mix_seed(*options_.seed, calls_++);
  Tensor y;
  if (options_.noise_shape.empty()) {
    y = dropout(inputs, rate_, seed);
  } else {
    const Shape ns(options_.noise_shape);
    if (ns.rank() != inputs.rank())
      throw ShapeError(fmt::format("{}: noise_shape {} must have the rank of the inputs {}", who(*this), ns.to_string(),
                                   inputs.shape().to_string()));
    std::vector<std::int64_t> dims(ns.begin(), ns.end());
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const std::int64_t in = inputs.shape()[static_cast<std::int64_t>(d)];
      if (dims[d] == -1) dims[d] = in;
      if (dims[d] != in && dims[d] != 1)
        throw ShapeError(fmt::format("{}: noise_shape {} does not broadcast to the inputs {}", who(*this),
                                     ns.to_string(), inputs.shape().to_string()));
    }
    // One keep/drop decision per element of the noise shape, broadcast over the rest: dropout
    // of ones gives the scaled mask (0 or 1 / (1 - rate)).
    const Tensor mask = dropout(ones(Shape(dims), inputs.dtype()), rate_, seed);
    y = mul(inputs, mask);
  }
  return mask_view(inputs, y);
}

// ---- Masking ---------------------------------------------------------------------------------

// A NaN mask_value equals no input, so nothing is masked (Keras accepts it too).
Masking::Masking(double mask_value, MaskingOptions options) : Layer(options.name), mask_value_(mask_value) {}

Tensor Masking::call(const Tensor& inputs, bool) {
  if (inputs.rank() < 1)
    throw ShapeError(fmt::format("{}: expects inputs with a feature axis, got shape {}", who(*this),
                                 inputs.shape().to_string()));
  // keep = any(inputs != mask_value) over the features; masked steps become zeros (Keras).
  const Tensor keep = reduce_any(not_equal(inputs, scalar_like(inputs, mask_value_)), {-1}, true);
  const Tensor y = mul(inputs, cast(keep, inputs.dtype()));
  return with_mask(y, squeeze(keep, {-1}));
}

// ---- Add, Multiply, Concatenate --------------------------------------------------------------

namespace {
}  // namespace

Add::Add(AddOptions options) : Layer(std::move(options.name)) {}
void Add::build(const Shape&) { needs_list(*this); }
void Add::build(const std::vector<Shape>& shapes) { check_elementwise_merge(*this, shapes); }
Tensor Add::call(const Tensor&, bool) { needs_list(*this); }

Tensor Add::call(const std::vector<Tensor>& inputs, bool) {
  check_elementwise_merge(*this, shapes_of(inputs));
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = add(y, inputs[i]);
  const Tensor mask = merged_mask(inputs);
  return mask.defined() ? with_mask(y, mask) : y;
}

Multiply::Multiply(MultiplyOptions options) : Layer(std::move(options.name)) {}
void Multiply::build(const Shape&) { needs_list(*this); }
void Multiply::build(const std::vector<Shape>& shapes) { check_elementwise_merge(*this, shapes); }
Tensor Multiply::call(const Tensor&, bool) { needs_list(*this); }

Tensor Multiply::call(const std::vector<Tensor>& inputs, bool) {
  check_elementwise_merge(*this, shapes_of(inputs));
  Tensor y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = mul(y, inputs[i]);
  const Tensor mask = merged_mask(inputs);
  return mask.defined() ? with_mask(y, mask) : y;
}

Concatenate::Concatenate(ConcatenateOptions options) : Layer(options.name), options_(std::move(options)) {}
void Concatenate::build(const Shape&) { needs_list(*this); }
Tensor Concatenate::call(const Tensor&, bool) { needs_list(*this); }

void Concatenate::build(const std::vector<Shape>& shapes) {
  if (shapes.empty())
    throw ValueError(fmt::format("{}: should be called on a list of at least 1 input", who(*this)));
  const std::int64_t rank = shapes[0].rank();
  if (options_.axis < -rank || options_.axis >= rank)
    throw ValueError(fmt::format("{}: axis {} is out of range for inputs of shape {}", who(*this), options_.axis,
                                 shapes[0].to_string()));
  const std::int64_t axis = options_.axis < 0 ? options_.axis + rank : options_.axis;
  for (const auto& s : shapes) {
    bool ok = s.rank() == rank;
    for (std::int64_t d = 0; ok && d < rank; ++d) ok = d == axis || s[d] == shapes[0][d];
    if (!ok)
      throw ShapeError(fmt::format("{}: inputs must match on every dimension except the concatenation axis {}, got "
                                   "shapes {}", who(*this), options_.axis, shapes_text(shapes)));
  }
}

Tensor Concatenate::call(const std::vector<Tensor>& inputs, bool) {
  build(shapes_of(inputs));  // the checks only: shapes may differ from call to call
  return concat(inputs, options_.axis);
}

// ---- Rescaling -------------------------------------------------------------------------------

Rescaling::Rescaling(double scale, RescalingOptions options)
    : Layer(options.name), scale_(scale), options_(std::move(options)) {}

Tensor Rescaling::call(const Tensor& inputs, bool) {
  // Integer inputs (uint8 images) arrive as floats in the compute dtype (floating_inputs()).
  const Tensor& x = inputs;
  Tensor y = mul(x, scalar_like(x, scale_));
  if (options_.offset != 0) y = add(y, scalar_like(x, options_.offset));
  return mask_view(inputs, y);
}

// ---- Embedding -------------------------------------------------------------------------------

Embedding::Embedding(int input_dim, int output_dim, EmbeddingOptions options)
    : Layer(options.name), input_dim_(input_dim), output_dim_(output_dim), options_(std::move(options)) {
  const std::string who = ctor_label("Embedding", options_.name);
  if (input_dim <= 0) throw ValueError(fmt::format("{}: input_dim must be a positive integer, got {}", who, input_dim));
  if (output_dim <= 0)
    throw ValueError(fmt::format("{}: output_dim must be a positive integer, got {}", who, output_dim));
  if (options_.input_length && *options_.input_length <= 0)
    throw ValueError(fmt::format("{}: input_length must be a positive integer, got {}", who, *options_.input_length));
}

void Embedding::build(const Shape& input_shape) {
  if (embeddings_) return;  // built before (see Dense::build)
  embeddings_ = &add_weight("embeddings", Shape{input_dim_, output_dim_}, options_.embeddings_initializer, true,
                            options_.embeddings_regularizer, options_.embeddings_constraint);
  set_built(input_shape);
}

Tensor Embedding::call(const Tensor& inputs, bool) {
  if (options_.input_length && (inputs.rank() != 2 || inputs.shape()[1] != *options_.input_length))
    throw ShapeError(fmt::format("{}: input_length is {}, but the inputs have shape {}", who(*this),
                                 *options_.input_length, inputs.shape().to_string()));
  if (inputs.dtype() == DType::bool_)
    throw DTypeError(fmt::format("{}: ids must be integers, got bool {}", who(*this), inputs.shape().to_string()));
  const Tensor ids = is_floating(inputs.dtype()) ? cast(inputs, DType::int64) : inputs;
  Tensor y = embedding_lookup(embeddings_->value(), ids);
  if (is_floating(compute_dtype()) && y.dtype() != compute_dtype()) y = cast(y, compute_dtype());
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  if (options_.mask_zero) y = with_mask(y, not_equal(ids, scalar_like(ids, 0)));
  return y;
}

Variable& Embedding::embeddings() {
  if (!embeddings_) throw ValueError(fmt::format("{}: embeddings() before the layer is built", who(*this)));
  return *embeddings_;
}

}  // namespace keel::layers
