#pragma once
// check_gradients: compares keel's analytic gradients (GradientTape) with central finite
// differences, in float64, element by element.
//
// The scalar that is differentiated is L(inputs) = reduce_sum(f(inputs) * W), where W is a fixed
// pseudo-random weight tensor of f's output shape (values in [0.5, 1.5], never zero). Weighting
// every output element differently makes every element of the upstream gradient matter: a
// backward rule that, say, sums over the wrong axis or transposes the wrong way gives a wrong
// answer even when the plain sum would hide it.
//
//   analytic:  dL/dx_j                            from tape.gradient(L, inputs)
//   numeric:   (L(x_j + eps) - L(x_j - eps)) / 2eps   with the perturbed input rebuilt by
//              keel::constant from to_vector<double>() (so views work as inputs too)
//
// A mismatch counts as |analytic - numeric| / max(1, |numeric|) (absolute below 1, relative above).
// The worst one of each input is reported with INFO and must be <= tol.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace keel_test {

// Fixed weights for an output of `n` elements: the same n always gives the same weights.
inline std::vector<double> gradcheck_weights(std::size_t n) {
  std::mt19937_64 gen(0x6b65656cULL);  // "keel"
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  std::vector<double> w(n);
  for (auto& v : w) v = dist(gen);
  return w;
}

// sum_i y_i * w_i computed in double, outside keel (the finite-difference side).
inline double gradcheck_weighted_sum(const keel::Tensor& y, const std::vector<double>& w) {
  const std::vector<double> values = y.to_vector<double>();
  double s = 0;
  for (std::size_t i = 0; i < values.size(); ++i) s += values[i] * w[i];
  return s;
}

inline void check_gradients(std::function<keel::Tensor(const std::vector<keel::Tensor>&)> f,
                            std::vector<keel::Tensor> inputs, double eps = 1e-6,
                            double tol = 1e-6) {
  using keel::DType;
  using keel::Tensor;
  REQUIRE(!inputs.empty());
  for (const auto& x : inputs) {
    REQUIRE(x.defined());
    REQUIRE(x.dtype() == DType::float64);  // finite differences need float64
  }

  // ---- analytic gradients --------------------------------------------------------------
  std::vector<Tensor> analytic;
  keel::Shape out_shape;
  std::vector<double> weights;
  {
    keel::GradientTape tape;
    for (const auto& x : inputs) tape.watch(x);
    const Tensor y = f(inputs);
    REQUIRE(y.defined());
    REQUIRE(y.dtype() == DType::float64);
    out_shape = y.shape();
    weights = gradcheck_weights(static_cast<std::size_t>(y.size()));
    const Tensor w = keel::constant(weights, y.shape(), DType::float64);
    const Tensor loss = keel::reduce_sum(y * w);
    analytic = tape.gradient(loss, inputs);
  }  // the tape is gone: the finite differences below record nothing
  REQUIRE(analytic.size() == inputs.size());

  // ---- central finite differences, element by element -----------------------------------
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const std::vector<double> base = x.to_vector<double>();
    const bool defined = analytic[i].defined();
    std::vector<double> a(base.size(), 0.0);  // an undefined gradient is reported below
    if (defined) {
      CHECK(analytic[i].shape() == x.shape());
      CHECK(analytic[i].dtype() == DType::float64);
      if (analytic[i].shape() == x.shape()) a = analytic[i].to_vector<double>();
    }

    double worst = 0, worst_a = 0, worst_n = 0;
    std::size_t worst_j = 0;
    for (std::size_t j = 0; j < base.size(); ++j) {
      auto eval = [&](double delta) {
        std::vector<Tensor> perturbed = inputs;
        std::vector<double> values = base;
        values[j] += delta;
        perturbed[i] = keel::constant(values, x.shape(), DType::float64);
        const Tensor y = f(perturbed);
        REQUIRE(y.shape() == out_shape);
        return gradcheck_weighted_sum(y, weights);
      };
      const double numeric = (eval(eps) - eval(-eps)) / (2 * eps);
      const double err = std::abs(a[j] - numeric) / std::max(1.0, std::abs(numeric));
      if (!(err <= worst)) {  // also true for NaN, which then counts as infinitely bad
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
        worst_a = a[j];
        worst_n = numeric;
        worst_j = j;
      }
    }
    std::ostringstream report;
    report << std::setprecision(12) << "input " << i << " (shape " << x.shape().to_string()
           << "): worst mismatch " << worst << " at element " << worst_j << ": analytic "
           << worst_a << ", numeric " << worst_n
           << (defined ? "" : " (analytic gradient undefined, taken as 0)");
    INFO(report.str());
    CHECK(defined);
    CHECK(worst <= tol);
  }
}

}  // namespace keel_test

using keel_test::check_gradients;
