#pragma once
// Helpers shared by the metric sources (metrics.cpp, confusion_metrics.cpp,
// probabilistic_metrics.cpp, metric_config.cpp). Metrics compute on the host: these bring their
// inputs there and name the metric in every error.
#include <string>

#include "keel/core/error.hpp"
#include "keel/core/tensor.hpp"

namespace keel::metrics::util {

inline constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()
inline constexpr float kNegInf = -1e10f;  // Keras' NEG_INF for predictions outside the top k

// `t` on the CPU, defined or a ValueError naming the metric (`who`) and the argument (`what`).
Tensor host(const Tensor& t, const std::string& who, const char* what);
// The same, cast to `dtype` when it has another.
Tensor host_as(const Tensor& t, DType dtype, const std::string& who, const char* what);

// a / b, or 0 when b is 0 (Keras' ops.divide_no_nan).
inline double divide_no_nan(double a, double b) { return b == 0 ? 0.0 : a / b; }

std::string lower(std::string s);

// A shape for an error message: "[2, 3]", or "none" for an undefined tensor.
inline std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().to_string() : "none"; }

// Runs f(); a keel error from it is thrown again, of the same type, with `context` in front, so
// that the error of an op deep inside a metric names the metric and its inputs.
template <class F>
void with_context(const std::string& context, F&& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    throw ShapeError(context + e.what());
  } catch (const DTypeError& e) {
    throw DTypeError(context + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(context + e.what());
  } catch (const ValueError& e) {
    throw ValueError(context + e.what());
  }
}

}  // namespace keel::metrics::util
