#pragma once
// A traced graph: the kernel calls a traced run made (nodes), the memory they touch (slots:
// one per Storage) and how each operand views its slot. trace.cpp builds it, passes.cpp
// optimises it, replay.cpp runs it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/recorder.hpp"
#include "keel/core/storage.hpp"
#include "keel/core/tensor.hpp"
#include "keel/graph/function.hpp"
#include "keel/ops/creation.hpp"

namespace keel::graph::detail {

// What makes a function untraceable (a value read on the host, random numbers drawn there,
// gradients through traced control flow): Model::fit then runs its step eagerly.
struct UntraceableError : ValueError {
  using ValueError::ValueError;
};

// keel::while_loop traced while nested tapes record (each must see every iteration) is unrolled
// behind guards: host steps that check each test took the traced value. A replay whose guard
// sees another value throws this, and the call traces (or finds) the plan of its own trip
// count. Not an Error: it never leaves keel::function.
struct GuardFailed {};

enum class SlotKind : std::uint8_t {
  input,         // argument k: bound to the caller's tensor on each call
  captured,      // a storage made before the trace (a Variable, a captured tensor): read and
                 // written where it is, so a Variable's new value is seen without retracing
  state,         // made during the trace and alive after it (a variable f created): kept
  constant,      // made during the trace on the host (a factory's values), never written by a kernel
  intermediate,  // made and dropped during the trace: lives in the graph's planned buffers
  output,        // a result: a fresh buffer on every call
};

struct Slot {
  SlotKind kind = SlotKind::intermediate;
  std::size_t nbytes = 0;
  Device device;
  int input = -1;                  // the argument of an input slot
  std::shared_ptr<Storage> held;   // captured, state and constant slots (and inputs while tracing)
  std::weak_ptr<Storage> seen;     // while tracing: tells an expired storage from a live one
  int buffer = -1;                 // intermediates: the planned buffer (one arena per device)
  std::size_t buffer_offset = 0;   // and where in it the slot starts (bytes, 64-aligned)
  bool written = false;            // some recorded call writes it
};

// An operand: a strided view of a slot.
struct View {
  int slot = -1;
  Shape shape;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
  DType dtype = DType::float32;
};

// Whether v's strides are row-major for its shape (size-1 axes may have any stride).
inline bool contiguous_view(const View& v) {
  std::int64_t expected = 1;
  for (std::int64_t i = v.shape.rank() - 1; i >= 0; --i) {
    if (v.shape[i] != 1 && v.strides[static_cast<std::size_t>(i)] != expected) return false;
    expected *= v.shape[i];
  }
  return true;
}

// Whether v is all of slot s, row-major from its first byte.
inline bool whole_slot_view(const View& v, const Slot& s) {
  return v.offset == 0 && contiguous_view(v) && static_cast<std::size_t>(v.shape.num_elements()) * itemsize(v.dtype) == s.nbytes;
}

// cond: operands {pred, results...}; runs sub[0] (then) or sub[1] (else), each of which ends by
// copying its results into the cond's. loop: operands {pred, loop state...}; runs sub[0] (the
// condition, which writes pred) and, while pred holds and fewer than max_iterations have run,
// sub[1] (the body, which ends by copying its results into the state).
enum class NodeKind : std::uint8_t { kernel, random, host, cond, loop };

// A named range that was open while nodes were traced (a layer call, a phase of fit's step, a
// user's profiler::Trace): a replay under a profiler opens it again around those nodes, so a
// replayed step shows the nesting an eager one does.
struct TracedRange {
  const char* category = "";
  std::string name;
  int parent = -1;  // the range it opened inside
};

struct Node {
  NodeKind kind = NodeKind::kernel;
  backend::KernelType type{"", 0};
  std::vector<std::int64_t> ints;  // the call's integer arguments (KernelType::ints)
  const char* host_name = "";
  std::vector<int> operands;  // view ids, inputs first; -1 for an absent optional operand
  std::size_t num_inputs = 0;
  backend::KernelReplay kernel;
  backend::RandomReplay random;
  backend::HostReplay host;
  std::uint64_t words = 0;                     // random: Philox words per call
  random::SeedGenerator* stream = nullptr;     // random: the stream it drew from (null: current)
  int fused_from = 0;                          // > 1: a fused elementwise node of that many calls
  std::vector<Node> sub[2];                    // cond and loop: the nested node lists
  std::int64_t max_iterations = -1;            // loop: -1 for no limit
  std::vector<Tensor> bound;                   // the operands over the executor's views
  bool backward = false;                       // differentiable plans: part of the traced backward
  int range = -1;                              // the innermost TracedRange open when it was traced
};

// Calls fn(view, written) for every operand of n and of the nodes nested in it.
template <class Fn>
void for_each_operand(const Node& n, Fn&& fn) {
  for (std::size_t j = 0; j < n.operands.size(); ++j)
    if (n.operands[j] >= 0) fn(n.operands[j], j >= n.num_inputs);
  for (const auto& list : n.sub)
    for (const Node& m : list) for_each_operand(m, fn);
}

// What a replay works with, built once per graph: a TensorImpl per view (so rebinding a slot
// to a call's storage is a pointer store per view) and each node's operand handles.
struct Executor {
  std::vector<std::shared_ptr<TensorImpl>> impls;       // per view
  std::vector<std::int64_t> base_offsets;               // per view, for input rebinding
  std::vector<std::vector<int>> slot_views;             // per slot
  std::vector<std::shared_ptr<Storage>> buffers;        // the planned buffers
  std::vector<int> written_external;                    // captured/state slots a call writes
  std::vector<int> input_slots, output_slots;           // what a call binds
};

// The memory of one call of a differentiable plan (a slot's storage and offset, by slot): its
// forward runs into it, and its backward, run when a tape asks, reads the same values.
struct Binding {
  std::vector<std::shared_ptr<Storage>> storages;
  std::vector<std::int64_t> offsets;
};

// What a plan holds but its executor: the graph, copyable (graph/generic.hpp makes a plan per
// size from a copy).
struct PlanData {
  std::string name;
  // A differentiable plan (traced for a call under a recording tape) holds the forward and,
  // flagged `backward`, the vector-Jacobian product: inputs num_inputs.. are the upstream
  // gradients of the results listed in dy_for_result; results num_forward_results.. are the
  // gradients of the floating arguments, then of var_sources (the variables f reads).
  bool differentiable = false;
  std::size_t num_forward_results = 0;
  std::vector<std::size_t> dy_for_result;
  std::vector<Tensor> var_sources;
  std::vector<Slot> slots;
  std::vector<View> views;
  std::vector<Node> nodes;
  std::vector<TracedRange> ranges;
  std::vector<int> outputs;  // view per result
  std::size_t num_inputs = 0;
  std::size_t traced_nodes = 0;
  std::size_t planned_bytes = 0, unplanned_bytes = 0;
};

struct VjpFunctions;  // graph/recorded_backward.cpp

struct Plan : PlanData {
  Executor exec;
  std::mutex run_mutex;  // one replay at a time: the planned buffers are shared
  // A differentiable plan's vector-Jacobian product as traced functions, made the first time a
  // tape records its gradient (a gradient of the gradient).
  mutable std::mutex vjp_mutex;
  mutable std::shared_ptr<VjpFunctions> vjp;
};

// Runs f on args while recording; returns f's results (the first call's answer) and fills
// `plan` (not yet optimised). With `first_call`, traces a differentiable plan (see Plan) under a
// tape of its own and keeps the traced run's memory there, as the first call's binding. A `dry`
// trace has no effects (writes to memory made before it go to copies, host steps do not run),
// as a branch not taken does: generic.cpp traces at other sizes so.
std::vector<Tensor> trace(const std::string& name, const std::vector<Tensor>& args, const TraceFn& f, Plan& plan,
                          Binding* first_call = nullptr, bool dry = false);

struct PassOptions {
  bool fold_constants = true;
  bool eliminate_common_subexpressions = true;
  bool eliminate_dead_code = true;
  bool fuse_elementwise = true;
  bool fuse_patterns = true;  // graph/fuse_patterns.cpp
  bool plan_memory = true;
};
// Every rewrite off (jit_compile = false; the trace a differentiable plan's binding is made for):
// the graph runs the calls as traced, in planned memory.
inline PassOptions no_rewrites() {
  PassOptions o;
  o.fold_constants = o.eliminate_common_subexpressions = o.eliminate_dead_code = false;
  o.fuse_elementwise = o.fuse_patterns = false;
  return o;
}
// A TensorImpl for view v over `storage` (null: bound per call).
std::shared_ptr<TensorImpl> view_impl(const View& v, std::shared_ptr<Storage> storage);

// What keel::function runs (jit_compile = false turns every pass off); tests switch passes here.
PassOptions& default_pass_options();
// Optimises the plan and builds its executor.
void finalise(Plan& plan, const PassOptions& options);

// Whether a one-element tensor is nonzero (read on the host: the branch or loop test).
bool truth(const Tensor& pred);
// Runs a node list of a plan whose slots are bound (at the top level, only the forward nodes or
// only the backward ones of a differentiable plan when `part` is 0 or 1).
void run_nodes(const std::vector<Node>& nodes, int part = -1);
// run_nodes on the plan's top-level list, reopening its traced ranges for a listening profiler.
void run_plan(const Plan& plan, int part = -1);
// A differentiable plan's forward into a fresh binding of `call`, and later its backward from
// the upstream gradients (one per dy_for_result); each returns its part of the results.
std::vector<Tensor> forward_replay(Plan& plan, const std::vector<Tensor>& args, Binding& call);
std::vector<Tensor> backward_replay(Plan& plan, Binding& call, const std::vector<Tensor>& dys);
// Replays the plan on args (their signature is the plan's).
std::vector<Tensor> replay(Plan& plan, const std::vector<Tensor>& args);

// The TensorFlow-style op type of a node ("MatMul", "Relu", ...), and of a kernel call.
std::string op_type(const Node& node);
std::string kernel_op_name(const backend::KernelType& type);

}  // namespace keel::graph::detail
