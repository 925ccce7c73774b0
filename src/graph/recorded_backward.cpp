#include "graph/recorded_backward.hpp"

#include <fmt/core.h>

#include "keel/autograd/tape.hpp"
#include "keel/ops/elementwise.hpp"
#include "keel/ops/reduce.hpp"

namespace keel::graph::detail {

namespace {

bool draws_random(const std::vector<Node>& nodes) {
  for (const Node& n : nodes) {
    if (n.kind == NodeKind::random) return true;
    for (const auto& list : n.sub)
      if (draws_random(list)) return true;
  }
  return false;
}

std::uint64_t version_of(const Tensor& t) { return t.impl()->storage->version(); }

}  // namespace

CallInputs call_inputs(const Plan& plan, const std::vector<Tensor>& args) {
  CallInputs c{args, {}};
  for (const Tensor& a : args) c.versions.push_back(version_of(a));
  for (const Tensor& v : plan.var_sources) c.versions.push_back(version_of(v));
  return c;
}

autograd::Grads recorded_backward(const Plan& plan, const TraceFn& f, const CallInputs& call, const autograd::Grads& g,
                                  const std::string& who) {
  const std::string why = who + ": a tape records this gradient (a gradient of the gradient), for which f runs again eagerly";
  if (draws_random(plan.nodes))
    throw ValueError(why + ", but f draws random numbers, which a second run would draw anew");
  if (!plan.exec.written_external.empty())
    throw ValueError(why + ", but f writes variables (an assign, an optimizer step, moving statistics), which a "
                           "second run would write again");
  for (std::size_t k = 0; k < call.versions.size(); ++k) {
    const bool arg = k < call.args.size();
    const Tensor& t = arg ? call.args[k] : plan.var_sources[k - call.args.size()];
    if (version_of(t) != call.versions[k])
      throw ValueError(fmt::format("{}, but {} {} was written since the call", why, arg ? "argument" : "variable",
                                   arg ? k : k - call.args.size()));
  }
  // What trace_vjp traced, now with ops: sum(result * dy) back to the floating arguments and the
  // variables f reads.
  GradientTape tape(false, true);
  std::vector<Tensor> sources;
  for (const Tensor& a : call.args)
    if (is_floating(a.dtype())) {
      tape.watch(a);
      sources.push_back(a);
    }
  const std::vector<Tensor> results = f(call.args);
  for (const Tensor& v : plan.var_sources) sources.push_back(v);
  Tensor proxy;
  for (std::size_t r : plan.dy_for_result) {
    if (r >= g.size() || !g[r].defined()) continue;
    const Tensor term = reduce_sum(mul(results.at(r), g[r]));
    proxy = proxy.defined() ? add(proxy, term) : term;
  }
  autograd::Grads out(call.args.size() + plan.var_sources.size());
  if (!proxy.defined()) return out;
  const std::vector<Tensor> grads = tape.gradient(proxy, sources, UnconnectedGradients::zero);
  std::size_t next = 0;
  for (std::size_t k = 0; k < call.args.size(); ++k)
    if (is_floating(call.args[k].dtype())) out[k] = grads[next++];
  for (std::size_t v = 0; v < plan.var_sources.size(); ++v) out[call.args.size() + v] = grads[next++];
  return out;
}

}  // namespace keel::graph::detail
