// Comparisons, logical ops and where on the CPU over long runs (split between threads), scalar
// and row broadcasts and strided operands, against expectations computed element by element.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "threads_guard.hpp"

using namespace keel;

TEST_CASE("comparisons, logical ops and where over long, broadcast and strided operands",
          "[elementwise][compare][where]") {
  // 300 x 257 elements: long enough to be split between threads along one run, with a NaN (every
  // comparison false but !=), repeated values (==), a scalar and a row broadcast, and a transposed
  // operand (the element-by-element path). Expectations from the values, element by element.
  keel_test::ThreadsGuard guard;
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    random::set_seed(3);
    const std::int64_t r = 300, c = 257;
    std::vector<float> xv = random::uniform_int(Shape{r, c}, -3, 4, DType::int32).astype(DType::float32).to_vector<float>();
    xv[5] = std::nanf("");
    const Tensor x = constant(xv, Shape{r, c});
    const Tensor y = cast(random::uniform_int(Shape{r, c}, -3, 4, DType::int32), DType::float32);
    const std::vector<float> yv = y.to_vector<float>();
    const Tensor row = cast(random::uniform_int(Shape{c}, -3, 4, DType::int32), DType::float32);
    const std::vector<float> rv = row.to_vector<float>();
    const auto check_cmp = [&](const Tensor& got, auto expect) {
      const std::vector<bool> g = got.to_vector<bool>();
      std::size_t wrong = 0;
      for (std::int64_t i = 0; i < r * c; ++i) wrong += g[static_cast<std::size_t>(i)] != expect(i);
      CHECK(wrong == 0);
    };
    const auto at = [](const std::vector<float>& v, std::int64_t i) { return v[static_cast<std::size_t>(i)]; };
    check_cmp(less(x, y), [&](std::int64_t i) { return at(xv, i) < at(yv, i); });
    check_cmp(not_equal(x, y), [&](std::int64_t i) { return at(xv, i) != at(yv, i); });
    check_cmp(equal(x, y), [&](std::int64_t i) { return at(xv, i) == at(yv, i); });
    check_cmp(greater_equal(x, constant(1.0f)), [&](std::int64_t i) { return at(xv, i) >= 1.0f; });
    check_cmp(less_equal(constant(1.0f), x), [&](std::int64_t i) { return 1.0f <= at(xv, i); });
    check_cmp(greater(x, row), [&](std::int64_t i) { return at(xv, i) > at(rv, i % c); });
    const Tensor xt = transpose(reshape(x, {c, r}));  // [r, c] view, strided
    const std::vector<float> xtv = xt.contiguous().to_vector<float>();
    check_cmp(greater(xt, y), [&](std::int64_t i) { return at(xtv, i) > at(yv, i); });
    const Tensor m = greater(x, y), k = less(y, constant(0.0f));
    const std::vector<bool> mv = m.to_vector<bool>(), kv = k.to_vector<bool>();
    const auto bit = [](const std::vector<bool>& v, std::int64_t i) { return static_cast<bool>(v[static_cast<std::size_t>(i)]); };
    check_cmp(logical_and(m, k), [&](std::int64_t i) { return bit(mv, i) && bit(kv, i); });
    check_cmp(logical_or(m, k), [&](std::int64_t i) { return bit(mv, i) || bit(kv, i); });
    check_cmp(logical_xor(m, k), [&](std::int64_t i) { return bit(mv, i) != bit(kv, i); });
    const auto check_where = [&](const Tensor& got, auto expect) {
      const std::vector<float> g = got.to_vector<float>();
      std::size_t wrong = 0;
      for (std::int64_t i = 0; i < r * c; ++i) {
        const float w = expect(i), v = g[static_cast<std::size_t>(i)];
        wrong += !(v == w || (std::isnan(v) && std::isnan(w)));
      }
      CHECK(wrong == 0);
    };
    check_where(where(m, x, y), [&](std::int64_t i) { return bit(mv, i) ? at(xv, i) : at(yv, i); });
    check_where(where(m, x, constant(-7.0f)), [&](std::int64_t i) { return bit(mv, i) ? at(xv, i) : -7.0f; });
    check_where(where(m, constant(9.0f), y), [&](std::int64_t i) { return bit(mv, i) ? 9.0f : at(yv, i); });
    check_where(where(m, row, xt), [&](std::int64_t i) { return bit(mv, i) ? at(rv, i % c) : at(xtv, i); });
    // Other element widths: where moves bits (int64, float64, uint8).
    const Tensor xi = cast(y, DType::int64), yi = cast(x, DType::float64);
    const std::vector<double> picked = cast(where(m, xi, cast(yi, DType::int64)), DType::float64).to_vector<double>();
    const std::vector<double> wide = where(m, cast(y, DType::float64), yi).to_vector<double>();
    std::size_t wrong = 0;
    for (std::int64_t i = 0; i < r * c; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      if (!std::isnan(xv[u])) wrong += picked[u] != (mv[u] ? yv[u] : xv[u]);
      wrong += !(wide[u] == (mv[u] ? yv[u] : xv[u]) || (std::isnan(wide[u]) && std::isnan(xv[u]) && !mv[u]));
    }
    CHECK(wrong == 0);
  }
}
