#include "keel/autograd/tape.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <fmt/core.h>

#include "autograd/tape_state.hpp"
#include "core/tensor_util.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/elementwise.hpp"

namespace keel {

namespace detail {

void backward_node(const Node& node, GradMap& grads, const std::unordered_set<std::uint64_t>& reach,
                   const std::unordered_set<std::uint64_t>& keep) {
  bool any_grad = false;
  for (auto o : node.outputs) any_grad |= grads.count(o) != 0;
  if (!any_grad) return;
  for (const auto& [storage, version] : node.saved_versions) {
    if (storage->version() != version)
      throw ValueError(fmt::format(
          "GradientTape.gradient: a tensor saved by '{}' for the backward pass was modified in "
          "place (Variable::assign*) after the op ran (version {} -> {}); compute gradients "
          "before updating the variables it read",
          node.op, version, storage->version()));
  }
  autograd::Grads gout;
  gout.reserve(node.outputs.size());
  for (std::size_t j = 0; j < node.outputs.size(); ++j) {
    auto it = grads.find(node.outputs[j]);
    if (it != grads.end()) {
      gout.push_back(it->second);
      if (!keep.count(node.outputs[j])) grads.erase(it);
    } else if (const OutputKind& kind = node.output_kinds[j]; is_floating(kind.dtype) && !node.sparse_grads) {
      DeviceScope scope(kind.device);
      gout.push_back(zeros(kind.shape, kind.dtype));
    } else {
      gout.emplace_back();
    }
  }
  autograd::Needs needs(node.inputs.size());
  for (std::size_t i = 0; i < node.inputs.size(); ++i)
    needs[i] = node.input_watched[i] && reach.count(node.inputs[i]) != 0;
  autograd::Grads gin = node.backward(gout, needs);
  for (std::size_t i = 0; i < node.inputs.size() && i < gin.size(); ++i) {
    if (!needs[i] || !gin[i].defined()) continue;
    auto [it, inserted] = grads.try_emplace(node.inputs[i], gin[i]);
    if (!inserted) it->second = add(it->second, gin[i]);
  }
}

std::vector<char> nodes_on_path(const std::vector<Node>& nodes, std::unordered_set<std::uint64_t>& reach) {
  std::vector<char> on_path(nodes.size(), 0);
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    for (std::size_t i = 0; i < nodes[k].inputs.size() && !on_path[k]; ++i)
      on_path[k] = nodes[k].input_watched[i] && reach.count(nodes[k].inputs[i]);
    if (on_path[k]) reach.insert(nodes[k].outputs.begin(), nodes[k].outputs.end());
  }
  return on_path;
}

GradMap backprop(const std::vector<Node>& nodes, GradMap seeds, const std::vector<std::uint64_t>& sources) {
  std::unordered_set<std::uint64_t> reach(sources.begin(), sources.end());
  const std::unordered_set<std::uint64_t> keep = reach;
  const std::vector<char> on_path = nodes_on_path(nodes, reach);
  for (std::size_t k = nodes.size(); k-- > 0;)
    if (on_path[k]) backward_node(nodes[k], seeds, reach, keep);
  GradMap out;
  for (std::uint64_t s : sources)
    if (auto it = seeds.find(s); it != seeds.end()) out.emplace(s, it->second);
  return out;
}

namespace {
thread_local GradientObserver* current_observer = nullptr;
}  // namespace

GradientObserverScope::GradientObserverScope(GradientObserver* observer) : previous_(current_observer) {
  current_observer = observer;
}
GradientObserverScope::~GradientObserverScope() { current_observer = previous_; }

}  // namespace detail

GradientTape::GradientTape(bool persistent, bool watch_accessed_variables)
    : state_(std::make_shared<detail::TapeState>()) {
  state_->persistent = persistent;
  state_->watch_accessed_variables = watch_accessed_variables;
  detail::tape_stack().push_back(state_);
  detail::recount_active_tapes();
}

GradientTape::~GradientTape() {
  auto& stack = detail::tape_stack();
  stack.erase(std::remove(stack.begin(), stack.end(), state_), stack.end());
  detail::recount_active_tapes();
}

bool GradientTape::persistent() const { return state_->persistent; }

void GradientTape::watch(const Tensor& tensor) {
  detail::check_defined(tensor, "GradientTape.watch");
  if (!is_floating(tensor.dtype())) return;  // like TF: integer tensors cannot be watched
  if (state_->watched.insert(tensor.id()).second) state_->watched_list.push_back(tensor);
}

void GradientTape::watch(const Variable& variable) { watch(variable.peek()); }

std::vector<Tensor> GradientTape::watched_tensors() const { return state_->watched_list; }
std::vector<Tensor> GradientTape::watched_variables() const { return state_->accessed; }

void GradientTape::reset() {
  state_->nodes.clear();
  state_->watched.clear();
  state_->watched_list.clear();
  state_->accessed.clear();
  state_->used = false;
  detail::recount_active_tapes();
}

GradientTape::RecordingPause::RecordingPause(std::shared_ptr<detail::TapeState> state)
    : state_(std::move(state)) {
  ++state_->paused;
  detail::recount_active_tapes();
}

GradientTape::RecordingPause::~RecordingPause() {
  --state_->paused;
  detail::recount_active_tapes();
}

GradientTape::RecordingPause GradientTape::stop_recording() { return RecordingPause(state_); }

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source, UnconnectedGradients u) {
  return gradient(target, std::vector<Tensor>{source}, u)[0];
}

Tensor GradientTape::gradient(const Tensor& target, const Variable& source, UnconnectedGradients u) {
  return gradient(target, std::vector<Tensor>{source.peek()}, u)[0];
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Variable*>& sources,
                                           UnconnectedGradients u) {
  std::vector<Tensor> values;
  values.reserve(sources.size());
  for (const Variable* v : sources) {
    if (v == nullptr) throw ValueError("GradientTape.gradient: a source Variable pointer is null");
    values.push_back(v->peek());
  }
  return gradient(target, values, u);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients u) {
  return gradient(target, sources, Tensor(), u);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           const Tensor& output_gradient, UnconnectedGradients u) {
  auto& st = *state_;
  if (st.used)
    throw ValueError(
        "GradientTape.gradient: a non-persistent GradientTape can only be used to compute one set "
        "of gradients; create it with GradientTape(/*persistent=*/true) to call gradient() again");
  detail::check_defined(target, "GradientTape.gradient (target)");
  for (const auto& s : sources) detail::check_defined(s, "GradientTape.gradient (source)");
  if (output_gradient.defined() && output_gradient.shape() != target.shape())
    throw ShapeError(fmt::format("GradientTape.gradient: output_gradient has shape {} but the target has shape {}",
                                 output_gradient.shape().to_string(), target.shape().to_string()));

  // This tape does not record its own backward pass; outer tapes do (higher-order gradients).
  RecordingPause pause(state_);

  // Which tensor ids depend on a source: only those nodes' gradients are needed.
  std::unordered_set<std::uint64_t> reach;
  for (const auto& s : sources)
    if (st.watched.count(s.id())) reach.insert(s.id());
  const std::vector<char> node_on_path = detail::nodes_on_path(st.nodes, reach);

  std::unordered_set<std::uint64_t> source_ids;
  for (const auto& s : sources) source_ids.insert(s.id());
  std::unordered_map<std::uint64_t, Tensor> grads;
  if (reach.count(target.id()) && is_floating(target.dtype()))
    grads[target.id()] = output_gradient.defined() ? output_gradient : ones_like(target);

  // Source i's gradient, once no node left to run adds to it.
  const auto final_gradient = [&](std::size_t i) {
    auto it = grads.find(sources[i].id());
    if (it != grads.end()) return it->second;
    return u == UnconnectedGradients::zero ? zeros_like(sources[i]) : Tensor();
  };
  // An observer hears of each source's gradient as soon as it is final: after the node that
  // reads the source first in recording order has run (the last reader the reverse pass meets).
  detail::GradientObserver* const observer = std::exchange(detail::current_observer, nullptr);
  struct RestoreObserver {
    detail::GradientObserver* o;
    ~RestoreObserver() { detail::current_observer = o; }
  } restore_observer{observer};
  std::vector<Tensor> early(sources.size());
  std::vector<char> reported(sources.size(), 0);
  std::unordered_map<std::size_t, std::vector<std::size_t>> final_after;  // node -> sources
  if (observer) {
    std::unordered_map<std::uint64_t, std::size_t> first_reader;
    for (std::size_t k = st.nodes.size(); k-- > 0;) {
      if (!node_on_path[k]) continue;
      const auto& node = st.nodes[k];
      for (std::size_t i = 0; i < node.inputs.size(); ++i)
        if (node.input_watched[i] && source_ids.count(node.inputs[i])) first_reader[node.inputs[i]] = k;
    }
    for (std::size_t i = 0; i < sources.size(); ++i) {
      // The target's own gradient is seeded, not accumulated: it is final only at the end.
      if (sources[i].id() == target.id()) continue;
      auto it = first_reader.find(sources[i].id());
      if (it != first_reader.end()) {
        final_after[it->second].push_back(i);
      } else {  // no node reads it: unconnected from the start
        early[i] = final_gradient(i);
        reported[i] = 1;
        observer->ready(i, early[i]);
      }
    }
  }

  for (std::size_t k = st.nodes.size(); k-- > 0;) {
    if (!node_on_path[k]) continue;
    if (observer) observer->before_node();
    detail::backward_node(st.nodes[k], grads, reach, source_ids);
    if (!observer) continue;
    if (auto it = final_after.find(k); it != final_after.end()) {
      for (std::size_t i : it->second) {
        early[i] = final_gradient(i);
        reported[i] = 1;
        observer->ready(i, early[i]);
      }
    }
  }

  std::vector<Tensor> result;
  result.reserve(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    result.push_back(reported[i] ? early[i] : final_gradient(i));
    if (observer && !reported[i]) observer->ready(i, result.back());
  }
  if (!st.persistent) {
    st.used = true;
    st.nodes.clear();
    st.nodes.shrink_to_fit();
  }
  return result;
}

Tensor stop_gradient(const Tensor& x) {
  detail::check_defined(x, "stop_gradient");
  // A new identity for the same values: no tape knows it, so nothing flows back through it.
  return detail::make_view(x, x.shape(), x.strides(), x.offset());
}

std::function<Tensor(const std::vector<Tensor>&)> custom_gradient(
    std::function<std::pair<Tensor, CustomGradFn>(const std::vector<Tensor>&)> f) {
  return [f = std::move(f)](const std::vector<Tensor>& inputs) {
    std::pair<Tensor, CustomGradFn> r;
    {
      autograd::NoRecordScope no_record;
      r = f(inputs);
    }
    detail::check_defined(r.first, "custom_gradient (result of f)");
    Tensor y = detail::make_view(r.first, r.first.shape(), r.first.strides(), r.first.offset());
    if (autograd::recording()) {
      // What each input's gradient must look like: its shape and its dtype (TensorFlow refuses
      // others too; accepting them would hand a wrong-sized gradient to the ops upstream).
      std::vector<std::pair<Shape, DType>> like;
      like.reserve(inputs.size());
      for (const auto& x : inputs) like.emplace_back(x.shape(), x.dtype());
      autograd::record(
          "custom_gradient", inputs, {y},
          [grad_fn = r.second, like = std::move(like)](const autograd::Grads& g, const autograd::Needs&) {
            if (!grad_fn) throw ValueError("custom_gradient: grad_fn is empty");
            autograd::Grads gi = grad_fn(g[0]);
            if (gi.size() != like.size())
              throw ValueError(fmt::format("custom_gradient: grad_fn returned {} gradients for {} inputs",
                                           gi.size(), like.size()));
            for (std::size_t i = 0; i < gi.size(); ++i) {
              if (!gi[i].defined()) continue;  // no gradient for this input, as TensorFlow's None
              if (gi[i].shape() != like[i].first)
                throw ShapeError(fmt::format("custom_gradient: grad_fn returned a gradient of shape {} for input {} "
                                             "of shape {}", gi[i].shape().to_string(), i, like[i].first.to_string()));
              if (gi[i].dtype() != like[i].second)
                throw DTypeError(fmt::format("custom_gradient: grad_fn returned a {} gradient for input {} of dtype {}",
                                             name(gi[i].dtype()), i, name(like[i].second)));
            }
            return gi;
          });
    }
    return y;
  };
}

std::function<Tensor(const Tensor&)> custom_gradient(
    std::function<std::pair<Tensor, std::function<Tensor(const Tensor&)>>(const Tensor&)> f) {
  auto multi = custom_gradient(
      [f = std::move(f)](const std::vector<Tensor>& in) -> std::pair<Tensor, CustomGradFn> {
        auto [y, g] = f(in[0]);
        return {y, [g = std::move(g)](const Tensor& dy) { return std::vector<Tensor>{g(dy)}; }};
      });
  return [multi = std::move(multi)](const Tensor& x) { return multi({x}); };
}

}  // namespace keel
