#pragma once
// Shared by the mixed-precision tests: sets a global dtype policy for one test and puts float32
// back at the end of it, whatever happens inside.
#include <keel/keel.hpp>

#include <string>

namespace keel_test {

struct PolicyGuard {
  explicit PolicyGuard(const std::string& name) { keel::mixed_precision::set_global_policy(name); }
  ~PolicyGuard() { keel::mixed_precision::set_global_policy("float32"); }
  PolicyGuard(const PolicyGuard&) = delete;
  PolicyGuard& operator=(const PolicyGuard&) = delete;
};

}  // namespace keel_test
