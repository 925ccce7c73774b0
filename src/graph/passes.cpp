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

// Whether node i may write its output into the memory of input view `in`, which dies there: an
// elementwise kernel (each element read before it is written, in the same position) whose input
// and output are both all of their slots, of one geometry, and which reads that slot through no
// other view.
bool writes_in_place(const Plan& p, const Node& n, int in, int out) {
  const std::string family = n.type.family;
  if (n.kind != NodeKind::kernel || (family != "unary" && family != "binary" && family != "fused_elementwise"))
    return false;
  const View& a = p.views[static_cast<std::size_t>(in)];
  const View& y = p.views[static_cast<std::size_t>(out)];
  if (a.slot == y.slot || !(a.shape == y.shape) || a.dtype != y.dtype ||
      !whole_slot_view(a, p.slots[static_cast<std::size_t>(a.slot)]) ||
      !whole_slot_view(y, p.slots[static_cast<std::size_t>(y.slot)]))
    return false;
  for (std::size_t j = 0; j < n.num_inputs; ++j) {
    const int v = n.operands[j];
    if (v < 0 || p.views[static_cast<std::size_t>(v)].slot != a.slot) continue;
    const View& o = p.views[static_cast<std::size_t>(v)];
    if (!(o.shape == a.shape) || o.strides != a.strides || o.offset != a.offset || o.dtype != a.dtype) return false;
  }
  return true;
}

// Intermediates get places in one arena per device (a value's lifetime runs from the first node
// that touches it to the last; without sharing, each value gets an arena of its own). Values written in place (an elementwise
// kernel's output over its dying input) share one place; then, largest first, each place goes at
// the lowest offset that no place alive at the same time overlaps (TensorFlow Lite's greedy by
// size), so the arena is about the most bytes alive at once rather than a buffer per size class.
void plan_memory(Plan& p, bool share) {
  constexpr int kNone = -1;
  constexpr std::size_t kAlign = 64;
  std::vector<int> first(p.slots.size(), kNone), last(p.slots.size(), kNone);
  for (std::size_t i = 0; i < p.nodes.size(); ++i)
    for_each_operand(p.nodes[i], [&](int v, bool) {
      const auto s = static_cast<std::size_t>(p.views[static_cast<std::size_t>(v)].slot);
      if (first[s] == kNone) first[s] = static_cast<int>(i);
      last[s] = static_cast<int>(i);
    });
  // Places: a slot's own, or the place of the input it overwrites.
  struct Place {
    std::size_t nbytes = 0, offset = 0;
    Device device;
    int first = 0, last = 0;
    int arena = -1;
  };
  std::vector<Place> places;
  std::vector<int> place_of(p.slots.size(), kNone);
  const auto planned = [&](int slot) {
    const auto s = static_cast<std::size_t>(slot);
    return p.slots[s].kind == SlotKind::intermediate && first[s] != kNone;
  };
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j) {
      const int out = n.operands[j];
      if (out < 0) continue;
      const int ys = p.views[static_cast<std::size_t>(out)].slot;
      if (!planned(ys) || place_of[static_cast<std::size_t>(ys)] != kNone) continue;
      // Only a single-output kernel writing ys for the first time may take over an input.
      if (!share || n.operands.size() != n.num_inputs + 1 || first[static_cast<std::size_t>(ys)] != static_cast<int>(i))
        continue;
      int host = kNone;  // the place it takes over
      for (std::size_t k = 0; k < n.num_inputs && host == kNone; ++k) {
        const int in = n.operands[k];
        if (in < 0) continue;
        const int as = p.views[static_cast<std::size_t>(in)].slot;
        if (planned(as) && last[static_cast<std::size_t>(as)] == static_cast<int>(i) &&
            place_of[static_cast<std::size_t>(as)] != kNone && writes_in_place(p, n, in, out))
          host = place_of[static_cast<std::size_t>(as)];
      }
      if (host == kNone) continue;
      place_of[static_cast<std::size_t>(ys)] = host;
      Place& pl = places[static_cast<std::size_t>(host)];
      pl.last = std::max(pl.last, last[static_cast<std::size_t>(ys)]);
    }
    // Slots first seen at this node that did not take over an input get a place of their own
    // (done after the in-place check so that an input's place exists before its reader's).
    for_each_operand(n, [&](int v, bool) {
      const int s = p.views[static_cast<std::size_t>(v)].slot;
      if (!planned(s) || place_of[static_cast<std::size_t>(s)] != kNone) return;
      place_of[static_cast<std::size_t>(s)] = static_cast<int>(places.size());
      places.push_back({p.slots[static_cast<std::size_t>(s)].nbytes, 0, p.slots[static_cast<std::size_t>(s)].device,
                        first[static_cast<std::size_t>(s)], last[static_cast<std::size_t>(s)], -1});
    });
  }
  // Arenas: one per device; without sharing, one per place.
  std::vector<std::pair<Device, std::size_t>> arenas;  // device, bytes
  std::vector<std::size_t> order(places.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return places[a].nbytes > places[b].nbytes; });
  std::vector<std::size_t> placed;
  for (std::size_t k : order) {
    Place& pl = places[k];
    if (!share) {
      pl.arena = static_cast<int>(arenas.size());
      arenas.push_back({pl.device, pl.nbytes});
      continue;
    }
    for (std::size_t a = 0; a < arenas.size() && pl.arena < 0; ++a)
      if (arenas[a].first == pl.device) pl.arena = static_cast<int>(a);
    if (pl.arena < 0) {
      pl.arena = static_cast<int>(arenas.size());
      arenas.push_back({pl.device, 0});
    }
    // The places alive with it in its arena, by offset; it goes in the first gap that fits.
    std::vector<std::pair<std::size_t, std::size_t>> taken;  // [offset, end)
    for (std::size_t q : placed) {
      const Place& o = places[q];
      if (o.arena == pl.arena && o.first <= pl.last && pl.first <= o.last) taken.push_back({o.offset, o.offset + o.nbytes});
    }
    std::sort(taken.begin(), taken.end());
    std::size_t at = 0;
    for (const auto& [begin, end] : taken) {
      if (begin >= at + pl.nbytes) break;
      at = std::max(at, (end + kAlign - 1) / kAlign * kAlign);
    }
    pl.offset = at;
    auto& size = arenas[static_cast<std::size_t>(pl.arena)].second;
    size = std::max(size, at + pl.nbytes);
    placed.push_back(k);
  }
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    if (place_of[s] == kNone) continue;
    const Place& pl = places[static_cast<std::size_t>(place_of[s])];
    p.slots[s].buffer = pl.arena;
    p.slots[s].buffer_offset = pl.offset;
  }
  p.planned_bytes = 0;
  p.exec.buffers.clear();
  for (const auto& [device, nbytes] : arenas) {
    p.planned_bytes += nbytes;
    p.exec.buffers.push_back(std::make_shared<Storage>(nbytes, device));
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
    if (planned) {
      View at = view;  // the slot's place in its arena
      at.offset += static_cast<std::int64_t>(s.buffer_offset / itemsize(view.dtype));
      e.impls[v] = view_impl(at, e.buffers[static_cast<std::size_t>(s.buffer)]);
    } else {
      e.impls[v] = view_impl(view, s.held);
    }
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
  if (options.fuse_patterns) fuse_patterns(plan);
  if (options.fuse_elementwise) fuse_elementwise(plan);
  // A differentiable plan's calls each bind memory of their own (Binding): nothing to plan.
  if (!plan.differentiable) plan_memory(plan, options.plan_memory);
  build_executor(plan);
}

}  // namespace keel::graph::detail
