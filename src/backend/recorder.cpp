// The thread's recorder, and host steps outside a trace.
#include "backend/recorder.hpp"

#include <vector>

#include "cpu/thread_pool.hpp"

namespace keel::backend {

namespace record_detail {
thread_local KernelRecorder* active = nullptr;
thread_local int depth = 0;
thread_local RangeListener* ranges = nullptr;
std::atomic<ThreadProfiler*> thread_profiler{nullptr};
}  // namespace record_detail

ThreadWork::ThreadWork(const char* category, const char* name, const char* kind) {
  // Off (the data pipeline's every element): one atomic load, and no string made.
  if (!record_detail::thread_profiler_running()) return;
  const std::string range = name ? name : "";
  start(category, name ? &range : nullptr, kind);
}

ThreadWork::ThreadWork(const char* category, const std::string& name, const char* kind) { start(category, &name, kind); }

void ThreadWork::start(const char* category, const std::string* name, const char* kind) {
  ThreadProfiler* p = record_detail::thread_profiler.load(std::memory_order_acquire);
  if (!p || record_detail::active) return;
  RangeListener* listener = nullptr;
  recorder_ = p->attach(listener, kind);
  if (!recorder_) return;
  owner_ = p;
  saved_recorder_ = record_detail::active;
  saved_ranges_ = record_detail::ranges;
  record_detail::active = recorder_;
  record_detail::ranges = listener;
  if (listener && name) {
    listener->begin(category, *name);
    ranged_ = true;
  }
}

ThreadWork::~ThreadWork() {
  if (!owner_) return;
  if (ranged_ && record_detail::ranges) record_detail::ranges->end();
  record_detail::active = saved_recorder_;
  record_detail::ranges = saved_ranges_;
  owner_->detach(recorder_);
}

namespace {

// The recorder a thread the profile does not follow gets for each outermost call while a
// profile runs: the call is recorded by a profiler of the thread's own, attached for the call.
class FollowingRecorder final : public KernelRecorder {
 public:
  void kernel(KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, KernelReplay replay) override {
    ThreadWork work("kernel", nullptr, "thread");
    if (KernelRecorder* r = followed(work)) return r->kernel(type, inputs, outputs, std::move(replay));
    run(inputs, outputs, [&](const Tensor* t) { replay(t); });
  }
  void random(KernelType type, std::initializer_list<const Tensor*> inputs,
              std::initializer_list<const Tensor*> outputs, std::uint64_t words, std::uint64_t key,
              std::uint64_t counter, RandomReplay replay) override {
    ThreadWork work("kernel", nullptr, "thread");
    if (KernelRecorder* r = followed(work)) return r->random(type, inputs, outputs, words, key, counter, std::move(replay));
    run(inputs, outputs, [&](const Tensor* t) { replay(t, key, counter); });
  }
  void host(const char* name, const std::vector<const Tensor*>& inputs, HostReplay step) override {
    ThreadWork work("host", nullptr, "thread");
    if (KernelRecorder* r = followed(work)) return r->host(name, inputs, std::move(step));
    std::vector<Tensor> operands;
    for (const Tensor* t : inputs) operands.push_back(*t);
    RecordedCall inside;
    step(operands.data());
  }
  void host_read(const char*) override {}

 private:
  static KernelRecorder* followed(const ThreadWork& work) { return work.following() ? record_detail::active : nullptr; }
  // The profile ended between the check and the call: the call runs as it would have.
  template <class Run>
  static void run(std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs, Run&& r) {
    std::vector<Tensor> operands;
    for (const Tensor* t : inputs) operands.push_back(*t);
    for (const Tensor* t : outputs) operands.push_back(*t);
    RecordedCall inside;
    r(operands.data());
  }
};

}  // namespace

namespace record_detail {

KernelRecorder* follow_thread_for_call() {
  // The thread pool's workers run parts of a kernel already timed on the calling thread.
  if (depth != 0 || cpu::in_parallel_region()) return nullptr;
  static thread_local FollowingRecorder following;
  return &following;
}

ThreadWork* follow_thread_for_range(const char* category, const std::string& name) {
  if (cpu::in_parallel_region()) return nullptr;
  auto* work = new ThreadWork(category, name, "thread");
  if (work->following()) return work;
  delete work;
  return nullptr;
}

void end_followed_range(ThreadWork* work) { delete work; }

}  // namespace record_detail

void host_step(const char* name, const std::vector<const Tensor*>& inputs, const HostReplay& step) {
  if (KernelRecorder* r = recorder()) return r->host(name, inputs, step);
  std::vector<Tensor> operands;
  operands.reserve(inputs.size());
  for (const Tensor* t : inputs) operands.push_back(*t);
  step(operands.data());
}

}  // namespace keel::backend
