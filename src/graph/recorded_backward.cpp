#include "graph/recorded_backward.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

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

// The traced vector-Jacobian products of one plan, by which of its results have a gradient and
// which of its inputs need one.
struct VjpFunctions {
  struct Entry {
    std::unique_ptr<FunctionCore> core;
    TraceFn fn;
  };
  std::map<std::vector<bool>, Entry> by_key;  // which dys are defined, then which inputs are wanted
};

namespace {

// (the call's arguments, then the defined dys) -> the gradients of the inputs (the arguments,
// then the variables f reads) that need one, in order: what trace_vjp traced, now with ops that a
// tape sees, and only for those inputs (a nested tape asking for x alone leaves the weights out).
TraceFn vjp_of(const Plan& plan, const TraceFn& f, std::size_t num_args, const std::vector<bool>& has_dy,
               const std::vector<bool>& wanted) {
  return [f, num_args, has_dy, wanted, dy_for_result = plan.dy_for_result,
          var_sources = plan.var_sources](const std::vector<Tensor>& in) {
    const std::vector<Tensor> args(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(num_args));
    GradientTape tape(false, true);
    std::vector<Tensor> sources;
    for (std::size_t k = 0; k < num_args; ++k)
      if (wanted[k]) {
        tape.watch(args[k]);
        sources.push_back(args[k]);
      }
    const std::vector<Tensor> results = f(args);
    for (std::size_t v = 0; v < var_sources.size(); ++v)
      if (wanted[num_args + v]) sources.push_back(var_sources[v]);
    Tensor proxy;
    std::size_t next = num_args;
    for (std::size_t i = 0; i < dy_for_result.size(); ++i) {
      if (!has_dy[i]) continue;
      const Tensor term = reduce_sum(mul(results.at(dy_for_result[i]), in.at(next++)));
      proxy = proxy.defined() ? add(proxy, term) : term;
    }
    return tape.gradient(proxy, sources, UnconnectedGradients::zero);
  };
}

}  // namespace

autograd::Grads recorded_backward(const Plan& plan, const TraceFn& f, const CallInputs& call, const autograd::Grads& g,
                                  const autograd::Needs& needs, const std::string& who, const std::string& name) {
  const std::string why = who + ": a tape records this gradient (a gradient of the gradient), for which f runs again";
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
  const std::size_t num_args = call.args.size();
  autograd::Grads out(num_args + plan.var_sources.size());
  std::vector<bool> wanted(out.size());
  for (std::size_t k = 0; k < out.size(); ++k)
    wanted[k] = (k >= needs.size() || needs[k]) && (k >= num_args || is_floating(call.args[k].dtype()));
  if (std::find(wanted.begin(), wanted.end(), true) == wanted.end()) return out;
  std::vector<bool> has_dy;
  std::vector<Tensor> inputs = call.args;
  for (std::size_t r : plan.dy_for_result) {
    has_dy.push_back(r < g.size() && g[r].defined());
    if (has_dy.back()) inputs.push_back(g[r]);
  }
  if (inputs.size() == num_args) return out;  // no result has a gradient
  VjpFunctions::Entry* vjp = nullptr;
  {
    const std::lock_guard<std::mutex> lock(plan.vjp_mutex);
    if (!plan.vjp) plan.vjp = std::make_shared<VjpFunctions>();
    std::vector<bool> key = has_dy;
    key.insert(key.end(), wanted.begin(), wanted.end());
    VjpFunctions::Entry& e = plan.vjp->by_key[key];
    if (!e.core) {
      e.core = std::make_unique<FunctionCore>(FunctionOptions{.name = name.empty() ? "gradient" : name + " gradient"});
      e.fn = vjp_of(plan, f, num_args, has_dy, wanted);
    }
    vjp = &e;  // entries of a std::map stay where they are
  }
  const std::vector<Tensor> grads = vjp->core->call(inputs, vjp->fn);
  std::size_t next = 0;
  for (std::size_t k = 0; k < out.size(); ++k)
    if (wanted[k]) out[k] = grads.at(next++);
  return out;
}

}  // namespace keel::graph::detail
