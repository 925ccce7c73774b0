#pragma once
// What the elementwise op files (src/ops/elementwise*.cpp) share: the argument checks and kernel
// calls of a unary and a binary op, and the recording of a unary op's gradient.
#include <string>

#include "autograd/record.hpp"
#include "core/kernel_kinds.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// A unary kernel's output for x, after the dtype check (integers only for the ops that stay
// integers; float16/bfloat16 run as stored).
Tensor unary_op(const char* name, kernel::UnaryOp op, const Tensor& x, double alpha = 0);
// The broadcast shape of x and y, after the defined / device / dtype checks.
Shape check_binary(const Tensor& x, const Tensor& y, const char* op);
// A binary kernel's output for x and y, of any numeric dtype.
Tensor binary_op(const char* name, kernel::BinaryOp op, const Tensor& x, const Tensor& y);

// g times the derivative of exp, tanh, sigmoid or relu at the point where the op's output is y
// (these derivatives are functions of the output alone); ValueError for another op.
Tensor grad_from_output(kernel::UnaryOp op, const Tensor& g, const Tensor& y);

// Whether bias_add(x, bias, activation) takes this Keras activation name (and fuses it).
bool bias_add_fuses(const std::string& activation);

// What a unary op's derivative reads: only that is kept for the backward. A ReLU's gradient
// reads its output (which the next layer keeps anyway), so its input can be freed as soon as
// nothing else needs it; exp, sqrt, tanh and sigmoid read their outputs too.
enum class Reads { input, output, both, neither };

// Records a unary op whose gradient is dydx(g, x, y); x or y is undefined there unless `reads`
// names it.
template <class D>
void record_unary(const char* name, const Tensor& x, const Tensor& y, D dydx, Reads reads) {
  if (!autograd::recording()) return;
  const Tensor kx = reads == Reads::input || reads == Reads::both ? x : Tensor();
  const Tensor ky = reads == Reads::output || reads == Reads::both ? y : Tensor();
  std::vector<Tensor> saved;
  if (kx.defined()) saved.push_back(kx);
  if (ky.defined()) saved.push_back(ky);
  autograd::record(name, {x}, {y}, [kx, ky, dydx](const autograd::Grads& g, const autograd::Needs&) {
    return autograd::Grads{dydx(g[0], kx, ky)};
  }, saved);
}

}  // namespace keel::detail
