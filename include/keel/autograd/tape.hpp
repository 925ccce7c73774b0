#pragma once
// GradientTape: TensorFlow's eager autograd. Ops record onto every active tape (a thread-local
// stack) that watches one of their inputs; gradient() walks the records backwards.
#include <functional>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "keel/autograd/variable.hpp"
#include "keel/core/tensor.hpp"

namespace keel {

enum class UnconnectedGradients { none, zero };

namespace detail { struct TapeState; }

class GradientTape {
 public:
  explicit GradientTape(bool persistent = false, bool watch_accessed_variables = true);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  void watch(const Tensor& tensor);
  void watch(const Variable& variable);
  std::vector<Tensor> watched_tensors() const;
  // The values of the trainable Variables this tape started watching because they were read
  // while it recorded (TensorFlow's watched_variables(), as the variables' value tensors).
  std::vector<Tensor> watched_variables() const;

  Tensor gradient(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::none);
  Tensor gradient(const Tensor& target, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::none);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::none);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable*>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::none);
  // tape.gradient(loss, {&w, &b}) (a braced list of pointers would also match vector<Tensor>'s
  // iterator-pair constructor without this overload).
  std::vector<Tensor> gradient(const Tensor& target, std::initializer_list<Variable*> sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::none) {
    return gradient(target, std::vector<Variable*>(sources), unconnected);
  }
  // With explicit upstream gradients (tf's output_gradients); the default is ones.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const Tensor& output_gradient,
                               UnconnectedGradients unconnected = UnconnectedGradients::none);

  // tf.GradientTape.jacobian: every d target[i] / d source[j], shape target.shape + source.shape
  // (one backward pass per target element; the tape stays usable until the last one, and
  // outer tapes record the passes, so jacobians nest). Unconnected: undefined, or zeros.
  Tensor jacobian(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::none);
  Tensor jacobian(const Tensor& target, const Variable& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::none);
  // tf.GradientTape.batch_jacobian: target [b, y...] and source [b, x...] with rows independent
  // across the batch; result [b, y..., x...] with result[i] = d target[i] / d source[i]. One
  // backward pass per element of y.
  Tensor batch_jacobian(const Tensor& target, const Tensor& source,
                        UnconnectedGradients unconnected = UnconnectedGradients::none);

  // While the returned guard lives, this tape records nothing.
  class RecordingPause {
   public:
    explicit RecordingPause(std::shared_ptr<detail::TapeState> state);
    ~RecordingPause();
    RecordingPause(const RecordingPause&) = delete;
    RecordingPause& operator=(const RecordingPause&) = delete;

   private:
    std::shared_ptr<detail::TapeState> state_;
  };
  [[nodiscard]] RecordingPause stop_recording();
  void reset();  // forget everything recorded and watched

  bool persistent() const;

 private:
  std::shared_ptr<detail::TapeState> state_;
};

// The value of x, with no gradient flowing through it.
Tensor stop_gradient(const Tensor& x);

// custom_gradient(f): f computes y from its inputs and returns {y, grad_fn}; grad_fn maps the
// upstream gradient dy to one gradient per input. Ops inside f are not recorded; y's node uses
// grad_fn. Returns a callable with f's signature minus the gradient.
using CustomGradFn = std::function<std::vector<Tensor>(const Tensor& dy)>;
std::function<Tensor(const std::vector<Tensor>&)> custom_gradient(
    std::function<std::pair<Tensor, CustomGradFn>(const std::vector<Tensor>&)> f);
std::function<Tensor(const Tensor&)> custom_gradient(
    std::function<std::pair<Tensor, std::function<Tensor(const Tensor&)>>(const Tensor&)> f);

}  // namespace keel
