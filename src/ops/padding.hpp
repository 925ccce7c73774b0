#pragma once
// The padding argument of the convolution and pooling ops.
#include <string_view>

#include "core/window.hpp"

namespace keel::detail {

// "valid"/"same" (either case, as Keras and tf.nn spell them; "causal" only where allow_causal,
// for conv1d as Keras' Conv1D); ValueError naming op and the string otherwise.
kernel::Padding parse_padding(std::string_view padding, const char* op, bool allow_causal = false);

}  // namespace keel::detail
