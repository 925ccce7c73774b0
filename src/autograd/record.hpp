#pragma once
// How an op puts a node on the active tapes. Pattern used by every differentiable op:
//
//   Tensor y = <forward>;
//   if (autograd::recording())
//     autograd::record("mul", {x, w}, {y}, [x, w](const Grads& g, const Needs& n) {
//       return Grads{n[0] ? sum_to(g[0] * w, x.shape()) : Tensor(), ...};
//     });
//
// Backward functions are written with differentiable ops, so an outer tape records them
// (higher-order gradients). Tensors captured by a backward function must be listed in `saved`
// so that overwriting them (Variable::assign) before gradient() is detected.
#include <functional>
#include <memory>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::detail { struct TapeState; }

namespace keel::autograd {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
// Given one gradient per output (zeros filled in for outputs that got none), returns one
// gradient per input (undefined where needs[i] is false or the input has no gradient).
using BackwardFn = std::function<Grads(const Grads& grad_outputs, const Needs& needs)>;

namespace detail { extern thread_local int active_tapes; }

// True when at least one tape on this thread is recording. One thread-local read.
inline bool recording() { return detail::active_tapes > 0; }

// Records a node onto every recording tape that watches one of `inputs`. Outputs that are not
// floating point are never watched (no gradients through integers or bools).
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward, const std::vector<Tensor>& saved = {});

// Called when a Variable is read: tapes that watch accessed variables start watching it.
void notify_variable_read(const Tensor& value);

// RAII: no tape active on this thread when it is made records while it lives (used by
// custom_gradient and by tapes computing their own gradients). Tapes made inside still record.
class NoRecordScope {
 public:
  NoRecordScope();
  ~NoRecordScope();
  NoRecordScope(const NoRecordScope&) = delete;
  NoRecordScope& operator=(const NoRecordScope&) = delete;

 private:
  std::vector<std::shared_ptr<keel::detail::TapeState>> paused_;
};

}  // namespace keel::autograd
