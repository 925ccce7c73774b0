#pragma once
// The per-channel parameters of the normalisations (gamma, beta, the moving statistics): [C] with
// C the last axis of x, x's dtype, x's device. One check for batch_norm and group_norm, the error
// naming the op.
#include <fmt/core.h>

#include <cstdint>

#include "core/tensor_util.hpp"
#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"

namespace keel::detail {

// Undefined passes unless `required` (batch_norm's statistics in inference mode).
inline void check_channel_param(const char* op, const Tensor& p, const Tensor& x, std::int64_t channels,
                                const char* what, bool required) {
  if (!p.defined()) {
    if (required) throw ValueError(fmt::format("{}: {} is required in inference mode (training = false)", op, what));
    return;
  }
  if (p.dtype() != x.dtype())
    throw DTypeError(fmt::format("{}: {} has dtype {}, x has {}", op, what, name(p.dtype()), name(x.dtype())));
  check_same_device(p, x, op);
  if (p.shape() != Shape{channels})
    throw ShapeError(fmt::format("{}: {} has shape {}, expected [{}] (the last axis of x {})", op, what,
                                 p.shape().to_string(), channels, x.shape().to_string()));
}

}  // namespace keel::detail
