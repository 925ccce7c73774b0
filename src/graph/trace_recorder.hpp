#pragma once
// The recorder of a trace (trace.cpp runs it; control_flow.cpp adds cond and while_loop).
#include <functional>
#include <unordered_map>
#include <vector>

#include <fmt/core.h>

#include "backend/backend.hpp"
#include "graph/plan.hpp"
#include "ops/random_stream.hpp"

namespace keel::graph::detail {

struct LoopTape;  // while_gradient.cpp

class TraceRecorder final : public backend::KernelRecorder, public backend::RangeListener {
 public:
  // keel::cond and keel::while_loop while tracing (control_flow.cpp).
  Tensor cond(const Tensor& pred, const std::function<Tensor()>& then_fn, const std::function<Tensor()>& else_fn);
  // cond of branches with several results, where a result one branch leaves undefined is zeros
  // there (undefined in both: undefined). Under recording tapes, the branches become one tape
  // node whose gradient is such a cond of the branches' gradients.
  using Branch = std::function<std::vector<Tensor>()>;
  std::vector<Tensor> cond_branches(const Tensor& pred, const Branch& then_fn, const Branch& else_fn,
                                    const char* op);
  std::vector<Tensor> while_loop(const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
                                 const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
                                 const std::vector<Tensor>& loop_vars, int maximum_iterations);

  // keel::while_loop traced while one tape records, as one graph with the loop's gradient
  // (while_gradient.cpp); false, having changed nothing, where nested tapes record (the loop is
  // then unrolled).
  bool while_under_tape(const std::function<Tensor(const std::vector<Tensor>&)>& cond_fn,
                        const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& body_fn,
                        const std::vector<Tensor>& loop_vars, int maximum_iterations, std::vector<Tensor>& results);
  // The gradient of such a loop, recorded as a loop running its body's backward (the tape node's
  // backward while the trace records the gradient).
  std::vector<Tensor> while_gradient(const LoopTape& loop, const std::vector<Tensor>& g,
                                     const std::vector<bool>& needs);

  TraceRecorder(Plan& plan, std::uint64_t first_serial) : plan_(plan), first_serial_(first_serial) {}

  // A guard on pred's value (recorded as a host step) that is its value now; control_flow.cpp.
  bool guard(const Tensor& pred, const char* op);

  // The argument copies f gets: slots of their own, so that two arguments sharing memory (or
  // an argument that is a Variable's value) stay apart in the graph.
  void add_input(const Tensor& t, int k) {
    const int s = new_slot(t.impl()->storage, SlotKind::input);
    plan_.slots[static_cast<std::size_t>(s)].input = k;
    plan_.slots[static_cast<std::size_t>(s)].held = t.impl()->storage;
  }

  bool fuses_elementwise() const override { return true; }

  void kernel(backend::KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, backend::KernelReplay replay) override {
    Node n;
    n.kind = NodeKind::kernel;
    n.type = type;
    n.ints.assign(type.ints, type.ints + type.num_ints);
    n.type.ints = nullptr;
    n.type.num_ints = 0;
    run_and_record(n, inputs, outputs, [&](const Tensor* t) { replay(t); });
    n.kernel = std::move(replay);
    push(std::move(n));
  }

  void random(backend::KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, std::uint64_t words, std::uint64_t key,
              std::uint64_t counter, backend::RandomReplay replay) override {
    Node n;
    n.kind = NodeKind::random;
    n.type = type;
    n.words = words;
    n.stream = random::current_generator();
    random::tracing::reserved_words -= static_cast<std::int64_t>(words);
    run_and_record(n, inputs, outputs, [&](const Tensor* t) { replay(t, key, counter); });
    n.random = std::move(replay);
    push(std::move(n));
  }

  void host(const char* name, const std::vector<const Tensor*>& inputs, backend::HostReplay step) override {
    Node n;
    n.kind = NodeKind::host;
    n.host_name = name;
    run_and_record(n, inputs, {}, [&](const Tensor* t) {
      if (dry_ == 0) step(t);  // a branch not taken while tracing has no effects
    });
    n.host = std::move(step);
    push(std::move(n));
  }

  [[noreturn]] void host_read(const char* what) override {
    throw UntraceableError(fmt::format(
        "keel::function{}: {} while tracing: a traced graph cannot depend on tensor values read on the host "
        "(use keel::cond or keel::while_loop for data-dependent control flow, or read the value outside the "
        "function)",
        plan_.name.empty() ? "" : " '" + plan_.name + "'", what));
  }

  // A range opened while tracing (a layer call, a phase of fit's step, a profiler::Trace): the
  // nodes recorded inside it note it, for replays under a profiler; a profiler listening to the
  // trace itself (`outer`) is told too.
  void begin(const char* category, const std::string& name) override {
    plan_.ranges.push_back({category, name, range_});
    range_ = static_cast<int>(plan_.ranges.size()) - 1;
    if (outer_ranges_) outer_ranges_->begin(category, name);
  }
  void end() override {
    if (range_ >= 0) range_ = plan_.ranges[static_cast<std::size_t>(range_)].parent;
    if (outer_ranges_) outer_ranges_->end();
  }
  void listen_after(backend::RangeListener* outer) { outer_ranges_ = outer; }

  // The slot of a result (made where it is first seen: a result no kernel touched).
  int view_of(const Tensor& t) { return make_view(t); }
  // Nodes recorded from now on are the backward of a differentiable plan.
  void start_backward() { backward_ = true; }
  // Keeps every storage made during the trace alive (a differentiable trace's first call reads
  // them again in its backward).
  void keep_storages() { keep_ = true; }
  // The whole trace runs as a branch not taken: memory made before it is not written.
  void without_effects() {
    dry_ = 1;
    dry_serial_ = first_serial_;
  }

 private:
  template <class Inputs, class Run>
  void run_and_record(Node& n, const Inputs& inputs, std::initializer_list<const Tensor*> outputs, Run&& run) {
    std::vector<Tensor> operands;
    operands.reserve(inputs.size() + outputs.size());
    for (const Tensor* t : inputs) operands.push_back(*t);
    {
      backend::RecordedCall inside;
      for (const Tensor* t : outputs) {
        // A branch not taken while tracing runs on copies of the memory it would write that
        // existed before it (a variable, the cond's result): recorded, but without effects.
        const bool redirect = dry_ > 0 && t->defined() && t->impl()->storage->serial() < dry_serial_;
        operands.push_back(redirect ? backend::clone(*t) : *t);
      }
      run(operands.data());
    }
    n.num_inputs = inputs.size();
    for (const Tensor* t : inputs) n.operands.push_back(t->defined() ? read(*t) : -1);
    for (const Tensor* t : outputs) n.operands.push_back(t->defined() ? write(*t) : -1);
  }

  int read(const Tensor& t) {
    const int v = make_view(t);
    Slot& s = plan_.slots[static_cast<std::size_t>(plan_.views[static_cast<std::size_t>(v)].slot)];
    // Memory made during the trace that no recorded call wrote holds values computed on the
    // host (constant(), a factory): the graph keeps it as a constant.
    if (s.kind == SlotKind::intermediate && !s.written) {
      s.kind = SlotKind::constant;
      s.held = s.seen.lock();
    }
    return v;
  }

  int write(const Tensor& t) {
    const int v = make_view(t);
    const int id = plan_.views[static_cast<std::size_t>(v)].slot;
    Slot& s = plan_.slots[static_cast<std::size_t>(id)];
    if (s.kind == SlotKind::constant) restore_constant(id);
    s.written = true;
    return v;
  }

  // A host-made constant later written in place (zeros() accumulated into): its values are
  // copied in at the start of every replay from a snapshot, and the slot becomes a buffer.
  void restore_constant(int id) {
    Slot& s = plan_.slots[static_cast<std::size_t>(id)];
    const std::shared_ptr<Storage> now = s.held;
    auto snapshot = std::make_shared<Storage>(s.nbytes, s.device);
    {
      backend::RecordedCall inside;
      Tensor from = raw_tensor(now), to = raw_tensor(snapshot);
      backend::copy(from, to, "keel::function");
    }
    Slot copy;
    copy.kind = SlotKind::constant;
    copy.nbytes = s.nbytes;
    copy.device = s.device;
    copy.held = snapshot;
    plan_.slots.push_back(std::move(copy));
    const int src_slot = static_cast<int>(plan_.slots.size()) - 1;
    Slot& slot = plan_.slots[static_cast<std::size_t>(id)];
    slot.kind = SlotKind::intermediate;
    slot.held.reset();
    View whole_src{src_slot, Shape({static_cast<std::int64_t>(slot.nbytes)}), {1}, 0, DType::uint8};
    View whole_dst{id, Shape({static_cast<std::int64_t>(slot.nbytes)}), {1}, 0, DType::uint8};
    plan_.views.push_back(std::move(whole_src));
    plan_.views.push_back(std::move(whole_dst));
    Node n;
    n.type = {"copy", 0};
    n.num_inputs = 1;
    n.operands = {static_cast<int>(plan_.views.size()) - 2, static_cast<int>(plan_.views.size()) - 1};
    n.kernel = [](const Tensor* t) { backend::copy(t[0], t[1], "keel::function"); };
    plan_.nodes.insert(plan_.nodes.begin(), std::move(n));
  }

  static Tensor raw_tensor(const std::shared_ptr<Storage>& s) {
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = Shape({static_cast<std::int64_t>(s->nbytes())});
    impl->strides = {1};
    impl->dtype = DType::uint8;
    impl->storage = s;
    return Tensor(std::move(impl));
  }

  int make_view(const Tensor& t) {
    const TensorImpl* impl = t.impl();
    View v;
    v.slot = slot_of(impl->storage);
    v.shape = impl->shape;
    v.strides = impl->strides;
    v.offset = impl->offset;
    v.dtype = impl->dtype;
    plan_.views.push_back(std::move(v));
    return static_cast<int>(plan_.views.size()) - 1;
  }

  int slot_of(const std::shared_ptr<Storage>& storage) {
    auto it = by_storage_.find(storage.get());
    if (it != by_storage_.end()) {
      const Slot& s = plan_.slots[static_cast<std::size_t>(it->second)];
      // The same address may be a new Storage after the old one died.
      if (s.held == storage || s.seen.lock() == storage) return it->second;
    }
    return new_slot(storage, storage->serial() < first_serial_ ? SlotKind::captured : SlotKind::intermediate);
  }

  void push(Node n) {
    n.backward = backward_;
    n.range = range_;
    plan_.nodes.push_back(std::move(n));
  }

  int new_slot(const std::shared_ptr<Storage>& storage, SlotKind kind) {
    if (keep_ && kind == SlotKind::intermediate) kept_.push_back(storage);
    Slot s;
    s.kind = kind;
    s.nbytes = storage->nbytes();
    s.device = storage->device();
    s.seen = storage;
    if (kind == SlotKind::captured) s.held = storage;
    plan_.slots.push_back(std::move(s));
    const int id = static_cast<int>(plan_.slots.size()) - 1;
    by_storage_[storage.get()] = id;
    return id;
  }

  // Records fn()'s calls into a node list of their own (a branch, a loop body), dry or not.
  template <class Fn>
  auto record_nested(std::vector<Node>& into, bool dry, Fn&& fn) {
    std::vector<Node> saved;
    saved.swap(plan_.nodes);
    const std::uint64_t saved_serial = dry_serial_;
    if (dry) {
      if (dry_++ == 0) dry_serial_ = next_storage_serial();
    }
    struct Restore {
      TraceRecorder& r;
      std::vector<Node>& into;
      std::vector<Node>& saved;
      bool dry;
      std::uint64_t serial;
      ~Restore() {
        into.swap(r.plan_.nodes);
        r.plan_.nodes.swap(saved);
        if (dry) --r.dry_;
        r.dry_serial_ = serial;
      }
    } restore{*this, into, saved, dry, saved_serial};
    return fn();
  }
  // Runs recorded nodes now, on the memory their slots have in this trace, as a replay would
  // (a loop traced under a tape runs its iterations so: while_gradient.cpp).
  void run_now(std::vector<Node>& nodes);
  void run_loop_now(Node& loop);

  int output_view(const Tensor& t) { return write(t); }
  int input_view(const Tensor& t) { return read(t); }

  Plan& plan_;
  std::uint64_t first_serial_;
  int dry_ = 0;                  // > 0 inside a branch not taken while tracing
  bool backward_ = false;
  bool keep_ = false;
  int range_ = -1;                             // the innermost range open now
  backend::RangeListener* outer_ranges_ = nullptr;
  std::vector<std::shared_ptr<Storage>> kept_;
  std::uint64_t dry_serial_ = 0; // memory older than this is not written there
  std::unordered_map<const Storage*, int> by_storage_;
};


// The trace recorder of this thread's outermost backend call, or null.
inline TraceRecorder* active_trace() { return dynamic_cast<TraceRecorder*>(backend::recorder()); }

}  // namespace keel::graph::detail
