#pragma once
// The small regression the distributed tests train on, alike in every worker (test_distributed,
// and the NCCL cases of test_cuda).
#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace keel::test {

// x[i][j] = sin(0.37 (4 i + j)), y[i] = x[i] . (1, -2, 0.5, 3) + 0.1 cos(i), on the default device.
inline std::pair<Tensor, Tensor> regression_data(std::int64_t n) {
  std::vector<float> x, y;
  for (std::int64_t i = 0; i < n; ++i) {
    const float w[4] = {1, -2, 0.5f, 3};
    float t = 0.1f * std::cos(static_cast<float>(i));
    for (int j = 0; j < 4; ++j) {
      x.push_back(std::sin(0.37f * static_cast<float>(4 * i + j)));
      t += x.back() * w[j];
    }
    y.push_back(t);
  }
  return {constant(x, {n, 4}), constant(y, {n, 1})};
}

}  // namespace keel::test
