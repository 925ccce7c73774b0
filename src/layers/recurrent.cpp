// Recurrent layers (SimpleRNN, LSTM, GRU) and the wrappers Bidirectional and TimeDistributed.
//
// Recurrent::run() is the one time loop: it prepares the input (dtype, dropout mask), the
// initial states and the Keras mask, then either hands the whole sequence to a fused op
// (lstm() / gru(): one input projection for all steps, one tape node per step) or steps through
// time with the subclass's StepFn, applying the mask between steps. The subclasses only say how
// one step maps (x_t, states) to new states, and which options allow the fused op.
#include "keel/layers/recurrent.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "keel/autograd/tape.hpp"
#include "keel/core/device.hpp"
#include "keel/core/error.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/linalg.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/shape.hpp"
#include "layers/layer_util.hpp"

namespace keel::layers {

namespace {

// x[:, ::-1]: a gather along the time axis (differentiable; its gradient scatters back).
Tensor reverse_time(const Tensor& x) {
  const std::int64_t time = x.shape()[1];
  std::vector<std::int64_t> idx(static_cast<std::size_t>(time));
  for (std::int64_t t = 0; t < time; ++t) idx[static_cast<std::size_t>(t)] = time - 1 - t;
  DeviceScope scope(x.device());
  return gather(x, constant(idx, Shape{time}), 1);
}

void check_units(const char* cls, int units) {
  if (units <= 0)
    throw ValueError(fmt::format("{}: units must be a positive integer, got {}", cls, units));
}

std::string strip_prefix(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

// Recurrent::Common from SimpleRNN's, LSTM's or GRU's options, which name those fields alike.
template <class Common, class Options>
Common common_of(const Options& o) {
  return Common{o.dropout,      o.recurrent_dropout, o.seed,   o.return_sequences,   o.return_state,
                o.go_backwards, o.stateful,          o.unroll, o.activity_regularizer};
}

// The kernel [input_dim, width] and recurrent kernel [units, width] of a cell whose gates take
// `width` columns.
template <class Options>
void add_cell_kernels(Layer& layer, const Options& options, std::int64_t input_dim, std::int64_t units,
                      std::int64_t width, Variable*& kernel, Variable*& recurrent_kernel) {
  kernel = &layer.add_weight("kernel", Shape{input_dim, width}, options.kernel_initializer, true,
                             options.kernel_regularizer, options.kernel_constraint);
  recurrent_kernel = &layer.add_weight("recurrent_kernel", Shape{units, width}, options.recurrent_initializer, true,
                                       options.recurrent_regularizer, options.recurrent_constraint);
}

// The activations the fused LSTM and GRU ops implement.
template <class Options>
bool fused_activations(const Options& options) {
  return options.activation.name() == "tanh" && options.recurrent_activation.name() == "sigmoid";
}

// A copy of a SimpleRNN, LSTM or GRU with its options but a new direction and name.
template <class L, class Options>
std::shared_ptr<Recurrent> clone_with(int units, Options options, bool go_backwards) {
  options.go_backwards = go_backwards;
  options.name.clear();
  return std::make_shared<L>(units, options);
}

// h_{t-1} with the call's recurrent dropout mask applied (Keras' DropoutRNNCell), if any.
Tensor dropped(const Tensor& h, const Tensor& recurrent_mask) {
  return recurrent_mask.defined() ? mul(h, recurrent_mask) : h;
}

}  // namespace

// ---- Recurrent ---------------------------------------------------------------------------------

Recurrent::Recurrent(int units, Common common, std::string name)
    : Layer(std::move(name)), units_(units), common_(std::move(common)) {}

void Recurrent::check_rate(const std::string& layer, const char* what, double rate) {
  if (!(rate >= 0 && rate <= 1))
    throw ValueError(fmt::format("{}: {} must be in [0, 1], got {}", layer, what, rate));
}

Tensor Recurrent::value_as(const Variable* v, DType dtype) {
  return v == nullptr ? Tensor() : detail::as_dtype(v->value(), dtype);
}

void Recurrent::build(const Shape& input_shape) {
  if (input_shape.rank() != 3)
    throw ShapeError(fmt::format("{} ({}): expected inputs of rank 3 [batch, time, features], got {}", name(),
                                 class_name(), input_shape.to_string()));
  build_cell(input_shape[2]);
}

Tensor Recurrent::call(const Tensor& inputs, bool training) { return run(inputs, {}, training); }

Tensor Recurrent::call(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() != 1 && inputs.size() != 1 + state_count())
    throw ValueError(fmt::format("{} ({}): expected {{inputs}} or {{inputs, {} initial state{}}}, got {} tensors",
                                 name(), class_name(), state_count(), state_count() == 1 ? "" : "s",
                                 inputs.size()));
  check_input_shape(inputs[0].shape());  // the multi-input operator() leaves this to the layer
  return run(inputs[0], std::vector<Tensor>(inputs.begin() + 1, inputs.end()), training);
}

std::vector<Tensor> Recurrent::call_with_state(const Tensor& x, bool training,
                                               const std::vector<Tensor>& initial_state) {
  Tensor out;
  if (initial_state.empty()) {
    out = (*this)(x, training);
  } else {
    std::vector<Tensor> inputs{x};
    inputs.insert(inputs.end(), initial_state.begin(), initial_state.end());
    out = (*this)(inputs, training);
  }
  std::vector<Tensor> result{out};
  result.insert(result.end(), states_.begin(), states_.end());
  return result;
}

void Recurrent::reset_states() { carried_.clear(); }

std::uint64_t Recurrent::next_seed(MaskStream stream) {
  // Two streams per training call (inputs, recurrent state), both functions of (seed, call):
  // reproducible, yet a new mask for every batch, as Keras' SeedGenerator gives.
  return detail::mix(*common_.seed ^ detail::mix(2 * training_calls_ + static_cast<std::uint64_t>(stream)));
}

Tensor Recurrent::run(const Tensor& x_in, const std::vector<Tensor>& initial_state, bool training) {
  if (x_in.rank() != 3)
    throw ShapeError(fmt::format("{} ({}): expected inputs of rank 3 [batch, time, features], got {}", name(),
                                 class_name(), x_in.shape().to_string()));
  const DType dt = x_in.dtype();  // the compute dtype operator() cast the input to
  const std::int64_t batch = x_in.shape()[0], time = x_in.shape()[1], features = x_in.shape()[2];
  const std::int64_t units = units_;
  DeviceScope device_scope(x_in.device());
  Tensor x = x_in;

  Tensor mask = get_mask(x_in);
  if (mask.defined()) {
    if (mask.shape() != Shape{batch, time})
      throw ShapeError(fmt::format("{} ({}): the input's mask must be [batch, time] = {}, got {}", name(),
                                   class_name(), Shape{batch, time}.to_string(), mask.shape().to_string()));
    if (mask.dtype() != DType::bool_) mask = cast(mask, DType::bool_);
  }

  // Initial states: given, carried over (stateful) or zeros.
  std::vector<Tensor> states;
  if (!initial_state.empty()) {
    if (initial_state.size() != state_count())
      throw ValueError(fmt::format("{} ({}): expected {} initial state tensor{}, got {}", name(), class_name(),
                                   state_count(), state_count() == 1 ? "" : "s", initial_state.size()));
    for (const Tensor& s : initial_state) {
      if (s.shape() != Shape{batch, units})
        throw ShapeError(fmt::format("{} ({}): an initial state must be [batch, units] = {}, got {}", name(),
                                     class_name(), Shape{batch, units}.to_string(), s.shape().to_string()));
      states.push_back(detail::as_dtype(s, dt));
    }
  } else if (common_.stateful && !carried_.empty()) {
    if (carried_[0].shape()[0] != batch)
      throw ValueError(fmt::format("{} ({}): a stateful layer needs the same batch size in every call: it "
                                   "carries states of batch {}, got inputs {} (call reset_states() first)",
                                   name(), class_name(), carried_[0].shape()[0], x_in.shape().to_string()));
    for (const Tensor& s : carried_) states.push_back(detail::as_dtype(s, dt));
  } else {
    for (std::size_t i = 0; i < state_count(); ++i) states.push_back(zeros(Shape{batch, units}, dt));
  }

  // Dropout masks: one per call, shared by all steps (Keras' DropoutRNNCell). Keras applies a
  // rate only when 0 < rate < 1.
  const bool input_dropout = training && common_.dropout > 0 && common_.dropout < 1;
  const bool state_dropout = training && common_.recurrent_dropout > 0 && common_.recurrent_dropout < 1;
  std::optional<std::uint64_t> seed0, seed1;
  if (common_.seed && (input_dropout || state_dropout)) {
    seed0 = next_seed(MaskStream::inputs);
    seed1 = next_seed(MaskStream::recurrent);
  }
  if (input_dropout || state_dropout) ++training_calls_;
  if (input_dropout) {
    const Tensor keep = dropout(ones(Shape{batch, features}, dt), common_.dropout, seed0);
    x = mul(x, expand_dims(keep, 1));
  }
  Tensor recurrent_mask;
  if (state_dropout) recurrent_mask = dropout(ones(Shape{batch, units}, dt), common_.recurrent_dropout, seed1);

  Tensor outputs;                  // [batch, time, units] in processing order (return_sequences)
  Tensor last;                     // the output of the last step processed
  std::vector<Tensor> final_states;
  if (time == 0) {
    outputs = zeros(Shape{batch, 0, units}, dt);
    last = zeros(Shape{batch, units}, dt);
    final_states = states;
  } else if (!mask.defined() && !recurrent_mask.defined() &&
             run_fused(x, states, dt, outputs, final_states)) {
    last = final_states[0];
  } else {
    const StepFn step = make_step(dt, recurrent_mask);
    const std::vector<Tensor> steps = unstack(x, 1);
    std::vector<Tensor> keep;  // per step: bool [batch, 1]
    if (mask.defined())
      for (const Tensor& m : unstack(mask, 1)) keep.push_back(reshape(m, Shape{batch, 1}));
    std::vector<Tensor> outs;
    if (common_.return_sequences) outs.reserve(static_cast<std::size_t>(time));
    Tensor previous_output = mask.defined() ? zeros(Shape{batch, units}, dt) : Tensor();
    for (std::int64_t s = 0; s < time; ++s) {
      const std::size_t t = static_cast<std::size_t>(common_.go_backwards ? time - 1 - s : s);
      std::vector<Tensor> next = step(steps[t], states);
      Tensor out = next[0];
      if (mask.defined()) {
        // Keras' rnn(): a masked step keeps every state; its output repeats the previous output
        // (or is zero with zero_output_for_mask).
        for (std::size_t i = 0; i < next.size(); ++i) next[i] = where(keep[t], next[i], states[i]);
        out = where(keep[t], out, zero_output_for_mask_ ? zeros_like(out) : previous_output);
        previous_output = out;
      }
      states = std::move(next);
      if (common_.return_sequences) outs.push_back(out);
      last = out;
    }
    if (common_.return_sequences) outputs = stack(outs, 1);
    final_states = states;
  }

  states_ = final_states;
  if (common_.stateful) {
    carried_.clear();
    for (const Tensor& s : final_states) carried_.push_back(stop_gradient(s));  // no gradient across calls
  }
  Tensor y = common_.return_sequences ? outputs : last;
  if (common_.return_sequences && mask.defined()) y = detail::attach_mask(y, mask);
  if (common_.activity_regularizer.active()) {
    // Keras regularises every output of the call: with return_state, the states too.
    add_loss(common_.activity_regularizer(y));
    if (common_.return_state)
      for (const Tensor& s : final_states) add_loss(common_.activity_regularizer(s));
  }
  return y;
}

// ---- SimpleRNN ---------------------------------------------------------------------------------

SimpleRNN::SimpleRNN(int units, SimpleRNNOptions options)
    : Recurrent(units, common_of<Common>(options), options.name), options_(std::move(options)) {
  check_units("SimpleRNN", units);
  check_rate("SimpleRNN", "dropout", options_.dropout);
  check_rate("SimpleRNN", "recurrent_dropout", options_.recurrent_dropout);
}

void SimpleRNN::build_cell(std::int64_t input_dim) {
  const std::int64_t u = units();
  add_cell_kernels(*this, options_, input_dim, u, u, kernel_, recurrent_kernel_);
  if (options_.use_bias)
    bias_ = &add_weight("bias", Shape{u}, options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
}

Recurrent::StepFn SimpleRNN::make_step(DType dtype, const Tensor& recurrent_mask) {
  const Tensor kernel = value_as(kernel_, dtype), recurrent = value_as(recurrent_kernel_, dtype),
               bias = value_as(bias_, dtype);
  const activations::ActivationFn activation = options_.activation;
  return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
    const Tensor h = dropped(states[0], recurrent_mask);
    Tensor z = matmul(x, kernel);
    if (bias.defined()) z = add(z, bias);
    return {activation(add(z, matmul(h, recurrent)))};
  };
}

std::shared_ptr<Recurrent> SimpleRNN::clone(bool go_backwards) const {
  return clone_with<SimpleRNN>(units(), options_, go_backwards);
}

// ---- LSTM --------------------------------------------------------------------------------------

LSTM::LSTM(int units, LSTMOptions options)
    : Recurrent(units, common_of<Common>(options), options.name), options_(std::move(options)) {
  check_units("LSTM", units);
  check_rate("LSTM", "dropout", options_.dropout);
  check_rate("LSTM", "recurrent_dropout", options_.recurrent_dropout);
}

bool LSTM::default_activations() const { return fused_activations(options_); }

void LSTM::build_cell(std::int64_t input_dim) {
  const std::int64_t u = units();
  add_cell_kernels(*this, options_, input_dim, u, 4 * u, kernel_, recurrent_kernel_);
  if (options_.use_bias) {
    initializers::Initializer init = options_.bias_initializer;
    if (options_.unit_forget_bias) {
      // Keras: the forget gate starts open (bias 1) so that early gradients flow through c;
      // the other three blocks come from bias_initializer.
      const initializers::Initializer base = options_.bias_initializer;
      init = initializers::Initializer(
          [base, u](const Shape&, DType dtype) {
            return concat({base(Shape{u}, dtype), ones(Shape{u}, dtype), base(Shape{2 * u}, dtype)}, 0);
          },
          base.name());
    }
    bias_ = &add_weight("bias", Shape{4 * u}, init, true, options_.bias_regularizer, options_.bias_constraint);
  }
}

Recurrent::StepFn LSTM::make_step(DType dtype, const Tensor& recurrent_mask) {
  const Tensor kernel = value_as(kernel_, dtype), recurrent = value_as(recurrent_kernel_, dtype),
               bias = value_as(bias_, dtype);
  if (default_activations())
    return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
      const Tensor h = dropped(states[0], recurrent_mask);
      const LSTMState s = lstm_cell(x, h, states[1], kernel, recurrent, bias);
      return {s.h, s.c};
    };
  const activations::ActivationFn act = options_.activation, rec_act = options_.recurrent_activation;
  return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
    const Tensor h = dropped(states[0], recurrent_mask);
    Tensor z = add(matmul(x, kernel), matmul(h, recurrent));
    if (bias.defined()) z = add(z, bias);
    const std::vector<Tensor> g = split(z, 4, 1);
    const Tensor i = rec_act(g[0]), f = rec_act(g[1]), o = rec_act(g[3]);
    const Tensor c = add(mul(f, states[1]), mul(i, act(g[2])));
    return {mul(o, act(c)), c};
  };
}

bool LSTM::run_fused(const Tensor& x, const std::vector<Tensor>& initial_states, DType dtype,
                     Tensor& outputs, std::vector<Tensor>& final_states) {
  if (!default_activations()) return false;
  const LSTMSequence r = lstm(x, initial_states[0], initial_states[1], value_as(kernel_, dtype),
                              value_as(recurrent_kernel_, dtype), value_as(bias_, dtype), go_backwards());
  outputs = r.outputs;
  final_states = {r.h, r.c};
  return true;
}

std::shared_ptr<Recurrent> LSTM::clone(bool go_backwards) const {
  return clone_with<LSTM>(units(), options_, go_backwards);
}

// ---- GRU ---------------------------------------------------------------------------------------

GRU::GRU(int units, GRUOptions options)
    : Recurrent(units, common_of<Common>(options), options.name), options_(std::move(options)) {
  check_units("GRU", units);
  check_rate("GRU", "dropout", options_.dropout);
  check_rate("GRU", "recurrent_dropout", options_.recurrent_dropout);
}

bool GRU::default_activations() const { return fused_activations(options_); }

void GRU::build_cell(std::int64_t input_dim) {
  const std::int64_t u = units();
  add_cell_kernels(*this, options_, input_dim, u, 3 * u, kernel_, recurrent_kernel_);
  if (options_.use_bias)
    bias_ = &add_weight("bias", options_.reset_after ? Shape{2, 3 * u} : Shape{3 * u},
                        options_.bias_initializer, true, options_.bias_regularizer, options_.bias_constraint);
}

Recurrent::StepFn GRU::make_step(DType dtype, const Tensor& recurrent_mask) {
  const Tensor kernel = value_as(kernel_, dtype), recurrent = value_as(recurrent_kernel_, dtype),
               bias = value_as(bias_, dtype);
  // As Keras' GRUCell, recurrent dropout replaces h_{t-1} everywhere in the step, including
  // the final mix z * h_{t-1}.
  if (options_.reset_after && default_activations())
    return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
      const Tensor h = dropped(states[0], recurrent_mask);
      return {gru_cell(x, h, kernel, recurrent, bias)};
    };
  const activations::ActivationFn act = options_.activation, rec_act = options_.recurrent_activation;
  const std::int64_t u = units();
  if (options_.reset_after) {
    Tensor b_in, b_rec;
    if (bias.defined()) {
      const std::vector<Tensor> b = unstack(bias, 0);
      b_in = b[0];
      b_rec = b[1];
    }
    return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
      const Tensor h = dropped(states[0], recurrent_mask);
      Tensor mx = matmul(x, kernel), mh = matmul(h, recurrent);
      if (b_in.defined()) {
        mx = add(mx, b_in);
        mh = add(mh, b_rec);
      }
      const std::vector<Tensor> xs = split(mx, 3, 1), hs = split(mh, 3, 1);
      const Tensor z = rec_act(add(xs[0], hs[0])), r = rec_act(add(xs[1], hs[1]));
      const Tensor hh = act(add(xs[2], mul(r, hs[2])));
      return {add(mul(z, h), mul(sub(ones_like(z), z), hh))};
    };
  }
  const Tensor rec_zr = slice(recurrent, {0, 0}, {u, 2 * u}), rec_h = slice(recurrent, {0, 2 * u}, {u, u});
  return [=](const Tensor& x, const std::vector<Tensor>& states) -> std::vector<Tensor> {
    const Tensor h = dropped(states[0], recurrent_mask);
    Tensor mx = matmul(x, kernel);
    if (bias.defined()) mx = add(mx, bias);
    const std::vector<Tensor> xs = split(mx, 3, 1), hs = split(matmul(h, rec_zr), 2, 1);
    const Tensor z = rec_act(add(xs[0], hs[0])), r = rec_act(add(xs[1], hs[1]));
    const Tensor hh = act(add(xs[2], matmul(mul(r, h), rec_h)));
    return {add(mul(z, h), mul(sub(ones_like(z), z), hh))};
  };
}

bool GRU::run_fused(const Tensor& x, const std::vector<Tensor>& initial_states, DType dtype,
                    Tensor& outputs, std::vector<Tensor>& final_states) {
  if (!options_.reset_after || !default_activations()) return false;
  const GRUSequence r = gru(x, initial_states[0], value_as(kernel_, dtype), value_as(recurrent_kernel_, dtype),
                            value_as(bias_, dtype), go_backwards());
  outputs = r.outputs;
  final_states = {r.h};
  return true;
}

std::shared_ptr<Recurrent> GRU::clone(bool go_backwards) const {
  return clone_with<GRU>(units(), options_, go_backwards);
}

// ---- Bidirectional -----------------------------------------------------------------------------

Bidirectional::Bidirectional(LayerRef layer, BidirectionalOptions options)
    : Layer(options.name), options_(std::move(options)) {
  const std::string& mode = options_.merge_mode;
  if (mode != "concat" && mode != "sum" && mode != "mul" && mode != "ave")
    throw ValueError(fmt::format("Bidirectional: merge_mode must be \"concat\", \"sum\", \"mul\" or \"ave\", "
                                 "got \"{}\"", mode));
  const auto rnn = std::dynamic_pointer_cast<Recurrent>(layer.get());
  if (!rnn)
    throw ValueError(fmt::format("Bidirectional: the wrapped layer must be a recurrent layer (SimpleRNN, LSTM, "
                                 "GRU), got {} '{}'", layer.get()->class_name(), layer.get()->name()));
  // Fresh copies, as Keras rebuilds both directions from the layer's config: the layer passed
  // in keeps no weights or states of its own here.
  forward_ = rnn->clone(rnn->go_backwards());
  forward_->set_name("forward_" + strip_prefix(rnn->name(), "forward_"));
  if (options_.backward_layer) {
    backward_ = std::dynamic_pointer_cast<Recurrent>(options_.backward_layer);
    if (!backward_)
      throw ValueError(fmt::format("Bidirectional: backward_layer must be a recurrent layer (SimpleRNN, LSTM, "
                                   "GRU), got {} '{}'", options_.backward_layer->class_name(),
                                   options_.backward_layer->name()));
  } else {
    backward_ = rnn->clone(true);
    backward_->set_name("backward_" + strip_prefix(rnn->name(), "backward_"));
  }
  if (forward_->go_backwards() == backward_->go_backwards())
    throw ValueError(fmt::format("Bidirectional: the forward and backward layers need different go_backwards, "
                                 "both have go_backwards = {}", forward_->go_backwards()));
  const auto same = [&](const char* what, bool f, bool b) {
    if (f != b)
      throw ValueError(fmt::format("Bidirectional: the forward and backward layers need the same {}: {} vs {}",
                                   what, f, b));
  };
  same("return_sequences", forward_->return_sequences(), backward_->return_sequences());
  same("return_state", forward_->return_state(), backward_->return_state());
  same("stateful", forward_->stateful(), backward_->stateful());
  // As Keras: when returning sequences, masked steps output zeros, so that the reversed backward
  // outputs line up with the forward ones.
  forward_->set_zero_output_for_mask(forward_->return_sequences());
  backward_->set_zero_output_for_mask(backward_->return_sequences());
  track(forward_);
  track(backward_);
}

void Bidirectional::build(const Shape& input_shape) {
  if (input_shape.rank() != 3)
    throw ShapeError(fmt::format("{} (Bidirectional): expected inputs of rank 3 [batch, time, features], got {}",
                                 name(), input_shape.to_string()));
  // The two directions build themselves on their first call.
}

Tensor Bidirectional::call(const Tensor& inputs, bool training) { return run(inputs, {}, training); }

Tensor Bidirectional::call(const std::vector<Tensor>& inputs, bool training) {
  check_input_shape(inputs[0].shape());
  return run(inputs[0], std::vector<Tensor>(inputs.begin() + 1, inputs.end()), training);
}

Tensor Bidirectional::run(const Tensor& x, const std::vector<Tensor>& initial_state, bool training) {
  if (x.rank() != 3)
    throw ShapeError(fmt::format("{} (Bidirectional): expected inputs of rank 3 [batch, time, features], got {}",
                                 name(), x.shape().to_string()));
  Tensor y, y_rev;
  if (initial_state.empty()) {
    y = (*forward_)(x, training);
    y_rev = (*backward_)(x, training);
  } else {
    if (initial_state.size() % 2 != 0)
      throw ValueError(fmt::format("{} (Bidirectional): initial states come as forward states then backward "
                                   "states (an even number), got {}", name(), initial_state.size()));
    const std::size_t half = initial_state.size() / 2;
    std::vector<Tensor> fw{x}, bw{x};
    fw.insert(fw.end(), initial_state.begin(), initial_state.begin() + static_cast<std::ptrdiff_t>(half));
    bw.insert(bw.end(), initial_state.begin() + static_cast<std::ptrdiff_t>(half), initial_state.end());
    y = (*forward_)(fw, training);
    y_rev = (*backward_)(bw, training);
  }
  if (forward_->return_sequences()) {
    // A backward layer's sequence output is in processing order: put it back in time order.
    if (backward_->go_backwards()) y_rev = reverse_time(y_rev);
    if (forward_->go_backwards()) y = reverse_time(y);
  }
  const std::string& mode = options_.merge_mode;
  Tensor out;
  if (mode == "concat") {
    out = concat({y, y_rev}, -1);
  } else {
    if (y.shape() != y_rev.shape())
      throw ShapeError(fmt::format("{} (Bidirectional): merge_mode \"{}\" needs equal output shapes, got {} and {}",
                                   name(), mode, y.shape().to_string(), y_rev.shape().to_string()));
    if (mode == "sum")
      out = add(y, y_rev);
    else if (mode == "mul")
      out = mul(y, y_rev);
    else
      out = mul(add(y, y_rev), scalar_like(y, 0.5));
  }
  const Tensor mask = get_mask(x);
  if (forward_->return_sequences() && mask.defined()) out = detail::attach_mask(out, mask);
  return out;
}

std::vector<Tensor> Bidirectional::call_with_state(const Tensor& x, bool training,
                                                   const std::vector<Tensor>& initial_state) {
  Tensor out;
  if (initial_state.empty()) {
    out = (*this)(x, training);
  } else {
    std::vector<Tensor> inputs{x};
    inputs.insert(inputs.end(), initial_state.begin(), initial_state.end());
    out = (*this)(inputs, training);
  }
  std::vector<Tensor> result{out};
  for (const Tensor& s : states()) result.push_back(s);
  return result;
}

std::vector<Tensor> Bidirectional::states() const {
  std::vector<Tensor> s = forward_->states();
  const std::vector<Tensor> b = backward_->states();
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

void Bidirectional::reset_states() {
  forward_->reset_states();
  backward_->reset_states();
}

// ---- TimeDistributed ---------------------------------------------------------------------------

TimeDistributed::TimeDistributed(LayerRef layer, TimeDistributedOptions options)
    : Layer(std::move(options.name)) {
  if (!layer.get()) throw ValueError("TimeDistributed: the wrapped layer is null");
  layer_ = track(layer.get());
}

void TimeDistributed::build(const Shape& input_shape) {
  if (input_shape.rank() < 3)
    throw ShapeError(fmt::format("{} (TimeDistributed): expected inputs of rank >= 3 [batch, time, ...], got {}",
                                 name(), input_shape.to_string()));
  // The inner layer builds itself on its first call, on [batch * time, ...].
}

Tensor TimeDistributed::call(const Tensor& inputs, bool training) {
  const Shape& s = inputs.shape();
  if (s.rank() < 3)
    throw ShapeError(fmt::format("{} (TimeDistributed): expected inputs of rank >= 3 [batch, time, ...], got {}",
                                 name(), s.to_string()));
  const std::int64_t batch = s[0], time = s[1];
  std::vector<std::int64_t> inner{batch * time};
  inner.insert(inner.end(), s.dims().begin() + 2, s.dims().end());
  const Tensor mask = get_mask(inputs);
  Tensor step_inputs = reshape(inputs, Shape(inner));
  if (mask.defined()) {
    // Keras: the mask is [batch, time, ...]; each step's slice of it goes to the wrapped layer
    // with that step's inputs (here all steps at once, as [batch * time, ...]).
    const Shape& ms = mask.shape();
    if (ms.rank() < 2 || ms[0] != batch || ms[1] != time)
      throw ValueError(fmt::format("{} (TimeDistributed): the mask should have shape ({}, {}, ...), got mask shape {}",
                                   name(), batch, time, ms.to_string()));
    std::vector<std::int64_t> inner_mask{batch * time};
    inner_mask.insert(inner_mask.end(), ms.dims().begin() + 2, ms.dims().end());
    step_inputs = with_mask(step_inputs, reshape(mask, Shape(inner_mask)));
  }
  const Tensor y = (*layer_)(step_inputs, training);
  if (y.rank() < 1 || y.shape()[0] != batch * time)
    throw ShapeError(fmt::format("{} (TimeDistributed): the wrapped layer {} turned {} into {}; it must keep the "
                                 "first dimension (batch * time = {})",
                                 name(), layer_->name(), Shape(inner).to_string(), y.shape().to_string(),
                                 batch * time));
  std::vector<std::int64_t> out{batch, time};
  out.insert(out.end(), y.shape().dims().begin() + 1, y.shape().dims().end());
  Tensor result = reshape(y, Shape(out));
  if (mask.defined()) result = detail::attach_mask(result, mask);
  return result;
}

}  // namespace keel::layers
