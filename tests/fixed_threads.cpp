// Linked into every CPU test program: the tests of 2-thread paths keep both threads while other
// tests busy the cores (CTest runs them side by side), so keel's yielding of busy cores
// (config::set_yield_busy_cores) is off in them unless KEEL_YIELD_BUSY_CORES is set.
// test_cpu_load turns it on where it tests it.
#include <keel/core/config.hpp>

#include <cstdlib>

namespace {

const bool fixed_threads = [] {
  if (std::getenv("KEEL_YIELD_BUSY_CORES") == nullptr) keel::config::set_yield_busy_cores(false);
  return true;
}();

}  // namespace
