#pragma once
// Keras' autocast of variables: while an AutocastScope with a dtype is the innermost scope on
// this thread, Variable::value() hands out float32 variables cast to that dtype (the cast is
// recorded, so gradients flow back to the float32 variable). Layers under a mixed-precision
// policy open one around call(); a scope without a dtype switches an outer one off (a float32
// layer inside a mixed one).
#include <deque>
#include <optional>

#include "keel/core/tensor.hpp"

namespace keel::autograd {

class AutocastScope {
 public:
  explicit AutocastScope(std::optional<DType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  // The innermost scope of this thread, or nullptr.
  static AutocastScope* current();
  const std::optional<DType>& dtype() const { return dtype_; }
  // `value` cast to dtype(); the result lives as long as the scope, because Variable::value()
  // returns a reference.
  const Tensor& cast(const Tensor& value);

 private:
  std::optional<DType> dtype_;
  std::deque<Tensor> held_;  // a deque: references to its elements stay valid as it grows
  AutocastScope* previous_;
};

}  // namespace keel::autograd
