// keel::cond and keel::while_loop: eagerly, C++ control flow on a value read on the host; in a
// trace, graph nodes holding both branches (the loop's condition and body) as node lists, one
// of which each replay runs. The branch not taken while tracing is recorded dry: its kernels
// run on copies of the memory they would write, and its host steps do not run. Under a
// recording tape a cond is one tape node, whose gradient is a cond of its branches' gradients.
#include "keel/graph/control_flow.hpp"

#include <array>
#include <unordered_set>

#include <fmt/core.h>

#include "autograd/tape_state.hpp"
#include "keel/ops/elementwise.hpp"
#include "core/tensor_util.hpp"
#include "graph/control_flow_internal.hpp"
#include "graph/trace_recorder.hpp"

namespace keel {

namespace graph::detail {

bool truth(const Tensor& pred) { return pred.item<double>() != 0; }

void check_pred(const Tensor& pred, const char* op) {
  keel::detail::check_defined(pred, op, "pred");
  if (pred.size() != 1)
    throw ShapeError(fmt::format("{}: the predicate must have one element, got shape {}", op, pred.shape().to_string()));
}

bool traced_truth(const Tensor& pred) {
  backend::RecordedCall not_recorded;  // the trace's own read, not part of the graph
  return truth(pred);
}

namespace {

void check_same(const Tensor& a, const Tensor& b, const char* op, const std::string& what) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    throw ValueError(fmt::format("{}: {} has shape {} and dtype {}, but {} and {} are expected", op, what,
                                 b.shape().to_string(), keel::name(b.dtype()), a.shape().to_string(),
                                 keel::name(a.dtype())));
}

}  // namespace

void check_next(const std::vector<Tensor>& vars, const std::vector<Tensor>& next) {
  if (next.size() != vars.size())
    throw ValueError(fmt::format("while_loop: body_fn returned {} tensors for {} loop variables", next.size(),
                                 vars.size()));
  for (std::size_t k = 0; k < next.size(); ++k) {
    keel::detail::check_defined(next[k], "while_loop", "a body result");
    check_same(vars[k], next[k], "while_loop", fmt::format("loop variable {} after body_fn", k));
  }
}

void update_state(const std::vector<Tensor>& state, std::vector<Tensor> next) {
  check_next(state, next);
  for (std::size_t k = 0; k < next.size(); ++k) {
    for (const Tensor& s : state)
      if (next[k].impl()->storage == s.impl()->storage) next[k] = backend::clone(next[k]);
  }
  for (std::size_t k = 0; k < next.size(); ++k) backend::copy(next[k], state[k], "while_loop");
}

bool TraceRecorder::guard(const Tensor& pred, const char* op) {
  check_pred(pred, op);
  const bool p = traced_truth(pred);
  host("Guard", {&pred}, [p](const Tensor* t) {
    if (truth(t[0]) != p) throw GuardFailed{};
  });
  return p;
}

std::vector<TapeStretch> recording_tapes() {
  std::vector<TapeStretch> tapes;
  for (const auto& t : keel::detail::tape_stack())
    if (t->recording()) tapes.push_back({t, t->nodes.size(), 0});
  return tapes;
}

namespace {

// A cond's branches as one tape's node sees them: by branch (0 then, 1 else), their nodes and
// the ids of their results; the node's inputs (what the branches read from before the cond) and
// which cond results are its first outputs (the rest are the tensors the branches made).
struct SplicedCond {
  std::array<std::vector<keel::detail::Node>, 2> nodes;
  std::array<std::vector<std::uint64_t>, 2> results;
  std::vector<std::uint64_t> inputs;
  std::vector<std::size_t> result_of_output;
  std::vector<std::uint64_t> made;  // the outputs after those
};

// One branch's gradients of the node's inputs: undefined where it has none or none is needed.
std::vector<Tensor> branch_gradient(const SplicedCond& c, int b, const autograd::Grads& g,
                                    const autograd::Needs& needs) {
  keel::detail::GradMap seeds;
  const auto seed = [&](std::uint64_t id, const Tensor& gj) {
    if (id == 0 || !gj.defined()) return;
    auto [it, fresh] = seeds.try_emplace(id, gj);
    if (!fresh) it->second = add(it->second, gj);
  };
  const std::size_t num_results = c.result_of_output.size();
  const std::vector<std::uint64_t>& results = c.results[static_cast<std::size_t>(b)];
  for (std::size_t j = 0; j < num_results; ++j) seed(results[c.result_of_output[j]], g[j]);
  // The tensors the branches made, which later nodes (a gradient's own gradient) may have read.
  for (std::size_t j = num_results; j < g.size(); ++j) seed(c.made[j - num_results], g[j]);
  std::vector<std::uint64_t> wanted;
  for (std::size_t i = 0; i < c.inputs.size(); ++i)
    if (needs[i]) wanted.push_back(c.inputs[i]);
  const keel::detail::GradMap got =
      keel::detail::backprop(c.nodes[static_cast<std::size_t>(b)], std::move(seeds), wanted);
  std::vector<Tensor> out(c.inputs.size());
  for (std::size_t i = 0; i < c.inputs.size(); ++i)
    if (needs[i])
      if (auto it = got.find(c.inputs[i]); it != got.end()) out[i] = it->second;
  return out;
}

// Replaces the stretch of nodes a tape took while the cond's branches ran by one node: its
// inputs what the branches read from before the cond, its outputs the cond's floating results
// and every tensor the branches made; its backward a cond (on the same predicate) of the
// branches' gradients. `taken`: the branch run first, for real.
void splice(const TapeStretch& s, const Tensor& pred, int taken, const std::vector<Tensor>& outs,
            const std::array<std::vector<Tensor>, 2>& results) {
  auto& all = s.tape->nodes;
  auto c = std::make_shared<SplicedCond>();
  const std::array<std::size_t, 3> bounds{s.begin, s.middle, all.size()};
  std::unordered_set<std::uint64_t> seen;
  keel::detail::Node node;
  node.op = "cond";
  node.sparse_grads = true;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined() || !is_floating(outs[k].dtype())) continue;
    c->result_of_output.push_back(k);
    node.add_output(outs[k]);
  }
  for (int r = 0; r < 2; ++r) {  // r = 0: the branch taken
    const int b = r == 0 ? taken : 1 - taken;
    auto& nodes = c->nodes[static_cast<std::size_t>(b)];
    nodes.assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(bounds[r])),
                 std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(bounds[r + 1])));
    std::unordered_set<std::uint64_t> made;
    for (keel::detail::Node& n : nodes) {
      for (std::size_t i = 0; i < n.inputs.size(); ++i)
        if (n.input_watched[i] && !made.count(n.inputs[i]) && seen.insert(n.inputs[i]).second)
          c->inputs.push_back(n.inputs[i]);
      for (std::size_t j = 0; j < n.outputs.size(); ++j) {
        made.insert(n.outputs[j]);
        if (!is_floating(n.output_kinds[j].dtype)) continue;
        c->made.push_back(n.outputs[j]);
        node.outputs.push_back(n.outputs[j]);
        node.output_kinds.push_back(n.output_kinds[j]);
      }
      // The branch that ran checks what it saved when the cond's node runs backward; the other
      // ran on copies, so that what it saved is not the user's to keep.
      if (r == 0)
        node.saved_versions.insert(node.saved_versions.end(), n.saved_versions.begin(), n.saved_versions.end());
      n.saved_versions.clear();
    }
    for (const Tensor& t : results[static_cast<std::size_t>(b)]) {
      const std::uint64_t id = t.defined() ? t.id() : 0;
      c->results[static_cast<std::size_t>(b)].push_back(id);
      // A result read from before the cond (a branch returning an input as it is).
      if (id != 0 && !made.count(id) && s.tape->watched.count(id) && seen.insert(id).second) c->inputs.push_back(id);
    }
  }
  all.erase(all.begin() + static_cast<std::ptrdiff_t>(s.begin), all.end());
  if (c->result_of_output.empty() || c->inputs.empty()) return;  // no gradient flows through it
  node.inputs = c->inputs;
  node.input_watched.assign(c->inputs.size(), true);
  for (std::size_t j = 0; j < c->result_of_output.size(); ++j) s.tape->watched.insert(node.outputs[j]);
  node.backward = [c, pred, taken](const autograd::Grads& g, const autograd::Needs& needs) {
    const auto branch = [&](int b) -> TraceRecorder::Branch {
      return [&, b] { return branch_gradient(*c, b, g, needs); };
    };
    // Outside the trace (a tape kept past it) only what the trace ran is real.
    if (TraceRecorder* trace = active_trace()) return trace->cond_branches(pred, branch(0), branch(1), "cond gradient");
    return branch_gradient(*c, taken, g, needs);
  };
  all.push_back(std::move(node));
}

}  // namespace

std::vector<Tensor> TraceRecorder::cond_branches(const Tensor& pred, const Branch& then_fn, const Branch& else_fn,
                                                 const char* op) {
  std::vector<TapeStretch> tapes = recording_tapes();
  const bool p = traced_truth(pred);
  const int taken = p ? 0 : 1;
  // A gradient's cond reads the predicate again, later: a copy of its own keeps today's value.
  const Tensor kept = tapes.empty() ? pred : backend::clone(pred);
  Node node;
  node.kind = NodeKind::cond;
  node.type = {"cond"};
  const int pred_view = input_view(kept);
  const std::array<const Branch*, 2> fns{&then_fn, &else_fn};
  std::array<std::vector<Tensor>, 2> results;
  std::vector<Tensor> outs;  // made by the branch taken, before the other runs dry (so that it is not written)
  record_nested(node.sub[taken], false, [&] {
    results[taken] = (*fns[taken])();
    for (const Tensor& r : results[taken]) {
      outs.push_back(r.defined() ? keel::detail::empty_tensor(r.shape(), r.dtype(), r.device(), op) : Tensor());
      if (r.defined()) backend::copy(r, outs.back(), op);
    }
  });
  for (TapeStretch& s : tapes) s.middle = s.tape->nodes.size();
  std::vector<std::size_t> zero_in_taken;  // results only the other branch has
  record_nested(node.sub[1 - taken], true, [&] {
    std::vector<Tensor>& rs = results[1 - taken];
    rs = (*fns[1 - taken])();
    if (rs.size() != outs.size())
      throw ValueError(fmt::format("{}: the branches return {} and {} results", op, results[0].size(), rs.size()));
    for (std::size_t k = 0; k < rs.size(); ++k) {
      if (!rs[k].defined()) {
        if (outs[k].defined()) backend::fill(outs[k], 0.0);
        continue;
      }
      if (outs[k].defined()) {
        check_same(outs[k], rs[k], op, p ? "else_fn's result" : "then_fn's result");
      } else {
        outs[k] = keel::detail::empty_tensor(rs[k].shape(), rs[k].dtype(), rs[k].device(), op);
        zero_in_taken.push_back(k);
      }
      backend::copy(rs[k], outs[k], op);
    }
  });
  if (!zero_in_taken.empty()) {
    std::vector<Node> fills;
    record_nested(fills, false, [&] {
      for (std::size_t k : zero_in_taken) backend::fill(outs[k], 0.0);
    });
    for (Node& f : fills) node.sub[taken].push_back(std::move(f));
  }
  node.num_inputs = 1;
  node.operands = {pred_view};
  for (const Tensor& o : outs)
    if (o.defined()) node.operands.push_back(output_view(o));
  push(std::move(node));
  for (const TapeStretch& s : tapes) splice(s, kept, taken, outs, results);
  return outs;
}

Tensor TraceRecorder::cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
                           const std::function<Tensor()>& else_fn) {
  const auto one = [](const std::function<Tensor()>& fn, const char* what) -> Branch {
    return [&fn, what] {
      const Tensor r = fn();
      keel::detail::check_defined(r, "cond", what);
      return std::vector<Tensor>{r};
    };
  };
  return cond_branches(pred, one(then_fn, "then_fn's result"), one(else_fn, "else_fn's result"), "cond")[0];
}

std::vector<Tensor> TraceRecorder::while_loop(const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
                                              const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
                                              const std::vector<Tensor>& loop_vars, int maximum_iterations) {
  // Under one recording tape: one loop node and its gradient (while_gradient.cpp). Under nested
  // tapes the loop is unrolled behind a guard per test (another trip count traces a plan of its
  // own), so that the outer tapes see every iteration.
  if (autograd::recording()) {
    std::vector<Tensor> results;
    if (while_under_tape(cond_fn, body_fn, loop_vars, maximum_iterations, results)) return results;
    std::vector<Tensor> vars = loop_vars;
    for (std::int64_t it = 0; maximum_iterations < 0 || it < maximum_iterations; ++it) {
      if (!guard(cond_fn(vars), "while_loop")) break;
      std::vector<Tensor> next = body_fn(vars);
      check_next(vars, next);
      vars = std::move(next);
    }
    return vars;
  }
  std::vector<Tensor> state;  // the loop-carried values, in buffers of their own
  for (const Tensor& v : loop_vars) state.push_back(backend::clone(v));
  Node node;
  node.kind = NodeKind::loop;
  node.type = {"loop"};
  node.max_iterations = maximum_iterations;
  Tensor pred;
  record_nested(node.sub[0], false, [&] {
    pred = cond_fn(state);
    check_pred(pred, "while_loop");
  });
  const bool first = maximum_iterations != 0 && traced_truth(pred);
  record_nested(node.sub[1], !first, [&] { update_state(state, body_fn(state)); });
  node.num_inputs = 1;
  node.operands = {input_view(pred)};
  for (const Tensor& s : state) node.operands.push_back(output_view(s));
  push(std::move(node));
  if (first) {
    // The rest of the traced call's iterations run as they are (the graph has the loop).
    backend::RecordedCall not_recorded;
    for (std::int64_t it = 1; maximum_iterations < 0 || it < maximum_iterations; ++it) {
      if (!truth(cond_fn(state))) break;
      update_state(state, body_fn(state));
    }
  }
  std::vector<Tensor> results;
  for (const Tensor& s : state) results.push_back(backend::clone(s));
  return results;
}

}  // namespace graph::detail

Tensor cond(const Tensor& pred, std::function<Tensor()> then_fn, std::function<Tensor()> else_fn) {
  graph::detail::check_pred(pred, "cond");
  if (!then_fn || !else_fn) throw ValueError("cond: then_fn and else_fn must be callable");
  if (graph::detail::TraceRecorder* trace = graph::detail::active_trace()) return trace->cond(pred, then_fn, else_fn);
  return graph::detail::truth(pred) ? then_fn() : else_fn();
}

std::vector<Tensor> while_loop(std::function<Tensor(const std::vector<Tensor>&)> cond_fn,
                               std::function<std::vector<Tensor>(const std::vector<Tensor>&)> body_fn,
                               std::vector<Tensor> loop_vars, int maximum_iterations) {
  if (!cond_fn || !body_fn) throw ValueError("while_loop: cond_fn and body_fn must be callable");
  if (maximum_iterations < -1) throw ValueError(fmt::format("while_loop: maximum_iterations must be >= -1, got {}", maximum_iterations));
  for (const Tensor& v : loop_vars) keel::detail::check_defined(v, "while_loop", "a loop variable");
  if (graph::detail::TraceRecorder* trace = graph::detail::active_trace())
    return trace->while_loop(cond_fn, body_fn, loop_vars, maximum_iterations);
  for (std::int64_t it = 0; maximum_iterations < 0 || it < maximum_iterations; ++it) {
    const Tensor pred = cond_fn(loop_vars);
    graph::detail::check_pred(pred, "while_loop");
    if (!graph::detail::truth(pred)) break;
    std::vector<Tensor> next = body_fn(loop_vars);
    graph::detail::check_next(loop_vars, next);
    loop_vars = std::move(next);
  }
  return loop_vars;
}

}  // namespace keel
