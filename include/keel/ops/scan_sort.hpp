#pragma once
// Scans and sorting: cumsum, cumprod, top_k, sort, argsort, unique, bincount, searchsorted.
// TensorFlow's semantics (tf.math.cumsum, tf.math.top_k, tf.sort, tf.unique, ...). Floating
// values are ordered with NaN above +inf (every NaN equal to every other) and -0 equal to +0, the
// order XLA uses for sort and top_k: an ascending sort puts NaNs last, a descending one first.
#include <cstdint>
#include <string>

#include "keel/core/tensor.hpp"

namespace keel {

// Running sum / product along `axis` (negative counts from the end). exclusive: element i
// leaves out x[i] (the first result is 0, or 1 for cumprod); reverse: the scan runs from the
// end. Differentiable for floating x.
Tensor cumsum(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);
Tensor cumprod(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);

// The k largest entries of each row of the last axis, ties broken by the lower index.
// sorted = true: in descending order; false: in the order of their positions in the row.
struct TopK {
  Tensor values;   // x's shape with the last axis k; x's dtype
  Tensor indices;  // int32 positions along the last axis
};
TopK top_k(const Tensor& x, int k = 1, bool sorted = true);

// Sorted along `axis`; direction "ASCENDING" or "DESCENDING". Equal values keep their order.
Tensor sort(const Tensor& x, int axis = -1, std::string direction = "ASCENDING");
// The int32 positions that sort x along `axis` (always stable: `stable` is accepted for
// TensorFlow's signature).
Tensor argsort(const Tensor& x, int axis = -1, std::string direction = "ASCENDING", bool stable = true);

// The distinct values of a 1-D x in the order of their first occurrence, and for each element
// of x the position of its value in y (int32): x == gather(y, idx).
struct Unique {
  Tensor y;
  Tensor idx;
};
Unique unique(const Tensor& x);

// counts[v] = the number of elements of x (int32 or int64, any shape, non-negative) equal to v,
// for v < max(max(x) + 1, minlength); int32. With weights (x's shape): the sum of the weights
// of those elements instead, in the weights' dtype.
Tensor bincount(const Tensor& x, int minlength = 0);
Tensor bincount(const Tensor& x, const Tensor& weights, int minlength = 0);

// For each value, the position in its row of sorted_sequence (the innermost axis, ascending)
// where it would be inserted: side "left" before equal entries, "right" after them. The leading
// axes of both must agree; the result has values' shape, int32.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, std::string side = "left");

}  // namespace keel
