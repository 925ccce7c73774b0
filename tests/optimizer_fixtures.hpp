#pragma once
// Helpers the optimizer tests share.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <string>
#include <vector>

namespace keel_test {

inline void check_close(const keel::Tensor& t, const std::vector<double>& expected, double eps = 1e-6) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).margin(eps).epsilon(0));
  }
}

// A float vector in `dtype`.
inline keel::Tensor vec(std::vector<double> values, keel::DType dtype) {
  const auto n = static_cast<std::int64_t>(values.size());
  return keel::constant(values, keel::Shape{n}).astype(dtype);
}

// The auto name made right after `previous`: "adam" -> "adam_1" -> "adam_2".
inline std::string next_auto_name(const std::string& previous, const std::string& base) {
  if (previous == base) return base + "_1";
  return base + "_" + std::to_string(std::stoi(previous.substr(base.size() + 1)) + 1);
}

}  // namespace keel_test
