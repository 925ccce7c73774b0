#pragma once
// Initializers, regularizers and activations as Keras names them; each option that Keras
// accepts "as a name or an object" takes one of these, constructible from either.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel {

namespace initializers {
// "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform",
// "zeros", "ones", "orthogonal", "random_normal", "random_uniform", "truncated_normal",
// Constant(value), or a function (shape, dtype) -> Tensor.
class Initializer {
 public:
  using Fn = std::function<Tensor(const Shape&, DType)>;
  Initializer(const char* name) : Initializer(std::string(name)) {}  // NOLINT: implicit
  Initializer(std::string name);                                      // NOLINT
  Initializer(Fn fn, std::string name = "custom") : name_(std::move(name)), fn_(std::move(fn)) {}  // NOLINT
  Initializer(Fn fn, std::string name, std::vector<std::pair<std::string, double>> arguments)
      : name_(std::move(name)), fn_(std::move(fn)), arguments_(std::move(arguments)) {}
  Tensor operator()(const Shape& shape, DType dtype = DType::float32) const;
  const std::string& name() const { return name_; }
  // The arguments of a parameterised initializer (Constant's "value"), as Keras' get_config
  // lists them; empty for the named ones.
  const std::vector<std::pair<std::string, double>>& arguments() const { return arguments_; }

 protected:
  std::string name_;
  Fn fn_;
  std::vector<std::pair<std::string, double>> arguments_;
};

// keras.initializers.Constant: every element is `value`.
class Constant : public Initializer {
 public:
  explicit Constant(double value = 0.0);
};
// Keras' fan_in / fan_out for a weight shape (conv kernels: receptive field x channels).
std::pair<double, double> compute_fans(const Shape& shape);
}  // namespace initializers

namespace regularizers {
// Weight penalty l1 * sum|w| + l2 * sum w^2, added to the layer's losses().
class Regularizer {
 public:
  Regularizer() = default;  // none
  Regularizer(const char* name) : Regularizer(std::string(name)) {}  // NOLINT: "l1", "l2", "l1_l2"
  Regularizer(std::string name);                                      // NOLINT (0.01 each)
  Regularizer(double l1, double l2) : l1_(l1), l2_(l2) {}
  bool active() const { return l1_ != 0 || l2_ != 0; }
  Tensor operator()(const Tensor& w) const;
  double l1() const { return l1_; }
  double l2() const { return l2_; }
  std::string name() const;

 private:
  double l1_ = 0, l2_ = 0;
};
inline Regularizer l1(double l1 = 0.01) { return {l1, 0}; }
inline Regularizer l2(double l2 = 0.01) { return {0, l2}; }
inline Regularizer l1_l2(double l1 = 0.01, double l2 = 0.01) { return {l1, l2}; }
}  // namespace regularizers

namespace activations {
// "linear" (or ""), "relu", "relu6", "sigmoid", "tanh", "softmax", "log_softmax", "elu",
// "gelu", "silu"/"swish", "softplus", "leaky_relu", "exponential", or a function.
class ActivationFn {
 public:
  using Fn = std::function<Tensor(const Tensor&)>;
  ActivationFn() : ActivationFn(std::string("linear")) {}
  ActivationFn(const char* name) : ActivationFn(std::string(name)) {}  // NOLINT: implicit
  ActivationFn(std::string name);                                       // NOLINT
  ActivationFn(Fn fn, std::string name = "custom")  // NOLINT
      : name_(std::move(name)), fn_(std::move(fn)), builtin_(false) {}
  Tensor operator()(const Tensor& x) const { return fn_ ? fn_(x) : x; }
  const std::string& name() const { return name_; }
  bool is_linear() const { return !fn_; }
  // Made from a Keras name: the function is the library's own, so kernels may apply it in their
  // epilogues. A function passed in never is, whatever name it carries.
  bool is_builtin() const { return builtin_; }

 private:
  std::string name_;
  Fn fn_;
  bool builtin_ = true;
};
ActivationFn get(const std::string& name);
}  // namespace activations

}  // namespace keel
