#pragma once
// The small regression the distributed tests train on, alike in every worker (test_distributed,
// test_distributed_mirrored, and the NCCL and MirroredStrategy cases of test_cuda), its model, and
// how far two trainings' weights are apart.
#include <keel/keel.hpp>

#include <algorithm>
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

// The model they train: Dense(8, tanh), then Dense(1), on the 4 features.
inline models::Sequential regression_mlp() {
  return models::Sequential{layers::InputLayer({4}), layers::Dense(8, {.activation = "tanh"}), layers::Dense(1)};
}

// The largest |a - b| over lists of weights (on any device); infinity when they do not pair up.
inline double max_weight_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto va = cast(a[i], DType::float64).to(Device::cpu()).to_vector<double>();
    const auto vb = cast(b[i], DType::float64).to(Device::cpu()).to_vector<double>();
    if (va.size() != vb.size()) return INFINITY;
    for (std::size_t k = 0; k < va.size(); ++k) d = std::max(d, std::abs(va[k] - vb[k]));
  }
  return d;
}

}  // namespace keel::test
