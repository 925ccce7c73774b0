// Replay: bind the call's arguments and fresh result buffers to their slots, run the nodes in
// order, hand back the results. No shape checks, broadcasting rules or tape: the trace did them.
#include "graph/plan.hpp"
#include "backend/backend.hpp"

namespace keel::graph::detail {

namespace {

void bind_slot(Executor& e, int slot, const std::shared_ptr<Storage>& storage, std::int64_t offset) {
  for (int v : e.slot_views[static_cast<std::size_t>(slot)]) {
    TensorImpl& impl = *e.impls[static_cast<std::size_t>(v)];
    impl.storage = storage;
    impl.offset = e.base_offsets[static_cast<std::size_t>(v)] + offset;
  }
}

// Results [first, last) of a run: handles of their own (the executor's views are rebound by
// the next call) over the memory they are bound to now.
std::vector<Tensor> results_of(const Executor& e, const std::vector<int>& outputs, std::size_t first, std::size_t last) {
  std::vector<Tensor> results;
  results.reserve(last - first);
  for (std::size_t k = first; k < last; ++k) {
    const TensorImpl& impl = *e.impls[static_cast<std::size_t>(outputs[k])];
    auto out = std::make_shared<TensorImpl>();
    out->shape = impl.shape;
    out->strides = impl.strides;
    out->offset = impl.offset;
    out->dtype = impl.dtype;
    out->storage = impl.storage;
    results.emplace_back(std::move(out));
  }
  return results;
}

// Drops the call's arguments and results from the plan when the call ends, however it ends.
struct Unbind {
  Plan& p;
  ~Unbind() {
    for (const auto* list : {&p.exec.input_slots, &p.exec.output_slots})
      for (int s : *list)
        for (int v : p.exec.slot_views[static_cast<std::size_t>(s)]) p.exec.impls[static_cast<std::size_t>(v)]->storage.reset();
  }
};

}  // namespace

namespace {

void run_node(const Node& n) {
  const Tensor* operands = n.bound.data();
  switch (n.kind) {
    case NodeKind::kernel:
      n.kernel(operands);
      break;
    case NodeKind::random: {
      const random::PhiloxState st = n.stream ? n.stream->reserve(n.words) : random::reserve(n.words);
      n.random(operands, st.key, st.counter);
      break;
    }
    case NodeKind::host:
      n.host(operands);
      break;
    case NodeKind::cond:
      run_nodes(n.sub[truth(operands[0]) ? 0 : 1]);
      break;
    case NodeKind::loop:
      for (std::int64_t it = 0; n.max_iterations < 0 || it < n.max_iterations; ++it) {
        run_nodes(n.sub[0]);
        if (!truth(operands[0])) break;
        run_nodes(n.sub[1]);
      }
      break;
  }
}

// The ranges a replay has reopened, outermost first; closed when the replay ends, however it
// ends, so the profiler's own ranges around the call (the step) still close their own events.
struct OpenRanges {
  backend::RangeListener* listener;
  std::vector<int> open;
  void close_to(std::size_t depth) {
    for (; open.size() > depth; open.pop_back())
      if (listener == backend::record_detail::ranges) listener->end();
  }
  ~OpenRanges() { close_to(0); }
};

// As run_nodes, and before each node: closes the reopened ranges it was not traced in and opens
// those it was (a range none of the remaining nodes was traced in, one whose kernels passes
// removed or fused into a neighbour's, does not appear).
void run_in_ranges(const Plan& p, int part, backend::RangeListener* listener) {
  OpenRanges ranges{listener, {}};
  std::vector<int> path;
  for (const Node& n : p.nodes) {
    if (part >= 0 && n.backward != (part == 1)) continue;
    path.clear();
    for (int r = n.range; r >= 0; r = p.ranges[static_cast<std::size_t>(r)].parent) path.push_back(r);
    std::size_t same = 0;
    while (same < ranges.open.size() && same < path.size() && ranges.open[same] == path[path.size() - 1 - same]) ++same;
    ranges.close_to(same);
    for (std::size_t k = path.size() - same; k-- > 0;) {
      const TracedRange& r = p.ranges[static_cast<std::size_t>(path[k])];
      listener->begin(r.category, r.name);
      ranges.open.push_back(path[k]);
    }
    run_node(n);
  }
}

}  // namespace

void run_nodes(const std::vector<Node>& nodes, int part) {
  for (const Node& n : nodes)
    if (part < 0 || n.backward == (part == 1)) run_node(n);
}

void run_plan(const Plan& p, int part) {
  // Without a profiler: one thread-local load per call.
  if (backend::RangeListener* listener = backend::record_detail::ranges; listener && !p.ranges.empty())
    return run_in_ranges(p, part, listener);
  run_nodes(p.nodes, part);
}

std::vector<Tensor> replay(Plan& p, const std::vector<Tensor>& args) {
  std::lock_guard<std::mutex> lock(p.run_mutex);
  Executor& e = p.exec;
  Unbind unbind{p};
  std::vector<Tensor> kept;  // contiguous copies of strided arguments, alive for the call
  for (int s : e.input_slots) {
    Tensor a = args[static_cast<std::size_t>(p.slots[static_cast<std::size_t>(s)].input)];
    if (!a.is_contiguous()) {
      a = backend::contiguous(a);
      kept.push_back(a);
    }
    bind_slot(e, s, a.impl()->storage, a.offset());
  }
  for (int s : e.output_slots) {
    const Slot& slot = p.slots[static_cast<std::size_t>(s)];
    bind_slot(e, s, std::make_shared<Storage>(slot.nbytes, slot.device), 0);
  }
  run_plan(p);
  for (int s : e.written_external) {
    const auto& held = p.slots[static_cast<std::size_t>(s)].held;
    if (held) held->bump_version();
  }
  return results_of(e, p.outputs, 0, p.outputs.size());
}

namespace {

// Binds every slot of `call` (and `dys` to the upstream-gradient inputs), runs `part`, and hands
// back results [first, last); the plan's views drop the call's memory again when it ends.
std::vector<Tensor> run_bound(Plan& p, Binding& call, const std::vector<Tensor>* dys, int part, std::size_t first,
                              std::size_t last) {
  Executor& e = p.exec;
  struct Release {
    Plan& p;
    ~Release() {
      for (std::size_t s = 0; s < p.slots.size(); ++s)
        if (!p.slots[s].held)
          for (int v : p.exec.slot_views[s]) p.exec.impls[static_cast<std::size_t>(v)]->storage.reset();
    }
  } release{p};
  std::vector<Tensor> kept;
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    const Slot& slot = p.slots[s];
    if (slot.kind == SlotKind::input && static_cast<std::size_t>(slot.input) >= p.num_inputs) {
      if (!dys) continue;
      Tensor g = backend::contiguous((*dys)[static_cast<std::size_t>(slot.input) - p.num_inputs]);
      kept.push_back(g);
      bind_slot(e, static_cast<int>(s), g.impl()->storage, g.offset());
    } else if (call.storages[s]) {
      bind_slot(e, static_cast<int>(s), call.storages[s], call.offsets[s]);
    }
  }
  run_plan(p, part);
  return results_of(e, p.outputs, first, last);
}

}  // namespace

std::vector<Tensor> forward_replay(Plan& p, const std::vector<Tensor>& args, Binding& call) {
  std::lock_guard<std::mutex> lock(p.run_mutex);
  call.storages.assign(p.slots.size(), nullptr);
  call.offsets.assign(p.slots.size(), 0);
  for (std::size_t s = 0; s < p.slots.size(); ++s) {
    const Slot& slot = p.slots[s];
    if (slot.kind == SlotKind::input && static_cast<std::size_t>(slot.input) < p.num_inputs) {
      const Tensor a = backend::contiguous(args[static_cast<std::size_t>(slot.input)]);
      call.storages[s] = a.impl()->storage;
      call.offsets[s] = a.offset();
    } else if (slot.kind == SlotKind::intermediate || slot.kind == SlotKind::output) {
      call.storages[s] = std::make_shared<Storage>(slot.nbytes, slot.device);
    }
  }
  std::vector<Tensor> results = run_bound(p, call, nullptr, 0, 0, p.num_forward_results);
  for (int s : p.exec.written_external)
    if (const auto& held = p.slots[static_cast<std::size_t>(s)].held) held->bump_version();
  return results;
}

std::vector<Tensor> backward_replay(Plan& p, Binding& call, const std::vector<Tensor>& dys) {
  std::lock_guard<std::mutex> lock(p.run_mutex);
  // The gradients land in fresh memory each time (a persistent tape may ask twice).
  for (std::size_t k = p.num_forward_results; k < p.outputs.size(); ++k) {
    const auto s = static_cast<std::size_t>(p.views[static_cast<std::size_t>(p.outputs[k])].slot);
    if (p.slots[s].kind == SlotKind::output) call.storages[s] = std::make_shared<Storage>(p.slots[s].nbytes, p.slots[s].device);
  }
  return run_bound(p, call, &dys, 1, p.num_forward_results, p.outputs.size());
}

}  // namespace keel::graph::detail
