// keel::cond and keel::while_loop: eagerly, C++ control flow on a value read on the host; in a
// trace, graph nodes holding both branches (the loop's condition and body) as node lists, one
// of which each replay runs. The branch not taken while tracing is recorded dry: its kernels
// run on copies of the memory they would write, and its host steps do not run.
#include "keel/graph/control_flow.hpp"

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "core/tensor_util.hpp"
#include "graph/trace_recorder.hpp"

namespace keel {

namespace graph::detail {

bool truth(const Tensor& pred) { return pred.item<double>() != 0; }

namespace {

void check_pred(const Tensor& pred, const char* op) {
  keel::detail::check_defined(pred, op, "pred");
  if (pred.size() != 1)
    throw ShapeError(fmt::format("{}: the predicate must have one element, got shape {}", op, pred.shape().to_string()));
}

bool traced_truth(const Tensor& pred) {
  backend::RecordedCall not_recorded;  // the trace's own read, not part of the graph
  return truth(pred);
}

void check_same(const Tensor& a, const Tensor& b, const char* op, const std::string& what) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    throw ValueError(fmt::format("{}: {} has shape {} and dtype {}, but {} and {} are expected", op, what,
                                 b.shape().to_string(), keel::name(b.dtype()), a.shape().to_string(),
                                 keel::name(a.dtype())));
}

// body_fn's results, checked against the loop variables they replace.
void check_next(const std::vector<Tensor>& vars, const std::vector<Tensor>& next) {
  if (next.size() != vars.size())
    throw ValueError(fmt::format("while_loop: body_fn returned {} tensors for {} loop variables", next.size(),
                                 vars.size()));
  for (std::size_t k = 0; k < next.size(); ++k) {
    keel::detail::check_defined(next[k], "while_loop", "a body result");
    check_same(vars[k], next[k], "while_loop", fmt::format("loop variable {} after body_fn", k));
  }
}

// Copies the body's results into the loop state; a result that is (a view of) a state
// variable is copied first, so that writing one variable cannot change another's new value.
void update_state(const std::vector<Tensor>& state, std::vector<Tensor> next) {
  check_next(state, next);
  for (std::size_t k = 0; k < next.size(); ++k) {
    for (const Tensor& s : state)
      if (next[k].impl()->storage == s.impl()->storage) next[k] = backend::clone(next[k]);
  }
  for (std::size_t k = 0; k < next.size(); ++k) backend::copy(next[k], state[k], "while_loop");
}

}  // namespace

bool TraceRecorder::guard(const Tensor& pred, const char* op) {
  check_pred(pred, op);
  const bool p = traced_truth(pred);
  host("Guard", {&pred}, [p](const Tensor* t) {
    if (truth(t[0]) != p) throw GuardFailed{};
  });
  return p;
}

Tensor TraceRecorder::cond(const Tensor& pred, const std::function<Tensor()>& then_fn,
                           const std::function<Tensor()>& else_fn) {
  // Under a recording tape the graph must hold the gradient of the path taken, so that path is
  // recorded inline behind a guard (another path traces a plan of its own).
  if (autograd::recording()) {
    const Tensor r = guard(pred, "cond") ? then_fn() : else_fn();
    keel::detail::check_defined(r, "cond", "the branch's result");
    return r;
  }
  Node node;
  node.kind = NodeKind::cond;
  node.type = {"cond"};
  const int pred_view = input_view(pred);
  const bool p = traced_truth(pred);
  Tensor out;  // made by the branch taken, before the other runs dry (so that it is not written)
  record_nested(node.sub[p ? 0 : 1], false, [&] {
    const Tensor r = (p ? then_fn : else_fn)();
    keel::detail::check_defined(r, "cond", p ? "then_fn's result" : "else_fn's result");
    out = keel::detail::empty_tensor(r.shape(), r.dtype(), r.device(), "cond");
    backend::copy(r, out, "cond");
  });
  record_nested(node.sub[p ? 1 : 0], true, [&] {
    const Tensor r = (p ? else_fn : then_fn)();
    keel::detail::check_defined(r, "cond", p ? "else_fn's result" : "then_fn's result");
    check_same(out, r, "cond", p ? "else_fn's result" : "then_fn's result");
    backend::copy(r, out, "cond");
  });
  node.num_inputs = 1;
  node.operands = {pred_view, output_view(out)};
  push(std::move(node));
  return out;
}

std::vector<Tensor> TraceRecorder::while_loop(const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
                                              const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
                                              const std::vector<Tensor>& loop_vars, int maximum_iterations) {
  if (autograd::recording()) {  // unrolled behind a guard per test (see cond)
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
