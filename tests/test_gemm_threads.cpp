// The CPU GEMM's split over the thread pool (src/cpu/blas.cpp): by rows of C, by columns of C,
// or along the inner dimension k when k is long against both sides of C (each part then writes
// its own copy of C, added at the end). Whatever the split and the number of threads, C must be
// alpha * op(A) op(B) + beta * C, checked against a plain triple loop.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/blas.hpp"
#include "threads_guard.hpp"

using namespace keel;

namespace {

using keel_test::ThreadsGuard;

std::vector<double> random_values(std::int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

struct Case {
  std::int64_t m, n, k;
  bool ta, tb;
  const char* split;  // which split the sizes select at 2 threads (for the message)
};

}  // namespace

TEST_CASE("gemm splits by rows, columns or the inner dimension and still computes alpha AB + beta C") {
  ThreadsGuard guard;
  // Each has at least 2M multiply-adds, so that two or three threads get a part each.
  const Case cases[] = {
      {512, 64, 64, false, false, "rows"},
      {64, 512, 64, false, true, "columns"},
      {50, 200, 1600, true, false, "inner (a recurrent kernel's gradient: H^T dZ)"},
      {64, 128, 1024, false, false, "inner (a Dense forward)"},
      {37, 61, 1601, true, true, "inner, sizes that do not divide"},
  };
  for (const Case& c : cases) {
    const std::int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
    const auto a = random_values(c.m * c.k, 1), b = random_values(c.k * c.n, 2), c0 = random_values(c.m * c.n, 3);
    const double alpha = 0.75;
    for (const double beta : {0.0, 1.0, -0.5}) {
      std::vector<double> expected(c0.size());
      for (std::int64_t i = 0; i < c.m; ++i)
        for (std::int64_t j = 0; j < c.n; ++j) {
          double acc = 0;
          for (std::int64_t p = 0; p < c.k; ++p)
            acc += a[static_cast<std::size_t>(c.ta ? p * lda + i : i * lda + p)] *
                   b[static_cast<std::size_t>(c.tb ? j * ldb + p : p * ldb + j)];
          const auto at = static_cast<std::size_t>(i * c.n + j);
          expected[at] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c0[at]);
        }
      for (const int threads : {1, 2, 3}) {
        INFO(c.m << "x" << c.n << "x" << c.k << " (" << c.split << "), beta " << beta << ", threads " << threads);
        config::set_num_threads(threads);
        // A NaN in C must not leak through beta = 0 (BLAS does not read C then).
        std::vector<double> out = c0;
        if (beta == 0.0) out.assign(out.size(), std::nan(""));
        cpu::blas::gemm(c.ta, c.tb, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), c.n);
        std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), outf(c0.begin(), c0.end());
        if (beta == 0.0) outf.assign(outf.size(), std::nanf(""));
        cpu::blas::gemm(c.ta, c.tb, c.m, c.n, c.k, static_cast<float>(alpha), af.data(), lda, bf.data(), ldb,
                        static_cast<float>(beta), outf.data(), c.n);
        double worst = 0, worst_f = 0;
        for (std::size_t i = 0; i < expected.size(); ++i) {
          worst = std::max(worst, std::abs(out[i] - expected[i]));
          worst_f = std::max(worst_f, std::abs(static_cast<double>(outf[i]) - expected[i]));
        }
        CHECK(worst < 1e-11);
        CHECK(worst_f < 1e-3);  // sums of up to 1601 float32 products of values in [-1, 1]
      }
    }
  }
}

TEST_CASE("matmul gives the same product on one thread and on two for every split") {
  ThreadsGuard guard;
  for (const Shape& shapes : {Shape{512, 64, 64}, Shape{64, 64, 512}, Shape{50, 1600, 200}}) {
    const std::int64_t m = shapes[0], k = shapes[1], n = shapes[2];
    const Tensor a = random::normal({m, k}, 0.0, 1.0, DType::float64), b = random::normal({k, n}, 0.0, 1.0, DType::float64);
    config::set_num_threads(1);
    const auto one = matmul(a, b).to_vector<double>();
    config::set_num_threads(2);
    const auto two = matmul(a, b).to_vector<double>();
    INFO("[" << m << ", " << k << "] x [" << k << ", " << n << "]");
    double worst = 0;
    for (std::size_t i = 0; i < one.size(); ++i) worst = std::max(worst, std::abs(one[i] - two[i]));
    CHECK(worst < 1e-11);
  }
}
