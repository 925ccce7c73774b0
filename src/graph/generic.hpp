#pragma once
// Graphs that serve every size of a free dimension: a -1 in input_signature, or a dimension
// that reduce_retracing generalised (TensorFlow's None). A trace records concrete sizes, so the
// plan of the first call is generalised after the fact: f is traced again, without effects, at
// small sizes of the free dimensions, and every integer of the plan (slot bytes, view shapes,
// strides and offsets, kernels' integer arguments, random words, and one-element constants
// holding integers, such as the count reduce_mean divides by) is fitted as a multilinear
// function of those sizes (the batch times a row's length, say), then checked at two sizes
// the fit did not use. A plan that differs between the traces in anything else (another kernel,
// another host-made constant, a loop in f over a free dimension) is not generalised: the
// function then traces each size, as without the -1.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/plan.hpp"

namespace keel::graph::detail {

// A free dimension: axis `axis` of (flattened) argument `arg`.
struct FreeDim {
  std::size_t arg = 0;
  std::int64_t axis = 0;
};

// Free dimensions of one size in the first call (the batch of x, of y and of the sample
// weights) are one size of the plan, `symbol`: a later call where they differ is traced.
struct GenericPlan {
  std::vector<FreeDim> dims;
  std::vector<std::size_t> symbol;  // per dim
  std::size_t num_symbols = 0;
  std::shared_ptr<const Plan> raw;         // the first call's plan, before the passes
  // Fills (by pre-order position among the nodes) and host-made constants (slot and dtype)
  // whose values are fitted as sizes (the count reduce_mean divides by).
  std::vector<std::size_t> fill_nodes;
  std::vector<int> constant_slots;
  std::vector<DType> constant_dtypes;
  // Per integer of raw, in walk order, then per fitted fill and constant: 2^num_symbols each.
  std::vector<std::int64_t> coefficients;
  PassOptions passes;
  // Finalised plans by the sizes of the symbols, most recently used first (a few are
  // kept: each holds its planned buffers).
  std::vector<std::pair<std::vector<std::int64_t>, std::shared_ptr<Plan>>> instances;
  // What concrete_graph shows: the first call's graph with the free sizes as -1.
  std::shared_ptr<const Plan> display;
};

// The size of each symbol in these arguments; false when dimensions of one symbol differ.
bool symbol_sizes(const GenericPlan& g, const std::vector<Tensor>& args, std::vector<std::int64_t>& sizes);

// Generalises `raw`, the plan (before the passes) of a call on `args`, over `dims` by tracing
// f without effects at other sizes (C++ code in f runs again then, as in any trace; random
// streams are put back). Null, with the reason in `why`, when the plan is not generalisable.
std::shared_ptr<GenericPlan> generalise(std::shared_ptr<const Plan> raw, const std::vector<Tensor>& args,
                                        std::vector<FreeDim> dims, const TraceFn& f, const PassOptions& passes,
                                        std::string& why);

// The finalised plan for these symbol sizes (made on first use, without tracing), or null when
// the fitted sizes do not describe memory that fits its buffers there (the caller traces).
std::shared_ptr<Plan> instance(GenericPlan& g, const std::vector<std::int64_t>& sizes);

// The plan's graph data (slots, views, nodes, ranges, results), without its executor.
std::shared_ptr<Plan> copy_plan(const Plan& p);

}  // namespace keel::graph::detail
