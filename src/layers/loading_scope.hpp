#pragma once
// What models::load_model needs from the layer registry (src/layers/registry.cpp) beyond the
// public API.
#include <cstdint>
#include <string>

namespace keel::layers::detail {

// While a LoadingScope is alive on this thread, the initializers that layers::from_config builds
// make zeros instead of drawing their values, and count the elements they make against `budget`.
// A model being loaded gets every weight from its weights file, so drawing random numbers for
// them would only waste time and move the global random stream (a restored training run must
// draw the numbers the interrupted run would have drawn); and a config cannot ask for more weight
// values than the file holds: past the budget the initializer throws IOError naming `file`,
// before anything is allocated.
struct LoadingScope {
  LoadingScope(std::uint64_t budget, std::string file);
  ~LoadingScope();
  LoadingScope(const LoadingScope&) = delete;
  LoadingScope& operator=(const LoadingScope&) = delete;

  std::uint64_t remaining;
  std::string file;
  LoadingScope* previous;
};

}  // namespace keel::layers::detail
