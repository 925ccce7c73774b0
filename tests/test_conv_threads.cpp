// conv2d's kernel gradient on the CPU sums the im2col rows in blocks (cpu/conv.cpp), each thread
// its share of the rows into its own copy of the result: checked against a plain loop written from
// the definition, on one thread and on two, over enough rows for several blocks per thread.
#include <catch2/catch.hpp>

#include <keel/keel.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "conv_family_fixtures.hpp"
#include "threads_guard.hpp"

using namespace keel;
using i64 = std::int64_t;

namespace {

using keel_test::ThreadsGuard;

// The kernel gradient of sum(conv2d(x, k) * w) (dilation 1): dk[i, j, ci, co] = the sum over
// (n, oh, ow) of x[n, oh*s - top + i, ow*s - left + j, ci] * w[n, oh, ow, co]; a tap in the
// padding adds 0. Padding per TensorFlow's rule (keel_test::tf_axis).
std::vector<double> kernel_grad_reference(const Tensor& xt, const Shape& ks, const Tensor& wt, int s, bool same) {
  const auto x = keel_test::values(xt), w = keel_test::values(wt);
  const Shape& xs = xt.shape();
  const auto [ho, top] = keel_test::tf_axis(xs[1], ks[0], s, 1, same);
  const auto [wo, left] = keel_test::tf_axis(xs[2], ks[1], s, 1, same);
  const i64 C = xs[3], O = ks[3];
  std::vector<double> dk(static_cast<std::size_t>(ks.num_elements()), 0.0);
  for (i64 n = 0; n < xs[0]; ++n)
    for (i64 oh = 0; oh < ho; ++oh)
      for (i64 ow = 0; ow < wo; ++ow)
        for (i64 i = 0; i < ks[0]; ++i)
          for (i64 j = 0; j < ks[1]; ++j) {
            const i64 ih = oh * s - top + i, iw = ow * s - left + j;
            if (ih < 0 || ih >= xs[1] || iw < 0 || iw >= xs[2]) continue;
            const double* xp = x.data() + ((n * xs[1] + ih) * xs[2] + iw) * C;
            const double* wp = w.data() + ((n * ho + oh) * wo + ow) * O;
            double* dp = dk.data() + (i * ks[1] + j) * C * O;
            for (i64 ci = 0; ci < C; ++ci)
              for (i64 co = 0; co < O; ++co) dp[ci * O + co] += xp[ci] * wp[co];
          }
  return dk;
}

}  // namespace

TEST_CASE("conv2d kernel gradient sums every block of rows on one thread and on two") {
  // 8 * 24 * 24 = 4608 output rows (at stride 1): the kernel gradient sums them in blocks of at
  // most 2048 rows (fewer for wider kernels), so a thread's share spans several blocks whose
  // products add into one result; a dropped or repeated block, or a lost partial sum, changes dk.
  ThreadsGuard guard;
  struct Case {
    Shape x, k;
    int stride;
    bool same;
  };
  for (const Case& c : {Case{{8, 24, 24, 1}, {3, 3, 1, 4}, 1, true}, Case{{8, 24, 24, 4}, {3, 3, 4, 5}, 1, true},
                        Case{{8, 24, 24, 16}, {3, 3, 16, 8}, 1, false}, Case{{8, 48, 48, 2}, {3, 3, 2, 3}, 2, true}}) {
    const Tensor x = random::normal(c.x, 0.0, 1.0, DType::float64);
    const Tensor k = random::normal(c.k, 0.0, 1.0, DType::float64);
    const std::string padding = c.same ? "same" : "valid";
    const Tensor w = random::normal(conv2d(x, k, {c.stride, c.stride}, padding).shape(), 0.0, 1.0, DType::float64);
    const std::vector<double> expected = kernel_grad_reference(x, c.k, w, c.stride, c.same);
    for (const int threads : {1, 2}) {
      INFO("x " << c.x.to_string() << " k " << c.k.to_string() << " threads " << threads);
      config::set_num_threads(threads);
      GradientTape tape;
      tape.watch(k);
      const Tensor y = conv2d(x, k, {c.stride, c.stride}, padding);
      const auto got = keel_test::values(tape.gradient(reduce_sum(y * w), k));
      REQUIRE(got.size() == expected.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
      CHECK(worst < 1e-9);
    }
  }
}
