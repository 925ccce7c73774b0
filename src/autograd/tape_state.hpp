#pragma once
// What a GradientTape holds: the watched tensor ids and the recorded nodes, in order.
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "autograd/record.hpp"

namespace keel::detail {

// What a node's backward needs of an output that got no gradient (zeros of its kind).
struct OutputKind {
  Shape shape;
  DType dtype;
  Device device;
};

struct Node {
  const char* op;
  std::vector<std::uint64_t> inputs;
  std::vector<bool> input_watched;  // floating and watched when recorded
  std::vector<std::uint64_t> outputs;
  std::vector<OutputKind> output_kinds;  // one list, not three: a recorded op allocates less
  autograd::BackwardFn backward;
  std::vector<std::pair<std::shared_ptr<Storage>, std::uint64_t>> saved_versions;
  // An output with no gradient gets an undefined one, not zeros (keel::cond's node, whose
  // outputs include every tensor its branches made: zeros for each would be work for nothing).
  bool sparse_grads = false;

  void add_output(const Tensor& t) {
    outputs.push_back(t.id());
    output_kinds.push_back({t.shape(), t.dtype(), t.device()});
  }
};

using GradMap = std::unordered_map<std::uint64_t, Tensor>;

// The backward of one node: its outputs' gradients taken from `grads`, its inputs' gradients
// added into it. `reach`: the ids whose gradients are wanted somewhere; `keep`: ids whose
// gradients stay in `grads` once read (the sources).
void backward_node(const Node& node, GradMap& grads, const std::unordered_set<std::uint64_t>& reach,
                   const std::unordered_set<std::uint64_t>& keep);

// Which nodes (in recording order) read, through watched inputs, an id in `reach` or one made
// from it; `reach` grows by their outputs.
std::vector<char> nodes_on_path(const std::vector<Node>& nodes, std::unordered_set<std::uint64_t>& reach);

// The gradients of `sources` (ids) from `seeds`, back through `nodes` (in recording order);
// a source no seed reaches has none.
GradMap backprop(const std::vector<Node>& nodes, GradMap seeds, const std::vector<std::uint64_t>& sources);

struct TapeState {
  // The node list takes the buffer of the last tape that ended on this thread, and gives its own
  // back when it ends: a training loop makes a tape per step, and a freed list of a thousand
  // nodes (200 KB) went back to the system (glibc trims the heap's top) to be faulted in again
  // by the next step's tape.
  TapeState();
  ~TapeState();
  TapeState(const TapeState&) = delete;
  TapeState& operator=(const TapeState&) = delete;

  bool persistent = false;
  bool watch_accessed_variables = true;
  bool used = false;  // a non-persistent tape after its gradient() call
  int paused = 0;
  std::unordered_set<std::uint64_t> watched;
  std::vector<Tensor> watched_list;  // for watched_tensors()
  std::vector<Tensor> accessed;      // for watched_variables()
  std::vector<Node> nodes;

  bool recording() const { return paused == 0 && !used; }
};

// This thread's active tapes, innermost last.
std::vector<std::shared_ptr<TapeState>>& tape_stack();
void recount_active_tapes();

}  // namespace keel::detail

namespace keel::detail {

// Watches the GradientTape::gradient calls on this thread (the data-parallel train step
// starts each gradient bucket's all-reduce while the backward pass goes on, as PyTorch DDP's
// autograd hooks do). `ready(i, g)`: source i's gradient g is final (no node left to run adds
// to it); called once per source, in the order they become final, before gradient() returns.
// `before_node()`: before each node the backward pass runs (so the observer knows more work
// follows what it heard). Nested gradient calls (a node's own backward) do not see it.
struct GradientObserver {
  std::function<void(std::size_t, const Tensor&)> ready;
  std::function<void()> before_node;
};

// While it lives, `observer` watches this thread's gradient() calls.
class GradientObserverScope {
 public:
  explicit GradientObserverScope(GradientObserver* observer);
  ~GradientObserverScope();
  GradientObserverScope(const GradientObserverScope&) = delete;
  GradientObserverScope& operator=(const GradientObserverScope&) = delete;

 private:
  GradientObserver* previous_;
};

}  // namespace keel::detail
