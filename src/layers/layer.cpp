#include "keel/layers/layer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>

#include <fmt/core.h>

#include "autograd/autocast.hpp"
#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "layers/symbolic.hpp"

namespace keel::layers {

namespace {
thread_local bool training_context = false;

struct TrainingScope {
  bool saved;
  explicit TrainingScope(bool t) : saved(training_context) { training_context = t; }
  ~TrainingScope() { training_context = saved; }
};
}  // namespace

bool in_training_call() { return training_context; }

Tensor get_mask(const Tensor& x) {
  return x.defined() && x.impl()->keras_mask ? Tensor(x.impl()->keras_mask) : Tensor();
}

Tensor with_mask(const Tensor& x, const Tensor& mask) {
  Tensor t = keel::detail::make_view(x, x.shape(), x.strides(), x.offset());
  t.impl()->keras_mask = mask.defined() ? mask.impl_ptr() : nullptr;
  // The view is a new tensor to the tape: an identity node keeps gradients flowing through it.
  if (autograd::recording())
    autograd::record("with_mask", {x}, {t}, [](const autograd::Grads& g, const autograd::Needs&) {
      return autograd::Grads{g[0]};
    });
  return t;
}

std::string to_snake_case(const std::string& cls) {
  std::string out;
  for (std::size_t i = 0; i < cls.size(); ++i) {
    const char c = cls[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      // A new word starts at an upper-case letter after a lower-case one, or before a
      // lower-case one in an acronym run ("GRUCell" -> "gru_cell"); digits stay attached.
      const bool prev_lower = i > 0 && std::islower(static_cast<unsigned char>(cls[i - 1]));
      const bool next_lower = i + 1 < cls.size() && std::islower(static_cast<unsigned char>(cls[i + 1]));
      const bool prev_upper = i > 0 && std::isupper(static_cast<unsigned char>(cls[i - 1]));
      if (i > 0 && (prev_lower || (prev_upper && next_lower))) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

std::string unique_name(const std::string& class_name) {
  static std::mutex mutex;
  static std::map<std::string, int> counts;
  const std::string base = to_snake_case(class_name);
  std::lock_guard<std::mutex> lock(mutex);
  const int n = counts[base]++;
  return n == 0 ? base : fmt::format("{}_{}", base, n);
}

Layer::Layer(std::string name) : name_(std::move(name)), policy_(mixed_precision::global_policy()) {}
Layer::~Layer() = default;
Layer::Layer(Layer&&) noexcept = default;
Layer& Layer::operator=(Layer&&) noexcept = default;

const std::string& Layer::name() const {
  if (name_.empty()) name_ = unique_name(class_name());
  return name_;
}

void Layer::build(const Shape&) {}

void Layer::build(const std::vector<Shape>& shapes) {
  if (shapes.empty()) throw ValueError(fmt::format("{}: build() got no input shapes", name()));
  build(shapes[0]);
}

Tensor Layer::call(const Tensor& inputs, bool) { return inputs; }

Tensor Layer::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() != 1)
    throw ValueError(fmt::format("{} ({}): expected one input, got {}", name(), class_name(), inputs.size()));
  return call(inputs[0], training);
}

void Layer::check_input_shape(const Shape& s) const {
  const Shape& b = built_shape_;
  if (s.rank() != b.rank() || (s.rank() > 0 && s[s.rank() - 1] != b[b.rank() - 1]))
    throw ShapeError(fmt::format("{} ({}): input shape {} is incompatible with the shape {} the layer was built for",
                                 name(), class_name(), s.to_string(), b.to_string()));
}

// Marks the build() that operator() runs, as opposed to one the user calls directly.
struct Layer::BuildScope {
  Layer& layer;
  explicit BuildScope(Layer& l) : layer(l) { layer.building_ = true; }
  ~BuildScope() { layer.building_ = false; }
  BuildScope(const BuildScope&) = delete;
  BuildScope& operator=(const BuildScope&) = delete;
};

namespace detail {

Tensor make_symbolic(const Tensor& value, std::shared_ptr<SymbolicNode> node) {
  Tensor t = keel::detail::make_view(value, value.shape(), value.strides(), value.offset());
  t.impl()->symbolic = std::move(node);
  return t;
}

Tensor placeholder_of(const Tensor& symbolic) {
  return keel::detail::make_view(symbolic, symbolic.shape(), symbolic.strides(), symbolic.offset());
}

std::string shape_text(const Shape& s) {
  if (s.rank() == 0) return "()";
  std::string out = "(";
  for (std::int64_t i = 0; i < s.rank(); ++i)
    out += (i ? ", " : "") + (i == 0 || s[i] < 0 ? std::string("None") : std::to_string(s[i]));
  return out + (s.rank() == 1 ? ",)" : ")");
}

Shape probe_shape(const Shape& shape, std::int64_t probe) {
  std::vector<std::int64_t> dims = shape.dims();
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (i == 0) dims[i] = 1;
    else if (dims[i] < 0) dims[i] = probe;
  return Shape(dims);
}

Shape shape_from_probes(const Shape& probe, const Shape& probe_alt, const std::string& who) {
  if (probe.rank() != probe_alt.rank())
    throw ValueError(fmt::format("{}: the output's rank depends on the size of a None input dimension ({} for one "
                                 "size, {} for another)", who, probe.to_string(), probe_alt.to_string()));
  std::vector<std::int64_t> dims = probe.dims();
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (i == 0 || dims[i] != probe_alt[static_cast<std::int64_t>(i)]) dims[i] = -1;
  return Shape(dims);
}

}  // namespace detail


std::shared_ptr<Layer> Layer::move_to_heap() {
  throw ValueError(fmt::format(
      "{}: this layer class has no KEEL_LAYER_BOILERPLATE, so a temporary of it cannot be kept by a "
      "model; create it with std::make_shared<{}>(...) instead", name(), class_name()));
}


// ---- dtype policies (Keras' autocast) ---------------------------------------------------------

namespace {

// The dtype operator() hands an input of dtype `x` to call() in, for a layer computing in
// `compute` (Keras' DTypePolicy.convert_input): floating inputs are cast to it, except float64
// under a float32 policy, which stays float64 so that gradients can be checked in double
// precision. Integer inputs are cast for layers that compute on floats only; bool tensors
// (masks) and the integer inputs of other layers (ids, shape layers) stay as they are.
DType input_dtype(DType x, DType compute, bool mixed, bool floating_inputs) {
  if (is_floating(x)) return x == DType::float64 && !mixed ? x : compute;
  return floating_inputs && x != DType::bool_ ? compute : x;
}

// `x` as call() receives it; a mask riding on it rides on the cast too.
Tensor converted(const Tensor& x, DType compute, bool mixed, bool floating_inputs) {
  if (!x.defined()) return x;
  const DType dtype = input_dtype(x.dtype(), compute, mixed, floating_inputs);
  if (dtype == x.dtype()) return x;
  const Tensor mask = get_mask(x);
  const Tensor y = cast(x, dtype);
  return mask.defined() ? with_mask(y, mask) : y;
}

std::vector<Tensor> converted(const std::vector<Tensor>& xs, DType compute, bool mixed, bool floating_inputs) {
  std::vector<Tensor> out;
  out.reserve(xs.size());
  for (const auto& x : xs) out.push_back(converted(x, compute, mixed, floating_inputs));
  return out;
}

bool needs_cast(const Tensor& x, DType compute, bool floating_inputs) {
  return input_dtype(x.dtype(), compute, false, floating_inputs) != x.dtype();
}
bool needs_cast(const std::vector<Tensor>& xs, DType compute, bool floating_inputs) {
  for (const auto& x : xs)
    if (needs_cast(x, compute, floating_inputs)) return true;
  return false;
}

}  // namespace

class LayerAccess {
 public:
  // The shape summary() shows for a layer called in a functional graph (None dimensions as -1).
  static void set_output_shape(Layer& layer, const Shape& shape) { layer.output_shape_ = shape; }

  // call() under the layer's dtype policy (see Layer::Autocast): the one place where a layer's
  // inputs are cast to the dtype it computes in. Float32 layers with float32 inputs, the common
  // case, take the first branch: no casts, no allocation.
  template <class Inputs>
  static Tensor call(Layer& layer, const Inputs& inputs, bool training) {
    const mixed_precision::Policy& policy = layer.policy_;
    const bool mixed = policy.is_mixed();
    const Layer::Autocast mode = layer.autocast();
    const bool floating_inputs = layer.floating_inputs();
    // The dtype call() computes in: the policy's, or float32 for the layers that declare it.
    const DType compute = mode == Layer::Autocast::float32 ? DType::float32 : policy.compute_dtype();
    if (!mixed && (mode == Layer::Autocast::none || mode == Layer::Autocast::variables ||
                   !needs_cast(inputs, compute, floating_inputs))) {
      if (autograd::AutocastScope::current()) {  // inside a mixed layer: read weights as they are
        autograd::AutocastScope off(std::nullopt);
        return layer.call(inputs, training);
      }
      return layer.call(inputs, training);
    }
    // Weights are read in the dtype the layer computes in: float32 variables cast to the compute
    // dtype of a mixed policy, and as they are otherwise.
    const std::optional<DType> read_as =
        mixed && mode != Layer::Autocast::float32 && mode != Layer::Autocast::none ? std::optional<DType>(compute)
                                                                                   : std::nullopt;
    autograd::AutocastScope scope(read_as);
    switch (mode) {
      case Layer::Autocast::none:
      case Layer::Autocast::variables:
        return layer.call(inputs, training);
      case Layer::Autocast::compute:
        return layer.call(converted(inputs, compute, mixed, floating_inputs), training);
      case Layer::Autocast::float32: {
        // Computed in float32, handed back in the compute dtype (Keras' BatchNormalization).
        const Tensor y = layer.call(converted(inputs, compute, mixed, floating_inputs), training);
        return y.defined() && y.dtype() == DType::float32 ? converted(y, policy.compute_dtype(), mixed, false) : y;
      }
    }
    return layer.call(inputs, training);
  }

  // Which weights collect() lists: those that train, or those that do not.
  enum class Which { trainable, non_trainable };

  static void collect(Layer& layer, std::vector<Variable*>& out, Which which, bool parent_trainable,
                      std::vector<const Layer*>& seen) {
    for (const auto* s : seen)
      if (s == &layer) return;  // shared layers count once
    seen.push_back(&layer);
    const bool trainable = parent_trainable && layer.trainable_;
    for (auto& w : layer.weights_) {
      const bool t = trainable && w.variable->trainable();
      if (t == (which == Which::trainable)) out.push_back(w.variable.get());
    }
    for (auto& s : layer.sublayers_) collect(*s, out, which, trainable, seen);
  }
  static void losses(Layer& layer, std::vector<Tensor>& out, std::vector<const Layer*>& seen) {
    for (const auto* s : seen)
      if (s == &layer) return;
    seen.push_back(&layer);
    for (auto& w : layer.weights_)
      if (w.regularizer.active()) out.push_back(w.regularizer(w.variable->value()));
    for (const auto& l : layer.call_losses_) out.push_back(l);
    for (auto& s : layer.sublayers_) losses(*s, out, seen);
  }
};

namespace {
Tensor run_untaped(Layer& layer, const std::vector<Tensor>& values, bool multi) {
  autograd::NoRecordScope no_record;
  return multi ? layer(values, false) : layer(values[0], false);
}

std::string static_shapes_text(const std::vector<Tensor>& symbolic) {
  std::string out;
  for (const auto& t : symbolic) out += (out.empty() ? "" : ", ") + detail::shape_text(detail::static_shape(t));
  return out;
}

// A layer called on symbolic tensors: run it once on the placeholder values (which builds it
// and gives the output's shape), then hand back a symbolic output that remembers the call. Below
// an Input with None dimensions it runs a second time, on the placeholders of the other probe
// size: a dimension that differs between the two outputs is None, and a layer that cannot take
// the second size (a Dense on a None feature axis) fails here, when the model is made, as in Keras.
Tensor symbolic_call(Layer& layer, const std::vector<Tensor>& inputs, bool multi) {
  std::shared_ptr<Layer> self = layer.weak_from_this().lock();
  if (!self) self = layer.move_to_heap();
  std::vector<Tensor> values, alternates;
  bool dynamic = false;
  for (const auto& t : inputs) {
    if (!detail::is_symbolic(t))
      throw ValueError(fmt::format("{}: a functional-API call mixes symbolic and concrete inputs", self->name()));
    values.push_back(detail::placeholder_of(t));
    dynamic = dynamic || t.impl()->symbolic->alternate.defined();
  }
  const Tensor out = run_untaped(*self, values, multi);
  auto node = std::make_shared<SymbolicNode>();
  node->layer = self;
  node->inputs = inputs;
  node->multi_input = multi;
  node->shape = out.rank() > 0 ? detail::shape_from_probes(out.shape(), out.shape(), self->name()) : out.shape();
  if (dynamic) {
    for (const auto& t : inputs) {
      const Tensor& alt = t.impl()->symbolic->alternate;
      alternates.push_back(alt.defined() ? alt : detail::placeholder_of(t));
    }
    try {
      node->alternate = run_untaped(*self, alternates, multi);
    } catch (const Error& e) {
      throw ValueError(fmt::format("{} ({}): cannot take inputs of shape {}, whose None dimensions may have any size: {}",
                                   self->name(), self->class_name(), static_shapes_text(inputs), e.what()));
    }
    node->shape = detail::shape_from_probes(out.shape(), node->alternate.shape(), self->name());
  }
  LayerAccess::set_output_shape(*self, node->shape);
  return detail::make_symbolic(out, std::move(node));
}
}  // namespace

void detail::set_output_shape(Layer& layer, const Shape& shape) { LayerAccess::set_output_shape(layer, shape); }

Tensor Layer::operator()(const Tensor& inputs, bool training) {
  keel::detail::check_defined(inputs, "Layer.__call__");
  if (detail::is_symbolic(inputs)) return symbolic_call(*this, {inputs}, false);
  const bool t = training || training_context;
  TrainingScope scope(t);
  if (!built_) {
    BuildScope building(*this);
    build(inputs.shape());
    set_built(inputs.shape());
  } else if (build_shape_unknown_) {
    set_built(inputs.shape());  // built by a direct build() call: its shape is this one
  } else {
    check_input_shape(inputs.shape());
  }
  call_losses_.clear();
  backend::ProfileRange range("layer", name());
  Tensor y = LayerAccess::call(*this, inputs, t);
  if (y.defined()) output_shape_ = y.shape();
  return y;
}

Tensor Layer::operator()(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.empty()) throw ValueError(fmt::format("{}: called with an empty list of inputs", name()));
  for (const auto& x : inputs) keel::detail::check_defined(x, "Layer.__call__");
  if (detail::is_symbolic(inputs[0])) return symbolic_call(*this, inputs, true);
  const bool t = training || training_context;
  TrainingScope scope(t);
  if (!built_) {
    std::vector<Shape> shapes;
    for (const auto& x : inputs) shapes.push_back(x.shape());
    BuildScope building(*this);
    build(shapes);
    set_built(inputs[0].shape());
  } else if (build_shape_unknown_) {
    set_built(inputs[0].shape());
  }
  call_losses_.clear();
  backend::ProfileRange range("layer", name());
  Tensor y = LayerAccess::call(*this, inputs, t);
  if (y.defined()) output_shape_ = y.shape();
  return y;
}

Variable& Layer::add_weight(std::string wname, Shape shape, std::string initializer, bool trainable) {
  return add_weight(std::move(wname), std::move(shape), initializers::Initializer(std::move(initializer)),
                    trainable, {});
}

Variable& Layer::add_weight(std::string wname, Shape shape, const initializers::Initializer& initializer,
                            bool trainable, const regularizers::Regularizer& regularizer,
                            const constraints::Constraint& constraint) {
  Tensor init;
  try {
    init = initializer(shape, DType::float32);
  } catch (const ResourceExhaustedError& e) {
    throw ResourceExhaustedError(fmt::format("{}.add_weight('{}', {}): {}", name(), wname, shape.to_string(), e.what()));
  } catch (const ValueError& e) {  // a shape whose size overflows
    throw ValueError(fmt::format("{}.add_weight('{}', {}): {}", name(), wname, shape.to_string(), e.what()));
  }
  if (init.shape() != shape)
    throw ShapeError(fmt::format("{}.add_weight('{}'): the initializer made shape {} instead of {}", name(),
                                 wname, init.shape().to_string(), shape.to_string()));
  // A weight made outside a build() that operator() started comes from the user's own call of
  // build() (or from the constructor): the layer counts as built from here on, so that its first
  // call does not build it a second time (Keras' build wrapper marks the layer built the same way).
  if (!built_ && !building_) {
    built_ = true;
    build_shape_unknown_ = true;
  }
  auto v = std::make_unique<Variable>(init, name() + "/" + wname, trainable);
  if (constraint.active()) v->set_constraint(constraint.function());  // the optimizer applies it
  Variable& ref = *v;
  weights_.push_back({std::move(v), regularizer});
  return ref;
}

Variable& Layer::add_weight(std::string wname, Shape shape, DType dtype) {
  Variable& v = add_weight(std::move(wname), std::move(shape), initializers::Initializer("zeros"), false);
  if (dtype != DType::float32) v = Variable(cast(v.peek(), dtype), v.name(), false);
  return v;
}

void Layer::track_layer(std::shared_ptr<Layer> sublayer) {
  if (!sublayer) throw ValueError(fmt::format("{}: track() got a null layer", name()));
  if (sublayer.get() == this) throw ValueError(fmt::format("{}: a layer cannot track itself", name()));
  for (const auto& s : sublayers_)
    if (s == sublayer) return;
  sublayers_.push_back(std::move(sublayer));
}


std::vector<Variable*> Layer::trainable_weights() {
  std::vector<Variable*> out;
  std::vector<const Layer*> seen;
  LayerAccess::collect(*this, out, LayerAccess::Which::trainable, true, seen);
  return out;
}

std::vector<Variable*> Layer::non_trainable_weights() {
  std::vector<Variable*> out;
  std::vector<const Layer*> seen;
  LayerAccess::collect(*this, out, LayerAccess::Which::non_trainable, true, seen);
  return out;
}

std::vector<Variable*> Layer::weights() {
  auto out = trainable_weights();
  auto rest = non_trainable_weights();
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

std::vector<Tensor> Layer::losses() {
  std::vector<Tensor> out;
  std::vector<const Layer*> seen;
  LayerAccess::losses(*this, out, seen);
  return out;
}

void Layer::add_loss(const Tensor& loss) {
  keel::detail::check_defined(loss, "Layer.add_loss");
  call_losses_.push_back(loss);
}

std::int64_t Layer::count_params() {
  std::int64_t n = 0;
  for (Variable* v : weights()) n += v->shape().num_elements();
  return n;
}

void Layer::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (auto& s : sublayers_) s->set_trainable(trainable);
}

nlohmann::json Layer::get_config() const {
  return {{"name", name()}, {"trainable", trainable_}, {"dtype", policy_.name()}};
}

Shape Layer::compute_output_shape(const Shape& input_shape) {
  // Traced on a batch of one (cheap), then given the batch of the shape asked about: layers map
  // samples to samples, as Keras' symbolic trace assumes. A batch of -1 (None) stays -1, and
  // other -1 dimensions are traced on two sizes, as a functional model's None dimensions are.
  std::vector<std::int64_t> dims = input_shape.dims();
  autograd::NoRecordScope no_record;
  if (dims.empty()) return (*this)(zeros(input_shape), false).shape();
  const std::int64_t batch = dims[0];
  const bool dynamic = std::any_of(dims.begin() + 1, dims.end(), [](std::int64_t d) { return d < 0; });
  const Shape traced = (*this)(zeros(detail::probe_shape(input_shape, detail::kNoneProbe)), false).shape();
  std::vector<std::int64_t> out = traced.dims();
  if (dynamic) {
    const Shape alt = (*this)(zeros(detail::probe_shape(input_shape, detail::kNoneProbeAlt)), false).shape();
    out = detail::shape_from_probes(traced, alt, name()).dims();
  }
  if (!out.empty() && (out[0] == 1 || out[0] == -1)) out[0] = batch;
  return Shape(out);
}

InputLayer::InputLayer(Shape shape, std::string name) : Layer(std::move(name)), shape_(std::move(shape)) {
  std::vector<std::int64_t> dims{1};
  dims.insert(dims.end(), shape_.dims().begin(), shape_.dims().end());
  set_built(Shape(dims));
}

Tensor InputLayer::call(const Tensor& inputs, bool) { return inputs; }

void InputLayer::check_input_shape(const Shape& s) const {
  bool ok = s.rank() == shape_.rank() + 1;
  for (std::int64_t i = 0; ok && i < shape_.rank(); ++i) ok = shape_[i] < 0 || s[i + 1] == shape_[i];
  if (!ok)
    throw ShapeError(fmt::format("{} (InputLayer): expected inputs of shape [batch]+{}, got {}", name(),
                                 shape_.to_string(), s.to_string()));
}

nlohmann::json InputLayer::get_config() const {
  auto config = Layer::get_config();
  config["dtype"] = "float32";  // the input's dtype, not a policy
  // As Keras writes it: the batch, and any dimension of unknown size, is null.
  nlohmann::json batch_shape = nlohmann::json::array({nullptr});
  for (std::int64_t d : shape_.dims()) batch_shape.push_back(d < 0 ? nlohmann::json(nullptr) : nlohmann::json(d));
  config["batch_shape"] = batch_shape;
  return config;
}

}  // namespace keel::layers
