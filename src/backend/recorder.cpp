// The thread's recorder, and host steps outside a trace.
#include "backend/recorder.hpp"

#include <vector>

namespace keel::backend {

namespace record_detail {
thread_local KernelRecorder* active = nullptr;
thread_local int depth = 0;
thread_local RangeListener* ranges = nullptr;
std::atomic<ThreadProfiler*> thread_profiler{nullptr};
}  // namespace record_detail

ThreadWork::ThreadWork(const char* category, const char* name) {
  ThreadProfiler* p = record_detail::thread_profiler.load(std::memory_order_acquire);
  if (!p || record_detail::active) return;
  RangeListener* listener = nullptr;
  recorder_ = p->attach(listener);
  if (!recorder_) return;
  owner_ = p;
  saved_recorder_ = record_detail::active;
  saved_ranges_ = record_detail::ranges;
  record_detail::active = recorder_;
  record_detail::ranges = listener;
  if (listener) listener->begin(category, name);
}

ThreadWork::~ThreadWork() {
  if (!owner_) return;
  if (record_detail::ranges) record_detail::ranges->end();
  record_detail::active = saved_recorder_;
  record_detail::ranges = saved_ranges_;
  owner_->detach(recorder_);
}

void host_step(const char* name, const std::vector<const Tensor*>& inputs, const HostReplay& step) {
  if (KernelRecorder* r = recorder()) return r->host(name, inputs, step);
  std::vector<Tensor> operands;
  operands.reserve(inputs.size());
  for (const Tensor* t : inputs) operands.push_back(*t);
  step(operands.data());
}

}  // namespace keel::backend
