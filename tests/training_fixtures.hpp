#pragma once
// Shared by the training and callback tests: a one-weight linear model whose steps are easy to
// work out by hand, its two-sample data set, and per-process temporary file names.
#include <keel/keel.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace keel_test {

inline std::string temp_path(const std::string& name) {
  return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/keel_train_" +
         std::to_string(::getpid()) + "_" + name;
}

// y = w x + b with w = 1, b = 0 to start.
inline keel::models::Sequential linear_model() {
  return keel::models::Sequential{
      keel::layers::InputLayer({1}),
      keel::layers::Dense(1, {.kernel_initializer = "ones", .bias_initializer = "zeros"})};
}

// x = [1, 2], y = [2, 4]: with w = 1, b = 0 the errors are [-1, -2] and the mse is 2.5.
inline const keel::Tensor kX = keel::constant({1.f, 2.f}, {2, 1});
inline const keel::Tensor kY = keel::constant({2.f, 4.f}, {2, 1});

}  // namespace keel_test
