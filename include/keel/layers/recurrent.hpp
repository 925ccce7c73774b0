#pragma once
// Recurrent layers as Keras has them: SimpleRNN, LSTM and GRU (all three derive from Recurrent, which
// holds what they share: the time loop, Keras masks, dropout masks, initial and final states),
// and the wrappers Bidirectional and TimeDistributed.
//
// Inputs are [batch, time, features]. With default options a layer returns the last output
// [batch, units]; `.return_sequences = true` returns every output [batch, time, units].
//
// States. Layer::operator() returns ONE tensor (the output), so Keras' `return_state = True`
// (`output, h, c = lstm(x)`) is spelled in one of two ways:
//   std::vector<Tensor> r = lstm.call_with_state(x);   // {output, h, (c)}
//   Tensor out = lstm(x);  std::vector<Tensor> s = lstm.states();   // {h, (c)} of that call
// call_with_state() returns the states whatever return_state is set to; return_state itself only
// changes get_config() and whether the states count as outputs for the activity regularizer.
// Initial states: call_with_state(x, training, {h0, c0}), or the multi-input call
// lstm({x, h0, c0}) (Keras' `initial_state=`), which also works on symbolic tensors. (On symbolic
// tensors of the functional API only the output is symbolic: the states of call_with_state() are
// those of the placeholder run, so they cannot be model outputs yet.)
//
// Masks. When the input carries a Keras mask (get_mask(x): bool [batch, time], as
// Embedding(mask_zero = true) makes it), a masked step leaves the states as they were and, as
// Keras does, its output repeats the previous step's output (zeros before the first unmasked
// step). With zero_output_for_mask (Bidirectional sets it when returning sequences, as Keras
// does) a masked step outputs zeros instead. With return_sequences the output carries the input's
// mask on (unreversed even with go_backwards, like Keras' RNN.compute_mask).
//
// go_backwards processes the sequence from its last step to its first; the sequence output is in
// processing order, i.e. reversed in time (as Keras returns it).
//
// dropout / recurrent_dropout act only in training (training = true, or called from a layer or
// model running in training mode). As in Keras, one dropout mask is drawn per call for the inputs
// ([batch, features]) and one for the recurrent state ([batch, units]) and reused at every step.
// With `seed` the masks are reproducible: the n-th training call of a layer draws from seed and n.
//
// DTypes. Weights are float32. A float64 input runs the whole layer in float64 (the weights are
// cast; the cast is differentiable, so gradients still reach the float32 variables); any other
// input dtype is cast to float32.
//
// The fused sequence ops lstm() / gru() run when the activations are the defaults (tanh, sigmoid;
// GRU with reset_after), no mask rides on the input and no recurrent dropout applies; otherwise a
// step loop runs the same maths (fused cells where the activations allow, plain ops elsewhere).
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

// ---- Recurrent: what SimpleRNN, LSTM and GRU share (Keras' RNN base) ----------------------------

class Recurrent : public Layer {
 public:
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;     // [batch, time, features]
  Tensor call(const Tensor& inputs, bool training) override;
  // {x, initial states...}: {x, h0} (SimpleRNN, GRU) or {x, h0, c0} (LSTM), states [batch, units].
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;

  // Keras' `output, *states = layer(x, initial_state=...)` with return_state = True: returns
  // {output, h} or {output, h, c}. initial_state empty: zeros (or, when stateful, the states
  // the previous call ended with).
  std::vector<Tensor> call_with_state(const Tensor& x, bool training = false,
                                      const std::vector<Tensor>& initial_state = {});
  // The final states of the last call: {h} or {h, c} for LSTM (empty before the first call).
  std::vector<Tensor> states() const { return states_; }
  // stateful = true: forget the carried states (the next call starts from zeros).
  void reset_states();
  void reset_state() { reset_states(); }

  int units() const { return units_; }
  bool return_sequences() const { return common_.return_sequences; }
  bool return_state() const { return common_.return_state; }
  bool go_backwards() const { return common_.go_backwards; }
  bool stateful() const { return common_.stateful; }
  bool zero_output_for_mask() const { return zero_output_for_mask_; }
  void set_zero_output_for_mask(bool zero) { zero_output_for_mask_ = zero; }

  // A fresh, unbuilt layer of the same class and options (new weights), processing the sequence
  // forwards or backwards: how Bidirectional makes its two directions.
  virtual std::shared_ptr<Recurrent> clone(bool go_backwards) const = 0;

 protected:
  // Computes in the compute dtype (float16 under mixed_float16), as Keras' recurrent layers do.
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs
  // The options every recurrent layer has (copied from the XOptions of the subclass).
  struct Common {
    double dropout = 0, recurrent_dropout = 0;
    std::optional<std::uint64_t> seed;
    bool return_sequences = false, return_state = false, go_backwards = false, stateful = false,
         unroll = false;
    regularizers::Regularizer activity_regularizer;
  };
  Recurrent(int units, Common common, std::string name);

  // One step: the new states from the step input [batch, features] and the previous states.
  // The output of a step is its first new state (h).
  using StepFn = std::function<std::vector<Tensor>(const Tensor& x, const std::vector<Tensor>& states)>;

  virtual std::size_t state_count() const { return 1; }
  virtual void build_cell(std::int64_t input_dim) = 0;
  // The step for one call, in `dtype`; recurrent_mask (undefined when no recurrent dropout)
  // multiplies the previous h before the recurrent product, as Keras' cells do.
  virtual StepFn make_step(DType dtype, const Tensor& recurrent_mask) = 0;
  // The whole sequence with a fused op, when the subclass has one for its options: fills
  // `outputs` ([batch, time, units], processing order) and `final_states`; false otherwise.
  virtual bool run_fused(const Tensor& /*x*/, const std::vector<Tensor>& /*initial_states*/, DType /*dtype*/,
                         Tensor& /*outputs*/, std::vector<Tensor>& /*final_states*/) {
    return false;
  }
  // A weight in the compute dtype (undefined stays undefined).
  static Tensor value_as(const Variable* v, DType dtype);
  // The config entries every recurrent layer has (Keras' RNN.get_config), plus Layer's.
  nlohmann::json rnn_config() const;
  static void check_rate(const std::string& layer, const char* what, double rate);

 private:
  Tensor run(const Tensor& x, const std::vector<Tensor>& initial_state, bool training);
  // The two dropout masks of a training call: on the inputs, on the recurrent state.
  enum class MaskStream { inputs, recurrent };
  std::uint64_t next_seed(MaskStream stream);

  int units_;
  Common common_;
  bool zero_output_for_mask_ = false;
  std::vector<Tensor> states_;
  std::vector<Tensor> carried_;   // stateful: where the next call starts
  std::uint64_t training_calls_ = 0;
};

// ---- SimpleRNN ---------------------------------------------------------------------------------

struct SimpleRNNOptions {
  activations::ActivationFn activation = "tanh";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer recurrent_initializer = "orthogonal";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer;
  regularizers::Regularizer recurrent_regularizer;
  regularizers::Regularizer bias_regularizer;
  regularizers::Regularizer activity_regularizer;
  constraints::Constraint kernel_constraint{};
  constraints::Constraint recurrent_constraint{};
  constraints::Constraint bias_constraint{};
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool stateful = false;
  bool unroll = false;  // accepted for Keras compatibility; the results do not depend on it
  std::optional<std::uint64_t> seed;
  std::string name;
};

// h_t = activation(x_t . kernel + h_{t-1} . recurrent_kernel + bias):
// kernel [features, units], recurrent_kernel [units, units], bias [units].
class SimpleRNN : public Recurrent {
 public:
  explicit SimpleRNN(int units, SimpleRNNOptions options = {});
  KEEL_LAYER_BOILERPLATE(SimpleRNN)
  nlohmann::json get_config() const override;
  std::shared_ptr<Recurrent> clone(bool go_backwards) const override;
  const SimpleRNNOptions& options() const { return options_; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  StepFn make_step(DType dtype, const Tensor& recurrent_mask) override;

 private:
  SimpleRNNOptions options_;
  Variable* kernel_ = nullptr;  // owned by Layer (stable addresses)
  Variable* recurrent_kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- LSTM --------------------------------------------------------------------------------------

struct LSTMOptions {
  activations::ActivationFn activation = "tanh";
  activations::ActivationFn recurrent_activation = "sigmoid";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer recurrent_initializer = "orthogonal";
  initializers::Initializer bias_initializer = "zeros";
  bool unit_forget_bias = true;  // the forget gate's bias block starts at ones
  regularizers::Regularizer kernel_regularizer;
  regularizers::Regularizer recurrent_regularizer;
  regularizers::Regularizer bias_regularizer;
  regularizers::Regularizer activity_regularizer;
  constraints::Constraint kernel_constraint{};
  constraints::Constraint recurrent_constraint{};
  constraints::Constraint bias_constraint{};
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<std::uint64_t> seed;
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool stateful = false;
  bool unroll = false;  // accepted for Keras compatibility; the results do not depend on it
  std::string name;
};

// Gates in Keras' order i, f, c, o: kernel [features, 4u], recurrent_kernel [u, 4u], bias [4u].
//   z = x . kernel + h . recurrent_kernel + bias = [z_i | z_f | z_c | z_o]
//   i, f, o = recurrent_activation(z_i, z_f, z_o);  c' = f*c + i*activation(z_c);
//   h' = o * activation(c')
class LSTM : public Recurrent {
 public:
  explicit LSTM(int units, LSTMOptions options = {});
  KEEL_LAYER_BOILERPLATE(LSTM)
  nlohmann::json get_config() const override;
  std::shared_ptr<Recurrent> clone(bool go_backwards) const override;
  const LSTMOptions& options() const { return options_; }

 protected:
  std::size_t state_count() const override { return 2; }
  void build_cell(std::int64_t input_dim) override;
  StepFn make_step(DType dtype, const Tensor& recurrent_mask) override;
  bool run_fused(const Tensor& x, const std::vector<Tensor>& initial_states, DType dtype,
                 Tensor& outputs, std::vector<Tensor>& final_states) override;

 private:
  bool default_activations() const;
  LSTMOptions options_;
  Variable* kernel_ = nullptr;
  Variable* recurrent_kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- GRU ---------------------------------------------------------------------------------------

struct GRUOptions {
  activations::ActivationFn activation = "tanh";
  activations::ActivationFn recurrent_activation = "sigmoid";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer recurrent_initializer = "orthogonal";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer;
  regularizers::Regularizer recurrent_regularizer;
  regularizers::Regularizer bias_regularizer;
  regularizers::Regularizer activity_regularizer;
  constraints::Constraint kernel_constraint{};
  constraints::Constraint recurrent_constraint{};
  constraints::Constraint bias_constraint{};
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<std::uint64_t> seed;
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool stateful = false;
  bool unroll = false;  // accepted for Keras compatibility; the results do not depend on it
  bool reset_after = true;
  std::string name;
};

// Gates in Keras' order z, r, h: kernel [features, 3u], recurrent_kernel [u, 3u].
// reset_after = true (Keras' default, cuDNN's convention): bias [2, 3u] (input bias, recurrent
// bias) and the reset gate multiplies the recurrent product:
//   x' = x . kernel + b_in,  r' = h . recurrent_kernel + b_rec
//   z = ra(x'_z + r'_z),  r = ra(x'_r + r'_r),  hh = a(x'_h + r * r'_h),  h' = z*h + (1-z)*hh
// reset_after = false: bias [3u]; hh = a(x'_h + (r*h) . recurrent_kernel_h).
class GRU : public Recurrent {
 public:
  explicit GRU(int units, GRUOptions options = {});
  KEEL_LAYER_BOILERPLATE(GRU)
  nlohmann::json get_config() const override;
  std::shared_ptr<Recurrent> clone(bool go_backwards) const override;
  const GRUOptions& options() const { return options_; }

 protected:
  void build_cell(std::int64_t input_dim) override;
  StepFn make_step(DType dtype, const Tensor& recurrent_mask) override;
  bool run_fused(const Tensor& x, const std::vector<Tensor>& initial_states, DType dtype,
                 Tensor& outputs, std::vector<Tensor>& final_states) override;

 private:
  bool default_activations() const;
  GRUOptions options_;
  Variable* kernel_ = nullptr;
  Variable* recurrent_kernel_ = nullptr;
  Variable* bias_ = nullptr;
};

// ---- Bidirectional -----------------------------------------------------------------------------

struct BidirectionalOptions {
  std::string merge_mode = "concat";  // "concat", "sum", "mul" or "ave"
  // Keras' backward_layer: a recurrent layer with the opposite go_backwards and the same
  // return_sequences / return_state / stateful; none: a clone of `layer` with go_backwards.
  std::shared_ptr<Layer> backward_layer;
  std::string name;
};

// Runs a recurrent layer over the sequence in both directions and merges the two outputs
// (with return_sequences, the backward outputs are put back into forward time order first).
// As Keras, it works on fresh copies of `layer` (same class and options, new weights) named
// "forward_<name>" and "backward_<name>"; the layer passed in is only a template.
// concat doubles the last dimension; sum / mul / ave keep it.
class Bidirectional : public Layer {
 public:
  explicit Bidirectional(LayerRef layer, BidirectionalOptions options = {});
  KEEL_LAYER_BOILERPLATE(Bidirectional)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  // {x, forward states..., backward states...} (Keras' initial_state, split in halves).
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;

  // {output, forward states..., backward states...} (Keras with return_state = True).
  std::vector<Tensor> call_with_state(const Tensor& x, bool training = false,
                                      const std::vector<Tensor>& initial_state = {});
  // The last call's forward states followed by the backward states.
  std::vector<Tensor> states() const;
  void reset_states();

  const std::shared_ptr<Recurrent>& forward_layer() const { return forward_; }
  const std::shared_ptr<Recurrent>& backward_layer() const { return backward_; }
  const BidirectionalOptions& options() const { return options_; }

 private:
  Tensor run(const Tensor& x, const std::vector<Tensor>& initial_state, bool training);
  BidirectionalOptions options_;
  std::shared_ptr<Recurrent> forward_, backward_;
};

// ---- TimeDistributed ---------------------------------------------------------------------------

struct TimeDistributedOptions {
  std::string name;
};

// Applies `layer` to every time step of [batch, time, ...]: one call on [batch*time, ...], then
// the result is reshaped back to [batch, time, ...]. The inner layer's weights are shared by all
// steps. A mask riding on the input rides on the output.
class TimeDistributed : public Layer {
 public:
  explicit TimeDistributed(LayerRef layer, TimeDistributedOptions options = {});
  KEEL_LAYER_BOILERPLATE(TimeDistributed)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  nlohmann::json get_config() const override;
  const std::shared_ptr<Layer>& layer() const { return layer_; }

 private:
  std::shared_ptr<Layer> layer_;
};

}  // namespace keel::layers
