#pragma once
// What a traced function needs from the random generators: the stream a draw comes from (so
// a replay draws afresh from the same one) and a count of words reserved while tracing that no
// recorded kernel consumed (numbers drawn on the host, which a replay could not redraw).
#include <cstdint>

#include "keel/ops/creation.hpp"

namespace keel::random {

// The SeedGenerator of this thread's innermost GeneratorScope, or null (the global generator).
SeedGenerator* current_generator();

namespace tracing {
// Words reserved under a kernel recorder, less those a recorded random kernel drew.
extern thread_local std::int64_t reserved_words;
}  // namespace tracing

}  // namespace keel::random
