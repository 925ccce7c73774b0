#pragma once
// Calls a templated lambda with the C++ type of a runtime DType:
//   dispatch_float(x.dtype(), "exp", [&]<class T>() { ... });
#include <cstdint>

#include <fmt/core.h>

#include "keel/core/dtype.hpp"
#include "keel/core/error.hpp"

namespace keel::detail {

[[noreturn]] inline void unsupported_dtype(const char* op, DType dt, const char* wanted) {
  throw DTypeError(fmt::format("{}: unsupported dtype {} (expected {})", op, name(dt), wanted));
}

template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::float32: return f.template operator()<float>();
    case DType::float64: return f.template operator()<double>();
    default: unsupported_dtype(op, dt, "float32 or float64");
  }
}

// float32, float64, int32, int64: the types arithmetic is defined on.
template <class F>
decltype(auto) dispatch_numeric(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::float32: return f.template operator()<float>();
    case DType::float64: return f.template operator()<double>();
    case DType::int32: return f.template operator()<std::int32_t>();
    case DType::int64: return f.template operator()<std::int64_t>();
    case DType::uint8: return f.template operator()<std::uint8_t>();
    default: unsupported_dtype(op, dt, "float32, float64, int32, int64 or uint8");
  }
}

// Every dtype with a native C++ type (half types are storage only).
template <class F>
decltype(auto) dispatch_all(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::float32: return f.template operator()<float>();
    case DType::float64: return f.template operator()<double>();
    case DType::int32: return f.template operator()<std::int32_t>();
    case DType::int64: return f.template operator()<std::int64_t>();
    case DType::uint8: return f.template operator()<std::uint8_t>();
    case DType::bool_: return f.template operator()<bool>();
    case DType::float16: return f.template operator()<float16_t>();
    case DType::bfloat16: return f.template operator()<bfloat16_t>();
  }
  unsupported_dtype(op, dt, "a known dtype");
}

// Index dtypes: int32, int64.
template <class F>
decltype(auto) dispatch_index(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::int32: return f.template operator()<std::int32_t>();
    case DType::int64: return f.template operator()<std::int64_t>();
    default: unsupported_dtype(op, dt, "int32 or int64");
  }
}

}  // namespace keel::detail
