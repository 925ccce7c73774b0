// Factories: constant, filled tensors, ranges, eye, and the random generators.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/philox.hpp"
#include "simd_levels.hpp"

using namespace keel;

namespace {

struct Moments {
  double mean, stddev, min, max;
};
Moments moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(s2 / static_cast<double>(v.size())), *std::min_element(v.begin(), v.end()),
          *std::max_element(v.begin(), v.end())};
}

// Restores keel's thread count when a test that changes it ends (even by an exception).
struct ThreadCountGuard {
  int saved = config::num_threads();
  ~ThreadCountGuard() { config::set_num_threads(saved); }
};

}  // namespace

TEST_CASE("constant takes its dtype from the C++ element type", "[creation]") {
  const Tensor f = constant(std::vector<float>{1.5f, -2.f}, Shape{2});
  CHECK(f.dtype() == DType::float32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.5f, -2.f});

  const Tensor d = constant(std::vector<double>{0.1, 0.2, 0.3, 0.4}, Shape{2, 2});
  CHECK(d.dtype() == DType::float64);
  CHECK(d.shape() == Shape{2, 2});
  CHECK(d.to_vector<double>() == std::vector<double>{0.1, 0.2, 0.3, 0.4});  // no rounding to float

  const Tensor i32 = constant(std::vector<std::int32_t>{-1, 2147483647}, Shape{2});
  CHECK(i32.dtype() == DType::int32);
  CHECK(i32.to_vector<std::int32_t>() == std::vector<std::int32_t>{-1, 2147483647});

  const Tensor i64 = constant(std::vector<std::int64_t>{-5, 1LL << 40}, Shape{2});
  CHECK(i64.dtype() == DType::int64);
  CHECK(i64.to_vector<std::int64_t>() == std::vector<std::int64_t>{-5, 1LL << 40});  // > 2^32

  const Tensor u8 = constant(std::vector<std::uint8_t>{0, 255}, Shape{2});
  CHECK(u8.dtype() == DType::uint8);
  CHECK(u8.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 255});

  const Tensor b = constant({true, false, true}, {3});
  CHECK(b.dtype() == DType::bool_);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});

  // an explicit dtype converts the values
  const Tensor as64 = constant({1.f, 2.f}, {2}, DType::float64);
  CHECK(as64.dtype() == DType::float64);
  CHECK(as64.to_vector<double>() == std::vector<double>{1.0, 2.0});
  CHECK(constant({1.0, 2.0}, {2}, DType::int32).dtype() == DType::int32);

  // the 1-D overload and the scalar overload
  const Tensor v = constant(std::vector<double>{1, 2, 3});
  CHECK(v.shape() == Shape{3});
  CHECK(v.dtype() == DType::float64);
  const Tensor s = constant(3.0, DType::float64);
  CHECK(s.shape() == Shape{});
  CHECK(s.dtype() == DType::float64);
  CHECK(s.item<double>() == 3.0);
  CHECK(constant(7.0, DType::int64).item<std::int64_t>() == 7);

  CHECK_THROWS_AS(constant({1.f, 2.f, 3.f}, {2, 2}), Error);  // 3 values for 4 elements
}

TEST_CASE("zeros, ones, full and the _like factories fill shape and dtype", "[creation]") {
  const Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == DType::float32);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));

  const Tensor o = ones({4}, DType::int64);
  CHECK(o.dtype() == DType::int64);
  CHECK(o.to_vector<std::int64_t>() == std::vector<std::int64_t>(4, 1));

  const Tensor f = full({3, 1}, 2.5, DType::float64);
  CHECK(f.shape() == Shape{3, 1});
  CHECK(f.to_vector<double>() == std::vector<double>(3, 2.5));

  const Tensor scalar = full({}, -1.0);
  CHECK(scalar.rank() == 0);
  CHECK(scalar.item<float>() == -1.f);

  const Tensor empty_t = zeros({0, 3});
  CHECK(empty_t.size() == 0);
  CHECK(empty_t.to_vector<float>().empty());

  const Tensor base = constant({1, 2, 3, 4, 5, 6}, {3, 2});  // int32
  CHECK(zeros_like(base).shape() == Shape{3, 2});
  CHECK(zeros_like(base).dtype() == DType::int32);
  CHECK(zeros_like(base).to_vector<int>() == std::vector<int>(6, 0));
  CHECK(ones_like(base).dtype() == DType::int32);
  CHECK(ones_like(base).to_vector<int>() == std::vector<int>(6, 1));
  CHECK(full_like(base, 7).to_vector<int>() == std::vector<int>(6, 7));
  CHECK(ones_like(transpose(base)).shape() == Shape{2, 3});  // the view's shape
}

TEST_CASE("arange, linspace and eye give the documented values", "[creation]") {
  // arange(stop): 0, 1, ..., stop - 1 in float32
  const Tensor a = arange(5);
  CHECK(a.dtype() == DType::float32);
  CHECK(a.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  // [1, 2) in steps of 0.25: ceil((2 - 1) / 0.25) = 4 values, all exact in binary
  CHECK(arange(1, 2, 0.25).to_vector<float>() == std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  // ceil((10 - 0) / 3) = 4 values: 0 3 6 9
  const Tensor ai = arange(0, 10, 3, DType::int32);
  CHECK(ai.dtype() == DType::int32);
  CHECK(ai.to_vector<int>() == std::vector<int>{0, 3, 6, 9});
  // a negative step counts down: 5 4 3 2 1
  CHECK(arange(5, 0, -1).to_vector<float>() == std::vector<float>{5, 4, 3, 2, 1});
  CHECK(arange(3, 3).size() == 0);

  // linspace includes both ends: step (1 - 0) / (5 - 1) = 0.25
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  const Tensor l = linspace(-1, 1, 3, DType::float64);
  CHECK(l.dtype() == DType::float64);
  CHECK(l.to_vector<double>() == std::vector<double>{-1, 0, 1});
  CHECK(linspace(2, 2, 1).to_vector<float>() == std::vector<float>{2});

  const Tensor e = eye(3);
  CHECK(e.shape() == Shape{3, 3});
  CHECK(e.to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(eye(2, DType::int32).to_vector<int>() == std::vector<int>{1, 0, 0, 1});
}

TEST_CASE("random: the same seed gives the same numbers, another seed other numbers",
          "[creation][random]") {
  random::set_seed(42);
  const auto a = random::normal({1000}).to_vector<float>();
  const auto a_next = random::normal({1000}).to_vector<float>();  // the generator moves on
  random::set_seed(42);
  const auto b = random::normal({1000}).to_vector<float>();
  const auto b_next = random::normal({1000}).to_vector<float>();
  CHECK(a == b);
  CHECK(a_next == b_next);
  CHECK(a != a_next);

  random::set_seed(43);
  CHECK(random::normal({1000}).to_vector<float>() != a);

  random::set_seed(42);
  const auto u1 = random::uniform({500}, 0, 1, DType::float64).to_vector<double>();
  random::set_seed(42);
  const auto u2 = random::uniform({500}, 0, 1, DType::float64).to_vector<double>();
  CHECK(u1 == u2);
  random::set_seed(7);
  CHECK(random::uniform({500}, 0, 1, DType::float64).to_vector<double>() != u1);

  random::set_seed(42);
  const auto t1 = random::truncated_normal({500}).to_vector<float>();
  random::set_seed(42);
  CHECK(random::truncated_normal({500}).to_vector<float>() == t1);
}

TEST_CASE("random::normal has the requested mean and standard deviation", "[creation][random]") {
  random::set_seed(1234);
  const Tensor x = random::normal({100000}, 2.0, 3.0, DType::float64);
  CHECK(x.dtype() == DType::float64);
  CHECK(x.shape() == Shape{100000});
  const Moments m = moments(x);
  // standard error of the mean: 3 / sqrt(1e5) = 0.0095; of the std: 3 / sqrt(2e5) = 0.0067.
  // The tolerances below are > 5 standard errors.
  CHECK(m.mean == Approx(2.0).margin(0.05));
  CHECK(m.stddev == Approx(3.0).margin(0.04));
  // a normal sample of 1e5 reaches beyond 3 sigma on both sides (P(miss) ~ 1e-59)
  CHECK(m.min < 2.0 - 3 * 3.0);
  CHECK(m.max > 2.0 + 3 * 3.0);

  const Moments f = moments(random::normal({100000}));  // float32, N(0, 1)
  CHECK(f.mean == Approx(0.0).margin(0.02));
  CHECK(f.stddev == Approx(1.0).margin(0.015));
}

TEST_CASE("random::uniform stays in [minval, maxval) and is flat", "[creation][random]") {
  random::set_seed(99);
  const Tensor x = random::uniform({100000}, 2.0, 5.0);
  CHECK(x.dtype() == DType::float32);
  const Moments m = moments(x);
  CHECK(m.min >= 2.0);
  CHECK(m.max < 5.0);
  // U(2, 5): mean 3.5, std 3 / sqrt(12) = 0.866; standard error of the mean 0.0027
  CHECK(m.mean == Approx(3.5).margin(0.02));
  CHECK(m.stddev == Approx(3.0 / std::sqrt(12.0)).margin(0.01));
  // the extremes are approached: P(no value in [2, 2.01)) = (1 - 0.01/3)^1e5 ~ e^-333
  CHECK(m.min < 2.01);
  CHECK(m.max > 4.99);

  const auto d = random::uniform({1000}, -1.0, 1.0, DType::float64).to_vector<double>();
  for (double v : d) {
    REQUIRE(v >= -1.0);
    REQUIRE(v < 1.0);
  }
}

TEST_CASE("random::truncated_normal stays within two standard deviations", "[creation][random]") {
  random::set_seed(5);
  const Tensor x = random::truncated_normal({100000}, 1.0, 2.0, DType::float64);
  const Moments m = moments(x);
  CHECK(m.min >= 1.0 - 2 * 2.0);
  CHECK(m.max <= 1.0 + 2 * 2.0);
  // symmetric around the mean
  CHECK(m.mean == Approx(1.0).margin(0.03));
  // Var of N(0,1) truncated to [-2, 2]: 1 - 2 * 2 phi(2) / (Phi(2) - Phi(-2))
  //   = 1 - 4 * 0.0539910 / 0.9544997 = 0.773741, so std = 2 * sqrt(0.773741) = 1.759251
  CHECK(m.stddev == Approx(1.759251).margin(0.03));
  // it is not merely clipped: clipping would pile ~4.6% of the values onto the bounds
  const auto v = x.to_vector<double>();
  const auto at_bounds = std::count_if(v.begin(), v.end(),
                                       [](double t) { return t == -3.0 || t == 5.0; });
  CHECK(at_bounds < 10);
}

TEST_CASE("Philox-4x32-10 gives Random123's known answers, and the SIMD blocks give its words", "[creation][random]") {
  // The known-answer vectors of Random123 (kat_vectors, philox4x32 10 rounds): counter and key
  // all zeros, all ones, and the digits of pi.
  using philox::Words;
  CHECK(philox::philox4x32_10({0, 0, 0, 0}, 0, 0) == Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff) ==
        Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0) ==
        Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  // The kernel table's batches of blocks (dropout's and random::uniform's words) against the
  // scalar blocks: counters whose low word wraps inside a batch, two streams, counts with tails.
  constexpr std::uint64_t key = 0xDEADBEEF12345678ull;
  testing::at_every_simd_level([&](const std::string&) {
    for (const std::uint64_t counter : {std::uint64_t{0}, std::uint64_t{0xFFFFFFF5}, std::uint64_t{0x123456789ABC}})
      for (const std::uint32_t stream : {0u, 5u})
        for (const std::int64_t blocks : {1, 3, 4, 8, 16, 31, 32, 33, 100}) {
          INFO("counter " << counter << " stream " << stream << " blocks " << blocks);
          std::vector<std::uint32_t> out(static_cast<std::size_t>(4 * blocks));
          cpu::simd().philox_words(key, counter, stream, blocks, out.data());
          std::vector<std::uint32_t> want;
          for (std::int64_t g = 0; g < blocks; ++g)
            for (const std::uint32_t w : philox::block(key, counter, static_cast<std::uint64_t>(g), stream))
              want.push_back(w);
          CHECK(out == want);
        }
  });
}

TEST_CASE("random::uniform's float32 kernel gives the scalar rule's bits at every SIMD level", "[creation][random]") {
  // Words at the ends of the 24 bits used and a spread between them; [1, 2) rounds its top draws
  // up to 2, which the half-open interval turns into the float below 2; [2, 2) gives 2.
  std::vector<std::uint32_t> words{0, 0xFF, 0x100, 0x80000000u, 0xFFFFFF00u, 0xFFFFFFFFu, 0xFFFFFE00u};
  for (std::uint32_t k = 0; k < 1000; ++k) words.push_back(k * 0x9E3779B9u);
  const std::pair<double, double> ranges[] = {{0, 1}, {1, 2}, {-3, 5}, {2, 2}, {-1e-3, 1e6}};
  testing::at_every_simd_level([&](const std::string&) {
    for (const auto& [lo, hi] : ranges) {
      INFO("[" << lo << ", " << hi << ")");
      const auto hi_f = static_cast<float>(hi), lo_f = static_cast<float>(lo);
      const float below_hi = lo_f < hi_f ? std::nextafter(hi_f, lo_f) : lo_f;
      std::vector<float> got(words.size());
      cpu::simd().uniform_floats(words.data(), static_cast<std::int64_t>(words.size()), lo, hi, hi_f, below_hi,
                                 got.data());
      for (std::size_t i = 0; i < words.size(); ++i) {
        const auto v = static_cast<float>(lo + (hi - lo) * (static_cast<double>(words[i] >> 8) * 0x1.0p-24));
        INFO("word " << words[i]);
        CHECK(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(v < hi_f ? v : below_hi));
      }
    }
  });
}

TEST_CASE("random::normal's Box-Muller kernel gives the same bits at every SIMD level and the formula's values",
          "[creation][random]") {
  // Radii from u_open = 1 (r = 0) down to 2^-33, angles on the quadrant boundaries (where the
  // reduction turns sin into cos) and between them; 37 pairs leave a short last batch.
  std::vector<double> u_open{1.0, 0x1.0p-33, 0.5, 1e-300 * 1e290, 0.999999}, u{0.0, 0.125, 0.25, 0.5, 0.75};
  for (int k = 0; u_open.size() < 37; ++k) {
    u_open.push_back((k * 0.6180339887498949 - std::floor(k * 0.6180339887498949)) * 0.999 + 0.0005);
    u.push_back(k * 0.7548776662466927 - std::floor(k * 0.7548776662466927));
  }
  const std::int64_t n = static_cast<std::int64_t>(u.size());
  std::vector<double> first;
  testing::at_every_simd_level([&](const std::string&) {
    std::vector<double> z(static_cast<std::size_t>(2 * n));
    cpu::simd().box_muller(u_open.data(), u.data(), n, z.data());
    if (first.empty()) first = z;
    CHECK(z == first);
  });
  constexpr long double kTwoPi = 6.283185307179586476925286766559L;
  for (std::size_t j = 0; j < u.size(); ++j) {
    INFO("pair " << j << ": u_open " << u_open[j] << ", u " << u[j]);
    const long double r = std::sqrt(-2.0L * std::log(static_cast<long double>(u_open[j])));
    const long double t = kTwoPi * static_cast<long double>(u[j]);
    const double tol = 4e-16 * static_cast<double>(std::max(r, 1.0L));
    CHECK(first[2 * j] == Approx(static_cast<double>(r * std::cos(t))).epsilon(0).margin(tol));
    CHECK(first[2 * j + 1] == Approx(static_cast<double>(r * std::sin(t))).epsilon(0).margin(tol));
  }
}

TEST_CASE("random numbers do not depend on the number of threads", "[creation][random][threads]") {
  ThreadCountGuard guard;
  config::set_num_threads(1);
  CHECK(config::num_threads() == 1);
  random::set_seed(2024);
  const auto n1 = random::normal({100000}).to_vector<float>();
  const auto u1 = random::uniform({100000}, -3, 3, DType::float64).to_vector<double>();
  const auto t1 = random::truncated_normal({50000}).to_vector<float>();

  config::set_num_threads(2);
  CHECK(config::num_threads() == 2);
  random::set_seed(2024);
  const auto n2 = random::normal({100000}).to_vector<float>();
  const auto u2 = random::uniform({100000}, -3, 3, DType::float64).to_vector<double>();
  const auto t2 = random::truncated_normal({50000}).to_vector<float>();

  CHECK(n1 == n2);
  CHECK(u1 == u2);
  CHECK(t1 == t2);
}

TEST_CASE("factories use the device of the innermost DeviceScope", "[creation][device]") {
  DeviceScope outer(Device::cpu());
  CHECK(default_device() == Device::cpu());
  CHECK(zeros({2}).device() == Device::cpu());
  CHECK(random::normal({2}).device() == Device::cpu());
  CHECK(constant(1.0).device() == Device::cpu());
}
