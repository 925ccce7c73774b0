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

void run_nodes(const std::vector<Node>& nodes) {
  for (const Node& n : nodes) {
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
  run_nodes(p.nodes);
  for (int s : e.written_external) {
    const auto& held = p.slots[static_cast<std::size_t>(s)].held;
    if (held) held->bump_version();
  }
  std::vector<Tensor> results;
  results.reserve(p.outputs.size());
  for (int v : p.outputs) {
    const TensorImpl& impl = *e.impls[static_cast<std::size_t>(v)];
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

}  // namespace keel::graph::detail
