// keel::function's non-template part: input signatures (TensorFlow's retracing rules), the
// traced plans, and when a call traces, replays or runs f as it is.
#include <iostream>
#include <memory>
#include <mutex>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "graph/generic.hpp"
#include "graph/plan.hpp"
#include "graph/recorded_backward.hpp"
#include "graph/trace_recorder.hpp"

namespace keel::graph::detail {

// A call's signature: what a trace is cached by. In the named namespace (not an anonymous one)
// because FunctionCore::State, a class with external linkage, holds it.
struct ArgSig {
  std::vector<std::int64_t> dims;
  DType dtype;
  Device device;
  bool operator==(const ArgSig&) const = default;
};
using Signature = std::vector<ArgSig>;

namespace {

std::string spec_str(const TensorSpec& s) {
  std::string dims = "[";
  for (std::size_t i = 0; i < s.shape.dims().size(); ++i)
    dims += (i ? "," : "") + (s.shape.dims()[i] < 0 ? std::string("None") : std::to_string(s.shape.dims()[i]));
  return fmt::format("TensorSpec(shape={}], dtype={})", dims, keel::name(s.dtype));
}

std::string who(const FunctionOptions& o) { return o.name.empty() ? "keel::function" : "keel::function '" + o.name + "'"; }

void check_signature(const FunctionOptions& o, const std::vector<Tensor>& args) {
  const auto& sig = o.input_signature;
  if (sig.empty()) return;
  if (sig.size() != args.size())
    throw ValueError(fmt::format("{}: called with {} tensor arguments; its input_signature has {}", who(o), args.size(),
                                 sig.size()));
  for (std::size_t k = 0; k < args.size(); ++k) {
    const Tensor& a = args[k];
    const auto& spec = sig[k];
    bool ok = a.dtype() == spec.dtype && a.rank() == spec.shape.rank();
    for (std::int64_t i = 0; ok && i < a.rank(); ++i) ok = spec.shape[i] < 0 || spec.shape[i] == a.shape()[i];
    if (!ok)
      throw ValueError(fmt::format("{}: argument {} (shape {}, dtype {}) is incompatible with input_signature[{}] = {}",
                                   who(o), k, a.shape().to_string(), keel::name(a.dtype()), k, spec_str(spec)));
  }
}

}  // namespace

struct FunctionCore::State {
  struct Entry {
    Signature signature;  // -1 in the free dimensions of a generic entry
    std::shared_ptr<Plan> plan;
    Graph graph;
    std::shared_ptr<GenericPlan> generic;  // a plan for every size of its free dimensions
  };
  using Entries = std::vector<std::unique_ptr<Entry>>;
  Entries entries;         // plans of calls without a recording tape
  Entries differentiable;  // plans of calls under one: forward and traced backward
  FunctionOptions options;
  std::mutex mutex;
  int traces = 0;
  bool warned = false;  // that a -1 signature's graph could not be generalised

  static bool admits(const Signature& general, const Signature& s) {
    if (general.size() != s.size()) return false;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const ArgSig& g = general[k];
      if (g.dtype != s[k].dtype || g.device != s[k].device || g.dims.size() != s[k].dims.size()) return false;
      for (std::size_t i = 0; i < g.dims.size(); ++i)
        if (g.dims[i] >= 0 && g.dims[i] != s[k].dims[i]) return false;
    }
    return true;
  }

  // The entry of exactly this signature, else a generic one that admits it.
  static Entry* find(Entries& list, const Signature& s) {
    for (auto& e : list)
      if (!e->generic && e->signature == s) return e.get();
    for (auto& e : list)
      if (e->generic && admits(e->signature, s)) return e.get();
    return nullptr;
  }

  // The plans for a call: this signature's own (one, or one per path through guarded control
  // flow), else a generic entry's plan for these sizes (made from its fit the first time).
  static std::vector<std::shared_ptr<Plan>> plans_for(Entries& list, const Signature& sig,
                                                      const std::vector<Tensor>& args) {
    std::vector<std::shared_ptr<Plan>> plans;
    for (auto& e : list)
      if (!e->generic && e->signature == sig) plans.push_back(e->plan);
    if (!plans.empty()) return plans;
    for (auto& e : list) {
      if (!e->generic || !admits(e->signature, sig)) continue;
      std::vector<std::int64_t> sizes;
      if (!symbol_sizes(*e->generic, args, sizes)) continue;
      if (std::shared_ptr<Plan> p = instance(*e->generic, sizes)) return {std::move(p)};
    }
    return plans;
  }

  // The dimensions a trace of `sig` generalises: the -1s of input_signature; with
  // reduce_retracing, those in which sig differs from the latest trace in `list` of the same
  // ranks, dtypes and devices (TensorFlow relaxes them to None on the second trace).
  std::vector<FreeDim> free_dims(const Entries& list, const Signature& sig) const {
    std::vector<FreeDim> dims;
    if (!options.input_signature.empty()) {
      for (std::size_t k = 0; k < options.input_signature.size(); ++k)
        for (std::int64_t i = 0; i < options.input_signature[k].shape.rank(); ++i)
          if (options.input_signature[k].shape[i] < 0) dims.push_back({k, i});
      return dims;
    }
    if (!options.reduce_retracing) return dims;
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      const Signature& before = (*it)->signature;
      bool same_kinds = before.size() == sig.size();
      for (std::size_t k = 0; same_kinds && k < sig.size(); ++k)
        same_kinds = before[k].dtype == sig[k].dtype && before[k].device == sig[k].device &&
                     before[k].dims.size() == sig[k].dims.size();
      if (!same_kinds) continue;
      for (std::size_t k = 0; k < sig.size(); ++k)
        for (std::size_t i = 0; i < sig[k].dims.size(); ++i)
          if (before[k].dims[i] != sig[k].dims[i]) dims.push_back({k, static_cast<std::int64_t>(i)});
      return dims;
    }
    return dims;
  }

  // Makes a fresh trace's entry generic over the free dimensions of its signature in `list`,
  // where there are any and its plan generalises (its plan then is the fit's, at the call's
  // sizes); false otherwise.
  bool generalise_entry(Entry& entry, const Entries& list, const std::vector<Tensor>& args, const TraceFn& f,
                        const PassOptions& passes) {
    const std::vector<FreeDim> dims = free_dims(list, entry.signature);
    if (dims.empty()) return false;
    std::string why;
    entry.generic = generalise(copy_plan(*entry.plan), args, dims, f, passes, why);
    if (!entry.generic) {
      // Said once where the user asked for -1 dimensions (reduce_retracing just traces on).
      if (!warned && !options.input_signature.empty())
        std::cerr << "keel: " << who(options) << " traces each size of its free dimensions: " << why << std::endl;
      warned = true;
      return false;
    }
    for (const FreeDim& d : dims) entry.signature[d.arg].dims[static_cast<std::size_t>(d.axis)] = -1;
    entry.plan = entry.generic->instances.front().second;
    entry.graph = Graph(entry.generic->display);
    return true;
  }
};

FunctionCore::FunctionCore(FunctionOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
}

int FunctionCore::trace_count() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->traces;
}

namespace {

Signature signature_of(const std::vector<Tensor>& args) {
  Signature s;
  s.reserve(args.size());
  for (const Tensor& a : args) {
    if (!a.defined()) throw ValueError("keel::function: an undefined Tensor argument");
    s.push_back({a.shape().dims(), a.dtype(), a.device()});
  }
  return s;
}

// A guard that fails makes the call trace again, which runs f's writes again: so no variable
// write may come before a guard.
void check_guards(const Plan& p, const std::string& who) {
  bool wrote = false;
  for (const Node& n : p.nodes) {
    if (n.kind == NodeKind::host && std::string_view(n.host_name) == "Guard" && wrote)
      throw ValueError(fmt::format(
          "{}: a variable is written before keel::while_loop under a recording GradientTape; a call with another "
          "trip count would write it twice (move the write after the loop)", who));
    for (std::size_t j = n.num_inputs; j < n.operands.size(); ++j) {
      if (n.operands[j] < 0) continue;
      const SlotKind k = p.slots[static_cast<std::size_t>(p.views[static_cast<std::size_t>(n.operands[j])].slot)].kind;
      wrote = wrote || k == SlotKind::captured || k == SlotKind::state;
    }
  }
}

PassOptions passes_for(const FunctionOptions& o) {
  PassOptions p = default_pass_options();
  if (!o.jit_compile) p = no_rewrites();
  return p;
}

}  // namespace

PassOptions& default_pass_options() {
  static PassOptions options;
  return options;
}

std::vector<Tensor> FunctionCore::call(const std::vector<Tensor>& args, const TraceFn& f) {
  // Inside another function's trace, f's kernels become part of that graph (TensorFlow inlines
  // nested functions). (Another recorder, the profiler, just watches the replay.)
  if (active_trace()) return f(args);
  check_signature(state_->options, args);
  // Under a recording tape: the differentiable graph, one tape node for the whole call.
  if (autograd::recording()) return call_differentiable(args, f);
  const Signature sig = signature_of(args);
  State& st = *state_;
  std::unique_lock<std::mutex> lock(st.mutex);
  const std::vector<std::shared_ptr<Plan>> plans = State::plans_for(st.entries, sig, args);
  if (!plans.empty()) {
    lock.unlock();
    for (const auto& plan : plans) {
      try {
        return replay(*plan, args);
      } catch (const GuardFailed&) {  // another path: the next plan, or a new trace
      }
    }
    lock.lock();
  }
  auto entry = std::make_unique<State::Entry>();
  entry->signature = sig;
  entry->plan = std::make_shared<Plan>();
  std::vector<Tensor> results = trace(st.options.name, args, f, *entry->plan);
  check_guards(*entry->plan, who(st.options));
  if (!st.generalise_entry(*entry, st.entries, args, f, passes_for(st.options))) {
    finalise(*entry->plan, passes_for(st.options));
    entry->graph = Graph(entry->plan);
  }
  ++st.traces;
  st.entries.push_back(std::move(entry));
  return results;
}

// The call records one node on the active tapes: inputs the arguments and the variables f
// reads, outputs its results, backward the traced vector-Jacobian product on this call's memory.
std::vector<Tensor> FunctionCore::call_differentiable(const std::vector<Tensor>& args, const TraceFn& f) {
  const Signature sig = signature_of(args);
  State& st = *state_;
  std::shared_ptr<Plan> plan;
  auto binding = std::make_shared<Binding>();
  std::vector<Tensor> results;
  {
    std::unique_lock<std::mutex> lock(st.mutex);
    const std::vector<std::shared_ptr<Plan>> plans = State::plans_for(st.differentiable, sig, args);
    lock.unlock();
    for (const auto& p : plans) {
      try {
        results = forward_replay(*p, args, *binding);
        plan = p;
        break;
      } catch (const GuardFailed&) {  // another path
        binding = std::make_shared<Binding>();
      }
    }
    lock.lock();
    if (!plan) {
      auto entry = std::make_unique<State::Entry>();
      entry->signature = sig;
      entry->plan = std::make_shared<Plan>();
      autograd::NoRecordScope outer_tapes_wait;  // they get the one node below
      results = trace(st.options.name, args, f, *entry->plan, binding.get());
      check_guards(*entry->plan, who(st.options));
      // The generic plan's copy at this call's sizes has the trace's slots: the binding fits it.
      const PassOptions none = no_rewrites();
      if (!st.generalise_entry(*entry, st.differentiable, args, f, none)) finalise(*entry->plan, none);
      plan = entry->plan;
      ++st.traces;
      st.differentiable.push_back(std::move(entry));
    }
  }
  std::vector<Tensor> inputs = args;
  for (const Tensor& v : plan->var_sources) {
    autograd::notify_variable_read(v);  // as reading the variable eagerly would
    inputs.push_back(v);
  }
  const std::size_t num_args = args.size();
  std::vector<bool> floating_arg(num_args);
  for (std::size_t k = 0; k < num_args; ++k) floating_arg[k] = is_floating(args[k].dtype());
  const std::string name = who(st.options);
  autograd::record("function", inputs, results,
                   [plan, binding, num_args, floating_arg, name, f, call = call_inputs(*plan, args),
                    fn_name = st.options.name](const autograd::Grads& g, const autograd::Needs& needs) {
                     // A tape records this backward (a gradient of the gradient): a traced
                     // function of its own, which that tape sees as one node.
                     if (autograd::recording()) return recorded_backward(*plan, f, call, g, needs, name, fn_name);
                     std::vector<Tensor> dys;
                     for (std::size_t r : plan->dy_for_result) dys.push_back(g[r]);
                     const std::vector<Tensor> grads = backward_replay(*plan, *binding, dys);
                     autograd::Grads out(num_args + plan->var_sources.size());
                     std::size_t next = 0;
                     for (std::size_t k = 0; k < num_args; ++k)
                       if (floating_arg[k]) out[k] = grads[next++];
                     for (std::size_t v = 0; v < plan->var_sources.size(); ++v) out[num_args + v] = grads[next++];
                     return out;
                   });
  return results;
}

const Graph& FunctionCore::concrete_graph(const std::vector<Tensor>& args, const TraceFn& f) {
  check_signature(state_->options, args);
  const Signature sig = signature_of(args);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (State::Entry* e = State::find(state_->entries, sig)) return e->graph;
  }
  if (active_trace() || autograd::recording())
    throw ValueError(fmt::format("{}: concrete_graph cannot trace inside another trace or under a recording tape",
                                 who(state_->options)));
  call(args, f);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return State::find(state_->entries, sig)->graph;
}

}  // namespace keel::graph::detail
