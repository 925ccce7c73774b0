// dropout: statistics of the mask, the 1/(1-rate) scaling, seeding (explicit seeds and the global
// generator), the gradient, thread-count independence and the rate's validation.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "simd_levels.hpp"

using namespace keel;
using Catch::Contains;

namespace {

constexpr std::int64_t kN = 100000;

std::vector<bool> kept(const Tensor& y) {
  const auto v = y.to_vector<double>();
  std::vector<bool> k(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) k[i] = v[i] != 0;
  return k;
}

}  // namespace

TEST_CASE("dropout zeroes about a fraction rate of 100k elements and scales the rest by 1/(1-rate)", "[dropout]") {
  for (DType dt : {DType::float32, DType::float64}) {
    for (double rate : {0.1, 0.5, 0.8}) {
      INFO(name(dt) << ", rate " << rate);
      const Tensor y = dropout(ones({kN}, dt), rate, 1234);
      CHECK(y.shape() == Shape{kN});
      CHECK(y.dtype() == dt);
      const auto v = y.to_vector<double>();
      // The zero count is Binomial(n, rate): standard deviation sqrt(n rate (1-rate)) <= 158, so
      // a band of +-1% of n (>= 6 standard deviations) never fails by chance.
      std::int64_t zeros_seen = 0;
      const double scale = dt == DType::float32 ? static_cast<double>(static_cast<float>(1 / (1 - rate))) : 1 / (1 - rate);
      bool kept_scaled = true;
      for (double e : v) {
        if (e == 0) ++zeros_seen;
        else kept_scaled = kept_scaled && e == scale;
      }
      CHECK(std::abs(static_cast<double>(zeros_seen) / kN - rate) < 0.01);
      CHECK(kept_scaled);
      // The mean is preserved in expectation: |mean - 1| within the same band, scaled.
      CHECK(std::abs(reduce_mean(y).item<double>() - 1.0) < 0.01 / (1 - rate));
    }
  }
}

TEST_CASE("dropout keeps x * 1/(1-rate) of arbitrary values and drops non-finite ones to zero", "[dropout]") {
  random::set_seed(3);
  const Tensor x = random::normal({1000}, 0, 1, DType::float64);
  const Tensor y = dropout(x, 0.25, 99);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    INFO("element " << i);
    CHECK((yv[i] == 0 || yv[i] == xv[i] * (1 / 0.75)));
  }
  // Infinity at every position: dropped ones are 0, not NaN (0 * inf).
  const Tensor inf = full({1000}, std::numeric_limits<double>::infinity(), DType::float64);
  const auto iv = dropout(inf, 0.5, 7).to_vector<double>();
  for (double e : iv) CHECK((e == 0 || std::isinf(e)));
}

TEST_CASE("dropout's float32 select gives the same bits at every SIMD level", "[dropout]") {
  // 1001 elements (a tail after whole registers) with NaN, infinities and -0.0 among them: each
  // output is x * (1 / 0.7f) or +0.0, the gradient mask 1 / 0.7f or +0.0, at AVX-512, AVX2 and SSE2.
  random::set_seed(12);
  std::vector<float> xs = random::normal({1001}).to_vector<float>();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.0f};
  for (std::size_t i = 0; i < xs.size(); i += 7) xs[i] = specials[(i / 7) % 4];
  const Tensor x = constant(xs, {1001});
  const float scale = 1.0f / 0.7f;
  std::vector<std::uint32_t> first;
  testing::at_every_simd_level([&](const std::string&) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = dropout(x, 0.3, 21);
    const auto ys = y.to_vector<float>(), gs = tape.gradient(y, x).to_vector<float>();
    std::vector<std::uint32_t> now;
    for (std::size_t i = 0; i < ys.size(); ++i) {
      INFO("element " << i);
      const bool keep = gs[i] != 0;
      CHECK(std::bit_cast<std::uint32_t>(gs[i]) == (keep ? std::bit_cast<std::uint32_t>(scale) : 0u));
      CHECK(std::bit_cast<std::uint32_t>(ys[i]) == (keep ? std::bit_cast<std::uint32_t>(xs[i] * scale) : 0u));
      now.push_back(std::bit_cast<std::uint32_t>(ys[i]));
    }
    if (first.empty()) first = now;
    CHECK(now == first);
  });
}

TEST_CASE("dropout with the same seed gives the same mask, a function of (seed, element index)", "[dropout]") {
  const Tensor x = ones({kN});
  CHECK(kept(dropout(x, 0.5, 42)) == kept(dropout(x, 0.5, 42)));
  CHECK(kept(dropout(x, 0.5, 42)) != kept(dropout(x, 0.5, 43)));
  // Shape does not matter, only the flat index: [100] and [10, 10] drop the same elements, and
  // a shorter tensor gets a prefix of the longer one's mask.
  CHECK(kept(dropout(ones({100}), 0.5, 7)) == kept(dropout(ones({10, 10}), 0.5, 7)));
  auto long_mask = kept(dropout(ones({1001}), 0.3, 8));
  long_mask.resize(37);
  CHECK(kept(dropout(ones({37}), 0.3, 8)) == long_mask);
  // A seeded call does not consume the global generator.
  random::set_seed(5);
  const auto before = random::uniform({8}).to_vector<float>();
  random::set_seed(5);
  (void)dropout(x, 0.5, 42);
  CHECK(random::uniform({8}).to_vector<float>() == before);
}

TEST_CASE("dropout without a seed draws from the global generator", "[dropout]") {
  const Tensor x = ones({1001});  // not a multiple of the 4 words of a Philox block
  random::set_seed(77);
  const auto first = kept(dropout(x, 0.5));
  const auto second = kept(dropout(x, 0.5));
  CHECK(first != second);  // fresh counter space each call
  random::set_seed(77);
  CHECK(kept(dropout(x, 0.5)) == first);  // set_seed makes it reproducible
  CHECK(kept(dropout(x, 0.5)) == second);

  // Same generator and counter layout as random::uniform: after the same set_seed, element i is
  // kept exactly when uniform's float32 draw i is >= 0.5 (both use word i of the reservation;
  // 0.5 is exact in both the 32-bit and the 24-bit comparison).
  random::set_seed(2024);
  const auto mask = kept(dropout(x, 0.5));
  random::set_seed(2024);
  const auto u = random::uniform({1001}).to_vector<float>();
  std::vector<bool> expected(u.size());
  for (std::size_t i = 0; i < u.size(); ++i) expected[i] = u[i] >= 0.5f;
  CHECK(mask == expected);
}

TEST_CASE("dropout rate 0 returns x itself", "[dropout]") {
  const Tensor x = constant({1.0, -2.0, 3.0}, {3}, DType::float64);
  const Tensor y = dropout(x, 0.0);
  CHECK(y.id() == x.id());
  GradientTape tape;
  tape.watch(x);
  const Tensor g = tape.gradient(reduce_sum(dropout(x, 0.0) * 2.0), x);
  CHECK(g.to_vector<double>() == std::vector<double>{2, 2, 2});
}

TEST_CASE("dropout rate outside [0, 1) is a ValueError naming the rate", "[dropout][errors]") {
  const Tensor x = ones({4});
  CHECK_THROWS_AS(dropout(x, 1.0), ValueError);
  CHECK_THROWS_AS(dropout(x, -0.1), ValueError);
  CHECK_THROWS_AS(dropout(x, std::nan("")), ValueError);
  CHECK_THROWS_WITH(dropout(x, 1.5), Contains("dropout") && Contains("1.5"));
  CHECK_THROWS_AS(dropout(ones({4}, DType::int32), 0.5), DTypeError);
}

TEST_CASE("dropout gradient is the upstream gradient times mask / (1 - rate)", "[dropout][grad]") {
  random::set_seed(11);
  const Tensor x = random::uniform({500}, 1, 2, DType::float64);  // no zeros: y != 0 marks kept
  const Tensor w = random::normal({500}, 0, 1, DType::float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = dropout(x, 0.4);
  const Tensor g = tape.gradient(reduce_sum(y * w), x);
  const auto yv = y.to_vector<double>(), wv = w.to_vector<double>(), gv = g.to_vector<double>();
  for (std::size_t i = 0; i < yv.size(); ++i) {
    INFO("element " << i);
    CHECK(gv[i] == Approx(yv[i] != 0 ? wv[i] / 0.6 : 0.0).epsilon(1e-14));
  }
  // With a seed the op is a fixed function of x, so finite differences apply.
  check_gradients([](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, 9); },
                  {random::normal({4, 5}, 0, 1, DType::float64)}, 1e-6, 1e-8);
}

TEST_CASE("dropout mask does not depend on the thread count", "[dropout]") {
  const int before = config::num_threads();
  const Tensor x = ones({300000});
  config::set_num_threads(1);
  const auto one = kept(dropout(x, 0.5, 5));
  config::set_num_threads(2);
  const auto two = kept(dropout(x, 0.5, 5));
  config::set_num_threads(before);
  CHECK(one == two);
}
