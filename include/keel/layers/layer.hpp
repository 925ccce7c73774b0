#pragma once
// layers::Layer: the unit of composition, as in Keras. Subclasses override build() to create
// weights with add_weight() and call() to compute; operator() builds on first use and checks
// later inputs against the built shape. Sublayers are registered with track().
#include <nlohmann/json_fwd.hpp>

#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"
#include "keel/layers/constraints.hpp"
#include "keel/layers/initializers.hpp"
#include "keel/mixed_precision/policy.hpp"

namespace keel::layers {

class Layer : public std::enable_shared_from_this<Layer> {
 public:
  explicit Layer(std::string name = "");
  virtual ~Layer();
  Layer(Layer&&) noexcept;
  Layer& operator=(Layer&&) noexcept;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Builds on the first call; on symbolic inputs (models::Input) records a functional graph.
  // `training` propagates to the layers called inside: a layer runs in training mode when it or
  // any layer calling it was called with training = true.
  Tensor operator()(const Tensor& inputs, bool training = false);
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false);

  virtual void build(const Shape& input_shape);
  virtual void build(const std::vector<Shape>& input_shapes);  // default: build(shapes[0])
  virtual Tensor call(const Tensor& inputs, bool training);
  virtual Tensor call(const std::vector<Tensor>& inputs, bool training);  // default: one input
  // Throws ShapeError when `input_shape` cannot be fed to the layer built for built_shape();
  // the default checks the rank and the last dimension.
  virtual void check_input_shape(const Shape& input_shape) const;

  Variable& add_weight(std::string name, Shape shape, std::string initializer = "glorot_uniform",
                       bool trainable = true);
  Variable& add_weight(std::string name, Shape shape, const initializers::Initializer& initializer,
                       bool trainable, const regularizers::Regularizer& regularizer = {},
                       const constraints::Constraint& constraint = {});
  // Keras' add_weight(dtype=...): a weight of another dtype (uint8 codes, float16 storage), zeros,
  // never trained (keel's optimizers and initializers work on float32).
  Variable& add_weight(std::string name, Shape shape, DType dtype);
  // Registers a nested layer: its weights, training flag, summary and saving follow this one.
  template <class L>
  std::shared_ptr<L> track(std::shared_ptr<L> sublayer) {
    static_assert(std::is_base_of_v<Layer, L>, "track() takes layers");
    track_layer(sublayer);
    return sublayer;
  }
  void track_layer(std::shared_ptr<Layer> sublayer);
  const std::vector<std::shared_ptr<Layer>>& sublayers() const { return sublayers_; }

  std::vector<Variable*> trainable_weights();
  std::vector<Variable*> non_trainable_weights();
  std::vector<Variable*> weights();        // trainable first, as Keras
  std::vector<Tensor> losses();            // regularisation losses of this layer and sublayers
  void add_loss(const Tensor& loss);       // an extra loss from call() (cleared each call)
  std::int64_t count_params();

  const std::string& name() const;
  void set_name(std::string name) { name_ = std::move(name); }
  bool built() const { return built_; }
  const Shape& built_shape() const { return built_shape_; }
  // The shape of the last output (batch dimension included; what summary() prints).
  const Shape& output_shape() const { return output_shape_; }
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable);      // freezing reaches every sublayer
  virtual std::string class_name() const { return "Layer"; }
  virtual nlohmann::json get_config() const;
  // Output shape for an input shape (batch dimension included); default: traced by calling the
  // layer on zeros with a batch of one.
  virtual Shape compute_output_shape(const Shape& input_shape);

  // Keras' dtype policy (keel/mixed_precision/policy.hpp): the global policy when the layer was
  // made, or the one set here (or by the options' `dtype` of the layers that have it). Weights
  // are created in variable_dtype(); operator() casts floating inputs to compute_dtype() and
  // call() reads float32 weights in it.
  const mixed_precision::Policy& dtype_policy() const { return policy_; }
  void set_dtype_policy(const mixed_precision::Policy& policy) { policy_ = policy; }
  void set_dtype_policy(const std::string& name) { policy_ = mixed_precision::Policy(name); }
  DType compute_dtype() const { return policy_.compute_dtype(); }
  DType variable_dtype() const { return policy_.variable_dtype(); }

  // Moves a temporary layer (Dense(8) in `Dense(8)(x)` or Sequential{Dense(8)}) to the heap,
  // where a graph or a model can own it. KEEL_LAYER_BOILERPLATE defines it for a class.
  virtual std::shared_ptr<Layer> move_to_heap();

 protected:
  // Marks the layer built without calling build() (layers whose weights come from elsewhere).
  void set_built(const Shape& shape) {
    built_ = true;
    built_shape_ = shape;
    build_shape_unknown_ = false;
  }

  // How operator() applies the dtype policy around call(). operator() alone casts inputs: call()
  // receives them in the dtype it computes in.
  //   compute:   floating inputs cast to the compute dtype, float32 weights read in it (the
  //              default; Keras' autocast). Under a float32 policy, float64 inputs stay float64.
  //   float32:   layers that must compute in float32 (normalisation, dropout, softmax): inputs
  //              cast to float32, weights read in float32, float32 outputs cast to the compute
  //              dtype, as Keras' BatchNormalization does.
  //   variables: inputs as given, float32 weights read in the compute dtype (models: each of
  //              their layers casts its own inputs).
  //   none:      the layer applies the policy itself (Embedding: ids stay as given, the table
  //              is read in float32 and the looked-up rows are cast).
  enum class Autocast { compute, float32, variables, none };
  virtual Autocast autocast() const { return Autocast::compute; }
  // True for layers that compute on floats only (Dense, convolutions, pooling, normalisation,
  // recurrent and preprocessing layers): operator() casts their integer inputs (uint8 images,
  // integer features) to the compute dtype too. Bool inputs (masks) stay bool.
  virtual bool floating_inputs() const { return false; }

 private:
  struct Weight {
    std::unique_ptr<Variable> variable;
    regularizers::Regularizer regularizer;
  };
  friend class LayerAccess;
  struct BuildScope;
  mutable std::string name_;
  bool built_ = false;
  bool building_ = false;             // inside the build() that operator() runs
  bool build_shape_unknown_ = false;  // built by a direct build() call; the first call sets the shape
  bool trainable_ = true;
  Shape built_shape_;
  Shape output_shape_;
  std::vector<Weight> weights_;
  std::vector<std::shared_ptr<Layer>> sublayers_;
  std::vector<Tensor> call_losses_;
  mixed_precision::Policy policy_;
};

// A unique Keras-style name for a new layer of a class: "dense", "dense_1", ...
std::string unique_name(const std::string& class_name);

// Snake case of a class name: "Conv2D" -> "conv2d", "BatchNormalization" -> "batch_normalization".
std::string to_snake_case(const std::string& class_name);

// Keras masks: a bool tensor [batch, time] that rides along with a layer's output (as
// Embedding(mask_zero = true) makes it) and that mask-aware layers (RNNs) read.
Tensor get_mask(const Tensor& x);                       // undefined when none
Tensor with_mask(const Tensor& x, const Tensor& mask);  // a view of x carrying the mask

// The training flag in effect for the layer being called (see Layer::operator()).
bool in_training_call();

// Holds a layer given as a temporary (moved to the heap) or as a shared_ptr.
class LayerRef {
 public:
  template <class L, class = std::enable_if_t<std::is_base_of_v<Layer, std::decay_t<L>> &&
                                              !std::is_lvalue_reference_v<L>>>
  LayerRef(L&& layer)  // NOLINT: implicit, so that Sequential{Dense(8), ...} reads like Keras
      : ptr_(std::make_shared<std::decay_t<L>>(std::move(layer))) {}
  template <class L, class = std::enable_if_t<std::is_base_of_v<Layer, L>>>
  LayerRef(std::shared_ptr<L> layer) : ptr_(std::move(layer)) {}  // NOLINT
  const std::shared_ptr<Layer>& get() const { return ptr_; }

 private:
  std::shared_ptr<Layer> ptr_;
};

// The first entry of a Sequential: fixes the input shape (without the batch dimension) so that
// the model is built, and summary() works, before it sees data.
class InputLayer : public Layer {
 public:
  explicit InputLayer(Shape shape_without_batch, std::string name = "");
  const Shape& shape_without_batch() const { return shape_; }
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  std::string class_name() const override { return "InputLayer"; }
  std::shared_ptr<Layer> move_to_heap() override { return std::make_shared<InputLayer>(std::move(*this)); }
  nlohmann::json get_config() const override;

 protected:
  Autocast autocast() const override { return Autocast::none; }  // hands its inputs on as they are

 private:
  Shape shape_;
};

}  // namespace keel::layers

// In a layer class: its Keras class name and how a temporary of it moves to the heap.
#define KEEL_LAYER_BOILERPLATE(Class)                                              \
  std::string class_name() const override { return #Class; }                       \
  std::shared_ptr<::keel::layers::Layer> move_to_heap() override {                 \
    return std::make_shared<Class>(std::move(*this));                              \
  }
