#pragma once
// Normalisation layers, as Keras 3: BatchNormalization, LayerNormalization, GroupNormalization,
// UnitNormalization and the Normalization preprocessing layer (with adapt()).
//
// BatchNormalization keeps trainable gamma / beta and non-trainable moving_mean /
// moving_variance. Called with training = true it normalises with the batch's mean and (biased)
// variance and updates moving = moving * momentum + batch * (1 - momentum); otherwise it uses the
// moving statistics and changes nothing. A frozen layer (set_trainable(false)) always runs in
// inference mode, as in Keras 3 (the usual fine-tuning rule).
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

struct BatchNormalizationOptions {
  int axis = -1;  // the feature (channel) axis; statistics are taken over every other axis
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // add beta
  bool scale = true;   // multiply by gamma
  initializers::Initializer beta_initializer = "zeros";
  initializers::Initializer gamma_initializer = "ones";
  initializers::Initializer moving_mean_initializer = "zeros";
  initializers::Initializer moving_variance_initializer = "ones";
  regularizers::Regularizer beta_regularizer = {};
  regularizers::Regularizer gamma_regularizer = {};
  constraints::Constraint beta_constraint{};
  constraints::Constraint gamma_constraint{};
  std::string name = "";
};

class BatchNormalization : public Layer {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(BatchNormalization)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank and the axis' size
  nlohmann::json get_config() const override;

  const BatchNormalizationOptions& options() const { return options_; }
  // ValueError before build, and for gamma / beta when scale / center is off.
  Variable& gamma() const;
  Variable& beta() const;
  Variable& moving_mean() const;
  Variable& moving_variance() const;

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs
  // Computes in float32 under a mixed-precision policy (see Layer::Autocast).
  Autocast autocast() const override { return Autocast::float32; }

 private:
  BatchNormalizationOptions options_;
  int axis_ = -1;  // normalised to [0, rank) by build()
  Variable* gamma_ = nullptr;
  Variable* beta_ = nullptr;
  Variable* moving_mean_ = nullptr;
  Variable* moving_variance_ = nullptr;
};

// One axis or several, as Keras' `axis` (an int or a list): `.axis = -1` or `.axis = {1, 2}`.
struct NormalizationAxes {
  std::vector<int> axes;
  NormalizationAxes(int axis) : axes{axis} {}                                // NOLINT: implicit
  NormalizationAxes(std::initializer_list<int> list) : axes(list) {}         // NOLINT
  NormalizationAxes(std::vector<int> list) : axes(std::move(list)) {}        // NOLINT
};

struct LayerNormalizationOptions {
  NormalizationAxes axis = -1;  // the normalised axes; gamma and beta have their sizes
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  initializers::Initializer beta_initializer = "zeros";
  initializers::Initializer gamma_initializer = "ones";
  regularizers::Regularizer beta_regularizer = {};
  regularizers::Regularizer gamma_regularizer = {};
  constraints::Constraint beta_constraint{};
  constraints::Constraint gamma_constraint{};
  std::string name = "";
};

// Normalises each example over `axis` (mean and biased variance), then y * gamma + beta.
class LayerNormalization : public Layer {
 public:
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(LayerNormalization)
  using Layer::build;
  using Layer::call;

  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;  // rank and the axes' sizes
  nlohmann::json get_config() const override;

  const LayerNormalizationOptions& options() const { return options_; }
  Variable& gamma() const;
  Variable& beta() const;

 protected:
  bool floating_inputs() const override { return true; }  // see Layer::floating_inputs
  // Computes in float32 under a mixed-precision policy (see Layer::Autocast).
  Autocast autocast() const override { return Autocast::float32; }

 private:
  LayerNormalizationOptions options_;
  std::vector<int> axes_;  // normalised to [0, rank), sorted, by build()
  Variable* gamma_ = nullptr;
  Variable* beta_ = nullptr;
};

struct GroupNormalizationOptions {
  int groups = 32;  // -1: one group per channel (instance normalisation)
  int axis = -1;    // the channel axis
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  initializers::Initializer beta_initializer = "zeros";
  initializers::Initializer gamma_initializer = "ones";
  regularizers::Regularizer beta_regularizer = {};
  regularizers::Regularizer gamma_regularizer = {};
  constraints::Constraint beta_constraint{};
  constraints::Constraint gamma_constraint{};
  std::string name = "";
};

// Keras' GroupNormalization: the channels are split into `groups` groups of C / groups; each
// example is normalised with the mean and (biased) variance of each group over every non-batch
// axis, then y * gamma + beta per channel (gamma, beta [C]).
class GroupNormalization : public Layer {
 public:
  explicit GroupNormalization(GroupNormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(GroupNormalization)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const GroupNormalizationOptions& options() const { return options_; }
  Variable& gamma() const;
  Variable& beta() const;

 protected:
  bool floating_inputs() const override { return true; }
  Autocast autocast() const override { return Autocast::float32; }

 private:
  GroupNormalizationOptions options_;
  int axis_ = -1, groups_ = 0;
  Variable* gamma_ = nullptr;
  Variable* beta_ = nullptr;
};

struct UnitNormalizationOptions {
  NormalizationAxes axis = -1;
  std::string name = "";
};

// Keras' UnitNormalization: x / max(||x||_2, 1e-12) over `axis` (each example gets unit L2 norm).
class UnitNormalization : public Layer {
 public:
  explicit UnitNormalization(UnitNormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(UnitNormalization)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  const UnitNormalizationOptions& options() const { return options_; }

 protected:
  bool floating_inputs() const override { return true; }
  Autocast autocast() const override { return Autocast::float32; }

 private:
  UnitNormalizationOptions options_;
};

struct NormalizationOptions {
  // The axes that keep their own statistics (Keras' axis; -1: per feature). Empty (Keras' None):
  // one mean and variance for everything.
  std::vector<int> axis = {-1};
  // Fixed statistics instead of adapt(): one value (broadcast) or one per element of the kept
  // axes. Both or neither.
  std::vector<double> mean = {};
  std::vector<double> variance = {};
  bool invert = false;  // mean + x * sqrt(variance): undoes the normalisation
  std::string name = "";
};

// Keras' Normalization: (x - mean) / max(sqrt(variance), 1e-7) with mean and variance fixed in
// the options or computed by adapt() over every axis but the kept ones (the biased variance, as
// Keras). The statistics are non-trainable weights "mean" and "variance" (saved with the model).
class Normalization : public Layer {
 public:
  explicit Normalization(NormalizationOptions options = {});
  KEEL_LAYER_BOILERPLATE(Normalization)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  // Computes mean and variance of `data` ([N, ...], the layer's input shape) and builds the layer.
  void adapt(const Tensor& data);
  const NormalizationOptions& options() const { return options_; }
  Tensor mean() const;      // broadcastable to the inputs; ValueError before build / adapt
  Tensor variance() const;

 protected:
  bool floating_inputs() const override { return true; }
  Autocast autocast() const override { return Autocast::float32; }

 private:
  Shape stats_shape(const Shape& input_shape);  // also sets kept_ (validated axes)
  NormalizationOptions options_;
  std::vector<int> kept_;  // normalised to [0, rank), sorted
  bool adapted_ = false;
  Variable* mean_ = nullptr;
  Variable* variance_ = nullptr;
};

}  // namespace keel::layers
