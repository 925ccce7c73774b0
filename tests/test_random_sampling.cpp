// random::categorical and random::shuffle: reproducibility under a seed, the distribution of
// categorical draws against softmax(logits) (a chi-square bound), impossible classes, shuffle as
// a permutation of whole rows, and argument errors.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace keel;

TEST_CASE("categorical draws follow softmax(logits)", "[random][categorical]") {
  random::set_seed(7);
  // logits log([0.1, 0.2, 0.7]) -> probabilities 0.1, 0.2, 0.7.
  const Tensor logits = log(constant<float>({0.1f, 0.2f, 0.7f}, {1, 3}));
  const int n = 20000;
  const Tensor s = random::categorical(logits, n);
  REQUIRE(s.shape() == Shape({1, n}));
  REQUIRE(s.dtype() == DType::int64);
  std::vector<double> count(3, 0.0);
  for (std::int64_t v : s.to_vector<std::int64_t>()) {
    REQUIRE(v >= 0);
    REQUIRE(v < 3);
    count[static_cast<std::size_t>(v)] += 1;
  }
  // Pearson's chi-square with 2 degrees of freedom: P(chi2 > 13.8) = 0.001.
  const double p[] = {0.1, 0.2, 0.7};
  double chi2 = 0;
  for (int c = 0; c < 3; ++c) chi2 += std::pow(count[c] - n * p[c], 2) / (n * p[c]);
  CHECK(chi2 < 13.8);
}

TEST_CASE("categorical is reproducible, batched, and never draws a -inf logit", "[random][categorical]") {
  const float ninf = -std::numeric_limits<float>::infinity();
  const Tensor logits = constant<float>({0.f, ninf, 0.f, ninf, 5.f, ninf}, {2, 3});
  random::set_seed(3);
  const Tensor a = random::categorical(logits, 50, DType::int32);
  random::set_seed(3);
  const Tensor b = random::categorical(logits, 50, DType::int32);
  CHECK(a.dtype() == DType::int32);
  CHECK(a.to_vector<std::int32_t>() == b.to_vector<std::int32_t>());
  const auto v = a.to_vector<std::int32_t>();
  for (int i = 0; i < 50; ++i) CHECK(v[static_cast<std::size_t>(i)] != 1);  // row 0: class 1 is -inf
  for (int i = 50; i < 100; ++i) CHECK(v[static_cast<std::size_t>(i)] == 1);  // row 1: only class 1 is finite
  CHECK(random::categorical(logits, 0).shape() == Shape({2, 0}));
  CHECK_THROWS_AS(random::categorical(constant<float>({1.f, 2.f}, {2}), 3), ShapeError);
  CHECK_THROWS_AS(random::categorical(logits, -1), ValueError);
  CHECK_THROWS_AS(random::categorical(logits, 2, DType::float32), DTypeError);
}

TEST_CASE("shuffle permutes whole rows and is reproducible under a seed", "[random][shuffle]") {
  std::vector<double> v(20);
  for (int i = 0; i < 20; ++i) v[static_cast<std::size_t>(i)] = i;
  const Tensor x = constant(v, {10, 2});  // row r = [2r, 2r + 1]
  random::set_seed(11);
  const Tensor a = random::shuffle(x);
  random::set_seed(11);
  const Tensor b = random::shuffle(x);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  REQUIRE(a.shape() == x.shape());
  const auto av = a.to_vector<double>();
  std::vector<double> firsts;
  for (int r = 0; r < 10; ++r) {
    CHECK(av[2 * r + 1] == av[2 * r] + 1);  // rows move whole
    firsts.push_back(av[2 * r]);
  }
  std::sort(firsts.begin(), firsts.end());
  for (int r = 0; r < 10; ++r) CHECK(firsts[static_cast<std::size_t>(r)] == 2 * r);  // a permutation
  CHECK(av != v);  // 10! orders: the identity has probability 1 / 3628800 for this seed's check
  CHECK(random::shuffle(constant<double>({4}, {1})).to_vector<double>() == std::vector<double>{4});
}
