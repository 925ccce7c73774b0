// keras.mixed_precision's policies and the global policy.
#include "keel/mixed_precision/policy.hpp"

#include <mutex>

#include <fmt/core.h>

#include "keel/core/error.hpp"

namespace keel::mixed_precision {

Policy::Policy(std::string name) : name_(std::move(name)) {
  if (name_ == "float32") {
    compute_ = variable_ = DType::float32;
  } else if (name_ == "mixed_float16") {
    compute_ = DType::float16;
    variable_ = DType::float32;
  } else if (name_ == "mixed_bfloat16") {
    compute_ = DType::bfloat16;
    variable_ = DType::float32;
  } else {
    throw ValueError(fmt::format("mixed_precision.Policy: unknown policy name '{}'; valid names are \"float32\", "
                                 "\"mixed_float16\" and \"mixed_bfloat16\"", name_));
  }
}

namespace {
// Process-wide like Keras' global policy; layers read it once, when they are made.
std::mutex& policy_mutex() {
  static std::mutex m;
  return m;
}
Policy& global() {
  static Policy p;
  return p;
}
}  // namespace

void set_global_policy(const std::string& name) { set_global_policy(Policy(name)); }

void set_global_policy(const Policy& policy) {
  std::lock_guard<std::mutex> lock(policy_mutex());
  global() = policy;
}

Policy global_policy() {
  std::lock_guard<std::mutex> lock(policy_mutex());
  return global();
}

}  // namespace keel::mixed_precision
