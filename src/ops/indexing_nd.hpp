#pragma once
// The checked scatter shared by the tensor_scatter_nd ops and Variable's in-place scatters.
#include "backend/indexing_nd.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// Checks indices ([..., M], int32/int64, M <= out's rank) and updates (indices.shape[:-1] +
// out.shape[M:], out's dtype; numeric unless mode is update) against out, then runs the
// scatter: out = base with updates combined in at the indices (base may be out itself). All on
// one device, contiguous. Errors name `op`: ShapeError, DTypeError, ValueError for a bad index
// (nothing is written then).
void scatter_into(const char* op, backend::ScatterMode mode, const Tensor& base, const Tensor& indices,
                  const Tensor& updates, const Tensor& out);

}  // namespace keel::detail
