#pragma once
// Checks shared by the layer tests: element-wise comparison against expected values, and the
// number of parameters in a list of variables.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cstdint>
#include <vector>

namespace keel_test {

// Every element of t against `want`, within an absolute tolerance.
inline void check_values(const keel::Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  const auto got = t.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

inline std::int64_t param_count(const std::vector<keel::Variable*>& vars) {
  std::int64_t n = 0;
  for (auto* v : vars) n += v->shape().num_elements();
  return n;
}

}  // namespace keel_test
