#pragma once
// What the convolution-family layer tests share: a plain-loop 3-D convolution reference
// (TensorFlow's padding rule), closeness checks, and the config round trip every layer passes.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace keel_test {

inline std::vector<double> values(const keel::Tensor& t) {
  return keel::cast(t, keel::DType::float64).contiguous().to_vector<double>();
}

inline double max_abs_diff(const keel::Tensor& a, const keel::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = values(a), y = values(b);
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// TF's padding for one axis: output size and the padding before the first element.
inline std::pair<std::int64_t, std::int64_t> tf_axis(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                                                     bool same) {
  const std::int64_t ke = (k - 1) * d + 1;
  if (!same) return {in >= ke ? (in - ke) / s + 1 : 0, 0};
  const std::int64_t out = (in + s - 1) / s;
  return {out, std::max<std::int64_t>((out - 1) * s + ke - in, 0) / 2};
}

// y[n, z, r, c, o] = sum x[n, z*s - p + i*d, ...] * k[i, j, l, ci, o] over taps inside x.
inline keel::Tensor conv3d_reference(const keel::Tensor& x, const keel::Tensor& k, std::array<int, 3> s, bool same,
                                     std::array<int, 3> d = {1, 1, 1}) {
  const auto xs = x.shape().dims(), ks = k.shape().dims();
  const auto xv = values(x), kv = values(k);
  std::array<std::pair<std::int64_t, std::int64_t>, 3> ax;
  for (int a = 0; a < 3; ++a) ax[a] = tf_axis(xs[a + 1], ks[a], s[a], d[a], same);
  const std::int64_t N = xs[0], C = xs[4], O = ks[4];
  std::vector<double> out;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t z = 0; z < ax[0].first; ++z)
      for (std::int64_t r = 0; r < ax[1].first; ++r)
        for (std::int64_t q = 0; q < ax[2].first; ++q)
          for (std::int64_t o = 0; o < O; ++o) {
            double acc = 0;
            for (std::int64_t i = 0; i < ks[0]; ++i)
              for (std::int64_t j = 0; j < ks[1]; ++j)
                for (std::int64_t l = 0; l < ks[2]; ++l) {
                  const std::int64_t zz = z * s[0] - ax[0].second + i * d[0];
                  const std::int64_t rr = r * s[1] - ax[1].second + j * d[1];
                  const std::int64_t cc = q * s[2] - ax[2].second + l * d[2];
                  if (zz < 0 || zz >= xs[1] || rr < 0 || rr >= xs[2] || cc < 0 || cc >= xs[3]) continue;
                  for (std::int64_t ci = 0; ci < C; ++ci)
                    acc += xv[static_cast<std::size_t>((((n * xs[1] + zz) * xs[2] + rr) * xs[3] + cc) * C + ci)] *
                           kv[static_cast<std::size_t>((((i * ks[1] + j) * ks[2] + l) * ks[3] + ci) * O + o)];
                }
            out.push_back(acc);
          }
  return keel::constant(out, keel::Shape{N, ax[0].first, ax[1].first, ax[2].first, O}, keel::DType::float64);
}

// get_config -> layers::from_config -> the same config, and (with the weights copied) the same
// output for x.
inline void check_round_trip(keel::layers::Layer& layer, const keel::Tensor& x) {
  const keel::Tensor y = layer(x);
  const auto copy = keel::layers::from_config(layer.class_name(), layer.get_config());
  (*copy)(x);
  auto a = layer.weights(), b = copy->weights();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->assign(a[i]->value());
  CHECK(copy->get_config() == layer.get_config());
  CHECK(max_abs_diff((*copy)(x), y) < 1e-6);
}

}  // namespace keel_test
