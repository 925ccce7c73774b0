#pragma once
// Puts config::num_threads() back as it was when the guard was made: for tests that compare a
// kernel on one thread and on several.
#include <keel/keel.hpp>

namespace keel_test {

struct ThreadsGuard {
  int saved = keel::config::num_threads();
  ~ThreadsGuard() { keel::config::set_num_threads(saved); }
};

}  // namespace keel_test
