// Keras' initializers (variance scaling with Keras' fan rules), regularizers and activation
// names.
#include "keel/layers/initializers.hpp"

#include <cmath>
#include <vector>

#include <fmt/core.h>

#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "layers/elementwise_activations.hpp"
#include "layers/weight_classes.hpp"

namespace keel {

namespace initializers {

std::pair<double, double> compute_fans(const Shape& shape) {
  if (shape.rank() == 0) return {1, 1};
  if (shape.rank() == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  if (shape.rank() == 2) return {static_cast<double>(shape[0]), static_cast<double>(shape[1])};
  double receptive = 1;
  for (std::int64_t i = 0; i < shape.rank() - 2; ++i) receptive *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[shape.rank() - 2]) * receptive,
          static_cast<double>(shape[shape.rank() - 1]) * receptive};
}

namespace {

// Keras' VarianceScaling: scale / fan, drawn as a truncated normal (whose stddev is corrected
// by 0.87962566103423978, the stddev of a unit normal truncated at 2) or a uniform.
Tensor variance_scaling(const Shape& shape, DType dtype, double scale, const std::string& mode, bool normal) {
  const auto [fan_in, fan_out] = compute_fans(shape);
  const double fan = mode == "fan_in" ? fan_in : mode == "fan_out" ? fan_out : (fan_in + fan_out) / 2;
  const double variance = scale / std::max(1.0, fan);
  if (normal) return random::truncated_normal(shape, 0.0, std::sqrt(variance) / 0.87962566103423978, dtype);
  const double limit = std::sqrt(3.0 * variance);
  return random::uniform(shape, -limit, limit, dtype);
}

// Keras' Orthogonal: QR of a normal matrix (modified Gram-Schmidt), signs fixed by R's diagonal.
Tensor orthogonal(const Shape& shape, DType dtype) {
  if (shape.rank() < 2)
    throw ValueError(fmt::format("orthogonal initializer: needs a shape of rank >= 2, got {}", shape.to_string()));
  std::int64_t rows = 1;
  for (std::int64_t i = 0; i < shape.rank() - 1; ++i) rows *= shape[i];
  const std::int64_t cols = shape[shape.rank() - 1];
  const std::int64_t n = std::max(rows, cols), k = std::min(rows, cols);
  // Columns of an n x k normal matrix, orthonormalised.
  std::vector<double> a = random::normal({k, n}, 0, 1, DType::float64).to_vector<double>();
  for (std::int64_t j = 0; j < k; ++j) {
    double* v = a.data() + j * n;
    for (std::int64_t p = 0; p < j; ++p) {
      const double* q = a.data() + p * n;
      double dot = 0;
      for (std::int64_t i = 0; i < n; ++i) dot += q[i] * v[i];
      for (std::int64_t i = 0; i < n; ++i) v[i] -= dot * q[i];
    }
    double norm = 0;
    for (std::int64_t i = 0; i < n; ++i) norm += v[i] * v[i];
    norm = std::sqrt(norm);
    for (std::int64_t i = 0; i < n; ++i) v[i] = norm > 0 ? v[i] / norm : 0;
  }
  // a holds k orthonormal vectors of length n: as [rows, cols] that is a^T when rows >= cols.
  std::vector<double> out(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(r * cols + c)] = rows >= cols ? a[static_cast<std::size_t>(c * n + r)]
                                                                 : a[static_cast<std::size_t>(r * n + c)];
  return constant(out, shape, dtype);
}

}  // namespace

Initializer::Initializer(std::string name) : name_(std::move(name)) {
  const std::string& n = name_;
  if (n == "glorot_uniform") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 1.0, "fan_avg", false); };
  else if (n == "glorot_normal") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 1.0, "fan_avg", true); };
  else if (n == "he_normal") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 2.0, "fan_in", true); };
  else if (n == "he_uniform") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 2.0, "fan_in", false); };
  else if (n == "lecun_normal") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 1.0, "fan_in", true); };
  else if (n == "lecun_uniform") fn_ = [](const Shape& s, DType d) { return variance_scaling(s, d, 1.0, "fan_in", false); };
  else if (n == "zeros") fn_ = [](const Shape& s, DType d) { return zeros(s, d); };
  else if (n == "ones") fn_ = [](const Shape& s, DType d) { return ones(s, d); };
  else if (n == "orthogonal") fn_ = orthogonal;
  else if (n == "random_normal" || n == "normal") fn_ = [](const Shape& s, DType d) { return random::normal(s, 0, 0.05, d); };
  else if (n == "random_uniform" || n == "uniform") fn_ = [](const Shape& s, DType d) { return random::uniform(s, -0.05, 0.05, d); };
  else if (n == "truncated_normal") fn_ = [](const Shape& s, DType d) { return random::truncated_normal(s, 0, 0.05, d); };
  else
    throw ValueError(fmt::format(
        "initializer: unknown name '{}' (expected glorot_uniform, glorot_normal, he_normal, he_uniform, "
        "lecun_normal, lecun_uniform, zeros, ones, orthogonal, random_normal, random_uniform or "
        "truncated_normal)", n));
}

Constant::Constant(double value)
    : Initializer([value](const Shape& s, DType d) { return full(s, value, d); },
                  layers::detail::initializer_class("Constant")->name,
                  {{layers::detail::initializer_class("Constant")->field, value}}) {}

Tensor Initializer::operator()(const Shape& shape, DType dtype) const {
  if (!fn_) throw ValueError("initializer: empty initializer");
  return fn_(shape, dtype);
}

}  // namespace initializers

namespace regularizers {

Regularizer::Regularizer(std::string name) {
  if (name == "l1") l1_ = 0.01;
  else if (name == "l2") l2_ = 0.01;
  else if (name == "l1_l2") l1_ = l2_ = 0.01;
  else if (!name.empty() && name != "none")
    throw ValueError(fmt::format("regularizer: unknown name '{}' (expected l1, l2 or l1_l2)", name));
}

Tensor Regularizer::operator()(const Tensor& w) const {
  Tensor total;
  if (l1_ != 0) total = mul(scalar_like(w, l1_), reduce_sum(abs(w)));
  if (l2_ != 0) {
    Tensor t = mul(scalar_like(w, l2_), reduce_sum(square(w)));
    total = total.defined() ? add(total, t) : t;
  }
  return total.defined() ? total : scalar_like(w, 0.0);
}

std::string Regularizer::name() const {
  if (l1_ != 0 && l2_ != 0) return "l1_l2";
  if (l1_ != 0) return "l1";
  if (l2_ != 0) return "l2";
  return "none";
}

}  // namespace regularizers

namespace activations {

namespace detail {

const ElementwiseActivation* elementwise_activation(const std::string& name) {
  using kernel::UnaryOp;
  // The parameters are the ops' defaults (Keras 3's): leaky_relu's negative slope 0.2, elu's 1.
  static const ElementwiseActivation table[] = {
      {"relu", [](const Tensor& x) { return relu(x); }, UnaryOp::relu, 0},
      {"relu6", [](const Tensor& x) { return relu6(x); }, UnaryOp::relu6, 0},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, UnaryOp::sigmoid, 0},
      {"tanh", [](const Tensor& x) { return tanh(x); }, UnaryOp::tanh, 0},
      {"elu", [](const Tensor& x) { return elu(x, 1.0); }, UnaryOp::elu, 1.0},
      {"gelu", [](const Tensor& x) { return gelu(x, false); }, UnaryOp::gelu, 0},
      {"silu", [](const Tensor& x) { return silu(x); }, UnaryOp::silu, 0},
      {"swish", [](const Tensor& x) { return silu(x); }, UnaryOp::silu, 0},
      {"softplus", [](const Tensor& x) { return softplus(x); }, UnaryOp::softplus, 0},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, UnaryOp::leaky_relu, 0.2},
      {"exponential", [](const Tensor& x) { return exp(x); }, UnaryOp::exp, 0},
      {"selu", [](const Tensor& x) { return selu(x); }, UnaryOp::selu, 0},
      {"softsign", [](const Tensor& x) { return softsign(x); }, UnaryOp::softsign, 0},
      {"hard_sigmoid", [](const Tensor& x) { return hard_sigmoid(x); }, UnaryOp::hard_sigmoid, 0},
      {"hard_silu", [](const Tensor& x) { return hard_swish(x); }, UnaryOp::hard_swish, 0},
      {"hard_swish", [](const Tensor& x) { return hard_swish(x); }, UnaryOp::hard_swish, 0},
      {"mish", [](const Tensor& x) { return mish(x); }, UnaryOp::mish, 0},
  };
  for (const auto& e : table)
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace detail

ActivationFn::ActivationFn(std::string name) : name_(std::move(name)) {
  const std::string& n = name_;
  if (n.empty() || n == "linear" || n == "none") {
    name_ = "linear";
    return;
  }
  if (const auto* e = detail::elementwise_activation(n)) fn_ = e->op;
  else if (n == "softmax") fn_ = [](const Tensor& x) { return softmax(x, -1); };
  else if (n == "log_softmax") fn_ = [](const Tensor& x) { return log_softmax(x, -1); };
  // Keras 2's (and TensorFlow.js's) hard_sigmoid, clip(0.2 x + 0.5, 0, 1): tfjs's default
  // recurrent_activation. Keras 3's hard_sigmoid above is relu6(x + 3) / 6.
  else if (n == "hard_sigmoid_keras2")
    fn_ = [](const Tensor& x) { return clip_by_value(add(mul(x, scalar_like(x, 0.2)), scalar_like(x, 0.5)), 0.0, 1.0); };
  else
    throw ValueError(fmt::format(
        "activation: unknown name '{}' (expected linear, relu, relu6, sigmoid, tanh, softmax, log_softmax, "
        "elu, gelu, silu, swish, softplus, leaky_relu, exponential, selu, softsign, hard_sigmoid, "
        "hard_sigmoid_keras2, hard_silu, hard_swish or mish)", n));
}

ActivationFn get(const std::string& name) { return ActivationFn(name); }

}  // namespace activations

}  // namespace keel
