#include "autograd/autocast.hpp"

#include "keel/ops/elementwise.hpp"

namespace keel::autograd {

namespace {
thread_local AutocastScope* innermost = nullptr;
}  // namespace

AutocastScope::AutocastScope(std::optional<DType> dtype) : dtype_(dtype), previous_(innermost) { innermost = this; }

AutocastScope::~AutocastScope() { innermost = previous_; }

AutocastScope* AutocastScope::current() { return innermost; }

const Tensor& AutocastScope::cast(const Tensor& value) {
  held_.push_back(keel::cast(value, *dtype_));
  return held_.back();
}

}  // namespace keel::autograd
