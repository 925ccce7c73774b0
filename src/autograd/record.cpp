#include "autograd/record.hpp"

#include <algorithm>

#include "autograd/tape_state.hpp"

namespace keel {
namespace autograd::detail {
thread_local int active_tapes = 0;
}

namespace detail {

std::vector<std::shared_ptr<TapeState>>& tape_stack() {
  thread_local std::vector<std::shared_ptr<TapeState>> stack;
  return stack;
}

namespace {

// The largest node buffer a thread keeps for its next tape (16K nodes, a few MB): a tape of a
// million nodes would otherwise keep its buffer for as long as its thread lives.
constexpr std::size_t kMaxSpareNodes = std::size_t{1} << 14;

// This thread's spare node buffer; null once the thread's own objects are being destroyed (a
// tape that ends after that frees its buffer).
std::vector<Node>* spare_nodes() {
  thread_local bool gone = false;  // trivially destructible: readable until the thread ends
  struct Spare {
    std::vector<Node> nodes;
    ~Spare() { gone = true; }
  };
  if (gone) return nullptr;
  thread_local Spare spare;
  return &spare.nodes;
}

}  // namespace

TapeState::TapeState() {
  if (std::vector<Node>* spare = spare_nodes()) nodes.swap(*spare);
}

TapeState::~TapeState() {
  nodes.clear();
  std::vector<Node>* spare = spare_nodes();
  if (spare && nodes.capacity() > spare->capacity() && nodes.capacity() <= kMaxSpareNodes) nodes.swap(*spare);
}

void recount_active_tapes() {
  int n = 0;
  for (const auto& t : tape_stack()) n += t->recording() ? 1 : 0;
  autograd::detail::active_tapes = n;
}

}  // namespace detail

namespace autograd {

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward, const std::vector<Tensor>& saved) {
  bool any_float_output = false;
  for (const auto& o : outputs) any_float_output |= o.defined() && is_floating(o.dtype());
  if (!any_float_output) return;
  const auto& tapes = keel::detail::tape_stack();
  // The last recording tape takes `backward` itself, the others copies (a copy allocates again
  // when its captures do not fit in std::function: most backward functions keep two tensors).
  std::size_t last = tapes.size();
  for (std::size_t k = 0; k < tapes.size(); ++k)
    if (tapes[k]->recording()) last = k;
  for (std::size_t k = 0; k < tapes.size(); ++k) {
    const auto& tape = tapes[k];
    if (!tape->recording()) continue;
    std::vector<bool> watched(inputs.size(), false);
    bool any = false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      watched[i] = t.defined() && is_floating(t.dtype()) && tape->watched.count(t.id()) != 0;
      any |= watched[i];
    }
    if (!any) continue;
    keel::detail::Node node;
    node.op = op;
    node.inputs.reserve(inputs.size());
    for (const auto& t : inputs) node.inputs.push_back(t.defined() ? t.id() : 0);
    node.input_watched = std::move(watched);
    for (const auto& o : outputs) {
      node.add_output(o);
      if (is_floating(o.dtype())) tape->watched.insert(o.id());
    }
    node.backward = k == last ? std::move(backward) : backward;
    for (const auto& s : saved)
      if (s.defined()) node.saved_versions.emplace_back(s.impl()->storage, s.impl()->storage->version());
    tape->nodes.push_back(std::move(node));
  }
}

void notify_variable_read(const Tensor& value) {
  for (const auto& tape : keel::detail::tape_stack())
    if (tape->recording() && tape->watch_accessed_variables && tape->watched.insert(value.id()).second)
      tape->accessed.push_back(value);
}

NoRecordScope::NoRecordScope() {
  for (const auto& tape : keel::detail::tape_stack()) {
    if (tape->paused == 0) {
      ++tape->paused;
      paused_.push_back(tape);
    }
  }
  keel::detail::recount_active_tapes();
}

NoRecordScope::~NoRecordScope() {
  for (const auto& tape : paused_) --tape->paused;
  keel::detail::recount_active_tapes();
}

}  // namespace autograd
}  // namespace keel
