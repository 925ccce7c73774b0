#pragma once
// Common-subexpression elimination over a traced plan (cse.cpp).
#include "graph/plan.hpp"

namespace keel::graph::detail {

// A kernel call that repeats an earlier one (same pure kernel and kind, the same views of
// memory no call wrote in between) is dropped, and what read its result reads the earlier one's.
// Returns the number of calls dropped.
std::size_t eliminate_common_subexpressions(Plan& plan);

}  // namespace keel::graph::detail
