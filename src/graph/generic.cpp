// Generalising a traced plan over free dimensions (see generic.hpp): dry traces at small sizes,
// a multilinear fit of every integer of the plan, checks at sizes the fit did not use, and
// plans for new sizes made from the fit instead of a trace.
#include "graph/generic.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "autograd/record.hpp"
#include "backend/backend.hpp"
#include "backend/random.hpp"
#include "keel/ops/creation.hpp"
#include "keel/ops/shape.hpp"
#include "ops/random_stream.hpp"

namespace keel::graph::detail {

namespace {

// The probes: each symbol at kLow or kLow + 1 (the fit's grid; not 1, where an
// operand could broadcast differently), then every one at kCheck (a check the fit did not use).
constexpr std::int64_t kLow = 2;
constexpr std::int64_t kCheck = 5;
// More sizes would take 2^n traces to fit.
constexpr std::size_t kMaxSymbols = 3;
constexpr std::size_t kMaxInstances = 8;

// A random fill draws whole Philox blocks (its words are a multiple of 4, not multilinear in
// a size): its words are computed for each size as the backend reserves them (random_words).
bool blockwise_random(const Node& n) { return n.kind == NodeKind::random && std::string_view(n.type.family) == "random"; }

// Calls fn(std::int64_t&) on every integer of the plan that may depend on a size, in a fixed
// order: slot bytes, view shapes, strides and offsets, then each node's integer arguments and
// random words (nested lists in place).
template <class Fn>
void walk_nodes(std::vector<Node>& nodes, Fn& fn) {
  for (Node& n : nodes) {
    for (std::int64_t& i : n.ints) fn(i);
    auto words = static_cast<std::int64_t>(n.words);
    if (!blockwise_random(n)) fn(words);
    n.words = static_cast<std::uint64_t>(words);
    for (auto& list : n.sub) walk_nodes(list, fn);
  }
}

void random_words(std::vector<Node>& nodes, const std::vector<View>& views) {
  for (Node& n : nodes) {
    if (blockwise_random(n)) {
      const View& out = views[static_cast<std::size_t>(n.operands[n.num_inputs])];
      n.words = static_cast<std::uint64_t>(
          backend::random_blocks(static_cast<kernel::Distribution>(n.type.kind), out.dtype, out.shape.num_elements()) * 4);
    }
    for (auto& list : n.sub) random_words(list, views);
  }
}

template <class Fn>
void walk_sizes(Plan& p, Fn&& fn) {
  for (Slot& s : p.slots) {
    auto bytes = static_cast<std::int64_t>(s.nbytes);
    fn(bytes);
    s.nbytes = static_cast<std::size_t>(bytes);
  }
  for (View& v : p.views) {
    for (std::int64_t i = 0; i < v.shape.rank(); ++i) fn(v.shape[i]);
    for (std::int64_t& stride : v.strides) fn(stride);
    fn(v.offset);
  }
  walk_nodes(p.nodes, fn);
}

std::vector<std::int64_t> sizes_of(Plan& p) {
  std::vector<std::int64_t> out;
  walk_sizes(p, [&](std::int64_t& v) { out.push_back(v); });
  return out;
}

bool same_alpha(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_nodes(const std::vector<Node>& a, const std::vector<Node>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Node& x = a[i];
    const Node& y = b[i];
    // A fill's value may be a size (fitted_values compares them).
    const bool fill = std::string_view(x.type.family) == "fill";
    if (x.kind != y.kind || std::strcmp(x.type.family, y.type.family) != 0 || x.type.kind != y.type.kind ||
        (!fill && !same_alpha(x.type.alpha, y.type.alpha)) || std::strcmp(x.host_name, y.host_name) != 0 ||
        x.ints.size() != y.ints.size() || x.operands != y.operands || x.num_inputs != y.num_inputs ||
        x.stream != y.stream || x.max_iterations != y.max_iterations || x.backward != y.backward ||
        x.range != y.range || x.fused_from != y.fused_from)
      return false;
    for (int k = 0; k < 2; ++k)
      if (!same_nodes(x.sub[k], y.sub[k])) return false;
  }
  return true;
}

// Everything but the sizes: the same kernels on the same slots and views, the same variables,
// host-made constants of the same size (fitted_values compares their values).
bool same_structure(const Plan& a, const Plan& b) {
  if (a.num_inputs != b.num_inputs || a.outputs != b.outputs || a.differentiable != b.differentiable ||
      a.num_forward_results != b.num_forward_results || a.dy_for_result != b.dy_for_result ||
      a.var_sources.size() != b.var_sources.size() || a.slots.size() != b.slots.size() ||
      a.views.size() != b.views.size() || a.ranges.size() != b.ranges.size())
    return false;
  for (std::size_t v = 0; v < a.var_sources.size(); ++v)
    if (a.var_sources[v].impl()->storage != b.var_sources[v].impl()->storage) return false;
  for (std::size_t s = 0; s < a.slots.size(); ++s) {
    const Slot& x = a.slots[s];
    const Slot& y = b.slots[s];
    if (x.kind != y.kind || x.device != y.device || x.input != y.input || x.written != y.written) return false;
    if (x.kind == SlotKind::captured && x.held != y.held) return false;
    if (x.kind == SlotKind::constant && (x.nbytes != y.nbytes || !x.held || !y.held)) return false;
  }
  for (std::size_t v = 0; v < a.views.size(); ++v) {
    const View& x = a.views[v];
    const View& y = b.views[v];
    if (x.slot != y.slot || x.dtype != y.dtype || x.shape.rank() != y.shape.rank() || x.strides.size() != y.strides.size())
      return false;
  }
  for (std::size_t r = 0; r < a.ranges.size(); ++r) {
    const TracedRange& x = a.ranges[r];
    const TracedRange& y = b.ranges[r];
    if (x.name != y.name || std::strcmp(x.category, y.category) != 0 || x.parent != y.parent) return false;
  }
  return same_nodes(a.nodes, b.nodes);
}

bool same_bytes(const Slot& x, const Slot& y) {
  return x.held == y.held || (x.device.is_cpu() && std::memcmp(x.held->data(), y.held->data(), x.nbytes) == 0);
}

// Whether v holds an integer a double represents exactly.
bool integral(double v) { return std::abs(v) < 9.0e15 && v == std::floor(v); }

bool read_integer(const Storage& s, DType dtype, std::int64_t& out) {
  double v = 0;
  switch (dtype) {
    case DType::float32: v = *static_cast<const float*>(s.data()); break;
    case DType::float64: v = *static_cast<const double*>(s.data()); break;
    case DType::int32: out = *static_cast<const std::int32_t*>(s.data()); return true;
    case DType::int64: out = *static_cast<const std::int64_t*>(s.data()); return true;
    default: return false;
  }
  if (!integral(v)) return false;
  out = static_cast<std::int64_t>(v);
  return true;
}

std::shared_ptr<Storage> integer_storage(std::int64_t v, DType dtype) {
  auto s = std::make_shared<Storage>(itemsize(dtype), Device());
  switch (dtype) {
    case DType::float32: *static_cast<float*>(s->data()) = static_cast<float>(static_cast<double>(v)); break;
    case DType::float64: *static_cast<double*>(s->data()) = static_cast<double>(v); break;
    case DType::int32: *static_cast<std::int32_t*>(s->data()) = static_cast<std::int32_t>(v); break;
    default: *static_cast<std::int64_t*>(s->data()) = v; break;
  }
  return s;
}

bool fitted_constants(const Plan& raw, const std::vector<std::shared_ptr<Plan>>& others, GenericPlan& g) {
  for (std::size_t s = 0; s < raw.slots.size(); ++s) {
    const Slot& slot = raw.slots[s];
    if (slot.kind != SlotKind::constant) continue;
    bool differs = false;
    for (const auto& p : others) differs = differs || !same_bytes(slot, p->slots[s]);
    if (!differs) continue;
    DType dtype = DType::uint8;
    for (const View& v : raw.views)
      if (v.slot == static_cast<int>(s)) {
        dtype = v.dtype;
        break;
      }
    if (!slot.device.is_cpu() || slot.nbytes != itemsize(dtype)) return false;
    std::int64_t value = 0;
    if (!read_integer(*slot.held, dtype, value)) return false;
    for (const auto& p : others)
      if (!read_integer(*p->slots[s].held, dtype, value)) return false;
    g.constant_slots.push_back(static_cast<int>(s));
    g.constant_dtypes.push_back(dtype);
  }
  return true;
}

void flat_nodes(std::vector<Node>& nodes, std::vector<Node*>& out) {
  for (Node& n : nodes) {
    out.push_back(&n);
    for (auto& list : n.sub) flat_nodes(list, out);
  }
}

std::vector<Node*> flat_nodes(Plan& p) {
  std::vector<Node*> out;
  flat_nodes(p.nodes, out);
  return out;
}

// Values that differ between the traces: a one-element host-made constant or a fill holding an
// integer (reduce_mean divides by the count of elements it averages, made either way) is fitted
// as a size; any other difference is not generalisable (false).
bool fitted_values(Plan& raw, const std::vector<std::shared_ptr<Plan>>& others, GenericPlan& g) {
  const std::vector<Node*> nodes = flat_nodes(raw);
  std::vector<std::vector<Node*>> other_nodes;
  for (const auto& p : others) other_nodes.push_back(flat_nodes(*p));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (std::string_view(nodes[i]->type.family) != "fill") continue;
    bool differs = false, integers = integral(nodes[i]->type.alpha);
    for (const auto& o : other_nodes) {
      differs = differs || !same_alpha(o[i]->type.alpha, nodes[i]->type.alpha);
      integers = integers && integral(o[i]->type.alpha);
    }
    if (!differs) continue;
    if (!integers) return false;
    g.fill_nodes.push_back(i);
  }
  return fitted_constants(raw, others, g);
}


// The plan's sizes, then its fitted fills' values, then its fitted constants'.
std::vector<std::int64_t> field_values(Plan& p, const GenericPlan& g) {
  std::vector<std::int64_t> out = sizes_of(p);
  const std::vector<Node*> nodes = flat_nodes(p);
  for (std::size_t i : g.fill_nodes) out.push_back(static_cast<std::int64_t>(nodes[i]->type.alpha));
  for (std::size_t k = 0; k < g.constant_slots.size(); ++k) {
    std::int64_t v = 0;
    read_integer(*p.slots[static_cast<std::size_t>(g.constant_slots[k])].held, g.constant_dtypes[k], v);
    out.push_back(v);
  }
  return out;
}

void collect_streams(const std::vector<Node>& nodes, std::map<random::SeedGenerator*, random::PhiloxState>& out) {
  for (const Node& n : nodes) {
    if (n.kind == NodeKind::random && n.stream) out.emplace(n.stream, n.stream->state());
    for (const auto& list : n.sub) collect_streams(list, out);
  }
}

// The random streams a probe may draw from (the global one, the current scope's, those the
// first trace drew from), put back as they were when the probes end.
class StreamsKept {
 public:
  explicit StreamsKept(const Plan& raw) : global_(random::get_state()) {
    collect_streams(raw.nodes, streams_);
    if (random::SeedGenerator* g = random::current_generator()) streams_.emplace(g, g->state());
  }
  ~StreamsKept() {
    random::set_state(global_);
    for (auto& [g, state] : streams_) g->set_state(state);
  }
  StreamsKept(const StreamsKept&) = delete;
  StreamsKept& operator=(const StreamsKept&) = delete;

 private:
  random::PhiloxState global_;
  std::map<random::SeedGenerator*, random::PhiloxState> streams_;
};

// The arguments of a probe: each free dimension resized to its symbol's size by taking the
// call's slices cyclically, so that the values are the kind f was given (valid ids, labels).
std::vector<Tensor> probe_args(const std::vector<Tensor>& args, const GenericPlan& g,
                               const std::vector<std::int64_t>& sizes) {
  std::vector<Tensor> out = args;
  for (std::size_t d = 0; d < g.dims.size(); ++d) {
    const FreeDim& dim = g.dims[d];
    const std::int64_t want = sizes[g.symbol[d]];
    const std::int64_t have = args[dim.arg].shape()[dim.axis];
    std::vector<std::int64_t> ids(static_cast<std::size_t>(want));
    for (std::int64_t i = 0; i < want; ++i) ids[static_cast<std::size_t>(i)] = i % have;
    out[dim.arg] = gather(out[dim.arg], constant(ids, Shape({want}), DType::int64), static_cast<int>(dim.axis));
  }
  return out;
}

// A dry trace of f at these symbol sizes, before the passes.
std::shared_ptr<Plan> probe(const GenericPlan& g, const std::vector<Tensor>& args, const std::vector<std::int64_t>& sizes,
                            const TraceFn& f) {
  std::vector<Tensor> probe_in;
  {
    autograd::NoRecordScope not_for_tapes;
    probe_in = probe_args(args, g, sizes);
  }
  auto p = std::make_shared<Plan>();
  Binding call;  // a differentiable plan's trace keeps its run's memory there
  trace(g.raw->name, probe_in, f, *p, g.raw->differentiable ? &call : nullptr, /*dry=*/true);
  return p;
}

// The fitted value of integer `field` at these sizes (false on overflow).
bool evaluate(const GenericPlan& g, std::size_t field, const std::vector<std::int64_t>& sizes, std::int64_t& out) {
  const std::size_t terms = std::size_t{1} << g.num_symbols;
  std::int64_t sum = 0;
  for (std::size_t mask = 0; mask < terms; ++mask) {
    std::int64_t term = g.coefficients[field * terms + mask];
    for (std::size_t d = 0; d < g.num_symbols && term != 0; ++d)
      if (mask >> d & 1)
        if (__builtin_mul_overflow(term, sizes[d] - kLow, &term)) return false;
    if (__builtin_add_overflow(sum, term, &sum)) return false;
  }
  out = sum;
  return true;
}

// raw with the fitted sizes at `sizes`, or null where they do not describe valid memory.
std::shared_ptr<Plan> evaluated(const GenericPlan& g, const std::vector<std::int64_t>& sizes) {
  std::shared_ptr<Plan> p = copy_plan(*g.raw);
  std::size_t field = 0;
  bool ok = true;
  walk_sizes(*p, [&](std::int64_t& v) { ok = ok && evaluate(g, field++, sizes, v); });
  const std::vector<Node*> nodes = flat_nodes(*p);
  for (std::size_t i : g.fill_nodes) {
    std::int64_t v = 0;
    ok = ok && evaluate(g, field++, sizes, v);
    const auto value = static_cast<double>(v);
    nodes[i]->type.alpha = value;
    nodes[i]->kernel = [value](const Tensor* t) { backend::fill(t[0], value); };
  }
  for (std::size_t k = 0; k < g.constant_slots.size(); ++k) {
    std::int64_t v = 0;
    ok = ok && evaluate(g, field++, sizes, v);
    p->slots[static_cast<std::size_t>(g.constant_slots[k])].held = integer_storage(v, g.constant_dtypes[k]);
  }
  if (!ok) return nullptr;
  for (const Slot& s : p->slots)
    if (static_cast<std::int64_t>(s.nbytes) < 0) return nullptr;
  // Every view inside its slot: the fit is checked at four or more sizes, and this keeps a size
  // where it would not hold from reaching memory it does not own.
  for (const View& v : p->views) {
    std::int64_t lo = v.offset, hi = v.offset;
    bool empty = false;
    for (std::int64_t i = 0; i < v.shape.rank(); ++i) {
      if (v.shape[i] < 0) return nullptr;
      if (v.shape[i] == 0) empty = true;
      std::int64_t reach = 0;
      if (v.shape[i] > 0 && __builtin_mul_overflow(v.shape[i] - 1, v.strides[static_cast<std::size_t>(i)], &reach))
        return nullptr;
      (reach < 0 ? lo : hi) += reach;
    }
    if (empty) continue;
    const auto size = static_cast<std::int64_t>(itemsize(v.dtype));
    const auto bytes = static_cast<std::int64_t>(p->slots[static_cast<std::size_t>(v.slot)].nbytes);
    if (lo < 0 || (hi + 1) > bytes / size) return nullptr;
  }
  random_words(p->nodes, p->views);
  return p;
}

// The view shapes of a finalised plan at the first call's sizes, -1 where the same plan at
// other sizes has another size.
std::shared_ptr<const Plan> display_plan(const Plan& first, const Plan* other) {
  std::shared_ptr<Plan> d = copy_plan(first);
  if (!other || other->views.size() != d->views.size() || other->nodes.size() != d->nodes.size()) return d;
  for (std::size_t v = 0; v < d->views.size(); ++v) {
    View& x = d->views[v];
    const View& y = other->views[v];
    if (x.shape.rank() != y.shape.rank()) continue;
    for (std::int64_t i = 0; i < x.shape.rank(); ++i)
      if (x.shape[i] != y.shape[i]) x.shape[i] = -1;
  }
  return d;
}

// Most kernels read every size from their operands when they replay. These keep sizes they
// captured while tracing: the convolution's and pooling's window geometry (they take the
// batch, ints[0], from an operand), gather's rows (outer, dim, row bytes) and the int8
// convolutions' geometry (all but the batch). Those sizes must be the same in every trace.
bool captured_sizes_fixed(Plan& raw, const std::vector<std::shared_ptr<Plan>>& probes, std::string& why) {
  const std::vector<Node*> nodes = flat_nodes(raw);
  for (const auto& probe : probes) {
    const std::vector<Node*> other = flat_nodes(*probe);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      const std::string_view family = n.type.family;
      // The kept integer arguments: a window's all but the batch, gather's all, others' none.
      const auto from = static_cast<std::ptrdiff_t>(
          std::min(family == "conv" || family == "pool" || family == "conv_bias_activation" ? 1
                   : family == "gather"                                                     ? 0
                                                                                            : n.ints.size(),
                   n.ints.size()));
      bool fixed = std::equal(n.ints.begin() + from, n.ints.end(), other[i]->ints.begin() + from);
      if (family == "int8_conv2d" || family == "int8_depthwise2d")
        for (int v : n.operands) {
          if (v < 0) continue;
          const Shape& a = raw.views[static_cast<std::size_t>(v)].shape;
          const Shape& b = probe->views[static_cast<std::size_t>(v)].shape;
          for (std::int64_t d = 1; d < a.rank(); ++d) fixed = fixed && a[d] == b[d];
        }
      if (!fixed) {
        why = fmt::format("a free dimension changes sizes a '{}' kernel keeps from its trace (only its batch may change)",
                          family);
        return false;
      }
    }
  }
  return true;
}

// Memory f made in the first trace that the later traces found made (a variable, an
// optimizer's slot): state there, captured here.
bool made_variables(const Plan& raw, const Plan& probe) {
  if (raw.slots.size() != probe.slots.size()) return false;
  for (std::size_t s = 0; s < raw.slots.size(); ++s)
    if (raw.slots[s].kind == SlotKind::state && probe.slots[s].kind == SlotKind::captured) return true;
  return false;
}

// State whose size depends on a free dimension is memory f made and keeps outside the graph in
// every trace (a recurrent layer's last states): a buffer of that trace's size cannot hold
// another size's values, so the plans made from the fit compute it in buffers of their own.
// Null for a differentiable plan (its first call's memory is bound slot by slot).
std::shared_ptr<const Plan> kept_buffers_as_intermediates(const Plan& raw, const std::vector<std::shared_ptr<Plan>>& probes) {
  std::shared_ptr<Plan> p = copy_plan(raw);
  for (std::size_t s = 0; s < p->slots.size(); ++s) {
    Slot& slot = p->slots[s];
    const bool sized = std::any_of(probes.begin(), probes.end(),
                                   [&](const auto& q) { return q->slots[s].nbytes != slot.nbytes; });
    if (slot.kind != SlotKind::state || !sized) continue;
    if (p->differentiable) return nullptr;
    slot.kind = SlotKind::intermediate;
    slot.held.reset();
  }
  return p;
}

// A collective (an all-reduce, a broadcast, a parameter server's push and pull) talks to other
// processes: traced again at other sizes it would wait for replicas that do not trace with it.
bool communicates(const std::vector<Node>& nodes) {
  for (const Node& n : nodes) {
    const std::string_view family = n.type.family, host = n.host_name;
    if (family.starts_with("all_reduce") || family == "broadcast" || host == "PushPullParameters") return true;
    for (const auto& list : n.sub)
      if (communicates(list)) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<Plan> copy_plan(const Plan& p) {
  auto c = std::make_shared<Plan>();
  static_cast<PlanData&>(*c) = p;
  return c;
}

bool symbol_sizes(const GenericPlan& g, const std::vector<Tensor>& args, std::vector<std::int64_t>& sizes) {
  sizes.assign(g.num_symbols, -1);
  for (std::size_t d = 0; d < g.dims.size(); ++d) {
    const std::int64_t s = args[g.dims[d].arg].shape()[g.dims[d].axis];
    std::int64_t& want = sizes[g.symbol[d]];
    if (want >= 0 && want != s) return false;
    want = s;
  }
  return true;
}

std::shared_ptr<GenericPlan> generalise(std::shared_ptr<const Plan> raw, const std::vector<Tensor>& args,
                                        std::vector<FreeDim> dims, const TraceFn& f, const PassOptions& passes,
                                        std::string& why) {
  if (dims.empty()) return nullptr;
  if (communicates(raw->nodes)) {
    why = "it communicates with other processes";
    return nullptr;
  }
  for (const Node& n : raw->nodes)
    if (n.kind == NodeKind::host && std::string_view(n.host_name) == "Guard") {
      why = "control flow traced under a tape (a plan per path)";
      return nullptr;
    }
  auto g = std::make_shared<GenericPlan>();
  g->raw = raw;
  g->passes = passes;
  std::vector<std::int64_t> first;  // per symbol
  for (const FreeDim& d : dims) {
    const std::int64_t s = args[d.arg].shape()[d.axis];
    if (s < 1) {
      why = "an empty free dimension";
      return nullptr;
    }
    const auto at = std::find(first.begin(), first.end(), s);
    g->symbol.push_back(static_cast<std::size_t>(at - first.begin()));
    if (at == first.end()) first.push_back(s);
  }
  g->dims = std::move(dims);
  g->num_symbols = first.size();
  if (g->num_symbols > kMaxSymbols) {
    why = fmt::format("more than {} sizes of free dimensions", kMaxSymbols);
    return nullptr;
  }
  const std::size_t n = g->num_symbols;
  const std::size_t terms = std::size_t{1} << n;
  std::vector<std::shared_ptr<Plan>> probes(terms + 1);  // the grid, then the check
  std::vector<std::int64_t> check_sizes(n, kCheck);
  if (check_sizes == first) check_sizes.assign(n, kCheck + 2);
  try {
    StreamsKept streams(*raw);
    for (std::size_t mask = 0; mask <= terms; ++mask) {
      std::vector<std::int64_t> sizes = check_sizes;
      if (mask < terms)
        for (std::size_t d = 0; d < n; ++d) sizes[d] = kLow + static_cast<std::int64_t>(mask >> d & 1);
      probes[mask] = probe(*g, args, sizes, f);
      if (made_variables(*raw, *probes[mask])) {
        why = "the trace made variables (the next trace, which finds them made, may generalise)";
        return nullptr;
      }
      if (!same_structure(*raw, *probes[mask])) {
        why = fmt::format("f traces other work at other sizes of the free dimensions ({} kernel calls at {}, {} at {})",
                          raw->nodes.size(), fmt::join(first, "x"), probes[mask]->nodes.size(), fmt::join(sizes, "x"));
        return nullptr;
      }
    }
  } catch (const std::exception& e) {
    why = fmt::format("a trace at other sizes failed: {}", e.what());
    return nullptr;
  }
  std::shared_ptr<Plan> raw_copy = copy_plan(*raw);
  if (!fitted_values(*raw_copy, probes, *g)) {
    why = "a constant made on the host differs between sizes (other than a count of elements)";
    return nullptr;
  }
  std::vector<std::vector<std::int64_t>> grid(terms);
  for (std::size_t mask = 0; mask < terms; ++mask) grid[mask] = field_values(*probes[mask], *g);
  const std::shared_ptr<Plan> check = probes[terms];
  // Möbius inversion over the grid: the coefficient of prod_{d in A} (size_d - kLow) is the
  // alternating sum of the grid values over the subsets of A.
  const std::size_t fields = grid[0].size();
  g->coefficients.assign(fields * terms, 0);
  for (std::size_t a = 0; a < terms; ++a)
    for (std::size_t b = a;; b = (b - 1) & a) {
      const bool negative = (__builtin_popcountll(a) - __builtin_popcountll(b)) % 2 != 0;
      for (std::size_t k = 0; k < fields; ++k)
        g->coefficients[k * terms + a] += negative ? -grid[b][k] : grid[b][k];
      if (b == 0) break;
    }
  // Checked where the fit was not made: at kCheck and at the first call's own sizes.
  for (auto [plan, sizes] : {std::pair{check.get(), check_sizes}, std::pair{raw_copy.get(), first}}) {
    const std::vector<std::int64_t> seen = field_values(*plan, *g);
    for (std::size_t k = 0; k < fields; ++k) {
      std::int64_t fitted = 0;
      if (!evaluate(*g, k, sizes, fitted) || fitted != seen[k]) {
        why = "a size in the plan is not multilinear in the free dimensions";
        return nullptr;
      }
    }
  }
  if (!captured_sizes_fixed(*raw_copy, probes, why)) return nullptr;
  g->raw = kept_buffers_as_intermediates(*raw, probes);
  if (!g->raw) {
    why = "f keeps memory of a free size outside the graph (a recurrent layer's states) under a tape";
    return nullptr;
  }
  std::shared_ptr<Plan> at_first = instance(*g, first);
  std::vector<std::int64_t> next = first;
  for (std::int64_t& s : next) ++s;
  std::shared_ptr<Plan> at_next = evaluated(*g, next);
  if (at_next) finalise(*at_next, passes);
  if (!at_first) {
    why = "the fitted sizes do not describe the first call's memory";
    return nullptr;
  }
  g->display = display_plan(*at_first, at_next.get());
  return g;
}

std::shared_ptr<Plan> instance(GenericPlan& g, const std::vector<std::int64_t>& sizes) {
  for (std::size_t i = 0; i < g.instances.size(); ++i)
    if (g.instances[i].first == sizes) {
      std::rotate(g.instances.begin(), g.instances.begin() + static_cast<std::ptrdiff_t>(i),
                  g.instances.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return g.instances[0].second;
    }
  for (std::int64_t s : sizes)
    if (s < 1) return nullptr;  // empty: traced as a shape of its own
  std::shared_ptr<Plan> p = evaluated(g, sizes);
  if (!p) return nullptr;
  finalise(*p, g.passes);
  if (g.instances.size() == kMaxInstances) g.instances.pop_back();
  g.instances.insert(g.instances.begin(), {sizes, p});
  return p;
}

}  // namespace keel::graph::detail
