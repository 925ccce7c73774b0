// The thread's recorder, and host steps outside a trace.
#include "backend/recorder.hpp"

#include <vector>

namespace keel::backend {

namespace record_detail {
thread_local KernelRecorder* active = nullptr;
thread_local int depth = 0;
thread_local RangeListener* ranges = nullptr;
}  // namespace record_detail

void host_step(const char* name, const std::vector<const Tensor*>& inputs, const HostReplay& step) {
  if (KernelRecorder* r = recorder()) return r->host(name, inputs, step);
  std::vector<Tensor> operands;
  operands.reserve(inputs.size());
  for (const Tensor* t : inputs) operands.push_back(*t);
  step(operands.data());
}

}  // namespace keel::backend
