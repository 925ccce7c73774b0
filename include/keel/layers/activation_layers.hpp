#pragma once
// Activation layers with parameters, as Keras: PReLU (a learned slope), ELU and ThresholdedReLU
// (ReLU, LeakyReLU, Softmax and Activation are in core.hpp). Masks riding on the inputs pass on.
#include <string>
#include <vector>

#include "keel/layers/initializers.hpp"
#include "keel/layers/layer.hpp"

namespace keel::layers {

struct PReLUOptions {
  initializers::Initializer alpha_initializer = "zeros";
  regularizers::Regularizer alpha_regularizer{};
  constraints::Constraint alpha_constraint{};
  std::vector<int> shared_axes{};  // 1-based non-batch axes along which alpha is shared
  std::string name{};
};

// relu(x) - alpha * relu(-x), alpha a trainable weight shaped as one example (its shared axes 1).
class PReLU : public Layer {
 public:
  explicit PReLU(PReLUOptions options = {});
  KEEL_LAYER_BOILERPLATE(PReLU)
  using Layer::build;
  using Layer::call;
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape& input_shape) const override;
  nlohmann::json get_config() const override;
  const PReLUOptions& options() const { return options_; }
  Variable& alpha();  // ValueError before the layer is built

 protected:
  bool floating_inputs() const override { return true; }

 private:
  PReLUOptions options_;
  Variable* alpha_ = nullptr;
};

struct ELUOptions {
  std::string name{};
};

// x for x > 0, alpha * (exp(x) - 1) otherwise.
class ELU : public Layer {
 public:
  explicit ELU(double alpha = 1.0, ELUOptions options = {});
  KEEL_LAYER_BOILERPLATE(ELU)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double alpha() const { return alpha_; }

 private:
  double alpha_;
};

struct ThresholdedReLUOptions {
  std::string name{};
};

// Keras 2's ThresholdedReLU: x where x > theta, 0 elsewhere; theta >= 0.
class ThresholdedReLU : public Layer {
 public:
  explicit ThresholdedReLU(double theta = 1.0, ThresholdedReLUOptions options = {});
  KEEL_LAYER_BOILERPLATE(ThresholdedReLU)
  using Layer::call;
  Tensor call(const Tensor& inputs, bool training) override;
  void check_input_shape(const Shape&) const override {}
  nlohmann::json get_config() const override;
  double theta() const { return theta_; }

 private:
  double theta_;
};

}  // namespace keel::layers
