// softmax and log_softmax: values, normalisation, stability and gradients.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <vector>

#include "gradcheck.hpp"

using namespace keel;

namespace {

// softmax of one row in double: e^(x_i - max) / sum_j e^(x_j - max)
std::vector<double> ref_softmax(const std::vector<double>& x) {
  double m = x[0];
  for (double v : x) m = std::max(m, v);
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  std::vector<double> out;
  for (double v : x) out.push_back(std::exp(v - m) / s);
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& expected, double eps) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(eps).margin(eps));
  }
}

Tensor wavy(Shape s, double salt) {
  std::vector<double> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 2.0 * std::sin(1.7 * double(i) + salt);
  return constant(v, std::move(s), DType::float64);
}

}  // namespace

TEST_CASE("softmax and log_softmax of [1, 2, 3] match e^x / sum e^x", "[nn][softmax]") {
  // e^1, e^2, e^3 = 2.71828, 7.38906, 20.08554; sum 30.19287 -> 0.0900306, 0.2447285, 0.6652410
  const std::vector<double> expected = {0.09003057317038046, 0.24472847105479767,
                                        0.6652409557748219};
  check_close(ref_softmax({1, 2, 3}), expected, 1e-15);  // the reference itself

  const Tensor x64 = constant({1.0, 2.0, 3.0}, {3}, DType::float64);
  check_close(softmax(x64).to_vector<double>(), expected, 1e-14);
  check_close(log_softmax(x64).to_vector<double>(),
              {std::log(expected[0]), std::log(expected[1]), std::log(expected[2])}, 1e-14);

  const Tensor x32 = constant({1.f, 2.f, 3.f}, {3});
  CHECK(softmax(x32).dtype() == DType::float32);
  check_close(softmax(x32).to_vector<double>(), expected, 1e-6);
  // log_softmax(x) = x - logsumexp(x) = x - 3.4076059644
  check_close(log_softmax(x32).to_vector<double>(),
              {1 - 3.4076059644443806, 2 - 3.4076059644443806, 3 - 3.4076059644443806}, 1e-6);
}

TEST_CASE("softmax rows sum to one along the chosen axis", "[nn][softmax]") {
  const Tensor x = wavy({3, 4}, 0.2);
  const Tensor s = softmax(x);  // axis -1: each of the 3 rows
  CHECK(s.shape() == Shape{3, 4});
  check_close(reduce_sum(s, {1}).to_vector<double>(), {1, 1, 1}, 1e-14);
  const auto sv = s.to_vector<double>();
  const auto xv = x.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    const std::vector<double> row(xv.begin() + 4 * r, xv.begin() + 4 * r + 4);
    check_close(std::vector<double>(sv.begin() + 4 * r, sv.begin() + 4 * r + 4), ref_softmax(row),
                1e-14);
  }
  const Tensor s0 = softmax(x, 0);  // each of the 4 columns
  check_close(reduce_sum(s0, {0}).to_vector<double>(), {1, 1, 1, 1}, 1e-14);
  check_close(softmax(x, 1).to_vector<double>(), sv, 1e-15);
  // over the middle axis of a 3-D tensor
  const Tensor y = wavy({2, 3, 4}, 0.9);
  check_close(reduce_sum(softmax(y, 1), {1}).to_vector<double>(), std::vector<double>(8, 1.0),
              1e-14);
  // log_softmax = log(softmax)
  check_close(log_softmax(y, 1).to_vector<double>(), log(softmax(y, 1)).to_vector<double>(), 1e-13);
  // a transposed view gives the same as its contiguous copy
  check_close(softmax(transpose(x)).to_vector<double>(),
              softmax(transpose(x).contiguous()).to_vector<double>(), 1e-15);
  CHECK_THROWS_AS(softmax(x, 2), ValueError);
  CHECK_THROWS_AS(log_softmax(x, -3), ValueError);
}

TEST_CASE("softmax and log_softmax are stable for logits of 1e4", "[nn][softmax][stability]") {
  // [1e4, 1e4 - 1, 1e4 - 2] is [2, 1, 0] shifted: softmax = softmax([2, 1, 0]), no inf / NaN
  const std::vector<double> expected = ref_softmax({2, 1, 0});
  const Tensor x = constant({1e4f, 1e4f - 1.f, 1e4f - 2.f}, {3});  // all exact in float32
  const auto s = softmax(x).to_vector<double>();
  for (double v : s) CHECK(std::isfinite(v));
  check_close(s, expected, 1e-6);
  const auto ls = log_softmax(x).to_vector<double>();
  for (double v : ls) CHECK(std::isfinite(v));
  // loose: x - logsumexp(x) in float32 loses ~1e-3 at 1e4; the point here is "finite"
  check_close(ls, {std::log(expected[0]), std::log(expected[1]), std::log(expected[2])}, 2e-3);
  // very negative logits: softmax of [-1e4, -1e4] is [0.5, 0.5]
  check_close(softmax(constant({-1e4f, -1e4f}, {2})).to_vector<double>(), {0.5, 0.5}, 1e-7);
  // a large gap: log_softmax([0, -1e4]) = [0, -1e4] without -inf
  const auto gap = log_softmax(constant({0.0, -1e4}, {2}, DType::float64)).to_vector<double>();
  CHECK(gap[0] == Approx(0.0).margin(1e-300));
  CHECK(gap[1] == Approx(-1e4));
}

TEST_CASE("softmax and log_softmax pass gradient checks on axis -1 and 0", "[nn][softmax][gradient]") {
  const Tensor x = wavy({3, 4}, 0.4);
  using V = std::vector<Tensor>;
  check_gradients([](const V& xs) { return softmax(xs[0]); }, {x});
  check_gradients([](const V& xs) { return softmax(xs[0], 0); }, {x});
  check_gradients([](const V& xs) { return log_softmax(xs[0]); }, {x});
  check_gradients([](const V& xs) { return log_softmax(xs[0], 0); }, {x});
  check_gradients([](const V& xs) { return softmax(xs[0], 1); }, {wavy({2, 3, 2}, 1.3)});
  check_gradients([](const V& xs) { return log_softmax(transpose(xs[0])); }, {x});
  // the gradient of sum(softmax) is zero: the outputs always sum to 1
  GradientTape tape;
  tape.watch(x);
  const Tensor total = reduce_sum(softmax(x));
  const auto g = tape.gradient(total, x).to_vector<double>();
  for (double v : g) CHECK(v == Approx(0.0).margin(1e-14));
}

TEST_CASE("softmax and log_softmax over long rows equal their composite of ops bit for bit", "[nn][softmax]") {
  // Over the last axis the CPU runs the composite's steps a row at a time (x - max, exp, / sum;
  // log_softmax: x - max - log(sum of exps)) with the same kernels: the results must be the
  // composite's, written here with the public ops, to the bit. 300 rows of 1000 (a row length
  // that leaves partial SIMD batches), float32 and float64, on one thread and on two.
  for (const int threads : {1, 2}) {
    const int saved = config::num_threads();
    config::set_num_threads(threads);
    for (DType dt : {DType::float32, DType::float64}) {
      const Tensor x = cast(wavy(Shape{300, 1000}, 0.3) * 4.0, dt);
      const Tensor s = x - reduce_max(x, {-1}, true);
      const Tensor e = exp(s);
      const Tensor want = e / reduce_sum(e, {-1}, true);
      const Tensor want_log = s - log(reduce_sum(e, {-1}, true));
      CHECK(softmax(x, -1).to_vector<double>() == want.to_vector<double>());
      CHECK(log_softmax(x, 1).to_vector<double>() == want_log.to_vector<double>());
    }
    config::set_num_threads(saved);
  }
}

TEST_CASE("softmax and log_softmax gradients over long rows equal their composite of ops bit for bit",
          "[nn][softmax][gradient]") {
  // Without an outer tape the CPU runs the gradients' composites (softmax: y * (w - sum(w * y));
  // log_softmax: w - exp(y) * sum(w), for the upstream gradient w) a row at a time with the same
  // kernels; under a recording outer tape the ops themselves run, so second derivatives exist.
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor x = cast(wavy(Shape{64, 1000}, 0.9) * 3.0, dt);
    const Tensor w = cast(wavy(Shape{64, 1000}, 2.1), dt);
    GradientTape tape(true);
    tape.watch(x);
    const Tensor y = softmax(x, -1), ly = log_softmax(x, -1);
    const Tensor dy = tape.gradient(reduce_sum(y * w), x), dly = tape.gradient(reduce_sum(ly * w), x);
    const Tensor want = y * (w - reduce_sum(w * y, {-1}, true));
    const Tensor want_log = w - exp(ly) * reduce_sum(w, {-1}, true);
    CHECK(dy.to_vector<double>() == want.to_vector<double>());
    CHECK(dly.to_vector<double>() == want_log.to_vector<double>());
  }
  // Under a recording outer tape (second order) the composite's ops run: the first gradient must
  // equal the one taken without it, and the outer tape's derivative of f(x) = sum(first^2) must
  // match central differences of f (float64, h = 1e-6) at a few elements.
  const Tensor x = wavy(Shape{3, 40}, 0.4);
  const Tensor w = wavy(Shape{3, 40}, 1.3);
  const auto first_of = [&](const Tensor& at) {
    GradientTape inner;
    inner.watch(at);
    return inner.gradient(reduce_sum(softmax(at, -1) * w), at);
  };
  GradientTape outer;
  outer.watch(x);
  const Tensor first = first_of(x);
  const Tensor second = outer.gradient(reduce_sum(first * first), x);
  GradientTape plain;
  plain.watch(x);
  const Tensor again = plain.gradient(reduce_sum(softmax(x, -1) * w), x);
  const auto a = first.to_vector<double>(), b = again.to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-12).margin(1e-15));
  const std::vector<double> xv = x.to_vector<double>(), sv = second.to_vector<double>();
  for (const std::size_t i : {std::size_t{0}, std::size_t{57}, std::size_t{119}}) {
    const auto f = [&](double d) {
      std::vector<double> moved = xv;
      moved[i] += d;
      const Tensor g = first_of(constant(moved, x.shape()));
      return reduce_sum(g * g).item<double>();
    };
    const double h = 1e-6, numeric = (f(h) - f(-h)) / (2 * h);
    CHECK(sv[i] == Approx(numeric).epsilon(1e-5).margin(1e-8));
  }
}
