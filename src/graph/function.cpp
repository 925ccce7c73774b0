// keel::function's non-template part: input signatures (TensorFlow's retracing rules), the
// traced plans, and when a call traces, replays or runs f as it is.
#include <memory>
#include <mutex>

#include <fmt/core.h>

#include "autograd/record.hpp"
#include "backend/recorder.hpp"
#include "graph/plan.hpp"

namespace keel::graph::detail {

namespace {

struct ArgSig {
  std::vector<std::int64_t> dims;
  DType dtype;
  Device device;
  bool operator==(const ArgSig&) const = default;
};
using Signature = std::vector<ArgSig>;

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
  FunctionOptions options;
  std::mutex mutex;
  int traces = 0;
  struct Entry {
    Signature signature;
    std::shared_ptr<Plan> plan;
    Graph graph;
  };
  std::vector<std::unique_ptr<Entry>> entries;

  Entry* find(const Signature& s) {
    for (auto& e : entries)
      if (e->signature == s) return e.get();
    return nullptr;
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

PassOptions passes_for(const FunctionOptions& o) {
  PassOptions p = default_pass_options();
  if (!o.jit_compile) p = PassOptions{false, false, false, false};
  return p;
}

}  // namespace

PassOptions& default_pass_options() {
  static PassOptions options;
  return options;
}

std::vector<Tensor> FunctionCore::call(const std::vector<Tensor>& args, const TraceFn& f) {
  // Inside another function's trace, f's kernels become part of that graph (TensorFlow inlines
  // nested functions).
  if (backend::recorder()) return f(args);
  // Under a recording tape the call runs eagerly, so that the tape records every op and the
  // gradients are eager's (a traced backward is not there yet).
  if (autograd::recording()) return f(args);
  check_signature(state_->options, args);
  const Signature sig = signature_of(args);
  State& st = *state_;
  std::unique_lock<std::mutex> lock(st.mutex);
  if (State::Entry* e = st.find(sig)) {
    std::shared_ptr<Plan> plan = e->plan;
    lock.unlock();
    return replay(*plan, args);
  }
  auto entry = std::make_unique<State::Entry>();
  entry->signature = sig;
  entry->plan = std::make_shared<Plan>();
  std::vector<Tensor> results = trace(st.options.name, args, f, *entry->plan);
  finalise(*entry->plan, passes_for(st.options));
  entry->graph = Graph(entry->plan);
  ++st.traces;
  st.entries.push_back(std::move(entry));
  return results;
}

const Graph& FunctionCore::concrete_graph(const std::vector<Tensor>& args, const TraceFn& f) {
  check_signature(state_->options, args);
  const Signature sig = signature_of(args);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (State::Entry* e = state_->find(sig)) return e->graph;
  }
  if (backend::recorder() || autograd::recording())
    throw ValueError(fmt::format("{}: concrete_graph cannot trace inside another trace or under a recording tape",
                                 who(state_->options)));
  call(args, f);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->find(sig)->graph;
}

}  // namespace keel::graph::detail
