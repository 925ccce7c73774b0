#pragma once
// The hook through which keel::function sees a traced function's work: while a recorder is
// active on a thread, every outermost backend call on that thread is handed to it as a kernel
// call (its operands and a closure that runs the same kernel again on other operands), and the
// recorder runs it. A traced graph is the list of those calls; replaying it calls the closures on
// preallocated buffers, with none of the ops' checks, shape rules or tape bookkeeping.
//
// The pattern in a backend entry:
//
//   void unary(UnaryOp op, const Tensor& x, const Tensor& out, double alpha) {
//     if (KernelRecorder* r = recorder())
//       return r->kernel({"unary", int(op)}, {&x}, {&out}, [=](const Tensor* t) { unary(op, t[0], t[1], alpha); });
//     ...the kernel...
//   }
//
// The closure captures only the call's non-tensor arguments; the recorder calls it (also for
// the first, traced run), and a backend call made inside it is not recorded again.
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "keel/core/tensor.hpp"

namespace keel::backend {

// What a kernel call is, for the graph users see: its family ("unary", "conv", ...) and the
// kind within it (the enum value of UnaryOp, ConvKernel, ...; 0 where a family has one kernel).
struct KernelType {
  const char* family;
  int kind = 0;
  double alpha = 0;  // unary: the op's parameter (leaky_relu, elu), which fusion needs; fill's
                     // value; a normalisation's epsilon
  // The call's integer arguments that its operands do not show (reduction axes, a window's
  // geometry), for readers of a traced graph such as ONNX export; the recorder copies them into
  // the graph (Node::ints), so they may point at the caller's stack.
  const std::int64_t* ints = nullptr;
  std::size_t num_ints = 0;
};

// A kernel's operands in order: inputs first, then outputs (tensors the call writes, in place
// ones included). Undefined tensors stand for absent optional operands.
using KernelReplay = std::function<void(const Tensor* operands)>;
// A random kernel's replay also gets where its Philox words start (a fresh reservation per call).
using RandomReplay = std::function<void(const Tensor* operands, std::uint64_t key, std::uint64_t counter)>;
// A host step: C++ code on the host that reads its operands (checks of index values, an
// optimizer's scalar state); run again on every replay.
using HostReplay = std::function<void(const Tensor* operands)>;

class KernelRecorder {
 public:
  virtual ~KernelRecorder() = default;
  // Records and runs one kernel call.
  virtual void kernel(KernelType type, std::initializer_list<const Tensor*> inputs,
                      std::initializer_list<const Tensor*> outputs, KernelReplay replay) = 0;
  // Records and runs a kernel drawing `words` Philox words reserved from the random stream
  // current now (key and counter of this run's reservation given; a replay reserves afresh).
  virtual void random(KernelType type, std::initializer_list<const Tensor*> inputs,
                      std::initializer_list<const Tensor*> outputs, std::uint64_t words, std::uint64_t key,
                      std::uint64_t counter, RandomReplay replay) = 0;
  // Records and runs host code reading `inputs` (it writes no tensor the graph sees).
  virtual void host(const char* name, const std::vector<const Tensor*>& inputs, HostReplay step) = 0;
  // A value read on the host (item, to_vector, index lists) that later work may depend on: a
  // graph cannot replay that, so the recorder throws, naming `what`.
  virtual void host_read(const char* what) = 0;
  // True for a recorder that fuses chains of elementwise kernels itself (a graph's fusion pass):
  // ops then hand it their primitive kernels rather than a fused kernel of their own (bias_add's
  // activation), so that a whole chain fuses and a traced graph's readers (ONNX export) see the
  // primitives.
  virtual bool fuses_elementwise() const { return false; }
};

// Named ranges around kernel calls (a layer call, a fit step, a user's profiler::Trace), for a
// profiler listening on this thread.
class RangeListener {
 public:
  virtual ~RangeListener() = default;
  virtual void begin(const char* category, const std::string& name) = 0;
  virtual void end() = 0;
};

class ThreadProfiler;
namespace record_detail {
extern thread_local KernelRecorder* active;
extern thread_local int depth;  // > 0 inside a recorded call: nested backend calls run as is
extern thread_local RangeListener* ranges;
// Set by the profiler (an object that outlives every call it may get), read with one atomic load.
extern std::atomic<ThreadProfiler*> thread_profiler;
inline bool thread_profiler_running() { return thread_profiler.load(std::memory_order_relaxed) != nullptr; }
// The recorder of one outermost call on a thread the profile does not follow yet (a thread the
// user started): it follows the thread for that call (profiler.cpp does the following).
KernelRecorder* follow_thread_for_call();
}  // namespace record_detail

class ThreadWork;
namespace record_detail {
// A range on a thread the profile does not follow yet (one the user started): the thread is
// followed for the range's length (profiler.cpp). Null when no profile runs.
ThreadWork* follow_thread_for_range(const char* category, const std::string& name);
void end_followed_range(ThreadWork* work);
}  // namespace record_detail

// RAII: a range while a listener is installed; a thread-local load and, on a thread without a
// listener, one relaxed atomic load otherwise.
class ProfileRange {
 public:
  ProfileRange(const char* category, const std::string& name) : listener_(record_detail::ranges) {
    if (listener_) listener_->begin(category, name);
    else if (record_detail::thread_profiler_running()) [[unlikely]]
      work_ = record_detail::follow_thread_for_range(category, name);
  }
  ~ProfileRange() {
    // The range's own code may have stopped the profiler (TensorBoard's profile_batch ends
    // inside on_train_batch_end): only the listener still installed is told.
    if (listener_ && listener_ == record_detail::ranges) listener_->end();
    if (work_) [[unlikely]] record_detail::end_followed_range(work_);
  }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

 private:
  RangeListener* listener_;
  ThreadWork* work_ = nullptr;
};

// A profiler running on one thread that also wants the work of other threads (the data
// pipeline's workers, and threads the user started): while one is installed, such a thread asks
// it for a recorder and range listener of its own around each piece of work (see ThreadWork),
// under the name `kind` ("data worker", "thread") and a number. attach() returns null when the
// profile is ending; detach() gets back what attach() gave.
class ThreadProfiler {
 public:
  virtual ~ThreadProfiler() = default;
  virtual KernelRecorder* attach(RangeListener*& listener, const char* kind) = 0;
  virtual void detach(KernelRecorder* recorder) = 0;
};

// RAII around one piece of work on a thread the profile does not otherwise follow: a range named
// `name` in `category` (none when name is null), with the kernels inside it, while a profiler
// that wants such threads runs; one atomic load otherwise.
class ThreadWork {
 public:
  ThreadWork(const char* category, const char* name, const char* kind = "data worker");
  ThreadWork(const char* category, const std::string& name, const char* kind);
  bool following() const { return owner_ != nullptr; }
  ~ThreadWork();
  ThreadWork(const ThreadWork&) = delete;
  ThreadWork& operator=(const ThreadWork&) = delete;

 private:
  ThreadProfiler* owner_ = nullptr;
  KernelRecorder* recorder_ = nullptr;
  KernelRecorder* saved_recorder_ = nullptr;
  RangeListener* saved_ranges_ = nullptr;
  bool ranged_ = false;  // began a range of its own

  void start(const char* category, const std::string* name, const char* kind);
};

// The recorder of this thread's outermost backend call, or null (the common case: one
// thread-local load, and a relaxed atomic load while no recorder is installed).
inline KernelRecorder* recorder() {
  if (KernelRecorder* r = record_detail::active) return record_detail::depth == 0 ? r : nullptr;
  if (record_detail::thread_profiler_running()) [[unlikely]]
    return record_detail::follow_thread_for_call();
  return nullptr;
}

// Whether this thread's recorder fuses kernels itself (a graph trace): ops then hand it their
// primitive kernels rather than a fused path of their own (bias_add's activation, the max pool's
// kept choices). False eagerly and under the profiler.
inline bool recorder_fuses() {
  const KernelRecorder* r = recorder();
  return r != nullptr && r->fuses_elementwise();
}

// Runs host code reading `inputs` now and, under a recorder, on every replay: a check of index
// values, for instance, that an eager op makes on the host before its kernel.
// Undefined inputs stay undefined on every run.
void host_step(const char* name, const std::vector<const Tensor*>& inputs, const HostReplay& step);

// RAII: installs `r` as this thread's recorder (null: none), restoring the previous one.
class RecorderScope {
 public:
  explicit RecorderScope(KernelRecorder* r) : saved_(record_detail::active), saved_depth_(record_detail::depth) {
    record_detail::active = r;
    record_detail::depth = 0;
  }
  ~RecorderScope() {
    record_detail::active = saved_;
    record_detail::depth = saved_depth_;
  }
  RecorderScope(const RecorderScope&) = delete;
  RecorderScope& operator=(const RecorderScope&) = delete;

 private:
  KernelRecorder* saved_;
  int saved_depth_;
};

// RAII used by recorders while they run a recorded call: backend calls inside are not recorded.
class RecordedCall {
 public:
  RecordedCall() { ++record_detail::depth; }
  ~RecordedCall() { --record_detail::depth; }
  RecordedCall(const RecordedCall&) = delete;
  RecordedCall& operator=(const RecordedCall&) = delete;
};

}  // namespace keel::backend
