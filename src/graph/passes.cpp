// The whole-graph passes over a traced plan, each switchable for testing: constant folding,
// common-subexpression elimination (cse.cpp), dead-code elimination, elementwise fusion
// (fusion.cpp), and memory planning; then the executor the replays run.
#include <algorithm>
#include <functional>
#include <map>

#include "graph/cse.hpp"
#include "graph/fusion.hpp"
#include "graph/plan.hpp"

namespace keel::graph::detail {

std::shared_ptr<TensorImpl> view_impl(const View& v, std::shared_ptr<Storage> storage) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = v.shape;
  impl->strides = v.strides;
  impl->offset = v.offset;
  impl->dtype = v.dtype;
  impl->storage = std::move(storage);
  return impl;
}

namespace {

// State made during the trace (a variable f created, an optimizer's slots) was initialised by
// the traced run: the calls that wrote it before anything read it are not replayed, as
// TensorFlow lifts variable initialisers out of a function.
void drop_state_initialisers(Plan& p) {
  std::vector<bool> read(p.slots.size(), false);
  std::vector<Node> kept;
  kept.reserve(p.nodes.size());
  for (Node& n : p.nodes) {
    // Random initialisers too (a layer built in its first call draws its weights).
    bool initialises = (n.kind == NodeKind::kernel || n.kind == NodeKind::random) && n.operands.size() > n.num_inputs;
    for (std::size_t i = n.num_inputs; i < n.operands.size() && initialises; ++i) {
      if (n.operands[i] < 0) continue;
      const int s = p.views[static_cast<std::size_t>(n.operands[i])].slot;
      initialises = p.slots[static_cast<std::size_t>(s)].kind == SlotKind::state && !read[static_cast<std::size_t>(s)];
    }
    const bool nested = n.kind == NodeKind::cond || n.kind == NodeKind::loop;
    for_each_operand(n, [&](int v, bool written) {
      if (!written || nested) read[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)] = true;
    });
    if (!initialises) kept.push_back(std::move(n));
  }
  p.nodes = std::move(kept);
}

// A node is live when it writes what outlives the call (a result, captured or state memory),
// has effects of its own (host steps, control flow), or writes what a later live node reads.
// An unused random draw is dropped, as TensorFlow prunes it (the generator then moves less). Writers stay live for every later reader (a kernel may
// write part of a buffer or accumulate into it).
void eliminate_dead_code(Plan& p) {
  std::vector<bool> needed(p.slots.size(), false);
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    const SlotKind k = p.slots[s].kind;
    needed[s] = k == SlotKind::output || k == SlotKind::captured || k == SlotKind::state;
  }
  std::vector<bool> live(p.nodes.size(), false);
  for (std::size_t i = p.nodes.size(); i-- > 0;) {
    const Node& n = p.nodes[i];
    bool l = n.kind != NodeKind::kernel && n.kind != NodeKind::random;
    for (std::size_t j = n.num_inputs; j < n.operands.size() && !l; ++j)
      l = n.operands[j] >= 0 && needed[static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot)];
    if (!l) continue;
    live[i] = true;
    // Every operand of a nested list counts as read: a branch may read what it also writes.
    const bool nested = n.kind == NodeKind::cond || n.kind == NodeKind::loop;
    for_each_operand(n, [&](int v, bool written) {
      if (!written || nested) needed[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)] = true;
    });
  }
  std::vector<Node> kept;
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    if (live[i]) kept.push_back(std::move(p.nodes[i]));
  p.nodes = std::move(kept);
}

// A kernel whose inputs are all constants (a fill of a scalar operand, arithmetic on
// constants) computes the same values on every call: it runs once here and its outputs become
// constants. Only outputs no other node writes are folded.
void fold_constants(Plan& p) {
  std::vector<int> writers(p.slots.size(), 0);
  for (const Node& n : p.nodes)
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j)
      if (n.operands[j] >= 0) ++writers[static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot)];
  std::vector<Node> kept;
  kept.reserve(p.nodes.size());
  for (Node& n : p.nodes) {
    bool foldable = n.kind == NodeKind::kernel && n.operands.size() > n.num_inputs;
    for (std::size_t j = 0; j < n.operands.size() && foldable; ++j) {
      if (n.operands[j] < 0) continue;
      const View& v = p.views[static_cast<std::size_t>(n.operands[j])];
      const Slot& s = p.slots[static_cast<std::size_t>(v.slot)];
      foldable = j < n.num_inputs ? s.kind == SlotKind::constant
                                  : s.kind == SlotKind::intermediate && writers[static_cast<std::size_t>(v.slot)] == 1;
    }
    if (!foldable) {
      kept.push_back(std::move(n));
      continue;
    }
    std::vector<Tensor> operands;
    for (std::size_t j = 0; j < n.operands.size(); ++j) {
      if (n.operands[j] < 0) {
        operands.emplace_back();
        continue;
      }
      const View& v = p.views[static_cast<std::size_t>(n.operands[j])];
      Slot& s = p.slots[static_cast<std::size_t>(v.slot)];
      if (j >= n.num_inputs && !s.held) {
        s.held = std::make_shared<Storage>(s.nbytes, s.device);
        s.kind = SlotKind::constant;
      }
      operands.emplace_back(view_impl(v, s.held));
    }
    n.kernel(operands.data());
  }
  p.nodes = std::move(kept);
}

// Buffers for the intermediates: a value's lifetime runs from the first node that touches it
// to the last; values whose lifetimes do not overlap share a buffer (best fit by size, on the
// same device). Without planning each value gets a buffer of its own.
void plan_memory(Plan& p, bool share) {
  constexpr int kNone = -1;
  std::vector<int> first(p.slots.size(), kNone), last(p.slots.size(), kNone);
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    for_each_operand(p.nodes[i], [&](int v, bool) {
      const auto s = static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot);
      if (first[s] == kNone) first[s] = static_cast<int>(i);
      last[s] = static_cast<int>(i);
    });
  std::vector<std::size_t> order;
  for (std::size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].kind == SlotKind::intermediate && first[s] != kNone) order.push_back(s);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return first[a] < first[b]; });

  struct Buffer {
    std::size_t nbytes;
    Device device;
    int busy_until;
  };
  std::vector<Buffer> buffers;
  for (std::size_t s : order) {
    Slot& slot = p.slots[s];
    int best = kNone;  // the smallest free buffer that holds it
    if (share)
      for (std::size_t b = 0; b < buffers.size(); ++b) {
        const Buffer& buf = buffers[b];
        if (buf.busy_until >= first[s] || !(buf.device == slot.device) || buf.nbytes < slot.nbytes) continue;
        if (best == kNone || buf.nbytes < buffers[static_cast<std::size_t>(best)].nbytes) best = static_cast<int>(b);
      }
    if (best == kNone) {
      buffers.push_back({slot.nbytes, slot.device, last[s]});
      best = static_cast<int>(buffers.size()) - 1;
    }
    buffers[static_cast<std::size_t>(best)].busy_until = last[s];
    slot.buffer = best;
  }
  p.planned_bytes = 0;
  p.exec.buffers.clear();
  for (const Buffer& b : buffers) {
    p.planned_bytes += b.nbytes;
    p.exec.buffers.push_back(std::make_shared<Storage>(b.nbytes, b.device));
  }
}

// What the intermediates take each in a buffer of its own, as eager execution allocates them.
std::size_t intermediate_bytes(const Plan& p) {
  std::vector<bool> used(p.slots.size(), false);
  for (const Node& n : p.nodes)
    for_each_operand(n, [&](int v, bool) { used[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)] = true; });
  std::size_t bytes = 0;
  for (std::size_t s = 0; s < p.slots.size(); ++s)
    if (used[s] && p.slots[s].kind == SlotKind::intermediate) bytes += p.slots[s].nbytes;
  return bytes;
}

void build_executor(Plan& p) {
  Executor& e = p.exec;
  e.impls.assign(p.views.size(), nullptr);
  e.base_offsets.assign(p.views.size(), 0);
  e.slot_views.assign(p.slots.size(), {});
  for (std::size_t v = 0; v < p.views.size(); ++v) {
    const View& view = p.views[v];
    const Slot& s = p.slots[static_cast<std::size_t>(view.slot)];
    const bool planned = s.kind == SlotKind::intermediate && s.buffer >= 0;
    e.impls[v] = view_impl(view, planned ? e.buffers[static_cast<std::size_t>(s.buffer)] : s.held);
    e.base_offsets[v] = view.offset;
    e.slot_views[static_cast<std::size_t>(view.slot)].push_back(static_cast<int>(v));
  }
  std::vector<bool> written(p.slots.size(), false);
  std::function<void(Node&)> bind_operands = [&](Node& n) {
    n.bound.clear();
    for (int v : n.operands) n.bound.push_back(v >= 0 ? Tensor(e.impls[static_cast<std::size_t>(v)]) : Tensor());
    for (auto& list : n.sub)
      for (Node& m : list) bind_operands(m);
  };
  for (Node& n : p.nodes) {
    bind_operands(n);
    for_each_operand(n, [&](int v, bool w) {
      if (w) written[static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot)] = true;
    });
  }
  e.input_slots.clear();
  e.output_slots.clear();
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    if (e.slot_views[s].empty()) continue;
    if (p.slots[s].kind == SlotKind::input) e.input_slots.push_back(static_cast<int>(s));
    if (p.slots[s].kind == SlotKind::output) e.output_slots.push_back(static_cast<int>(s));
  }
  e.written_external.clear();
  for (std::size_t s = 0; s < p.slots.size(); ++s)
    if (written[s] && (p.slots[s].kind == SlotKind::captured || p.slots[s].kind == SlotKind::state))
      e.written_external.push_back(static_cast<int>(s));
}

}  // namespace

void finalise(Plan& plan, const PassOptions& options) {
  drop_state_initialisers(plan);
  if (options.fold_constants) fold_constants(plan);
  if (options.eliminate_common_subexpressions) eliminate_common_subexpressions(plan);
  if (options.eliminate_dead_code) eliminate_dead_code(plan);
  plan.unplanned_bytes = intermediate_bytes(plan);
  if (options.fuse_elementwise) fuse_elementwise(plan);
  // A differentiable plan's calls each bind memory of their own (Binding): nothing to plan.
  if (!plan.differentiable) plan_memory(plan, options.plan_memory);
  build_executor(plan);
}

}  // namespace keel::graph::detail
