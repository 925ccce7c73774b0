// PruneLowMagnitude: tfmot's pruning_wrapper.py. The wrapped layer runs on weight * mask: the
// stored weights already hold weight * mask (apply_masks() runs before each training batch's
// forward pass and after its update), and under a tape the wrapper's node multiplies the
// weights' gradients by the mask, which is the gradient of weight * mask.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "autograd/record.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/ops/creation.hpp"
#include "layers/layer_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "pruning/pruning_internal.hpp"

namespace keel::pruning {

namespace {

const char* const kCallbackError =
    "Prune() wrapper requires the UpdatePruningStep callback to be provided during training. Please add it as a "
    "callback to your model.fit call.";

}  // namespace

PruneLowMagnitude::PruneLowMagnitude(layers::LayerRef layer, PruningSchedule schedule, PruningOptions options)
    : Layer(layer.get() ? "prune_low_magnitude_" + layer.get()->name() : ""),
      layer_(layer.get()),
      schedule_(std::move(schedule)),
      options_(std::move(options)) {
  if (!layer_) throw ValueError("PruneLowMagnitude: the wrapped layer is null");
  if (dynamic_cast<PruneLowMagnitude*>(layer_.get()))
    throw ValueError(fmt::format("PruneLowMagnitude: '{}' is pruned already", layer_->name()));
  if (!is_prunable(*layer_))
    throw ValueError(fmt::format(
        "PruneLowMagnitude: {} '{}' has no prunable weights. Prunable layers: Dense, Conv1D/2D/3D(Transpose), "
        "DepthwiseConv1D/2D, SeparableConv1D/2D, Embedding, SimpleRNN, LSTM, GRU, ConvLSTM1D/2D/3D, Bidirectional, "
        "MultiHeadAttention",
        layer_->class_name(), layer_->name()));
  // The wrapped forward pass runs under a tape of its own, so a loss the layer adds in its call
  // would reach the outer tapes without gradients: refused rather than trained silently wrong.
  const nlohmann::json lc = layer_->get_config();
  if (auto it = lc.find("activity_regularizer"); it != lc.end() && !it->is_null())
    throw ValueError(fmt::format("PruneLowMagnitude: {} '{}' has an activity_regularizer, which a pruned layer does "
                                 "not support yet (use ActivityRegularization after it)",
                                 layer_->class_name(), layer_->name()));
  validate(schedule_);
  detail::validate_options(options_);
  set_dtype_policy(layer_->dtype_policy());
  track(layer_);
}

void PruneLowMagnitude::build(const Shape& input_shape) {
  // Keras' Wrapper.build: the wrapped layer builds on the shape (layers whose weights appear at
  // their first call, such as Bidirectional, get their masks after it).
  if (!layer_->built()) layer_->build(input_shape);
  make_masks();
}

void PruneLowMagnitude::make_masks() {
  if (step_) return;
  const std::vector<Variable*> weights = detail::prunable_weights(*layer_);
  if (weights.empty()) return;  // not built yet
  for (Variable* w : weights) {
    const Shape s = w->shape();
    if ((options_.block_size[0] != 1 || options_.block_size[1] != 1) && s.rank() != 2)
      throw ValueError(fmt::format("{}: block sparsity (block_size [{}, {}]) can only be used for layers which have "
                                   "2-dimensional weights; '{}' is {}", name(), options_.block_size[0],
                                   options_.block_size[1], w->name(), s.to_string()));
    if (options_.sparsity_m_by_n && s.rank() < 2)
      throw ValueError(fmt::format("{}: sparsity_m_by_n needs weights of rank >= 2; '{}' is {}", name(), w->name(),
                                   s.to_string()));
  }
  for (Variable* w : weights) {
    const std::string rel = layers::detail::relative_weight_name(w->name(), layer_->name());
    PrunedWeight p;
    p.weight = w;
    p.mask = &add_weight(rel + "_mask", w->shape(), initializers::Initializer("ones"), false);
    p.threshold = &add_weight(rel + "_threshold", Shape{}, initializers::Initializer("zeros"), false);
    pruned_.push_back(p);
  }
  // tfmot's int64 pruning_step, held as float32 (keel's weights are float32): exact up to 2^24.
  step_ = &add_weight("pruning_step", Shape{}, initializers::Constant(-1.0), false);
  if (step_set_ >= 0) set_pruning_step(step_set_);
}

void PruneLowMagnitude::check_input_shape(const Shape& input_shape) const {
  if (layer_->built()) layer_->check_input_shape(input_shape);
}

Shape PruneLowMagnitude::compute_output_shape(const Shape& input_shape) {
  return layer_->compute_output_shape(input_shape);
}

std::int64_t PruneLowMagnitude::pruning_step() const {
  if (!step_) return -1;
  return static_cast<std::int64_t>(std::llround(step_->peek().to(Device::cpu()).item<float>()));
}

void PruneLowMagnitude::set_pruning_step(std::int64_t step) {
  step_set_ = step;  // an unbuilt wrapper stores it when it makes its variables
  if (step_) step_->assign(constant(static_cast<double>(step), DType::float32).to(step_->device()));
}

bool PruneLowMagnitude::update_masks() {
  if (!step_) return false;  // not built: its masks do not exist yet (they start as ones)
  const ScheduleDecision d = evaluate(schedule_, pruning_step());
  if (!d.should_prune) return false;
  for (PrunedWeight& p : pruned_) {
    const Shape s = p.weight->shape();
    const std::vector<float> w = p.weight->peek().to(Device::cpu()).to_vector<float>();
    detail::MaskUpdate u;
    if (options_.sparsity_m_by_n)
      u = detail::m_by_n_mask(w, s, *options_.sparsity_m_by_n);
    else if (options_.block_size[0] != 1 || options_.block_size[1] != 1)
      u = detail::block_mask(w, s, d.sparsity, options_.block_size, options_.block_pooling_type);
    else
      u = detail::magnitude_mask(w, d.sparsity);
    p.mask->assign(constant(u.mask, s).to(p.mask->device()));
    p.threshold->assign(constant(static_cast<double>(u.threshold), DType::float32).to(p.threshold->device()));
  }
  return true;
}

void PruneLowMagnitude::apply_masks() {
  // tfmot's weight_mask_op: weight <- weight * mask.
  for (PrunedWeight& p : pruned_) p.weight->assign(mul(p.weight->peek(), p.mask->peek()));
}

Tensor PruneLowMagnitude::call(const Tensor& x, bool training) {
  if (training && step_set_ < 1) throw ValueError(fmt::format("{}: {}", name(), kCallbackError));
  std::vector<Variable*> vars = layer_->trainable_weights();
  if (!autograd::recording() || vars.empty()) {
    Tensor y = (*layer_)(x, training);
    make_masks();
    return y;
  }
  // The wrapped layer's forward pass is recorded on a tape of its own; the outer tapes get one
  // node whose gradient is that tape's, with each pruned weight's gradient times its mask.
  const bool floating_x = is_floating(x.dtype());
  std::shared_ptr<GradientTape> tape;
  Tensor y;
  {
    autograd::NoRecordScope outer_tapes_wait;
    tape = std::make_shared<GradientTape>(/*persistent=*/true, /*watch_accessed_variables=*/false);
    for (Variable* v : vars) tape->watch(*v);
    if (floating_x) tape->watch(x);
    y = (*layer_)(x, training);
  }
  // The inner tape stays on this thread's tape stack while the node below holds it: paused, so
  // that it records neither that node nor anything after it.
  std::shared_ptr<GradientTape::RecordingPause> paused(new GradientTape::RecordingPause(tape->stop_recording()));
  make_masks();
  std::vector<Tensor> inputs;
  if (floating_x) inputs.push_back(x);
  std::vector<Tensor> masks;
  for (Variable* v : vars) {
    autograd::notify_variable_read(v->peek());  // as reading it outside the inner tape would
    inputs.push_back(v->peek());
    Tensor m;
    for (const PrunedWeight& p : pruned_)
      if (p.weight == v) m = p.mask->peek();
    masks.push_back(m);
  }
  const std::size_t first_var = floating_x ? 1 : 0;
  autograd::record("prune_low_magnitude", inputs, {y},
                   [tape, paused, y, inputs, masks, first_var](const autograd::Grads& g, const autograd::Needs&) {
                     std::vector<Tensor> grads = tape->gradient(y, inputs, g[0], UnconnectedGradients::zero);
                     for (std::size_t i = 0; i < masks.size(); ++i)
                       if (masks[i].defined() && grads[first_var + i].defined())
                         grads[first_var + i] = mul(grads[first_var + i], masks[i]);
                     return grads;
                   });
  return y;
}

bool is_prunable(const layers::Layer& layer) { return detail::prunable_class(layer.class_name()); }

std::shared_ptr<layers::Layer> prune_low_magnitude(layers::LayerRef layer, PruningSchedule schedule,
                                                   PruningOptions options) {
  if (auto model = std::dynamic_pointer_cast<models::Model>(layer.get()))
    return prune_low_magnitude(*model, std::move(schedule), std::move(options));
  return std::make_shared<PruneLowMagnitude>(std::move(layer), std::move(schedule), std::move(options));
}

}  // namespace keel::pruning
