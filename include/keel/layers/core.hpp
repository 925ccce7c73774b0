#pragma once
// The core Keras layers: Dense, Activation, ReLU, LeakyReLU, Softmax, Flatten, Reshape, Permute,
// Dropout, Add, Concatenate, Multiply, Rescaling, Embedding, Identity and Lambda.
//
// Each layer with Keras keyword arguments takes an `XOptions` struct as its last constructor
// parameter. Its fields are declared in the order of Keras' keyword arguments, with Keras'
// defaults, followed by `name`, so that designated initialisers read like the Keras call:
//   layers::Dense(64, {.activation = "relu", .kernel_regularizer = "l2"})
// Every field has an initializer, if only `{}`: GCC's -Wmissing-field-initializers (in -Wextra)
// then stays quiet about the fields a designated initialiser leaves out.
//
// Masks (see get_mask / with_mask): layers that Keras marks `supports_masking` pass a mask that
// rides on their input on to their output (Dense and the elementwise layers); Add and Multiply
// pass on the logical and of their inputs' masks; Embedding(mask_zero = true) makes one.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "keel/layers/layer.hpp"

namespace keel::layers {

// ---- Dense ---------------------------------------------------------------------------------

struct DenseOptions {
  activations::ActivationFn activation = "linear";
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  regularizers::Regularizer kernel_regularizer{};
  regularizers::Regularizer bias_regularizer{};
  regularizers::Regularizer activity_regularizer{};  // on the output, added to losses() per call
  constraints::Constraint kernel_constraint{};
  constraints::Constraint bias_constraint{};
  std::string name{};
  std::string dtype{};  // a dtype policy name ("float32", "mixed_float16", ...); empty: the global one
};

// activation(inputs . kernel + bias) on the last axis of inputs of any rank >= 2:
// kernel [last_dim, units], bias [units] (Keras' weight names "kernel" and "bias").
class Dense : public Layer {
 public:
  explicit Dense(int units, DenseOptions options = {});
  KEEL_LAYER_BOILERPLATE(Dense)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;

  int units() const { return units_; }
  const DenseOptions& options() const { return options_; }
  Variable& kernel();  // ValueError before the layer is built
  Variable& bias();    // ValueError before build or with use_bias = false

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  int units_;
  DenseOptions options_;
  Variable* kernel_ = nullptr;  // owned by Layer (stable addresses)
  Variable* bias_ = nullptr;
};

// ---- activations -----------------------------------------------------------------------------

struct ActivationOptions {
  std::string name{};
  // A dtype policy name; "float32" gives float32 outputs in a mixed-precision model (Keras'
  // Activation("softmax", dtype="float32") at the end). Empty: the global policy.
  std::string dtype{};
};

// Applies an activation function by Keras name ("relu", "softmax", ...) or a callable.
class Activation : public Layer {
 public:
  explicit Activation(activations::ActivationFn activation, ActivationOptions options = {});
  KEEL_LAYER_BOILERPLATE(Activation)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}  // elementwise: any shape
  nlohmann::json get_config() const override;
  const activations::ActivationFn& activation() const { return activation_; }

 private:
  activations::ActivationFn activation_;
};

struct ReLUOptions {
  std::optional<double> max_value{};  // none: unbounded
  double negative_slope = 0.0;
  double threshold = 0.0;
  std::string name{};
};

// Keras' ReLU: x for x > threshold (clipped at max_value), negative_slope * (x - threshold)
// below it.
class ReLU : public Layer {
 public:
  explicit ReLU(ReLUOptions options = {});
  KEEL_LAYER_BOILERPLATE(ReLU)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const ReLUOptions& options() const { return options_; }

 private:
  ReLUOptions options_;
};

struct LeakyReLUOptions {
  double negative_slope = 0.3;  // Keras 3's default (tf.nn.leaky_relu's is 0.2)
  std::string name{};
};

class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(LeakyReLUOptions options = {});
  KEEL_LAYER_BOILERPLATE(LeakyReLU)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const LeakyReLUOptions& options() const { return options_; }

 private:
  LeakyReLUOptions options_;
};

struct SoftmaxOptions {
  int axis = -1;
  std::string name{};
  std::string dtype{};  // a dtype policy name; empty: the global policy
};

// softmax along `axis`. A mask riding on the input with the input's rank (true = keep) pushes the
// masked positions to a large negative number first, as Keras' Softmax(mask=...) does.
class Softmax : public Layer {
 public:
  explicit Softmax(SoftmaxOptions options = {});
  KEEL_LAYER_BOILERPLATE(Softmax)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const SoftmaxOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }  // softmax in float32

 private:
  SoftmaxOptions options_;
};

// ---- reshaping -------------------------------------------------------------------------------

struct FlattenOptions {
  std::string data_format = "channels_last";  // "channels_first": flattened in NHWC order
  std::string name{};
};

// [batch, d1, d2, ...] -> [batch, d1 * d2 * ...]; [batch] -> [batch, 1].
class Flatten : public Layer {
 public:
  explicit Flatten(FlattenOptions options = {});
  KEEL_LAYER_BOILERPLATE(Flatten)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const FlattenOptions& options() const { return options_; }

 private:
  FlattenOptions options_;
};

struct ReshapeOptions {
  std::string name{};
};

// Reshapes every example to target_shape (without the batch dimension; one entry may be -1).
class Reshape : public Layer {
 public:
  explicit Reshape(Shape target_shape, ReshapeOptions options = {});
  KEEL_LAYER_BOILERPLATE(Reshape)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}  // call() checks the element count
  nlohmann::json get_config() const override;
  const Shape& target_shape() const { return target_shape_; }

 private:
  Shape target_shape_;
};

struct PermuteOptions {
  std::string name{};
};

// Permutes the non-batch axes; dims are 1-based as in Keras: Permute({2, 1}) swaps axes 1 and 2.
class Permute : public Layer {
 public:
  explicit Permute(std::vector<int> dims, PermuteOptions options = {});
  KEEL_LAYER_BOILERPLATE(Permute)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const std::vector<int>& dims() const { return dims_; }

 private:
  std::vector<int> dims_;
};

// ---- regularisation --------------------------------------------------------------------------

struct DropoutOptions {
  // The shape of the keep/drop mask, broadcast over the input: {-1, 1, features} drops the same
  // features at every timestep. -1 (Keras' None) takes the input's dimension; empty (Keras'
  // noise_shape=None) is the input's shape.
  std::vector<std::int64_t> noise_shape{};
  std::optional<std::uint64_t> seed{};  // reproducible masks; each training call draws a new one
  std::string name{};
};

// Inverted dropout during training (training = true here or in a calling layer): each element is
// zeroed with probability `rate`, the others scaled by 1 / (1 - rate). The identity otherwise.
class Dropout : public Layer {
 public:
  explicit Dropout(double rate, DropoutOptions options = {});
  KEEL_LAYER_BOILERPLATE(Dropout)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double rate() const { return rate_; }
  const DropoutOptions& options() const { return options_; }

 protected:
  Autocast autocast() const override { return Autocast::float32; }  // the mask in float32

 private:
  double rate_;
  DropoutOptions options_;
  std::uint64_t calls_ = 0;  // advances the seed, as Keras' SeedGenerator does
};

struct MaskingOptions {
  std::string name{};
};

// Keras' Masking: a time step whose features all equal mask_value is masked. The output is the
// input with those steps zeroed, carrying the mask [batch, ...] (the input's shape without the
// last axis) that mask-aware layers downstream read (RNNs, BatchNormalization, losses).
class Masking : public Layer {
 public:
  explicit Masking(double mask_value = 0.0, MaskingOptions options = {});
  KEEL_LAYER_BOILERPLATE(Masking)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double mask_value() const { return mask_value_; }

 private:
  double mask_value_;
};

// ---- merging (called on a list of tensors) ---------------------------------------------------

struct AddOptions {
  std::string name{};
};

// Elementwise sum of inputs of the same shape (non-batch dimensions of size 1 broadcast).
class Add : public Layer {
 public:
  explicit Add(AddOptions options = {});
  KEEL_LAYER_BOILERPLATE(Add)
  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;  // ValueError: needs a list
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
};

struct MultiplyOptions {
  std::string name{};
};

// Elementwise product of inputs of the same shape (non-batch dimensions of size 1 broadcast).
class Multiply : public Layer {
 public:
  explicit Multiply(MultiplyOptions options = {});
  KEEL_LAYER_BOILERPLATE(Multiply)
  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
};

struct ConcatenateOptions {
  int axis = -1;
  std::string name{};
};

// Concatenates inputs that agree on every dimension but `axis`.
class Concatenate : public Layer {
 public:
  explicit Concatenate(ConcatenateOptions options = {});
  KEEL_LAYER_BOILERPLATE(Concatenate)
  void build(const Shape& input_shape) override;
  void build(const std::vector<Shape>& input_shapes) override;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  nlohmann::json get_config() const override;
  int axis() const { return options_.axis; }

 private:
  ConcatenateOptions options_;
};

// ---- preprocessing ---------------------------------------------------------------------------

struct RescalingOptions {
  double offset = 0.0;
  std::string name{};
};

// inputs * scale + offset. Integer inputs (uint8 images) become float32 first, as in Keras.
class Rescaling : public Layer {
 public:
  explicit Rescaling(double scale, RescalingOptions options = {});
  KEEL_LAYER_BOILERPLATE(Rescaling)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double scale() const { return scale_; }
  double offset() const { return options_.offset; }

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs

 private:
  double scale_;
  RescalingOptions options_;
};

// ---- Embedding -------------------------------------------------------------------------------

struct EmbeddingOptions {
  // Keras' "uniform" (RandomUniform(-0.05, 0.05)) is called "random_uniform" here.
  initializers::Initializer embeddings_initializer = "random_uniform";
  regularizers::Regularizer embeddings_regularizer{};
  regularizers::Regularizer activity_regularizer{};
  constraints::Constraint embeddings_constraint{};
  bool mask_zero = false;            // id 0 is padding: the output carries the mask ids != 0
  std::optional<int> input_length{};   // when set, inputs must be [batch, input_length]
  std::string name{};
};

// Integer ids [batch, ...] -> their rows of embeddings [input_dim, output_dim]:
// [batch, ..., output_dim]. Floating-point ids are truncated to integers first (Keras casts).
class Embedding : public Layer {
 public:
  Embedding(int input_dim, int output_dim, EmbeddingOptions options = {});
  KEEL_LAYER_BOILERPLATE(Embedding)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}  // any number of ids per example
  nlohmann::json get_config() const override;

  int input_dim() const { return input_dim_; }
  int output_dim() const { return output_dim_; }
  const EmbeddingOptions& options() const { return options_; }
  Variable& embeddings();  // ValueError before the layer is built

 protected:
  // Under a mixed-precision policy the ids stay as given and the float32 rows looked up are cast
  // to the compute dtype (Keras reads the table without autocast).
  Autocast autocast() const override { return Autocast::none; }

 private:
  int input_dim_, output_dim_;
  EmbeddingOptions options_;
  Variable* embeddings_ = nullptr;
};

// ---- Identity, Lambda ------------------------------------------------------------------------

struct IdentityOptions {
  std::string name{};
};

// Returns its input unchanged (its mask too): a placeholder in a model.
class Identity : public Layer {
 public:
  explicit Identity(IdentityOptions options = {});
  KEEL_LAYER_BOILERPLATE(Identity)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;  // the first input
  void check_input_shape(const Shape&) const override {}
};

// A function a Lambda layer applies: one tensor, or a list (the multi-input call) in, one out.
using LambdaFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Registers `fn` under `name`, so that Lambda("name") finds it and a saved model with that Lambda
// loads again (Keras serialises the Python bytecode; C++ has none, so the name is the config).
// Re-registering a name replaces its function. ValueError for an empty name.
void register_lambda(const std::string& name, LambdaFn fn);
void register_lambda(const std::string& name, std::function<Tensor(const Tensor&)> fn);
bool has_lambda(const std::string& name);

struct LambdaOptions {
  std::string name{};
};

// Keras' Lambda: wraps a stateless function as a layer (its gradients are the ops'). Lambda("fn")
// uses a registered function (ValueError if there is none) and is serialisable; Lambda(callable)
// works the same but get_config() throws ValueError (there is no name to save).
class Lambda : public Layer {
 public:
  explicit Lambda(std::string function, LambdaOptions options = {});
  explicit Lambda(LambdaFn fn, LambdaOptions options = {});
  explicit Lambda(std::function<Tensor(const Tensor&)> fn, LambdaOptions options = {});
  KEEL_LAYER_BOILERPLATE(Lambda)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  Tensor call(const std::vector<Tensor>& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const std::string& function_name() const { return function_; }  // empty for a bare callable

 private:
  std::string function_;
  LambdaFn fn_;
};

}  // namespace keel::layers
