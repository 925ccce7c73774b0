// Tracing: f runs once, eagerly, on copies of the arguments, while a recorder takes every
// outermost backend call into the plan. Memory is followed by Storage: a storage made before
// the trace is captured state (read at call time), one made during it is a buffer of the graph.
#include <unordered_map>
#include <unordered_set>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "core/tensor_util.hpp"
#include "keel/autograd/tape.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"
#include "graph/plan.hpp"
#include "graph/trace_recorder.hpp"
#include "ops/random_stream.hpp"

namespace keel::graph::detail {

namespace {

// The recorder hears the ranges opened while tracing (and passes them on to a profiler).
struct RangeScope {
  backend::RangeListener* saved = backend::record_detail::ranges;
  explicit RangeScope(TraceRecorder& r) {
    r.listen_after(saved);
    backend::record_detail::ranges = &r;
  }
  ~RangeScope() { backend::record_detail::ranges = saved; }
  RangeScope(const RangeScope&) = delete;
  RangeScope& operator=(const RangeScope&) = delete;
};

// Restores the random bookkeeping of the thread however the trace ends.
struct RandomCheck {
  std::int64_t saved = random::tracing::reserved_words;
  RandomCheck() { random::tracing::reserved_words = 0; }
  ~RandomCheck() { random::tracing::reserved_words = saved; }
};

}  // namespace

namespace {

// f under a tape of its own, then the vector-Jacobian product of its floating results with
// upstream gradients that become inputs of the plan (num_inputs on): sum(result * dy) taken
// back to the floating arguments and to the variables f read. Returns f's results followed by
// those gradients (zeros where unconnected).
std::vector<Tensor> trace_vjp(const std::vector<Tensor>& copies, const TraceFn& f, TraceRecorder& recorder, Plan& plan) {
  GradientTape tape(false, true);
  std::vector<Tensor> sources;
  std::unordered_set<std::uint64_t> args;
  for (const Tensor& c : copies) {
    args.insert(c.id());
    if (!is_floating(c.dtype())) continue;
    tape.watch(c);
    sources.push_back(c);
  }
  std::vector<Tensor> results = f(copies);
  for (const Tensor& w : tape.watched_variables())
    if (!args.count(w.id())) {
      sources.push_back(w);
      plan.var_sources.push_back(w);
    }
  recorder.start_backward();
  Tensor proxy;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Tensor& r = results[i];
    if (!r.defined() || !is_floating(r.dtype())) continue;
    Tensor dy = keel::detail::empty_tensor(r.shape(), r.dtype(), r.device());
    {
      backend::RecordedCall not_recorded;  // the traced run's upstream gradient: ones
      backend::fill(dy, 1.0);
    }
    recorder.add_input(dy, static_cast<int>(plan.num_inputs + plan.dy_for_result.size()));
    plan.dy_for_result.push_back(i);
    const Tensor term = reduce_sum(mul(r, dy));
    proxy = proxy.defined() ? add(proxy, term) : term;
  }
  plan.num_forward_results = results.size();
  if (proxy.defined()) {
    for (const Tensor& g : tape.gradient(proxy, sources, UnconnectedGradients::zero)) results.push_back(g);
  } else {
    for (const Tensor& s : sources) results.push_back(zeros_like(s));
  }
  return results;
}

}  // namespace

std::vector<Tensor> trace(const std::string& name, const std::vector<Tensor>& args, const TraceFn& f, Plan& plan,
                          Binding* first_call, bool dry) {
  plan.name = name;
  plan.num_inputs = args.size();
  plan.differentiable = first_call != nullptr;
  std::vector<Tensor> copies;
  copies.reserve(args.size());
  for (const Tensor& a : args) copies.push_back(backend::clone(a));
  const std::uint64_t first_serial = next_storage_serial();

  TraceRecorder recorder(plan, first_serial);
  if (first_call) recorder.keep_storages();
  if (dry) recorder.without_effects();
  for (std::size_t k = 0; k < copies.size(); ++k) recorder.add_input(copies[k], static_cast<int>(k));
  std::vector<Tensor> results;
  {
    RandomCheck random_check;
    backend::RecorderScope scope(&recorder);
    RangeScope ranges(recorder);
    results = first_call ? trace_vjp(copies, f, recorder, plan) : f(copies);
    if (random::tracing::reserved_words != 0)
      throw UntraceableError(fmt::format(
          "keel::function{}: random numbers were drawn on the host while tracing (a random layer or op without "
          "a kernel of its own): the graph could not draw them afresh on each call",
          name.empty() ? "" : " '" + name + "'"));
  }
  for (const Tensor& r : results) {
    if (!r.defined()) throw ValueError("keel::function: f returned an undefined Tensor");
    plan.outputs.push_back(recorder.view_of(r));
  }
  if (!first_call) plan.num_forward_results = results.size();
  plan.traced_nodes = plan.nodes.size();
  // Results are what the caller holds; everything else made during the trace is either still
  // alive (state f made and kept: a variable, an optimizer slot) or a buffer of the graph. (A
  // differentiable trace keeps its storages itself: there, alive means held by more than that.)
  for (int v : plan.outputs) {
    Slot& s = plan.slots[static_cast<std::size_t>(plan.views[static_cast<std::size_t>(v)].slot)];
    if (s.kind == SlotKind::intermediate) s.kind = SlotKind::output;
  }
  if (first_call) {
    first_call->storages.assign(plan.slots.size(), nullptr);
    first_call->offsets.assign(plan.slots.size(), 0);
  }
  for (std::size_t k = 0; k < plan.slots.size(); ++k) {
    Slot& s = plan.slots[k];
    if (first_call && s.kind == SlotKind::input && static_cast<std::size_t>(s.input) < plan.num_inputs)
      first_call->storages[k] = s.held;  // the argument's copy (an upstream gradient comes later)
    if (first_call && (s.kind == SlotKind::intermediate || s.kind == SlotKind::output))
      first_call->storages[k] = s.seen.lock();
    if (s.kind == SlotKind::input) s.held.reset();
    if (s.kind == SlotKind::output && !s.written) {  // a result computed on the host: a constant
      s.kind = SlotKind::constant;
      s.held = s.seen.lock();
    }
    if (s.kind != SlotKind::intermediate) continue;
    if (std::shared_ptr<Storage> alive = s.seen.lock()) {
      // `alive`, and in a differentiable trace the recorder's copy (it keeps every storage that
      // began as an intermediate, as every slot still one here did).
      const long own = first_call ? 2 : 1;
      const long others = alive.use_count() - own - (first_call && first_call->storages[k] == alive ? 1 : 0);
      if (others > 0) {
        s.kind = SlotKind::state;
        s.held = std::move(alive);
        if (first_call) first_call->storages[k].reset();
      }
    }
  }
  // The first call's results: f's own.
  if (first_call) results.resize(plan.num_forward_results);
  copies.clear();
  return results;
}

}  // namespace keel::graph::detail
