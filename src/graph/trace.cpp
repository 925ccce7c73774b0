// Tracing: f runs once, eagerly, on copies of the arguments, while a recorder takes every
// outermost backend call into the plan. Memory is followed by Storage: a storage made before
// the trace is captured state (read at call time), one made during it is a buffer of the graph.
#include <unordered_map>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "graph/plan.hpp"
#include "graph/trace_recorder.hpp"
#include "ops/random_stream.hpp"

namespace keel::graph::detail {

namespace {

// Restores the random bookkeeping of the thread however the trace ends.
struct RandomCheck {
  std::int64_t saved = random::tracing::reserved_words;
  RandomCheck() { random::tracing::reserved_words = 0; }
  ~RandomCheck() { random::tracing::reserved_words = saved; }
};

}  // namespace

std::vector<Tensor> trace(const std::string& name, const std::vector<Tensor>& args, const TraceFn& f, Plan& plan) {
  plan.name = name;
  plan.num_inputs = args.size();
  std::vector<Tensor> copies;
  copies.reserve(args.size());
  for (const Tensor& a : args) copies.push_back(backend::clone(a));
  const std::uint64_t first_serial = next_storage_serial();

  TraceRecorder recorder(plan, first_serial);
  for (std::size_t k = 0; k < copies.size(); ++k) recorder.add_input(copies[k], static_cast<int>(k));
  std::vector<Tensor> results;
  {
    RandomCheck random_check;
    backend::RecorderScope scope(&recorder);
    results = f(copies);
    if (random::tracing::reserved_words != 0)
      throw UntraceableError(fmt::format(
          "keel::function{}: random numbers were drawn on the host while tracing (a random layer or op without "
          "a kernel of its own): the graph could not draw them afresh on each call",
          name.empty() ? "" : " '" + name + "'"));
  }
  copies.clear();
  for (const Tensor& r : results) {
    if (!r.defined()) throw ValueError("keel::function: f returned an undefined Tensor");
    plan.outputs.push_back(recorder.view_of(r));
  }
  plan.traced_nodes = plan.nodes.size();
  // Results are what the caller holds; everything else made during the trace is either still
  // alive (state f made and kept: a variable, an optimizer slot) or a buffer of the graph.
  for (int v : plan.outputs) {
    Slot& s = plan.slots[static_cast<std::size_t>(plan.views[static_cast<std::size_t>(v)].slot)];
    if (s.kind == SlotKind::intermediate) s.kind = SlotKind::output;
  }
  std::vector<std::shared_ptr<Storage>> result_storages;
  for (const Tensor& r : results) result_storages.push_back(r.impl()->storage);
  for (Slot& s : plan.slots) {
    if (s.kind == SlotKind::input) s.held.reset();
    if (s.kind == SlotKind::output && !s.written) {  // a result computed on the host: a constant
      s.kind = SlotKind::constant;
      s.held = s.seen.lock();
    }
    if (s.kind != SlotKind::intermediate) continue;
    if (std::shared_ptr<Storage> alive = s.seen.lock()) {
      s.kind = SlotKind::state;
      s.held = std::move(alive);
    }
  }
  return results;
}

}  // namespace keel::graph::detail
