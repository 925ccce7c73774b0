// bias_add: x + bias along the last axis, with an activation whose derivative reads only the
// output fused into the same pass (one kernel, one tape node).
#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/fused.hpp"
#include "backend/recorder.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/nn.hpp"
#include "keel/ops/reduce.hpp"
#include "ops/elementwise_internal.hpp"

namespace keel {

namespace {

using kernel::UnaryOp;

struct BiasActivation {
  bool linear = true;
  UnaryOp op = UnaryOp::relu;
  Tensor (*apply)(const Tensor&) = nullptr;  // the op itself, for the unfused path
};

// The activations bias_add fuses, by Keras name; null for any other.
const BiasActivation* find_activation(const std::string& name) {
  static const BiasActivation linear{};
  static const BiasActivation relu_act{false, UnaryOp::relu, [](const Tensor& z) { return relu(z); }};
  static const BiasActivation sigmoid_act{false, UnaryOp::sigmoid, [](const Tensor& z) { return sigmoid(z); }};
  static const BiasActivation tanh_act{false, UnaryOp::tanh, [](const Tensor& z) { return tanh(z); }};
  static const BiasActivation exp_act{false, UnaryOp::exp, [](const Tensor& z) { return exp(z); }};
  if (name == "linear") return &linear;
  if (name == "relu") return &relu_act;
  if (name == "sigmoid") return &sigmoid_act;
  if (name == "tanh") return &tanh_act;
  if (name == "exponential") return &exp_act;
  return nullptr;
}

BiasActivation bias_activation_of(const std::string& name) {
  if (const BiasActivation* a = find_activation(name)) return *a;
  throw ValueError(fmt::format(
      "bias_add: activation '{}' is not one it fuses (linear, relu, sigmoid, tanh, exponential); apply it to "
      "bias_add's result",
      name));
}

// One pass where the device has the kernel, for float32 and float64, and not under a recorder
// that fuses elementwise chains itself (a keel::function trace sees the add and the activation).
bool runs_fused(const Tensor& x) {
  if (x.dtype() != DType::float32 && x.dtype() != DType::float64) return false;
  return backend::has_fused(backend::Fused::bias_activation, x.device()) && !backend::recorder_fuses();
}

}  // namespace

namespace detail {
bool bias_add_fuses(const std::string& activation) { return find_activation(activation) != nullptr; }
}  // namespace detail

Tensor bias_add(const Tensor& x, const Tensor& bias, const std::string& activation) {
  constexpr const char* op = "bias_add";
  detail::check_defined(x, op, "x");
  detail::check_defined(bias, op, "bias");
  detail::check_same_device(x, bias, op);
  detail::check_same_dtype(x, bias, op);
  const BiasActivation act = bias_activation_of(activation);
  if (x.rank() < 2)
    throw ShapeError(fmt::format("bias_add: x must be at least 2-D (the bias runs along its last axis), got shape {}",
                                 x.shape().to_string()));
  const std::int64_t c = x.shape()[x.rank() - 1];
  if (bias.rank() != 1 || bias.shape()[0] != c)
    throw ShapeError(fmt::format("bias_add: bias must be a vector of x's last axis ({}), got bias {} for x {}", c,
                                 bias.shape().to_string(), x.shape().to_string()));
  if (!act.linear && !is_half(x.dtype())) detail::check_float(x, op);
  if (!runs_fused(x)) return act.linear ? add(x, bias) : act.apply(add(x, bias));

  Tensor y = detail::empty_tensor(x.shape(), x.dtype(), x.device());
  backend::bias_activation(x.contiguous(), bias.contiguous(), act.linear, act.op, y);
  if (autograd::recording()) {
    // d/dx = the activation's derivative (from y); d/dbias = that summed over the leading axes.
    const Tensor saved = act.linear ? Tensor() : y;
    autograd::record(
        op, {x, bias}, {y},
        [saved, act, sb = bias.shape()](const autograd::Grads& g, const autograd::Needs& n) {
          const Tensor gz = act.linear ? g[0] : detail::grad_from_output(act.op, g[0], saved);
          return autograd::Grads{n[0] ? gz : Tensor(), n[1] ? sum_to(gz, sb) : Tensor()};
        },
        act.linear ? std::vector<Tensor>{} : std::vector<Tensor>{y});
  }
  return y;
}

}  // namespace keel
