#pragma once
// Shared fixtures of the linear algebra tests (test_linalg_*.cpp): float64 constants, test
// matrices and element-wise comparisons with a tolerance.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace linalg_test {

using keel::DType;
using keel::Shape;
using keel::Tensor;
using D = std::vector<double>;

inline Tensor f64(const D& v, Shape s) { return keel::constant(v, std::move(s), DType::float64); }
inline Tensor f32(const D& v, Shape s) { return keel::constant(v, std::move(s), DType::float32); }

// Pseudo-random values in [-1, 1) (a fixed generator seeded by `salt`) plus `diagonal_shift` on
// the diagonal of the last two axes: full-rank matrices with distinct singular values (a smooth
// pattern such as sin(i) would give rank-2 matrices), well conditioned for a shift of about n.
inline Tensor sample(Shape s, double salt = 0.2, double diagonal_shift = 0) {
  std::vector<double> v(static_cast<std::size_t>(s.num_elements()));
  std::mt19937_64 gen(static_cast<std::uint64_t>(salt * 1000.0) + 17);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const std::int64_t r = s.rank() >= 2 ? s[s.rank() - 2] : 1, c = s[s.rank() - 1];
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = dist(gen);
    const std::int64_t within = static_cast<std::int64_t>(i) % (r * c);
    if (s.rank() >= 2 && within / c == within % c) v[i] += diagonal_shift;
  }
  return f64(v, s);
}

// Every element of `got` within tol of `want` (same count), reporting the first miss.
inline void check_close(const Tensor& got, const D& want, double tol = 1e-10) {
  const D g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    CHECK(std::abs(g[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}

inline void check_close(const Tensor& got, const Tensor& want, double tol = 1e-10) {
  CHECK(got.shape() == want.shape());
  check_close(got, want.to_vector<double>(), tol);
}

}  // namespace linalg_test
