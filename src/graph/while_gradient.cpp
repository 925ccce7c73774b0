// keel::while_loop traced while a tape records, differentiated as TensorFlow differentiates While:
// one loop node whose body also keeps each iteration's values (the loop state at the iteration's
// start and what the body made that its backward reads) in a list of the call's, and one tape
// node whose gradient is a second loop running the body's backward over those values, last
// iteration first. The bodies are recorded dry and both loops then run from their recorded node
// lists, as a replay runs them, so that what an iteration keeps is what the graph's slots hold.
#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/core.h>

#include "core/tensor_util.hpp"
#include "graph/control_flow_internal.hpp"
#include "graph/trace_recorder.hpp"
#include "keel/ops/creation.hpp"

namespace keel::graph::detail {

// Each call's kept iterations, by the memory of its iteration counter (each call of a
// differentiable plan has its own; a plain plan runs one call at a time on its own). A call's
// buffers stay for its next loop, which overwrites them.
class IterationValues {
 public:
  // A loop starts: this call's earlier iterations are done with, and calls whose memory is gone
  // are dropped.
  void start(const Tensor& counter) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = calls_.begin(); it != calls_.end();)
      it = it->second.owner.expired() ? calls_.erase(it) : std::next(it);
    Call& c = calls_[counter.impl()->storage.get()];
    c.owner = counter.impl()->storage;
    c.used = 0;
  }
  // t[0]: the counter; t[1..n): the values to keep.
  void keep(const Tensor* t, std::size_t n) {
    Call* c = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      c = &calls_[t[0].impl()->storage.get()];
    }
    // The call's own entry: only this call's thread touches it between start and its backward.
    if (c->used == c->iterations.size()) {
      std::vector<Tensor> copies;
      for (std::size_t k = 1; k < n; ++k) copies.push_back(backend::clone(t[k]));
      c->iterations.push_back(std::move(copies));
    } else {
      const std::vector<Tensor>& into = c->iterations[c->used];
      for (std::size_t k = 1; k < n; ++k) backend::copy(t[k], into[k - 1], "while_loop");
    }
    ++c->used;
    *static_cast<double*>(t[0].raw_data()) += 1;  // the counter is host memory
  }
  // The test of the gradient's loop. t[0]: the forward's counter; t[1]: the iterations left
  // (host memory); t[2]: the test's result (host memory); t[3..n): where the values go back.
  // While iterations are left: the next one back is the last of them, whose values return.
  void back(const Tensor* t, std::size_t n) {
    double& left = *static_cast<double*>(t[1].raw_data());
    bool& more = *static_cast<bool*>(t[2].raw_data());
    more = left > 0;
    if (!more) return;
    left -= 1;
    const Call* c = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      auto it = calls_.find(t[0].impl()->storage.get());
      if (it != calls_.end()) c = &it->second;
    }
    if (!c || left >= static_cast<double>(c->used))
      throw ValueError(fmt::format("while_loop gradient: iteration {} of this call's loop was not kept", left));
    const std::vector<Tensor>& values = c->iterations[static_cast<std::size_t>(left)];
    for (std::size_t k = 3; k < n; ++k) backend::copy(values[k - 3], t[k], "while_loop gradient");
  }

 private:
  struct Call {
    std::weak_ptr<Storage> owner;
    std::vector<std::vector<Tensor>> iterations;
    std::size_t used = 0;
  };
  std::mutex mutex_;
  std::unordered_map<const Storage*, Call> calls_;  // elements stay where they are until erased
};

// What the loop's tape node needs for its gradient.
struct LoopTape {
  std::vector<keel::detail::Node> body;  // the body's tape nodes (one iteration, recorded dry)
  std::vector<Tensor> state;             // the loop state, as the body read it
  std::vector<std::uint64_t> next;       // the ids of the body's results, by state variable
  std::vector<std::size_t> var_inputs;   // the loop variables that are the node's first inputs
  std::vector<std::uint64_t> externals;  // then what else the body read from before the loop
  Tensor counter;                        // the iterations run
  std::vector<Tensor> kept;              // what each iteration keeps (whole slots, as bytes)
  std::shared_ptr<IterationValues> values;
};

namespace {

std::vector<const Tensor*> pointers(const std::vector<Tensor>& ts, std::initializer_list<const Tensor*> first) {
  std::vector<const Tensor*> out(first);
  for (const Tensor& t : ts) out.push_back(&t);
  return out;
}

}  // namespace

void TraceRecorder::run_now(std::vector<Node>& nodes) {
  std::unordered_map<int, std::shared_ptr<Storage>> scratch;  // slots whose trace memory is gone
  const auto bind = [&](auto& self, Node& n) -> void {
    n.bound.clear();
    for (int v : n.operands) {
      if (v < 0) {
        n.bound.emplace_back();
        continue;
      }
      const View& view = plan_.views[static_cast<std::size_t>(v)];
      const Slot& s = plan_.slots[static_cast<std::size_t>(view.slot)];
      std::shared_ptr<Storage> storage = s.held ? s.held : s.seen.lock();
      if (!storage) {
        std::shared_ptr<Storage>& t = scratch[view.slot];
        if (!t) t = std::make_shared<Storage>(s.nbytes, s.device);
        storage = t;
      }
      n.bound.emplace_back(view_impl(view, std::move(storage)));
    }
    for (auto& list : n.sub)
      for (Node& m : list) self(self, m);
  };
  for (Node& n : nodes) bind(bind, n);
  // The trace-time handles go when the run ends: memory they held would look alive to the end
  // of the trace (state kept across calls).
  struct Unbind {
    std::vector<Node>& nodes;
    static void drop(Node& n) {
      n.bound.clear();
      for (auto& list : n.sub)
        for (Node& m : list) drop(m);
    }
    ~Unbind() {
      for (Node& n : nodes) drop(n);
    }
  } unbind{nodes};
  backend::RecordedCall not_recorded;
  run_nodes(nodes);
}

void TraceRecorder::run_loop_now(Node& loop) {
  std::vector<Node> one;
  one.push_back(std::move(loop));
  struct Back {
    Node& to;
    std::vector<Node>& from;
    ~Back() { to = std::move(from.front()); }
  } back{loop, one};
  run_now(one);
}

bool TraceRecorder::while_under_tape(const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
                                     const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
                                     const std::vector<Tensor>& loop_vars, int maximum_iterations,
                                     std::vector<Tensor>& results) {
  std::vector<TapeStretch> tapes = recording_tapes();
  bool floating = false;
  for (const Tensor& v : loop_vars) floating = floating || is_floating(v.dtype());
  // Nested tapes (a gradient's own gradient) keep to the unrolled loop, whose gradient any tape
  // can take.
  if (tapes.size() != 1 || !floating) return false;
  keel::detail::TapeState& tape = *tapes[0].tape;
  auto loop = std::make_shared<LoopTape>();
  loop->values = std::make_shared<IterationValues>();
  // The state's buffers and the counter are filled once the loop is known to be recorded; the
  // dry recording of the test and the body reads zeros meanwhile (not recorded: the trace's own),
  // rather than memory never written.
  for (const Tensor& v : loop_vars) {
    loop->state.push_back(keel::detail::empty_tensor(v.shape(), v.dtype(), v.device(), "while_loop"));
    if (is_floating(v.dtype())) tape.watched.insert(loop->state.back().id());
    backend::RecordedCall not_recorded;
    backend::fill(loop->state.back(), 0.0);
  }
  // The counter lives on the host: only host steps read and write it.
  loop->counter = keel::detail::empty_tensor(Shape{}, DType::float64, Device::cpu(), "while_loop");
  // Written before the loop (below): not host-made constants, which a write in the body would
  // have restored first on every iteration.
  for (const Tensor& s : loop->state) write(s);
  write(loop->counter);
  Node node;
  node.kind = NodeKind::loop;
  node.type = {"loop"};
  node.max_iterations = maximum_iterations;
  Tensor pred;
  record_nested(node.sub[0], true, [&] {
    pred = cond_fn(loop->state);
    check_pred(pred, "while_loop");
  });
  const std::size_t body_begin = tape.nodes.size(), first_slot = plan_.slots.size();
  std::vector<Tensor> next;
  std::unordered_set<const Storage*> written_before;
  record_nested(node.sub[1], true, [&] {
    next = body_fn(loop->state);
    check_next(loop->state, next);
    // What the body made that something still holds (its backward's saved tensors; the trace of
    // a differentiable call holds everything, so there only what another holder has too) and its
    // results (a backward may hold them through the results' own handles), and the state at the
    // iteration's start, are kept before the state takes the results.
    for (std::size_t s = first_slot; s < plan_.slots.size(); ++s) {
      const Slot& slot = plan_.slots[s];
      if (slot.kind != SlotKind::intermediate || !slot.written) continue;
      std::shared_ptr<Storage> alive = slot.seen.lock();
      if (!alive) continue;
      bool result = false;
      for (const Tensor& r : next) result = result || r.impl()->storage == alive;
      if (result || alive.use_count() - 1 - (keep_ ? 1 : 0) > 0) loop->kept.push_back(raw_tensor(alive));
    }
    for (const Tensor& s : loop->state) loop->kept.push_back(raw_tensor(s.impl()->storage));
    // Memory made before the loop that the body writes (a variable): its backward must not read
    // it, since only the last iteration's values would be there.
    for (const Node& n : plan_.nodes)
      for_each_operand(n, [&](int v, bool written) {
        const Slot& s = plan_.slots[static_cast<std::size_t>(plan_.views[static_cast<std::size_t>(v)].slot)];
        std::shared_ptr<Storage> st = s.held ? s.held : s.seen.lock();
        if (written && st && st->serial() < dry_serial_) written_before.insert(st.get());
      });
    host("WhileKeep", pointers(loop->kept, {&loop->counter}),
         [values = loop->values, n = loop->kept.size() + 1](const Tensor* t) { values->keep(t, n); });
    update_state(loop->state, next);
  });
  const auto body_nodes = tape.nodes.begin() + static_cast<std::ptrdiff_t>(body_begin);
  loop->body.assign(std::make_move_iterator(body_nodes), std::make_move_iterator(tape.nodes.end()));
  // The test's nodes carry no gradient (its result is a predicate); the body's go into the loop's.
  tape.nodes.erase(tape.nodes.begin() + static_cast<std::ptrdiff_t>(tapes[0].begin), tape.nodes.end());

  // The tape node's inputs: the loop variables the tape watches (each, though two be one tensor)
  // and what else the body read from before the loop.
  std::unordered_set<std::uint64_t> made, seen;
  for (const Tensor& s : loop->state) made.insert(s.id());
  for (const keel::detail::Node& n : loop->body) made.insert(n.outputs.begin(), n.outputs.end());
  for (std::size_t k = 0; k < loop_vars.size(); ++k)
    if (is_floating(loop_vars[k].dtype()) && tape.watched.count(loop_vars[k].id())) loop->var_inputs.push_back(k);
  const auto external = [&](std::uint64_t id) {
    if (!made.count(id) && tape.watched.count(id) && seen.insert(id).second) loop->externals.push_back(id);
  };
  for (const keel::detail::Node& n : loop->body)
    for (std::size_t i = 0; i < n.inputs.size(); ++i)
      if (n.input_watched[i]) external(n.inputs[i]);
  for (const Tensor& r : next) {
    loop->next.push_back(r.id());
    external(r.id());  // a body result read from before the loop (a captured tensor)
  }
  const bool differentiable = !loop->var_inputs.empty() || !loop->externals.empty();
  if (!differentiable) {  // no gradient flows through it: the iterations need not be kept
    const auto keep_step = [](const Node& n) {
      return n.kind == NodeKind::host && n.host_name == std::string_view("WhileKeep");
    };
    node.sub[1].erase(std::remove_if(node.sub[1].begin(), node.sub[1].end(), keep_step), node.sub[1].end());
  }
  for (const keel::detail::Node& n : loop->body)
    for (const auto& saved : n.saved_versions)
      if (differentiable && written_before.count(saved.first.get()))
        throw ValueError(fmt::format(
            "while_loop: the body writes a variable that the gradient of its '{}' reads; under a tape each "
            "iteration's backward would read the last iteration's value (eagerly the tape refuses it too)", n.op));

  for (std::size_t k = 0; k < loop_vars.size(); ++k) backend::copy(loop_vars[k], loop->state[k], "while_loop");
  backend::fill(loop->counter, 0.0);
  if (differentiable)
    host("WhileStart", {&loop->counter}, [values = loop->values](const Tensor* t) { values->start(t[0]); });
  node.num_inputs = 1;
  node.operands = {input_view(pred), output_view(loop->counter)};
  for (const Tensor& s : loop->state) node.operands.push_back(output_view(s));
  push(std::move(node));
  if (dry_ == 0) run_loop_now(plan_.nodes.back());
  results.clear();
  for (const Tensor& s : loop->state) results.push_back(backend::clone(s));
  if (!differentiable) return true;
  keel::detail::Node tnode;
  tnode.op = "while_loop";
  for (std::size_t k : loop->var_inputs) tnode.inputs.push_back(loop_vars[k].id());
  tnode.inputs.insert(tnode.inputs.end(), loop->externals.begin(), loop->externals.end());
  tnode.input_watched.assign(tnode.inputs.size(), true);
  for (const Tensor& r : results) {
    if (!is_floating(r.dtype())) continue;
    tnode.add_output(r);
    tape.watched.insert(r.id());
  }
  tnode.backward = [loop](const autograd::Grads& g, const autograd::Needs& needs) {
    TraceRecorder* trace = active_trace();
    if (!trace || autograd::recording())
      throw ValueError("while_loop: a tape records the gradient of a loop traced under another tape alone (a "
                       "gradient of the gradient): make the outer tape before the loop, which is then traced under "
                       "both");
    return trace->while_gradient(*loop, g, needs);
  };
  tape.nodes.push_back(std::move(tnode));
  return true;
}

std::vector<Tensor> TraceRecorder::while_gradient(const LoopTape& loop, const std::vector<Tensor>& g,
                                                  const std::vector<bool>& needs) {
  // ds[k]: the gradient of state variable k (a floating one), taken back an iteration at a time;
  // g holds one per floating variable, in order.
  std::vector<std::size_t> floating;
  for (std::size_t k = 0; k < loop.state.size(); ++k)
    if (is_floating(loop.state[k].dtype())) floating.push_back(k);
  std::vector<Tensor> ds(loop.state.size());
  for (std::size_t j = 0; j < floating.size(); ++j) {
    const Tensor& s = loop.state[floating[j]];
    Tensor& d = ds[floating[j]];
    d = keel::detail::empty_tensor(s.shape(), s.dtype(), s.device(), "while_loop gradient");
    if (g[j].defined()) {
      backend::copy(g[j], d, "while_loop gradient");
    } else {
      backend::fill(d, 0.0);
    }
  }
  const Tensor at = backend::clone(loop.counter);  // the iterations left to take back
  const Tensor more = keel::detail::empty_tensor(Shape{}, DType::bool_, Device::cpu(), "while_loop gradient");
  write(more);  // by the test's host step: not a host-made constant
  const std::size_t num_vars = loop.var_inputs.size();
  std::vector<Tensor> acc(loop.externals.size());  // the externals' gradients, summed over iterations
  Node node;
  node.kind = NodeKind::loop;
  node.type = {"loop"};
  // The test counts down and puts the iteration's values back (dry: it runs with the loop).
  record_nested(node.sub[0], true, [&] {
    host("WhileBack", pointers(loop.kept, {&loop.counter, &at, &more}),
         [values = loop.values, n = loop.kept.size() + 3](const Tensor* t) { values->back(t, n); });
  });
  record_nested(node.sub[1], true, [&] {
    keel::detail::GradMap seeds;
    std::vector<std::uint64_t> wanted;
    for (std::size_t k : floating) {
      auto [it, fresh] = seeds.try_emplace(loop.next[k], ds[k]);
      if (!fresh) it->second = it->second + ds[k];
      wanted.push_back(loop.state[k].id());
    }
    for (std::size_t e = 0; e < loop.externals.size(); ++e)
      if (needs[num_vars + e]) wanted.push_back(loop.externals[e]);
    const keel::detail::GradMap got = keel::detail::backprop(loop.body, std::move(seeds), wanted);
    for (std::size_t e = 0; e < loop.externals.size(); ++e) {
      auto it = got.find(loop.externals[e]);
      if (!needs[num_vars + e] || it == got.end()) continue;
      if (!acc[e].defined()) {
        acc[e] = keel::detail::empty_tensor(it->second.shape(), it->second.dtype(), it->second.device(),
                                            "while_loop gradient");
        write(acc[e]);  // zeroed before the loop (below), not a host-made constant
      }
      backend::copy(acc[e] + it->second, acc[e], "while_loop gradient");
    }
    std::vector<Tensor> into, earlier;
    for (std::size_t k : floating) {
      auto it = got.find(loop.state[k].id());
      into.push_back(ds[k]);
      earlier.push_back(it != got.end() ? it->second : zeros_like(ds[k]));
    }
    update_state(into, earlier);
  });
  for (const Tensor& a : acc)
    if (a.defined()) backend::fill(a, 0.0);
  node.num_inputs = 1;
  node.operands = {input_view(more), output_view(at)};
  for (std::size_t k : floating) node.operands.push_back(output_view(ds[k]));
  for (const Tensor& a : acc)
    if (a.defined()) node.operands.push_back(output_view(a));
  push(std::move(node));
  if (dry_ == 0) run_loop_now(plan_.nodes.back());
  std::vector<Tensor> out(num_vars + loop.externals.size());
  for (std::size_t i = 0; i < num_vars; ++i)
    if (needs[i]) out[i] = ds[loop.var_inputs[i]];
  for (std::size_t e = 0; e < loop.externals.size(); ++e) out[num_vars + e] = acc[e];
  return out;
}

}  // namespace keel::graph::detail
