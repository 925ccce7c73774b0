// Reductions: values over all / single / multiple / negative axes with and without keepdims,
// argmax/argmin, errors, numerical stability, sum_to, and gradient checks.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;
using Catch::Contains;

namespace {

// x = [[1, 5, 3],
//      [4, 2, 6]]
Tensor x23(DType dt = DType::float32) { return constant({1.0, 5.0, 3.0, 4.0, 2.0, 6.0}, {2, 3}, dt); }

// [2,3,4] float64 with 24 distinct values: v_i = 0.1 * ((7 i) mod 24) - 1.1 (7 is coprime to 24,
// so (7 i) mod 24 is a permutation of 0..23): distinct maxima and minima along every axis.
Tensor distinct234() {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<std::size_t>(i)] = 0.1 * ((7 * i) % 24) - 1.1;
  return constant(v, {2, 3, 4}, DType::float64);
}

// [2,3,4] float64 in [0.5, 1.5] (products stay moderate): 0.5 + ((7 i) mod 24) / 23
Tensor around_one234() {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<std::size_t>(i)] = 0.5 + ((7 * i) % 24) / 23.0;
  return constant(v, {2, 3, 4}, DType::float64);
}

std::vector<float> fv(const Tensor& t) { return t.to_vector<float>(); }

void check_close(const Tensor& t, const std::vector<double>& expected, double eps = 1e-6) {
  const auto v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i);
    CHECK(v[i] == Approx(expected[i]).epsilon(eps).margin(eps));
  }
}

using Reduction = std::function<Tensor(const Tensor&, std::vector<int>, bool)>;

}  // namespace

TEST_CASE("reduce_sum over all, single, multiple and negative axes, with keepdims", "[reduce]") {
  const Tensor x = x23();
  // all: 1+5+3+4+2+6 = 21
  CHECK(reduce_sum(x).shape() == Shape{});
  CHECK(reduce_sum(x).item<float>() == 21.f);
  CHECK(reduce_sum(x, {0, 1}).item<float>() == 21.f);
  // axis 0: [1+4, 5+2, 3+6]; axis 1: [1+5+3, 4+2+6]
  CHECK(fv(reduce_sum(x, {0})) == std::vector<float>{5, 7, 9});
  CHECK(fv(reduce_sum(x, {1})) == std::vector<float>{9, 12});
  CHECK(fv(reduce_sum(x, {-1})) == std::vector<float>{9, 12});
  CHECK(fv(reduce_sum(x, {-2})) == std::vector<float>{5, 7, 9});
  CHECK(reduce_sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(fv(reduce_sum(x, {1}, true)) == std::vector<float>{9, 12});
  CHECK(reduce_sum(x, {}, true).shape() == Shape{1, 1});
  CHECK(reduce_sum(x, {0}, true).shape() == Shape{1, 3});
  CHECK(reduce_sum(x).dtype() == DType::float32);

  // [2,3,4] = arange(24): element (i,j,k) = 12 i + 4 j + k.
  // Over axes {0,2} for each j: sum_i sum_k (12 i + 4 j + k) = 4*12 + 8*4j + 2*6 = 60 + 32 j
  const Tensor c = reshape(arange(0, 24), {2, 3, 4});
  CHECK(fv(reduce_sum(c, {0, 2})) == std::vector<float>{60, 92, 124});
  CHECK(fv(reduce_sum(c, {2, 0})) == std::vector<float>{60, 92, 124});  // order does not matter
  CHECK(fv(reduce_sum(c, {-1, 0})) == std::vector<float>{60, 92, 124});
  CHECK(reduce_sum(c, {0, 2}, true).shape() == Shape{1, 3, 1});
  // over axis 1 for each (i,k): 3*12 i + 4*(0+1+2) + 3 k = 36 i + 12 + 3 k
  CHECK(fv(reduce_sum(c, {1})) == std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(reduce_sum(c).item<float>() == 276.f);  // 23 * 24 / 2

  // integers keep their dtype
  const Tensor i = constant({1, 2, 3, 4}, {2, 2});
  CHECK(reduce_sum(i).dtype() == DType::int32);
  CHECK(reduce_sum(i, {0}).to_vector<int>() == std::vector<int>{4, 6});
  // a reduction over an empty axis gives the identity
  CHECK(fv(reduce_sum(zeros({0, 2}), {0})) == std::vector<float>{0, 0});
}

TEST_CASE("reduce_mean, reduce_max, reduce_min and reduce_prod values", "[reduce]") {
  const Tensor x = x23();
  CHECK(reduce_mean(x).item<float>() == 3.5f);  // 21 / 6
  CHECK(fv(reduce_mean(x, {0})) == std::vector<float>{2.5f, 3.5f, 4.5f});
  CHECK(fv(reduce_mean(x, {1})) == std::vector<float>{3, 4});  // 9/3, 12/3
  CHECK(reduce_mean(x, {-1}, true).shape() == Shape{2, 1});

  CHECK(reduce_max(x).item<float>() == 6.f);
  CHECK(fv(reduce_max(x, {0})) == std::vector<float>{4, 5, 6});
  CHECK(fv(reduce_max(x, {1})) == std::vector<float>{5, 6});
  CHECK(reduce_max(x, {1}, true).shape() == Shape{2, 1});
  CHECK(reduce_min(x).item<float>() == 1.f);
  CHECK(fv(reduce_min(x, {0})) == std::vector<float>{1, 2, 3});
  CHECK(fv(reduce_min(x, {-1})) == std::vector<float>{1, 2});

  CHECK(reduce_prod(x).item<float>() == 720.f);  // 1*5*3*4*2*6
  CHECK(fv(reduce_prod(x, {0})) == std::vector<float>{4, 10, 18});
  CHECK(fv(reduce_prod(x, {1})) == std::vector<float>{15, 48});

  const Tensor neg = constant({-3.0, -1.0, -2.0}, {3}, DType::float64);
  CHECK(reduce_max(neg).item<double>() == -1.0);  // not 0: max starts from -inf
  CHECK(reduce_min(neg * -1.0).item<double>() == 1.0);

  const Tensor i = constant({3, -7, 5}, {3});
  CHECK(reduce_max(i).to_vector<int>() == std::vector<int>{5});
  CHECK(reduce_min(i).dtype() == DType::int32);
  CHECK(reduce_prod(i).item<int>() == -105);

  const Tensor b = constant({true, false, true, true}, {2, 2});
  CHECK(reduce_any(b, {1}).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(reduce_all(b, {1}).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(reduce_all(b).item<bool>() == false);
  CHECK(reduce_any(b).dtype() == DType::bool_);
}

TEST_CASE("reduce_logsumexp, reduce_variance and reduce_std values", "[reduce]") {
  const Tensor x = x23(DType::float64);
  // rows: log(e^1 + e^5 + e^3), log(e^4 + e^2 + e^6)
  check_close(reduce_logsumexp(x, {1}),
              {std::log(std::exp(1.0) + std::exp(5.0) + std::exp(3.0)),
               std::log(std::exp(4.0) + std::exp(2.0) + std::exp(6.0))},
              1e-12);
  double all = 0;
  for (double v : {1.0, 5.0, 3.0, 4.0, 2.0, 6.0}) all += std::exp(v);
  check_close(reduce_logsumexp(x), {std::log(all)}, 1e-12);
  CHECK(reduce_logsumexp(x, {0}, true).shape() == Shape{1, 3});

  // population variance (tf.math.reduce_variance): mean 3.5, squared deviations
  // 6.25 2.25 0.25 0.25 2.25 6.25 -> 17.5 / 6
  check_close(reduce_variance(x), {17.5 / 6.0}, 1e-12);
  // columns [1,4] [5,2] [3,6]: each has deviations +-1.5 -> 2.25
  check_close(reduce_variance(x, {0}), {2.25, 2.25, 2.25}, 1e-12);
  // rows [1,5,3] (mean 3: 4+4+0) and [4,2,6] (mean 4: 0+4+4): 8/3 each
  check_close(reduce_variance(x, {-1}), {8.0 / 3.0, 8.0 / 3.0}, 1e-12);
  check_close(reduce_std(x), {std::sqrt(17.5 / 6.0)}, 1e-12);
  check_close(reduce_std(x, {0}), {1.5, 1.5, 1.5}, 1e-12);
  CHECK(reduce_std(x, {1}, true).shape() == Shape{2, 1});
  check_close(reduce_variance(x23(), {1}), {8.0 / 3.0, 8.0 / 3.0}, 1e-6);  // float32 too
}

TEST_CASE("reduce_logsumexp is stable for logits of 1e4", "[reduce][stability]") {
  // log(e^1e4 + e^1e4) = 1e4 + log 2; e^1e4 overflows any float type if done naively
  const Tensor big = constant({1e4f, 1e4f}, {2});
  const float v = reduce_logsumexp(big).item<float>();
  CHECK(std::isfinite(v));
  CHECK(v == Approx(1e4 + std::log(2.0)).epsilon(1e-6));
  // and for -1e4 (naive: log(0) = -inf)
  CHECK(reduce_logsumexp(constant({-1e4, -1e4}, {2}, DType::float64)).item<double>() ==
        Approx(-1e4 + std::log(2.0)).epsilon(1e-12));
  // log(e^1e4 + e^0) = 1e4 + log(1 + e^-1e4) = 1e4
  CHECK(reduce_logsumexp(constant({1e4, 0.0}, {2}, DType::float64)).item<double>() == 1e4);
  // per row, with keepdims
  const auto rows = reduce_logsumexp(constant({1e4, 1e4, -5.0, -5.0}, {2, 2}, DType::float64),
                                     {1}, true);
  CHECK(rows.shape() == Shape{2, 1});
  check_close(rows, {1e4 + std::log(2.0), -5.0 + std::log(2.0)}, 1e-12);
}

TEST_CASE("argmax and argmin give int64 indices along an axis", "[reduce][argmax]") {
  const Tensor x = x23();  // [[1,5,3],[4,2,6]]
  const Tensor am1 = argmax(x, 1);
  CHECK(am1.dtype() == DType::int64);
  CHECK(am1.shape() == Shape{2});
  CHECK(am1.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});
  CHECK(argmax(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1});
  CHECK(argmax(x, -1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});
  CHECK(argmin(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1});
  CHECK(argmin(x, 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 0});
  CHECK(argmin(x, -2).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 0});
  // ties: the first index (like tf.argmax / numpy)
  CHECK(argmax(constant({2.f, 7.f, 7.f, 1.f}, {4}), 0).item<std::int64_t>() == 1);
  CHECK(argmin(constant({2.f, 1.f, 7.f, 1.f}, {4}), 0).item<std::int64_t>() == 1);
  // integers, and a transposed view: argmax of x^T along axis 0 is argmax of x along axis 1
  CHECK(argmax(constant({3, 9, 4}, {3}), 0).item<std::int64_t>() == 1);
  CHECK(argmax(transpose(x), 0).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("argmax and argmin over long rows give the first extreme, equal values and NaNs included",
          "[reduce][argmax]") {
  // 200 rows of 1027 values drawn from a few levels (many ties), with -0.0 beside +0.0, an
  // infinity or a NaN planted in some rows; the expectation is the definition, element by
  // element: the first NaN if there is one, else the first index of the largest (smallest) value.
  random::set_seed(11);
  const std::int64_t rows = 200, n = 1027;
  std::vector<double> v = cast(random::uniform_int(Shape{rows, n}, -4, 5, DType::int32), DType::float64)
                              .to_vector<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double* row = v.data() + r * n;
    if (r % 7 == 1) row[(r * 13) % n] = std::nan("");
    if (r % 7 == 2) row[(r * 17) % n] = std::numeric_limits<double>::infinity();
    if (r % 7 == 3) row[(r * 19) % n] = -std::numeric_limits<double>::infinity();
    if (r % 7 == 4) std::fill(row, row + n, 0.0), row[(r * 5) % n] = -0.0;  // zeros of both signs
    if (r % 7 == 5) std::fill(row, row + n, -std::numeric_limits<double>::infinity());
  }
  const auto expect = [&](const std::vector<double>& values, std::int64_t r, bool is_max) {
    const double* row = values.data() + r * n;
    std::int64_t best = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (std::isnan(row[i])) return i;
      if (is_max ? row[i] > row[best] : row[i] < row[best]) best = i;
    }
    return best;
  };
  for (DType dt : {DType::float32, DType::float64, DType::int32, DType::int64}) {
    INFO("dtype " << name(dt));
    const bool integral = dt == DType::int32 || dt == DType::int64;
    Tensor x = constant(v, Shape{rows, n});
    if (integral) x = clip_by_value(where(is_nan(x), zeros_like(x), x), -1e9, 1e9);  // no NaN or inf
    const std::vector<double> used = x.to_vector<double>();
    x = cast(x, dt);
    const std::vector<std::int64_t> am = argmax(x, -1).to_vector<std::int64_t>(),
                                    an = argmin(x, 1).to_vector<std::int64_t>();
    std::size_t wrong = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto u = static_cast<std::size_t>(r);
      wrong += am[u] != expect(used, r, true) || an[u] != expect(used, r, false);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("reductions over middle axes (a global pooling's {1, 2}) match loops over the definition",
          "[reduce][middle]") {
  // [3, 5, 7, 20]: the reduced block {1}, {2} or {1, 2} leaves 20 values after it per slice, which
  // the kernel sums row by row into each output row. Expectations by loops in double.
  const Shape shape{3, 5, 7, 20};
  const Tensor x = reshape(arange(0, 2100, 1, DType::float64), shape) * 0.37 - 11.0;
  const Tensor xs = sin(x) * 3.0;
  const std::vector<double> v = xs.to_vector<double>();
  const auto at = [&](std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
    return v[static_cast<std::size_t>(((a * 5 + b) * 7 + c) * 20 + d)];
  };
  for (const std::vector<int>& axes : {std::vector<int>{1}, std::vector<int>{2}, std::vector<int>{1, 2}}) {
    INFO("axes " << axes.size() << " from " << axes[0]);
    const bool over1 = axes[0] == 1, over2 = axes.back() == 2;
    std::vector<double> sum, mx;
    for (std::int64_t a = 0; a < 3; ++a)
      for (std::int64_t b = 0; b < (over1 ? 1 : 5); ++b)
        for (std::int64_t c = 0; c < (over2 ? 1 : 7); ++c)
          for (std::int64_t d = 0; d < 20; ++d) {
            double s = 0, m = -1e300;
            for (std::int64_t bb = 0; bb < (over1 ? 5 : 1); ++bb)
              for (std::int64_t cc = 0; cc < (over2 ? 7 : 1); ++cc) {
                const double e = at(a, over1 ? bb : b, over2 ? cc : c, d);
                s += e;
                m = std::max(m, e);
              }
            sum.push_back(s);
            mx.push_back(m);
          }
    for (DType dt : {DType::float32, DType::float64}) {
      const Tensor t = cast(xs, dt);
      const std::vector<double> got = cast(reduce_sum(t, axes), DType::float64).to_vector<double>();
      const std::vector<double> got_max = cast(reduce_max(t, axes), DType::float64).to_vector<double>();
      REQUIRE(got.size() == sum.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i] == Approx(sum[i]).margin(dt == DType::float32 ? 1e-4 : 1e-12));
        CHECK(got_max[i] == Approx(mx[i]).margin(dt == DType::float32 ? 1e-6 : 0));
      }
    }
  }
  // The global average pooling of the same values as an image [3, 5, 7, 20]: the mean of each channel.
  const std::vector<double> pooled = global_avg_pool2d(xs).to_vector<double>();
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t d = 0; d < 20; ++d) {
      double s = 0;
      for (std::int64_t b = 0; b < 5; ++b)
        for (std::int64_t c = 0; c < 7; ++c) s += at(a, b, c, d);
      CHECK(pooled[static_cast<std::size_t>(a * 20 + d)] == Approx(s / 35.0).margin(1e-12));
    }
}

TEST_CASE("reductions over a transposed view equal those over a contiguous copy", "[reduce][views]") {
  const Tensor c = reshape(arange(0, 24, 1, DType::float64), {2, 3, 4}) * 0.5 - 3.0;
  const Tensor t = transpose(c, {2, 0, 1});  // [4,2,3]
  const Tensor tc = t.contiguous();
  for (const std::vector<int>& axes :
       {std::vector<int>{}, std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{2},
        std::vector<int>{0, 2}}) {
    // the summation order may differ between strided and contiguous kernels: compare closely
    check_close(reduce_sum(t, axes), reduce_sum(tc, axes).to_vector<double>(), 1e-14);
    CHECK(reduce_max(t, axes).to_vector<double>() == reduce_max(tc, axes).to_vector<double>());
    check_close(reduce_mean(t, axes), reduce_mean(tc, axes).to_vector<double>(), 1e-14);
  }
  const Tensor s = slice(c, {0, 1, 1}, {2, 2, 2});
  check_close(reduce_sum(s, {1}), reduce_sum(s.contiguous(), {1}).to_vector<double>(), 1e-14);
}

TEST_CASE("reduction axes out of range throw ValueError naming the axis", "[reduce][errors]") {
  const Tensor x = x23();
  CHECK_THROWS_AS(reduce_sum(x, {2}), ValueError);
  CHECK_THROWS_WITH(reduce_sum(x, {5}), Contains("reduce_sum") && Contains("5"));
  CHECK_THROWS_AS(reduce_sum(x, {-3}), ValueError);
  CHECK_THROWS_WITH(reduce_sum(x, {-3}), Contains("-3"));
  CHECK_THROWS_WITH(reduce_mean(x, {0, 7}), Contains("reduce_mean") && Contains("7"));
  CHECK_THROWS_AS(reduce_max(x, {2}), ValueError);
  CHECK_THROWS_AS(reduce_min(x, {2}), ValueError);
  CHECK_THROWS_AS(reduce_prod(x, {2}), ValueError);
  CHECK_THROWS_AS(reduce_logsumexp(x, {2}), ValueError);
  CHECK_THROWS_AS(reduce_variance(x, {2}), ValueError);
  CHECK_THROWS_AS(reduce_std(x, {-4}), ValueError);
  CHECK_THROWS_AS(argmax(x, 2), ValueError);
  CHECK_THROWS_WITH(argmin(x, 9), Contains("argmin") && Contains("9"));
  CHECK_THROWS_AS(reduce_sum(constant(1.0), {0}), ValueError);  // a scalar has no axis 0
}

TEST_CASE("sum_to sums a broadcast tensor back down to a shape", "[reduce][sum_to]") {
  const Tensor x = x23();  // [[1,5,3],[4,2,6]]
  CHECK(sum_to(x, {2, 3}).to_vector<float>() == fv(x));
  CHECK(sum_to(x, {3}).shape() == Shape{3});
  CHECK(fv(sum_to(x, {3})) == std::vector<float>{5, 7, 9});  // leading axis dropped
  CHECK(sum_to(x, {1, 3}).shape() == Shape{1, 3});
  CHECK(fv(sum_to(x, {1, 3})) == std::vector<float>{5, 7, 9});
  CHECK(sum_to(x, {2, 1}).shape() == Shape{2, 1});
  CHECK(fv(sum_to(x, {2, 1})) == std::vector<float>{9, 12});
  CHECK(sum_to(x, {}).shape() == Shape{});
  CHECK(sum_to(x, {}).item<float>() == 21.f);
  CHECK(sum_to(x, {1}).item<float>() == 21.f);
  CHECK(sum_to(x, {1, 1}).shape() == Shape{1, 1});
  // [2,3,4] -> [3,1]: over axis 0 and the last axis, keeping axis 2 as size 1: 60 + 32 j
  const Tensor c = reshape(arange(0, 24), {2, 3, 4});
  CHECK(sum_to(c, {3, 1}).shape() == Shape{3, 1});
  CHECK(fv(sum_to(c, {3, 1})) == std::vector<float>{60, 92, 124});
  // sum_to inverts broadcast_to
  const Tensor b = broadcast_to(constant({1.f, 2.f}, {2, 1}), {3, 2, 4});
  CHECK(fv(sum_to(b, {2, 1})) == std::vector<float>{12, 24});  // each value repeated 3*4 times
}

// ---- gradients ------------------------------------------------------------------------------

TEST_CASE("reduce_sum and reduce_mean pass gradient checks over every kind of axes",
          "[reduce][gradient]") {
  const Tensor x = distinct234();
  for (const Reduction& r : {Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_sum(t, a, k);
                            }),
                            Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_mean(t, a, k);
                            })}) {
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {1}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {-1}, true); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {0, 2}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {0, 2}, true); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {}, true); }, {x});
    // a transposed input
    check_gradients([r](const std::vector<Tensor>& xs) { return r(transpose(xs[0]), {1}, false); },
                    {x});
  }
}

TEST_CASE("reduce_max and reduce_min pass gradient checks with unique extrema",
          "[reduce][gradient]") {
  const Tensor x = distinct234();  // distinct values: no ties anywhere
  for (const Reduction& r : {Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_max(t, a, k);
                            }),
                            Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_min(t, a, k);
                            })}) {
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {1}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {-1}, true); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {0, 2}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(transpose(xs[0]), {0}, true); },
                    {x});
  }
  // d max / dx is one-hot at the maximum: x = [1, 5, 3] -> [0, 1, 0]
  const Tensor v = constant({1.0, 5.0, 3.0}, {3}, DType::float64);
  GradientTape tape;
  tape.watch(v);
  const Tensor m = reduce_max(v);
  CHECK(tape.gradient(m, v).to_vector<double>() == std::vector<double>{0, 1, 0});
}

TEST_CASE("reduce_prod passes gradient checks, also with zero elements", "[reduce][gradient]") {
  const Tensor x = around_one234();
  auto prod = [](std::vector<int> axes, bool keep) {
    return [axes, keep](const std::vector<Tensor>& xs) { return reduce_prod(xs[0], axes, keep); };
  };
  check_gradients(prod({}, false), {x});
  check_gradients(prod({1}, false), {x});
  check_gradients(prod({-1}, true), {x});
  check_gradients(prod({0, 2}, false), {x});

  // zeros: the product is multilinear, so central differences are exact even at 0.
  // d/dx_i prod = product of the others: nonzero only for the zero element when there is one zero.
  std::vector<double> v = x.to_vector<double>();
  v[5] = 0.0;                // one zero in the whole tensor, in row (0, 1, :)
  v[12] = 0.0;               // (1, 0, 0) and
  v[13] = 0.0;               // (1, 0, 1): two zeros in that row -> all its gradients are 0
  const Tensor z = constant(v, {2, 3, 4}, DType::float64);
  check_gradients(prod({}, false), {z});
  check_gradients(prod({2}, false), {z});
  check_gradients(prod({0, 2}, true), {z});
  // by hand: prod([2, 0, 3]) -> gradient [0, 6, 0]
  const Tensor w = constant({2.0, 0.0, 3.0}, {3}, DType::float64);
  GradientTape tape;
  tape.watch(w);
  const Tensor p = reduce_prod(w);
  const auto g = tape.gradient(p, w).to_vector<double>();
  CHECK(g == std::vector<double>{0.0, 6.0, 0.0});
}

TEST_CASE("reduce_logsumexp, reduce_variance and reduce_std pass gradient checks",
          "[reduce][gradient]") {
  const Tensor x = distinct234();
  for (const Reduction& r : {Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_logsumexp(t, a, k);
                            }),
                            Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_variance(t, a, k);
                            }),
                            Reduction([](const Tensor& t, std::vector<int> a, bool k) {
                              return reduce_std(t, a, k);
                            })}) {
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {1}, false); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {-1}, true); }, {x});
    check_gradients([r](const std::vector<Tensor>& xs) { return r(xs[0], {0, 2}, false); }, {x});
  }
  // logsumexp's gradient is stable at 1e4 too: softmax([1e4, 1e4]) = [0.5, 0.5]
  const Tensor big = constant({1e4, 1e4}, {2}, DType::float64);
  GradientTape tape;
  tape.watch(big);
  const Tensor l = reduce_logsumexp(big);
  check_close(tape.gradient(l, big), {0.5, 0.5}, 1e-10);
}

TEST_CASE("sum_to passes a gradient check (its gradient is broadcast_to)", "[reduce][gradient]") {
  const Tensor x = distinct234();
  check_gradients([](const std::vector<Tensor>& xs) { return sum_to(xs[0], {3, 1}); }, {x});
  check_gradients([](const std::vector<Tensor>& xs) { return sum_to(xs[0], {4}); }, {x});
  check_gradients([](const std::vector<Tensor>& xs) { return sum_to(xs[0], {}); }, {x});
}

TEST_CASE("a reduction over the leading axes with few columns splits its rows between threads", "[reduce][threads]") {
  // A bias gradient's shape: [rows, columns] summed over the rows. With 2 threads the rows are
  // split in two and the two partial rows added; the values are those of a float64 loop over
  // the rows (sum to float32's rounding, max / min and integers exactly).
  const int saved = config::num_threads();
  const std::int64_t rows = 20000, cols = 10;
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7919) % 1000) / 250.0 - 2.0;
  std::vector<double> sum(cols, 0.0), mx(cols, -1e300), mn(cols, 1e300);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double x = v[static_cast<std::size_t>(r * cols + c)];
      sum[static_cast<std::size_t>(c)] += x;
      mx[static_cast<std::size_t>(c)] = std::max(mx[static_cast<std::size_t>(c)], x);
      mn[static_cast<std::size_t>(c)] = std::min(mn[static_cast<std::size_t>(c)], x);
    }
  for (int threads : {1, 2}) {
    config::set_num_threads(threads);
    INFO("threads " << threads);
    for (DType dt : {DType::float32, DType::float64}) {
      const Tensor x = constant(v, {rows, cols}, dt);
      const auto s = reduce_sum(x, {0}).to_vector<double>();
      const auto hi = reduce_max(x, {0}).to_vector<double>();
      const auto lo = reduce_min(x, {0}).to_vector<double>();
      for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c) {
        CHECK(s[c] == Approx(sum[c]).epsilon(dt == DType::float32 ? 1e-5 : 1e-12).margin(1e-3));
        // max / min pick an element: the input's value in that dtype.
        const auto in_dtype = [dt](double d) { return dt == DType::float32 ? double(float(d)) : d; };
        CHECK(hi[c] == in_dtype(mx[c]));
        CHECK(lo[c] == in_dtype(mn[c]));
      }
    }
    // Integers: exact.
    std::vector<std::int32_t> iv(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) iv[i] = static_cast<std::int32_t>(i % 13);
    const auto is = reduce_sum(constant(iv, {rows, cols}), {0}).to_vector<std::int64_t>();
    for (std::int64_t c = 0; c < cols; ++c) {
      std::int64_t expected = 0;
      for (std::int64_t r = 0; r < rows; ++r) expected += (r * cols + c) % 13;
      CHECK(is[static_cast<std::size_t>(c)] == expected);
    }
  }
  config::set_num_threads(saved);
}

TEST_CASE("leading-axis reductions of short rows count every row once, at every fold and split", "[reduce][threads]") {
  // Rows shorter than 2048 elements are summed a block of rows per run into a wide accumulator
  // whose rows are added at the end, then the leftover rows one at a time. Shapes below make no
  // full block, one block, blocks and a remainder, rows of 1 column and of 1000; values are small
  // integers (every float32 sum exact), so each result must equal the loop's exactly; a NaN in
  // one column poisons that column's sum, max and min and no other; products of +-1 are exact.
  const int saved = config::num_threads();
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 16}, {3, 7}, {130, 16}, {1000, 3}, {4099, 16}, {777, 1000}, {50001, 16}, {20000, 1}};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const auto& [rows, cols] : shapes)
      for (DType dt : {DType::float32, DType::float64}) {
        INFO("threads " << threads << ", [" << rows << ", " << cols << "] " << name(dt));
        std::vector<double> v(static_cast<std::size_t>(rows * cols)), signs(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) {
          v[i] = static_cast<double>(static_cast<int>((i * 7919) % 7) - 3);
          signs[i] = (i * 31) % 3 == 0 ? -1.0 : 1.0;
        }
        const std::size_t poisoned = static_cast<std::size_t>(cols / 2);  // its column
        v[static_cast<std::size_t>((rows / 2) * cols) + poisoned] = nan;
        std::vector<double> sum(static_cast<std::size_t>(cols), 0.0), mx(sum.size(), -1e300), mn(sum.size(), 1e300),
            prod(sum.size(), 1.0);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::size_t c = 0; c < sum.size(); ++c) {
            const std::size_t i = static_cast<std::size_t>(r * cols) + c;
            sum[c] += v[i];
            mx[c] = std::max(mx[c], v[i]);
            mn[c] = std::min(mn[c], v[i]);
            prod[c] *= signs[i];
          }
        const Tensor x = constant(v, {rows, cols}, dt);
        const auto s = reduce_sum(x, {0}).to_vector<double>();
        const auto hi = reduce_max(x, {0}).to_vector<double>();
        const auto lo = reduce_min(x, {0}).to_vector<double>();
        const auto p = reduce_prod(constant(signs, {rows, cols}, dt), {0}).to_vector<double>();
        for (std::size_t c = 0; c < sum.size(); ++c) {
          INFO("column " << c);
          if (c == poisoned) {
            CHECK(std::isnan(s[c]));
            CHECK(std::isnan(hi[c]));
            CHECK(std::isnan(lo[c]));
          } else {
            CHECK(s[c] == sum[c]);
            CHECK(hi[c] == mx[c]);
            CHECK(lo[c] == mn[c]);
          }
          CHECK(p[c] == prod[c]);
        }
      }
  }
  config::set_num_threads(saved);
}
