// Reductions over the last axis of many short rows ([N, C] with C < 64): the rows fold side by
// side in SIMD lanes, left to right from the op's identity. Checked at every SIMD level against a
// float64 fold of each row, bit for bit against the one-row kernel where a row is shorter than a
// batch (where that kernel also folds left to right), and for NaN.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "simd_levels.hpp"

using namespace keel;

namespace {

// Elements in one SIMD batch of dt at a level ("avx512bw", "avx2+fma", "sse2").
std::int64_t batch_width(const std::string& level, DType dt) {
  const std::int64_t bytes = level == "avx512bw" ? 64 : level == "avx2+fma" ? 32 : 16;
  return bytes / (dt == DType::float64 ? 8 : 4);
}

Tensor reduce_by(int op, const Tensor& x, std::vector<int> axes, bool keepdims) {
  switch (op) {
    case 0: return reduce_sum(x, axes, keepdims);
    case 1: return reduce_prod(x, axes, keepdims);
    case 2: return reduce_max(x, axes, keepdims);
    default: return reduce_min(x, axes, keepdims);
  }
}

double fold64(int op, const std::vector<double>& v) {
  double r = op == 0 ? 0.0 : op == 1 ? 1.0 : op == 2 ? -INFINITY : INFINITY;
  for (double e : v) r = op == 0 ? r + e : op == 1 ? r * e : op == 2 ? std::max(r, e) : std::min(r, e);
  return r;
}

}  // namespace

TEST_CASE("reductions over short last axes fold each row left to right at every SIMD level",
          "[reduce][simd]") {
  random::set_seed(41);
  const int threads = config::num_threads();
  for (int t : {1, 2}) {
    config::set_num_threads(t);
    testing::at_every_simd_level([&](const std::string& level) {
      for (DType dt : {DType::float32, DType::float64})
        for (std::int64_t cols : {1, 2, 3, 4, 7, 8, 15, 16, 17, 33, 63})
          for (std::int64_t rows : {1, 5, 16, 37, 3000}) {
            INFO(name(dt) << " [" << rows << ", " << cols << "], threads " << t);
            // Values near 1 keep the products finite.
            const Tensor x = random::uniform(Shape{rows, cols}, 0.5, 1.5, dt);
            const std::vector<double> xv = x.to_vector<double>();
            for (int op = 0; op < 4; ++op) {
              const std::vector<double> got = reduce_by(op, x, {1}, false).to_vector<double>();
              REQUIRE(got.size() == static_cast<std::size_t>(rows));
              const bool exact = cols < batch_width(level, dt);
              for (std::int64_t r = 0; r < rows; r += std::max<std::int64_t>(1, rows / 40)) {
                const std::vector<double> row(xv.begin() + r * cols, xv.begin() + (r + 1) * cols);
                const double tol = (dt == DType::float32 ? 1e-6 : 1e-14) * static_cast<double>(cols);
                CHECK(std::abs(got[static_cast<std::size_t>(r)] - fold64(op, row)) <=
                      tol * std::max(1.0, std::abs(fold64(op, row))));
                if (exact) {  // the one-row kernel folds a row shorter than a batch the same way
                  const Tensor one = reduce_by(op, slice(x, {r, 0}, {1, cols}).contiguous(), {0, 1}, false);
                  CHECK(got[static_cast<std::size_t>(r)] == one.to_vector<double>()[0]);
                }
              }
            }
          }
      // A NaN makes its row's sum, max and min NaN and leaves the other rows alone.
      std::vector<float> v(40 * 3, 1.0f);
      v[3 * 17 + 1] = std::numeric_limits<float>::quiet_NaN();
      const Tensor x = constant<float>(v, {40, 3});
      for (int op : {0, 2, 3}) {
        const std::vector<float> got = reduce_by(op, x, {1}, true).to_vector<float>();
        for (std::size_t r = 0; r < got.size(); ++r) CHECK(std::isnan(got[r]) == (r == 17));
      }
      // By hand: [[1, 5, 3], [4, 2, 6]] over its rows.
      const Tensor m = constant<float>({1, 5, 3, 4, 2, 6}, {2, 3});
      CHECK(reduce_sum(m, {1}).to_vector<float>() == std::vector<float>{9, 12});
      CHECK(reduce_max(m, {1}).to_vector<float>() == std::vector<float>{5, 6});
      CHECK(reduce_prod(m, {-1}).to_vector<float>() == std::vector<float>{15, 48});
    });
  }
  config::set_num_threads(threads);
}

TEST_CASE("argmax and argmin over short rows give the first extreme, or the first NaN", "[reduce][simd]") {
  // Short rows take their extremes from reduce_rows a block at a time, then the first index that
  // holds it; values from {0, 1, 2} make ties common, and a NaN wins from its row's first NaN on.
  random::set_seed(43);
  testing::at_every_simd_level([&](const std::string&) {
    for (DType dt : {DType::float32, DType::float64})
      for (std::int64_t cols : {1, 3, 4, 9, 40}) {
        const std::int64_t rows = 2100;  // more than one block of 1024 rows
        INFO(name(dt) << " [" << rows << ", " << cols << "]");
        std::vector<double> v = floor(random::uniform(Shape{rows, cols}, 0.0, 3.0, DType::float64)).to_vector<double>();
        for (std::int64_t r = 0; r < rows; r += 7) v[static_cast<std::size_t>(r * cols + (r / 7) % cols)] = NAN;
        const Tensor x = cast(constant<double>(v, {rows, cols}), dt);
        const std::vector<std::int64_t> hi = argmax(x, -1).to_vector<std::int64_t>();
        const std::vector<std::int64_t> lo = argmin(x, -1).to_vector<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
          std::int64_t want_hi = 0, want_lo = 0;
          for (std::int64_t j = 0; j < cols; ++j) {
            const double e = v[static_cast<std::size_t>(r * cols + j)];
            if (std::isnan(e)) { want_hi = want_lo = j; break; }
            if (e > v[static_cast<std::size_t>(r * cols + want_hi)]) want_hi = j;
            if (e < v[static_cast<std::size_t>(r * cols + want_lo)]) want_lo = j;
          }
          REQUIRE(hi[static_cast<std::size_t>(r)] == want_hi);
          REQUIRE(lo[static_cast<std::size_t>(r)] == want_lo);
        }
      }
  });
}
