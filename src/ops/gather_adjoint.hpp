#pragma once
// The adjoint of gather along an axis, as differentiable ops: gather's own gradient, and the
// backward of ops made of gathers (resize_bilinear) when a tape records that backward.
#include <cstdint>

#include "keel/core/tensor.hpp"

namespace keel::detail {

// g has gather's output layout with the indices flattened: [pre..., N, post...] where ids has N
// elements. Returns [pre..., dim, post...] with g's row n added into row ids[n].
Tensor gather_adjoint(const Tensor& g, const Tensor& ids, int axis, std::int64_t dim);

}  // namespace keel::detail
