// The fused float32 optimizer kernel (one pass over weight, gradient and slots, compiled per SIMD
// level) against the same optimizer on float64 weights, whose update runs the rule as keel ops:
// every rule and its variants, with gradient clamping, loss scaling and weight decay, at every SIMD
// level this processor runs (AVX-512, AVX2+FMA, SSE2). 77 elements: full batches of 4, 8 and 16
// floats and a tail; 70,000 elements: the kernel splits the weight over threads.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "simd_levels.hpp"

using namespace keel;
using namespace keel::optimizers;

namespace {

using Make = std::function<std::shared_ptr<Optimizer>()>;

struct Case {
  std::string name;
  Make make;
};

std::vector<Case> cases() {
  return {
      {"SGD", [] { return std::make_shared<SGD>(0.1); }},
      {"SGD momentum", [] { return std::make_shared<SGD>(0.1, SGDOptions{.momentum = 0.9}); }},
      {"SGD nesterov", [] { return std::make_shared<SGD>(0.1, SGDOptions{.momentum = 0.9, .nesterov = true}); }},
      {"Adam", [] { return std::make_shared<Adam>(0.01); }},
      {"Adam clipvalue + weight_decay",
       [] { return std::make_shared<Adam>(0.01, AdamOptions{.weight_decay = 0.1, .clipvalue = 0.3}); }},
      {"Adam loss_scale_factor", [] { return std::make_shared<Adam>(0.01, AdamOptions{.loss_scale_factor = 4.0}); }},
      {"RMSprop", [] { return std::make_shared<RMSprop>(0.01); }},
      {"RMSprop centered momentum",
       [] { return std::make_shared<RMSprop>(0.01, RMSpropOptions{.momentum = 0.5, .centered = true}); }},
      {"Adagrad", [] { return std::make_shared<Adagrad>(0.1); }},
      {"Nadam", [] { return std::make_shared<Nadam>(0.01); }},
  };
}

// Deterministic values of both signs and several magnitudes.
std::vector<double> series(std::int64_t n, double phase) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.37 * i + phase) * (1.0 + (i % 5));
  return v;
}

// Three steps with changing gradients on a float32 and a float64 copy of the same weight; the
// float32 result must match to float32 accuracy (relative 1e-5 of the weight's scale).
void check_against_float64(const Case& c, std::int64_t n) {
  auto opt32 = c.make(), opt64 = c.make();
  const std::vector<double> w0 = series(n, 0.1);
  Variable w32(constant(w0, Shape{n}).astype(DType::float32), "w");
  Variable w64(constant(w0, Shape{n}, DType::float64), "w");
  for (int step = 0; step < 3; ++step) {
    const std::vector<double> g = series(n, 1.3 * step + 0.5);
    opt32->apply_gradients({{constant(g, Shape{n}).astype(DType::float32), &w32}});
    opt64->apply_gradients({{constant(g, Shape{n}, DType::float64), &w64}});
  }
  const std::vector<double> got = w32.value().to_vector<double>(), want = w64.value().to_vector<double>();
  std::int64_t bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-5 * (1.0 + std::abs(want[i])))) {
      if (bad++ == 0) first = i;
    }
  INFO(c.name << ", n = " << n << ": " << bad << " elements differ; first at " << first << ": " << got[first]
              << " vs " << want[first]);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("the fused float32 optimizer kernel matches the float64 update at every SIMD level", "[optimizers][simd]") {
  keel::testing::at_every_simd_level([](const std::string&) {
    for (const Case& c : cases()) {
      check_against_float64(c, 77);
      check_against_float64(c, 70000);
    }
  });
}
